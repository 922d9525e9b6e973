// mmaflow stage `script`: tile, promote, vectorize and bufferize one matmul dispatch.
//
// Payload: a module holding one hal.executable (IREE executable-sources phase) whose contraction
// the `select` stage tagged with `mmaflow.contraction` (and its function `mmaflow.dispatch`: the
// variant may also hold the scalar epilogue function that `normalize` set aside). Result: bufferized vector IR in the form
// the `distribute` stage consumes:
//
//   LDS allocs for the A and B K-tiles (memref<..., #gpu.address_space<workgroup>>)
//   scf.for over K with the wave's accumulator as an iter_arg (vector<WMxWN>, zero-initialised) {
//     vector.transfer_read <global A K-tile> -> vector.transfer_write <LDS A>     (workgroup-wide)
//     vector.transfer_read <global B K-tile> -> vector.transfer_write <LDS B>
//     vector.transfer_read <LDS, this wave's A rows>, <LDS, this wave's B cols>
//     [arith.ext*] vector.contract
//   }
//   vector.transfer_write <accumulator> -> <global C>
//
// mmaflow sets the `mmaflow.param` constants and the thread mapping from the kernel config; the
// numbers below are the defaults, so the file also runs as is:
//   iree-opt --transform-preload-library=transform-library-paths=matmul.mlir --transform-interpreter in.mlir
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.consumed}) {
    %tile_m = transform.param.constant 128 : i64 {mmaflow.param = "tile_m"} -> !transform.param<i64>
    %tile_n = transform.param.constant 128 : i64 {mmaflow.param = "tile_n"} -> !transform.param<i64>
    %tile_k = transform.param.constant 32 : i64 {mmaflow.param = "tile_k"} -> !transform.param<i64>
    %waves_m = transform.param.constant 2 : i64 {mmaflow.param = "waves_m"} -> !transform.param<i64>
    %waves_n = transform.param.constant 4 : i64 {mmaflow.param = "waves_n"} -> !transform.param<i64>

    %variant = transform.structured.match ops{["hal.executable.variant"]} in %root : (!transform.any_op) -> !transform.any_op
    %mm = transform.structured.match attributes{mmaflow.contraction} in %variant : (!transform.any_op) -> !transform.any_op
    %fill = transform.get_producer_of_operand %mm[2] : (!transform.any_op) -> !transform.any_op

    // 1. Workgroups: one scf.forall iteration per tile_m x tile_n output tile; fuse the fill.
    %mm_wg, %grid = transform.structured.tile_using_forall %mm tile_sizes [%tile_m, %tile_n]
        (mapping = [#gpu.block<y>, #gpu.block<x>])
        : (!transform.any_op, !transform.param<i64>, !transform.param<i64>) -> (!transform.any_op, !transform.any_op)
    %fill_wg, %grid_2 = transform.structured.fuse_into_containing_op %fill into %grid
        : (!transform.any_op, !transform.any_op) -> (!transform.any_op, !transform.any_op)

    // 2. Each wave zeroes its own accumulator tile.
    %fill_w, %fill_forall = transform.structured.tile_using_forall %fill_wg num_threads [%waves_m, %waves_n]
        (mapping = [#gpu.warp<linear_dim_1>, #gpu.warp<linear_dim_0>])
        : (!transform.any_op, !transform.param<i64>, !transform.param<i64>) -> (!transform.any_op, !transform.any_op)

    // 3. K loop: tile_k per iteration.
    %mm_k, %k_loop = transform.structured.tile_using_for %mm_wg tile_sizes [0, 0, %tile_k]
        : (!transform.any_op, !transform.param<i64>) -> (!transform.any_op, !transform.any_op)

    // 4. Stage the A and B K-tiles through workgroup memory (LDS).
    %mm_p, %a_alloc, %b_alloc = transform.iree.promote_operands %mm_k [0, 1]
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op)

    // 5. Waves: each computes a (tile_m/waves_m) x (tile_n/waves_n) part of the K step.
    %mm_w, %wave_forall = transform.structured.tile_using_forall %mm_p num_threads [%waves_m, %waves_n]
        (mapping = [#gpu.warp<linear_dim_1>, #gpu.warp<linear_dim_0>])
        : (!transform.any_op, !transform.param<i64>, !transform.param<i64>) -> (!transform.any_op, !transform.any_op)

    // 6. Vectorize: transfer_read / vector.contract / transfer_write.
    %func = transform.structured.match ops{["func.func"]} attributes{mmaflow.dispatch} in %variant : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %func {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func : !transform.any_op
    %func_v = transform.structured.vectorize_children_and_apply_patterns %func : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %func_v {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func_v : !transform.any_op

    // 7. Bufferize.
    transform.iree.eliminate_empty_tensors %variant : (!transform.any_op) -> ()
    %variant_b = transform.iree.bufferize <{target_gpu}> %variant : (!transform.any_op) -> !transform.any_op
    %func_b = transform.structured.match ops{["func.func"]} attributes{mmaflow.dispatch} in %variant_b : (!transform.any_op) -> !transform.any_op

    // 8. Workgroup ids for the grid forall, wave ids (from gpu.thread_id) for the wave foralls.
    transform.iree.forall_to_workgroup %func_b : (!transform.any_op) -> ()
    transform.iree.map_nested_forall_to_gpu_threads %func_b workgroup_dims = [256, 1, 1] subgroup_size = 32
        : (!transform.any_op) -> ()

    // 9. Fold the self-copies the foralls leave behind (canonicalize after CSE).
    transform.apply_patterns to %func_b {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func_b : !transform.any_op
    transform.apply_patterns to %func_b {
      transform.apply_patterns.canonicalization
    } : !transform.any_op

    // 10. Keep the accumulator in registers across K: fold subviews into transfer indices,
    //     forward the zero fill, and hoist the accumulator read/write out of the loop. The
    //     global -> LDS copies are still linalg ops here, so forwarding cannot fold the LDS
    //     round trip away (it would when one wave reads the whole tile it just stored).
    transform.iree.hoist_static_alloc %func_b : (!transform.any_op) -> ()
    transform.apply_patterns to %func_b {
      transform.apply_patterns.memref.fold_memref_alias_ops
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func_b : !transform.any_op
    %func_o = transform.apply_registered_pass "iree-codegen-optimize-vector-transfer" to %func_b : (!transform.any_op) -> !transform.any_op
    %func_h = transform.structured.hoist_redundant_vector_transfers %func_o : (!transform.any_op) -> !transform.any_op
    %func_f = transform.apply_registered_pass "iree-codegen-optimize-vector-transfer" to %func_h : (!transform.any_op) -> !transform.any_op

    // 11. Vectorize the remaining copies: the global -> LDS promotions.
    %copies = transform.structured.match ops{["linalg.generic", "linalg.copy", "memref.copy"]} in %func_f : (!transform.any_op) -> !transform.any_op
    transform.structured.vectorize %copies : !transform.any_op
    transform.apply_patterns to %func_f {
      transform.apply_patterns.memref.fold_memref_alias_ops
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.apply_cse to %func_f : !transform.any_op
    transform.yield
  }
}
