func.func @add(%a: tensor<256xf32>, %b: tensor<256xf32>) -> tensor<256xf32> {
  %e = tensor.empty() : tensor<256xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>, affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
       ins(%a, %b : tensor<256xf32>, tensor<256xf32>) outs(%e : tensor<256xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<256xf32>
  return %r : tensor<256xf32>
}
