// MXFP4 x @ B^T at M = 1 in IREE's scaled-matmul form (runtime/modules.py scaled_module(1, 4096, 4096)): IREE drops the unit dimension
func.func @mx(%a0: tensor<1x128x16xi8>, %b0: tensor<4096x128x16xi8>, %sa: tensor<1x128xf8E8M0FNU>, %sb: tensor<4096x128xf8E8M0FNU>) -> tensor<1x4096xf32> {
  %a = flow.tensor.bitcast %a0 : tensor<1x128x16xi8> -> tensor<1x128x32xf4E2M1FN>
  %b = flow.tensor.bitcast %b0 : tensor<4096x128x16xi8> -> tensor<4096x128x32xf4E2M1FN>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x4096xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x4096xf32>) -> tensor<1x4096xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2)>, affine_map<(d0, d1, d2, d3) -> (d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%a, %b, %sa, %sb : tensor<1x128x32xf4E2M1FN>, tensor<4096x128x32xf4E2M1FN>, tensor<1x128xf8E8M0FNU>, tensor<4096x128xf8E8M0FNU>) outs(%f : tensor<1x4096xf32>) {
  ^bb0(%xa: f4E2M1FN, %xb: f4E2M1FN, %xsa: f8E8M0FNU, %xsb: f8E8M0FNU, %acc: f32):
    %xs = arith.scaling_extf %xa, %xsa : f4E2M1FN, f8E8M0FNU to f32
    %ys = arith.scaling_extf %xb, %xsb : f4E2M1FN, f8E8M0FNU to f32
    %p = arith.mulf %xs, %ys : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<1x4096xf32>
  return %r : tensor<1x4096xf32>
}
