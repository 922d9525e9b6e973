// C = A x B in f8E5M2, B stored K x N: the fp8 wgmma kernel refuses it (lit_tests/distribute/wgmma_fp8.test).
func.func @mm(%a: tensor<256x512xf8E5M2>, %b: tensor<512x512xf8E5M2>) -> tensor<256x512xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<256x512xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%empty : tensor<256x512xf32>) -> tensor<256x512xf32>
  %c = linalg.matmul ins(%a, %b : tensor<256x512xf8E5M2>, tensor<512x512xf8E5M2>) outs(%acc : tensor<256x512xf32>) -> tensor<256x512xf32>
  return %c : tensor<256x512xf32>
}
