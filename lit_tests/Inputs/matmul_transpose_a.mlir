// C = A^T x B with A stored K x M (linalg.generic: matched by maps, not by name).
func.func @mm_ta(%a: tensor<64x128xf16>, %b: tensor<64x256xf16>) -> tensor<128x256xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<128x256xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<128x256xf32>) -> tensor<128x256xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>],
                       iterator_types = ["parallel", "parallel", "reduction"]}
       ins(%a, %b : tensor<64x128xf16>, tensor<64x256xf16>) outs(%f : tensor<128x256xf32>) {
  ^bb0(%x: f16, %y: f16, %acc: f32):
    %xe = arith.extf %x : f16 to f32
    %ye = arith.extf %y : f16 to f32
    %p = arith.mulf %xe, %ye : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<128x256xf32>
  return %r : tensor<128x256xf32>
}
