func.func @matmul(%a: tensor<64x1xi8>, %b: tensor<1x64xi8>) -> tensor<64x64xi32> {
  %zero = arith.constant 0 : i32
  %e = tensor.empty() : tensor<64x64xi32>
  %f = linalg.fill ins(%zero : i32) outs(%e : tensor<64x64xi32>) -> tensor<64x64xi32>
  %r = linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"]}
       ins(%a, %b : tensor<64x1xi8>, tensor<1x64xi8>) outs(%f : tensor<64x64xi32>) {
  ^bb0(%x: i8, %y: i8, %acc: i32):
    %xe = arith.extui %x : i8 to i32
    %ye = arith.extui %y : i8 to i32
    %p = arith.muli %xe, %ye : i32
    %s = arith.addi %acc, %p : i32
    linalg.yield %s : i32
  } -> tensor<64x64xi32>
  return %r : tensor<64x64xi32>
}
