// A matmul dispatch next to a separate elementwise dispatch: mmaflow takes one, IREE keeps the other.
func.func @mm_add(%a: tensor<256x256xf16>, %b: tensor<256x256xf16>, %c: tensor<256x256xf32>) -> tensor<256x256xf32> {
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<256x256xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<256x256xf32>) -> tensor<256x256xf32>
  %r = linalg.matmul ins(%a, %b : tensor<256x256xf16>, tensor<256x256xf16>) outs(%f : tensor<256x256xf32>) -> tensor<256x256xf32>
  %r2 = util.optimization_barrier %r : tensor<256x256xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
       ins(%r2, %c : tensor<256x256xf32>, tensor<256x256xf32>) outs(%e : tensor<256x256xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %t = arith.addf %x, %y : f32
    linalg.yield %t : f32
  } -> tensor<256x256xf32>
  return %s : tensor<256x256xf32>
}
