func.func @two(%a: tensor<128x64xf16>, %b: tensor<64x96xf16>, %c: tensor<128x64xf16>, %d: tensor<64x96xf16>) -> (tensor<128x96xf32>, tensor<128x96xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<128x96xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<128x96xf32>) -> tensor<128x96xf32>
  %r1 = linalg.matmul ins(%a, %b : tensor<128x64xf16>, tensor<64x96xf16>) outs(%f : tensor<128x96xf32>) -> tensor<128x96xf32>
  %r2 = linalg.matmul ins(%c, %d : tensor<128x64xf16>, tensor<64x96xf16>) outs(%f : tensor<128x96xf32>) -> tensor<128x96xf32>
  return %r1, %r2 : tensor<128x96xf32>, tensor<128x96xf32>
}
