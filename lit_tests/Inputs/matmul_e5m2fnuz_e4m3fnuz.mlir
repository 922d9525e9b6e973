// C = A x B, A f8E5M2FNUZ, B f8E4M3FNUZ stored K x N: CDNA3's mixed bf8 x fp8 pair (lit_tests/isa/fp8_mixed.test).
func.func @mm(%a: tensor<192x256xf8E5M2FNUZ>, %b: tensor<256x160xf8E4M3FNUZ>) -> tensor<192x160xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<192x160xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<192x160xf32>) -> tensor<192x160xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]}
       ins(%a, %b : tensor<192x256xf8E5M2FNUZ>, tensor<256x160xf8E4M3FNUZ>) outs(%f : tensor<192x160xf32>) {
  ^bb0(%x: f8E5M2FNUZ, %y: f8E4M3FNUZ, %acc: f32):
    %xe = arith.extf %x : f8E5M2FNUZ to f32
    %ye = arith.extf %y : f8E4M3FNUZ to f32
    %p = arith.mulf %xe, %ye : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<192x160xf32>
  return %r : tensor<192x160xf32>
}
