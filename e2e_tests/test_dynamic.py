"""Dynamic shapes on every target: one compiled kernel, run on the lane executor at several
run-time sizes (given as IREE's host gives them: push constants and the grid's workload),
against numpy.

Without a divisibility promise any size works, down to 0 and 1; with one (util.assume.int
udiv) the kernel may load 128 bits per row and drop bounds checks, and is run at sizes that
keep the promise.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ALL_TARGETS, dynamic_module, simulate, spread

from mmaflow.runtime.numerics import EpilogueReference

NO_HINT_SIZES = [
    dict(m=1, n=1, k=1),
    dict(m=17, n=33, k=65),
    dict(m=100, n=200, k=300),
    dict(m=0, n=5, k=7),
    dict(m=5, n=6, k=0),
]


@pytest.mark.parametrize("target", ALL_TARGETS)
def test_fully_dynamic_any_size(target):
    src = dynamic_module()
    for sizes in NO_HINT_SIZES:
        r = simulate(src, target, sizes=sizes, seed=sum(sizes.values()), exact=True)
        assert r.check.passed, (sizes, r.check.line())
        assert not r.stats.races


@pytest.mark.parametrize("target", ALL_TARGETS)
def test_dynamic_with_divisibility_promises(target):
    src = dynamic_module(divisors=dict(m=16, n=32, k=64))
    for sizes in (dict(m=16, n=32, k=64), dict(m=48, n=96, k=192), dict(m=272, n=160, k=128)):
        r = simulate(src, target, sizes=sizes, seed=3)
        assert r.check.passed, (sizes, r.check.line())
        if target == "sm_90a":  # the wgmma kernel's tiles overhang: TMA bulk copies (wgmma.plan.default_copy)
            assert r.stats.async_copy_bytes > 0 and not r.stats.global_loads, r.stats
        else:
            assert r.stats.global_loads.get(16, 0) > 0, r.stats.global_loads  # 128-bit loads per lane


# A @ A with a promise on its one dynamic size: the one memref feeds A (rows tiled by tile_m) and B
# (rows tiled by tile_k). A promise of 32 covers tile_k but not tile_m, so A's rows keep their bounds
# (dropping them once read past the end of the tensor on NVIDIA).
SQUARE_HINTED = """func.func @matmul(%a0: tensor<?x?xf16>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n0 = tensor.dim %a0, %c0 : tensor<?x?xf16>
  %k0 = tensor.dim %a0, %c1 : tensor<?x?xf16>
  %n = util.assume.int %n0<udiv = 32> : index
  %a = flow.tensor.reshape %a0 : tensor<?x?xf16>{%n0, %k0} -> tensor<?x?xf16>{%n, %n}
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty(%n, %n) : tensor<?x?xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%empty : tensor<?x?xf32>) -> tensor<?x?xf32>
  %c = linalg.matmul ins(%a, %a : tensor<?x?xf16>, tensor<?x?xf16>) outs(%acc : tensor<?x?xf32>) -> tensor<?x?xf32>
  return %c : tensor<?x?xf32>
}
"""


# The sizes below are spread over the targets in the default set, every target keeping cases
# (``conftest.spread``); every size on every target with `-m exhaustive`.
@pytest.mark.parametrize("size,target", spread([32, 96, 160], ALL_TARGETS, 2))
def test_dynamic_square_one_tensor_as_both_operands(target, size):
    r = simulate(SQUARE_HINTED, target, sizes=dict(m=size, n=size, k=size), seed=size)
    assert r.check.passed, (size, r.check.line())
    assert not r.stats.races


@pytest.mark.parametrize("m,target", spread([1, 77, 300], ALL_TARGETS, 2))
def test_dynamic_rows_static_weights(target, m):
    """The common inference shape: a dynamic number of rows times a static weight matrix."""
    src = dynamic_module(m=None, n=192, k=256)
    r = simulate(src, target, sizes=dict(m=m), seed=m, exact=True)
    assert r.check.passed, (m, r.check.line())


@pytest.mark.parametrize("m,n,k,target", spread([(30, 50, 70), (129, 7, 33)], ALL_TARGETS, 3))
def test_dynamic_with_bias_epilogue(target, m, n, k):
    src = dynamic_module(bias=True)
    ref = EpilogueReference(lambda acc, b: acc + b[None, :], 1.0, 1)
    r = simulate(src, target, sizes=dict(m=m, n=n, k=k), seed=5, epilogue=ref)
    assert r.check.passed, r.check.line()


BATCH_DYNAMIC = """
func.func @bmm(%a: tensor<?x?x64xf16>, %b: tensor<?x64x?xf16>) -> tensor<?x?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %bt = tensor.dim %a, %c0 : tensor<?x?x64xf16>
  %m = tensor.dim %a, %c1 : tensor<?x?x64xf16>
  %n = tensor.dim %b, %c2 : tensor<?x64x?xf16>
  %cst = arith.constant 0.0 : f32
  %e = tensor.empty(%bt, %m, %n) : tensor<?x?x?xf32>
  %f = linalg.fill ins(%cst : f32) outs(%e : tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  %r = linalg.batch_matmul ins(%a, %b : tensor<?x?x64xf16>, tensor<?x64x?xf16>) outs(%f : tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
  return %r : tensor<?x?x?xf32>
}
"""


@pytest.mark.parametrize("batch,m,n,target", spread([(3, 20, 40), (1, 64, 64)], ALL_TARGETS, 3))
def test_dynamic_batch(target, batch, m, n):
    r = simulate(BATCH_DYNAMIC, target, sizes=dict(batch=batch, m=m, n=n), seed=7, exact=True)
    assert r.check.passed, r.check.line()


@pytest.mark.parametrize(
    "target,a_type,c_type",
    [("gfx942", "i8", "i32"), ("gfx1201", "f8E4M3FN", "f32"), ("sm_80", "bf16", "f32"), ("gfx1100", "f16", "f16")],
)
def test_dynamic_dtypes(target, a_type, c_type):
    r = simulate(dynamic_module(in_type=a_type, out_type=c_type), target, sizes=dict(m=40, n=24, k=72), seed=9)
    assert r.check.passed, r.check.line()


def test_missing_size_is_a_clear_error():
    from mmaflow.compiler.core.errors import MmaflowError

    with pytest.raises(MmaflowError, match="dynamic k: give its size"):
        simulate(dynamic_module(), "gfx942", sizes=dict(m=4, n=4))


def test_sizes_for_static_dimensions_are_refused():
    from mmaflow.compiler.core.errors import MmaflowError

    with pytest.raises(MmaflowError, match="static dimensions"):
        simulate(dynamic_module(m=None, n=64, k=64), "sm_80", sizes=dict(m=4, n=64))


def test_one_kernel_many_sizes_matches_numpy_exactly():
    """The grid really comes from the workload: a size that needs 3 x 2 workgroups and one that
    needs 1 x 1 from the same kernel."""
    src = dynamic_module()
    for sizes in (dict(m=300, n=200, k=40), dict(m=3, n=2, k=40)):
        r = simulate(src, "gfx1201", sizes=sizes, exact=True)
        assert r.check.passed and r.out.shape == (sizes["m"], sizes["n"]), r.check.line()
        assert np.array_equal(r.out.astype(np.float64), r.ref)
