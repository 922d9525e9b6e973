// C = A x B^T with B stored N x K (linalg.matmul with indexing maps).
func.func @mm_tb(%a: tensor<128x64xf16>, %b: tensor<256x64xf16>) -> tensor<128x256xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<128x256xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<128x256xf32>) -> tensor<128x256xf32>
  %r = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%a, %b : tensor<128x64xf16>, tensor<256x64xf16>) outs(%f : tensor<128x256xf32>) -> tensor<128x256xf32>
  return %r : tensor<128x256xf32>
}
