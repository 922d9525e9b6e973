// A decode-shaped nn.Linear: C = A x B^T, M = 5 rows (one 16-row instruction tile), B stored
// N x K (the weight), N = 40 (a partial last column tile), K = 2048 (16 or more K tiles).
func.func @decode(%a: tensor<5x2048xf16>, %b: tensor<40x2048xf16>) -> tensor<5x40xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<5x40xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<5x40xf32>) -> tensor<5x40xf32>
  %r = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%a, %b : tensor<5x2048xf16>, tensor<40x2048xf16>) outs(%f : tensor<5x40xf32>) -> tensor<5x40xf32>
  return %r : tensor<5x40xf32>
}
