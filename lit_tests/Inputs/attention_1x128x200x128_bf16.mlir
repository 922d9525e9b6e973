func.func @attn(%q: tensor<1x128x128xbf16>, %k: tensor<1x200x128xbf16>, %v: tensor<1x200x128xbf16>) -> tensor<1x128x128xbf16> {
  %scale = arith.constant 0.08838834764831845 : bf16
  %e = tensor.empty() : tensor<1x128x128xbf16>
  %o = iree_linalg_ext.attention <{indexing_maps = [affine_map<(b, m, n, k1, k2) -> (b, m, k1)>, affine_map<(b, m, n, k1, k2) -> (b, k2, k1)>, affine_map<(b, m, n, k1, k2) -> (b, k2, n)>, affine_map<(b, m, n, k1, k2) -> ()>, affine_map<(b, m, n, k1, k2) -> (b, m, n)>]}> ins(%q, %k, %v, %scale : tensor<1x128x128xbf16>, tensor<1x200x128xbf16>, tensor<1x200x128xbf16>, bf16) outs(%e : tensor<1x128x128xbf16>) {
  ^bb0(%s: f32):
    iree_linalg_ext.yield %s : f32
  } -> tensor<1x128x128xbf16>
  return %o : tensor<1x128x128xbf16>
}
