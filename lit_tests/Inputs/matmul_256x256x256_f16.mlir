func.func @mm(%a: tensor<256x256xf16>, %b: tensor<256x256xf16>) -> tensor<256x256xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<256x256xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<256x256xf32>) -> tensor<256x256xf32>
  %r = linalg.matmul ins(%a, %b : tensor<256x256xf16>, tensor<256x256xf16>) outs(%f : tensor<256x256xf32>) -> tensor<256x256xf32>
  return %r : tensor<256x256xf32>
}
