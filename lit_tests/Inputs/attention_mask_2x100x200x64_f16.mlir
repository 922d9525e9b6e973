func.func @attn(%q: tensor<2x100x64xf16>, %k: tensor<2x200x64xf16>, %v: tensor<2x200x64xf16>, %mask: tensor<2x100x200xf16>) -> tensor<2x100x64xf16> {
  %scale = arith.constant 0.125 : f16
  %e = tensor.empty() : tensor<2x100x64xf16>
  %o = iree_linalg_ext.attention <{indexing_maps = [affine_map<(b, m, n, k1, k2) -> (b, m, k1)>, affine_map<(b, m, n, k1, k2) -> (b, k2, k1)>, affine_map<(b, m, n, k1, k2) -> (b, k2, n)>, affine_map<(b, m, n, k1, k2) -> ()>, affine_map<(b, m, n, k1, k2) -> (b, m, k2)>, affine_map<(b, m, n, k1, k2) -> (b, m, n)>]}> ins(%q, %k, %v, %scale, %mask : tensor<2x100x64xf16>, tensor<2x200x64xf16>, tensor<2x200x64xf16>, f16, tensor<2x100x200xf16>) outs(%e : tensor<2x100x64xf16>) {
  ^bb0(%s: f32):
    iree_linalg_ext.yield %s : f32
  } -> tensor<2x100x64xf16>
  return %o : tensor<2x100x64xf16>
}
