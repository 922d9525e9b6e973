// A decoder step's attention as iree-turbine exports it (runtime/modules.decode_attention_module(1, 8, 4, 64)):
// one query of 32 heads over 8 KV heads, head dim 64, the KV cache of a run-time length, GQA broadcasts.
func.func @decode_attention(%q: tensor<1x32x1x64xf16>, %k: tensor<1x8x?x64xf16>, %v: tensor<1x8x?x64xf16>) -> tensor<1x32x1x64xf16> {
  %scale = arith.constant 0.125 : f32
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %k_len = tensor.dim %k, %c2 : tensor<1x8x?x64xf16>
  %k_e = tensor.empty(%k_len) : tensor<1x8x4x?x64xf16>
  %k_b = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%k : tensor<1x8x?x64xf16>) outs(%k_e : tensor<1x8x4x?x64xf16>) {
  ^bb0(%in: f16, %out: f16):
    linalg.yield %in : f16
  } -> tensor<1x8x4x?x64xf16>
  %k_h = tensor.collapse_shape %k_b [[0], [1, 2], [3], [4]] : tensor<1x8x4x?x64xf16> into tensor<1x32x?x64xf16>
  %k1 = tensor.collapse_shape %k_h [[0, 1], [2], [3]] : tensor<1x32x?x64xf16> into tensor<32x?x64xf16>
  %v_len = tensor.dim %v, %c2 : tensor<1x8x?x64xf16>
  %v_e = tensor.empty(%v_len) : tensor<1x8x4x?x64xf16>
  %v_b = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%v : tensor<1x8x?x64xf16>) outs(%v_e : tensor<1x8x4x?x64xf16>) {
  ^bb0(%in: f16, %out: f16):
    linalg.yield %in : f16
  } -> tensor<1x8x4x?x64xf16>
  %v_h = tensor.collapse_shape %v_b [[0], [1, 2], [3], [4]] : tensor<1x8x4x?x64xf16> into tensor<1x32x?x64xf16>
  %v1 = tensor.collapse_shape %v_h [[0, 1], [2], [3]] : tensor<1x32x?x64xf16> into tensor<32x?x64xf16>
  %q1 = tensor.collapse_shape %q [[0, 1], [2], [3]] : tensor<1x32x1x64xf16> into tensor<32x1x64xf16>
  %e = tensor.empty() : tensor<32x1x64xf16>
  %o = iree_linalg_ext.attention <{indexing_maps = [affine_map<(b, m, n, k1, k2) -> (b, m, k1)>, affine_map<(b, m, n, k1, k2) -> (b, k2, k1)>, affine_map<(b, m, n, k1, k2) -> (b, k2, n)>, affine_map<(b, m, n, k1, k2) -> ()>, affine_map<(b, m, n, k1, k2) -> (b, m, n)>]}>
       ins(%q1, %k1, %v1, %scale : tensor<32x1x64xf16>, tensor<32x?x64xf16>, tensor<32x?x64xf16>, f32) outs(%e : tensor<32x1x64xf16>) {
  ^bb0(%x: f32):
    iree_linalg_ext.yield %x : f32
  } -> tensor<32x1x64xf16>
  %r = tensor.expand_shape %o [[0, 1], [2], [3]] output_shape [1, 32, 1, 64] : tensor<32x1x64xf16> into tensor<1x32x1x64xf16>
  return %r : tensor<1x32x1x64xf16>
}
