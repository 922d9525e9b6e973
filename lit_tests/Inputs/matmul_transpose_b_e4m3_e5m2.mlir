// C = A x B^T, A f8E4M3FN, B f8E5M2 stored N x K: a mixed fp8 pair (lit_tests/distribute/wgmma_fp8.test, lit_tests/isa/fp8_mixed.test).
func.func @mm(%a: tensor<256x512xf8E4M3FN>, %b: tensor<512x512xf8E5M2>) -> tensor<256x512xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<256x512xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<256x512xf32>) -> tensor<256x512xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]}
       ins(%a, %b : tensor<256x512xf8E4M3FN>, tensor<512x512xf8E5M2>) outs(%f : tensor<256x512xf32>) {
  ^bb0(%x: f8E4M3FN, %y: f8E5M2, %acc: f32):
    %xe = arith.extf %x : f8E4M3FN to f32
    %ye = arith.extf %y : f8E5M2 to f32
    %p = arith.mulf %xe, %ye : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<256x512xf32>
  return %r : tensor<256x512xf32>
}
