// An unaligned matmul: M, N and K are not multiples of any tile (or of 8 halves = 128 bits).
func.func @mm_odd(%a: tensor<17x65xf16>, %b: tensor<65x33xf16>) -> tensor<17x33xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<17x33xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<17x33xf32>) -> tensor<17x33xf32>
  %r = linalg.matmul ins(%a, %b : tensor<17x65xf16>, tensor<65x33xf16>) outs(%f : tensor<17x33xf32>) -> tensor<17x33xf32>
  return %r : tensor<17x33xf32>
}
