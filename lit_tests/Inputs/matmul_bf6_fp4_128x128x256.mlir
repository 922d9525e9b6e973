// bf6 E3M2 x fp4 -> f32, A @ B^T, both passed as bytes (runtime/modules.py packed_module(128, 128, 256, "f6E3M2FN", "f4E2M1FN"))
func.func @packed(%a0: tensor<128x192xi8>, %b0: tensor<128x128xi8>) -> tensor<128x128xf32> {
  %a2 = flow.tensor.bitcast %a0 : tensor<128x192xi8> -> tensor<128x256xf6E3M2FN>
  %b2 = flow.tensor.bitcast %b0 : tensor<128x128xi8> -> tensor<128x256xf4E2M1FN>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<128x128xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e : tensor<128x128xf32>) -> tensor<128x128xf32>
  %r = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>] ins(%a2, %b2 : tensor<128x256xf6E3M2FN>, tensor<128x256xf4E2M1FN>) outs(%f0 : tensor<128x128xf32>) -> tensor<128x128xf32>
  return %r : tensor<128x128xf32>
}
