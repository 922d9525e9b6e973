// MXFP8 (fp8 E4M3 x bf8 E5M2) A @ B^T in IREE's scaled-matmul form (runtime/modules.py scaled_module(128, 128, 256, a_type="f8E4M3FN", b_type="f8E5M2"))
func.func @mx(%a0: tensor<128x8x32xf8E4M3FN>, %b0: tensor<128x8x32xf8E5M2>, %sa: tensor<128x8xf8E8M0FNU>, %sb: tensor<128x8xf8E8M0FNU>) -> tensor<128x128xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<128x128xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<128x128xf32>) -> tensor<128x128xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2)>, affine_map<(d0, d1, d2, d3) -> (d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%a0, %b0, %sa, %sb : tensor<128x8x32xf8E4M3FN>, tensor<128x8x32xf8E5M2>, tensor<128x8xf8E8M0FNU>, tensor<128x8xf8E8M0FNU>) outs(%f : tensor<128x128xf32>) {
  ^bb0(%xa: f8E4M3FN, %xb: f8E5M2, %xsa: f8E8M0FNU, %xsb: f8E8M0FNU, %acc: f32):
    %xs = arith.scaling_extf %xa, %xsa : f8E4M3FN, f8E8M0FNU to f32
    %ys = arith.scaling_extf %xb, %xsb : f8E5M2, f8E8M0FNU to f32
    %p = arith.mulf %xs, %ys : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<128x128xf32>
  return %r : tensor<128x128xf32>
}
