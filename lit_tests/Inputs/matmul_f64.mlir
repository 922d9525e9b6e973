func.func @mm64(%a: tensor<128x128xf64>, %b: tensor<128x128xf64>) -> tensor<128x128xf64> {
  %cst = arith.constant 0.0 : f64
  %e = tensor.empty() : tensor<128x128xf64>
  %f = linalg.fill ins(%cst : f64) outs(%e : tensor<128x128xf64>) -> tensor<128x128xf64>
  %r = linalg.matmul ins(%a, %b : tensor<128x128xf64>, tensor<128x128xf64>) outs(%f : tensor<128x128xf64>) -> tensor<128x128xf64>
  return %r : tensor<128x128xf64>
}
