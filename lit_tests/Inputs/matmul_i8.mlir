func.func @mm_i8(%a: tensor<128x128xi8>, %b: tensor<128x128xi8>) -> tensor<128x128xi32> {
  %c0 = arith.constant 0 : i32
  %e = tensor.empty() : tensor<128x128xi32>
  %f = linalg.fill ins(%c0 : i32) outs(%e : tensor<128x128xi32>) -> tensor<128x128xi32>
  %r = linalg.matmul ins(%a, %b : tensor<128x128xi8>, tensor<128x128xi8>) outs(%f : tensor<128x128xi32>) -> tensor<128x128xi32>
  return %r : tensor<128x128xi32>
}
