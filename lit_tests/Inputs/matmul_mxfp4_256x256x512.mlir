// MXFP4 A @ B^T in IREE's scaled-matmul form, operands (A, A-scales, B, B-scales) (runtime/modules.py scaled_module(256, 256, 512, order="asbs"))
func.func @mx(%a0: tensor<256x16x16xi8>, %b0: tensor<256x16x16xi8>, %sa: tensor<256x16xf8E8M0FNU>, %sb: tensor<256x16xf8E8M0FNU>) -> tensor<256x256xf32> {
  %a = flow.tensor.bitcast %a0 : tensor<256x16x16xi8> -> tensor<256x16x32xf4E2M1FN>
  %b = flow.tensor.bitcast %b0 : tensor<256x16x16xi8> -> tensor<256x16x32xf4E2M1FN>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<256x256xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<256x256xf32>) -> tensor<256x256xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2)>, affine_map<(d0, d1, d2, d3) -> (d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%a, %sa, %b, %sb : tensor<256x16x32xf4E2M1FN>, tensor<256x16xf8E8M0FNU>, tensor<256x16x32xf4E2M1FN>, tensor<256x16xf8E8M0FNU>) outs(%f : tensor<256x256xf32>) {
  ^bb0(%xa: f4E2M1FN, %xsa: f8E8M0FNU, %xb: f4E2M1FN, %xsb: f8E8M0FNU, %acc: f32):
    %xs = arith.scaling_extf %xa, %xsa : f4E2M1FN, f8E8M0FNU to f32
    %ys = arith.scaling_extf %xb, %xsb : f4E2M1FN, f8E8M0FNU to f32
    %p = arith.mulf %xs, %ys : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<256x256xf32>
  return %r : tensor<256x256xf32>
}
