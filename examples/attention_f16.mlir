// Attention (no mask, f16, head dim 64) whose Q and K are computed by other dispatches: IREE packs
// them into one buffer at byte offsets. mmaflow takes the attention dispatch on NVIDIA and AMD targets.
func.func @attn(%q: tensor<2x100x64xf16>, %k: tensor<2x200x64xf16>, %v: tensor<2x200x64xf16>) -> tensor<2x100x64xf16> {
  %scale = arith.constant 0.125 : f16
  %eq = tensor.empty() : tensor<2x100x64xf16>
  %ek = tensor.empty() : tensor<2x200x64xf16>
  %q2 = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%q : tensor<2x100x64xf16>) outs(%eq : tensor<2x100x64xf16>) {
  ^bb0(%x: f16, %y: f16):
    %n = arith.negf %x : f16
    linalg.yield %n : f16
  } -> tensor<2x100x64xf16>
  %k2 = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%k : tensor<2x200x64xf16>) outs(%ek : tensor<2x200x64xf16>) {
  ^bb0(%x: f16, %y: f16):
    %n = arith.negf %x : f16
    linalg.yield %n : f16
  } -> tensor<2x200x64xf16>
  %v2 = linalg.generic {indexing_maps = [affine_map<(a, b, c) -> (a, b, c)>, affine_map<(a, b, c) -> (a, b, c)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%v : tensor<2x200x64xf16>) outs(%ek : tensor<2x200x64xf16>) {
  ^bb0(%x: f16, %y: f16):
    %n = arith.negf %x : f16
    linalg.yield %n : f16
  } -> tensor<2x200x64xf16>
  %e = tensor.empty() : tensor<2x100x64xf16>
  %o = iree_linalg_ext.attention <{indexing_maps = [affine_map<(b, m, n, k1, k2) -> (b, m, k1)>, affine_map<(b, m, n, k1, k2) -> (b, k2, k1)>, affine_map<(b, m, n, k1, k2) -> (b, k2, n)>, affine_map<(b, m, n, k1, k2) -> ()>, affine_map<(b, m, n, k1, k2) -> (b, m, n)>]}> ins(%q2, %k2, %v, %scale : tensor<2x100x64xf16>, tensor<2x200x64xf16>, tensor<2x200x64xf16>, f16) outs(%e : tensor<2x100x64xf16>) {
  ^bb0(%s: f32):
    iree_linalg_ext.yield %s : f32
  } -> tensor<2x100x64xf16>
  return %o : tensor<2x100x64xf16>
}
