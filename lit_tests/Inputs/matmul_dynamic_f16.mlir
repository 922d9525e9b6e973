// C = A @ B, every dimension dynamic; util.assume.int promises M % 16 == 0, N % 32 == 0, K % 64 == 0.
func.func @matmul(%a0: tensor<?x?xf16>, %b0: tensor<?x?xf16>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %m0 = tensor.dim %a0, %c0 : tensor<?x?xf16>
  %m = util.assume.int %m0<udiv = 16> : index
  %n0 = tensor.dim %b0, %c1 : tensor<?x?xf16>
  %n = util.assume.int %n0<udiv = 32> : index
  %k0 = tensor.dim %a0, %c1 : tensor<?x?xf16>
  %k = util.assume.int %k0<udiv = 64> : index
  %a = flow.tensor.reshape %a0 : tensor<?x?xf16>{%m0, %k0} -> tensor<?x?xf16>{%m, %k}
  %b = flow.tensor.reshape %b0 : tensor<?x?xf16>{%k0, %n0} -> tensor<?x?xf16>{%k, %n}
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty(%m, %n) : tensor<?x?xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%empty : tensor<?x?xf32>) -> tensor<?x?xf32>
  %c = linalg.matmul ins(%a, %b : tensor<?x?xf16>, tensor<?x?xf16>) outs(%acc : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %c : tensor<?x?xf32>
}
