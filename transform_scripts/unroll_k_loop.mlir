// Unroll one scf.for in place by `factor` (upstream loopUnrollByFactor; a remainder loop follows
// when the trip count may not divide). `distribute` applies it to AMD's LDS ring with 3 or more
// stages, factor stages - 1, so that each K tile in flight keeps its registers across
// iterations: a tile carried round the loop as an iter_arg would be copied at the back edge,
// and the copy waits for its loads (s_waitcnt vmcnt(0)) in the iteration that issued them.
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%loop: !transform.any_op {transform.consumed}) {
    transform.loop.unroll %loop factor = 2 : !transform.any_op
    transform.yield
  }
}
