func.func @weight_only(%x: tensor<4x1024xf16>, %w: tensor<256x8x128xi4>, %s: tensor<256x8xf16>, %z: tensor<256x8xf16>) -> tensor<4x256xf32> {
  %e = tensor.empty() : tensor<256x8x128xf16>
  %deq = linalg.generic {indexing_maps = [affine_map<(n, g, k) -> (n, g, k)>, affine_map<(n, g, k) -> (n, g)>, affine_map<(n, g, k) -> (n, g)>, affine_map<(n, g, k) -> (n, g, k)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%w, %s, %z : tensor<256x8x128xi4>, tensor<256x8xf16>, tensor<256x8xf16>) outs(%e : tensor<256x8x128xf16>) {
  ^bb0(%q: i4, %sc: f16, %zp: f16, %o: f16):
    %f = arith.uitofp %q : i4 to f16
    %c = arith.subf %f, %zp : f16
    %d = arith.mulf %c, %sc : f16
    linalg.yield %d : f16
  } -> tensor<256x8x128xf16>
  %a = tensor.expand_shape %x [[0], [1, 2]] output_shape [4, 8, 128] : tensor<4x1024xf16> into tensor<4x8x128xf16>
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<4x256xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e2 : tensor<4x256xf32>) -> tensor<4x256xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, g, k) -> (m, g, k)>, affine_map<(m, n, g, k) -> (n, g, k)>, affine_map<(m, n, g, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction", "reduction"]} ins(%a, %deq : tensor<4x8x128xf16>, tensor<256x8x128xf16>) outs(%init : tensor<4x256xf32>) {
  ^bb0(%av: f16, %bv: f16, %ov: f32):
    %ae = arith.extf %av : f16 to f32
    %be = arith.extf %bv : f16 to f32
    %p = arith.mulf %ae, %be : f32
    %t = arith.addf %ov, %p : f32
    linalg.yield %t : f32
  } -> tensor<4x256xf32>
  return %r : tensor<4x256xf32>
}

