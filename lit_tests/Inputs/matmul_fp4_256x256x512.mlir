// fp4 x fp4 -> f32, A @ B^T, passed as bytes (runtime/modules.py packed_module(256, 256, 512))
func.func @packed(%a0: tensor<256x256xi8>, %b0: tensor<256x256xi8>) -> tensor<256x256xf32> {
  %a2 = flow.tensor.bitcast %a0 : tensor<256x256xi8> -> tensor<256x512xf4E2M1FN>
  %b2 = flow.tensor.bitcast %b0 : tensor<256x256xi8> -> tensor<256x512xf4E2M1FN>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<256x256xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e : tensor<256x256xf32>) -> tensor<256x256xf32>
  %r = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>] ins(%a2, %b2 : tensor<256x512xf4E2M1FN>, tensor<256x512xf4E2M1FN>) outs(%f0 : tensor<256x256xf32>) -> tensor<256x256xf32>
  return %r : tensor<256x256xf32>
}
