// unsigned i4 x i4 -> i32, A @ B^T (runtime/modules.py packed_module(128, 128, 256, "i4", unsigned=True))
func.func @packed(%a0: tensor<128x256xi4>, %b0: tensor<128x256xi4>) -> tensor<128x128xi32> {
  %zero = arith.constant 0 : i32
  %e = tensor.empty() : tensor<128x128xi32>
  %f0 = linalg.fill ins(%zero : i32) outs(%e : tensor<128x128xi32>) -> tensor<128x128xi32>
  %r = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>] {cast = #linalg.type_fn<cast_unsigned>} ins(%a0, %b0 : tensor<128x256xi4>, tensor<128x256xi4>) outs(%f0 : tensor<128x128xi32>) -> tensor<128x128xi32>
  return %r : tensor<128x128xi32>
}
