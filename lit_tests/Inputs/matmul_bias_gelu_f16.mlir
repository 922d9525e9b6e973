// matmul + bias over columns + erf GELU (x * 0.5 * (1 + erf(x / sqrt(2))), as torch exports
// gelu(approximate="none")), f32 accumulator stored as f16: IREE fuses the consumer into the
// matmul's dispatch, mmaflow applies it in registers.
func.func @mm_bias_gelu(%a: tensor<256x128xf16>, %b: tensor<128x192xf16>, %bias: tensor<192xf32>) -> tensor<256x192xf16> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<256x192xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<256x192xf32>) -> tensor<256x192xf32>
  %r = linalg.matmul ins(%a, %b : tensor<256x128xf16>, tensor<128x192xf16>) outs(%f : tensor<256x192xf32>) -> tensor<256x192xf32>
  %e2 = tensor.empty() : tensor<256x192xf16>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
       ins(%r, %bias : tensor<256x192xf32>, tensor<192xf32>) outs(%e2 : tensor<256x192xf16>) {
  ^bb0(%x: f32, %y: f32, %o: f16):
    %t = arith.addf %x, %y : f32
    %c = arith.constant 0.70710678 : f32
    %u = arith.mulf %t, %c : f32
    %er = math.erf %u : f32
    %one = arith.constant 1.0 : f32
    %p = arith.addf %er, %one : f32
    %half = arith.constant 0.5 : f32
    %v = arith.mulf %t, %half : f32
    %g = arith.mulf %v, %p : f32
    %h = arith.truncf %g : f32 to f16
    linalg.yield %h : f16
  } -> tensor<256x192xf16>
  return %s : tensor<256x192xf16>
}
