"""The matmul variants users hit first (issue 7), on every target, on the lane executor against numpy:
transposed operands, batch matmul, and unaligned shapes down to 1x1x1.

Small cases run twice (random data within the dtype's rounding bound, then small integers compared
exactly); the large unaligned shapes run the random check only, on the grid's corner workgroups
(the whole grid with `-m exhaustive`), to keep the suite short. The default set runs each shape or
transpose on some targets, every target keeping cases of each kind (``conftest.spread``); every
pair with `-m exhaustive`.
"""

from __future__ import annotations

import pytest
from conftest import ALL_TARGETS, matmul_module, simulate, spread

from mmaflow.compiler.core.errors import MmaflowError
from mmaflow.compiler.driver.bridge import codegen_module


def _check(src, target, *, seed=0, exact=True, overrides=None, sample=0):
    r = simulate(src, target, overrides, seed=seed, sample=sample)
    assert r.check.passed, r.check.line()
    assert not r.stats.races, r.stats.races[:3]
    assert r.stats.matrix_ops > 0
    if exact:
        e = simulate(src, target, overrides, seed=seed + 1, exact=True)
        assert e.check.passed, e.check.line()
    return r


TRANSPOSES = [(True, False), (False, True), (True, True)]


_T_IDS = {(True, False): "At", (False, True): "Bt", (True, True): "AtBt", (False, False): "NN"}


# Each transpose on four targets in the default set (every target twice), every target with
# `-m exhaustive` (``conftest.spread``; so for the other spread cases below).
@pytest.mark.parametrize("ta,tb,target", spread(TRANSPOSES, ALL_TARGETS, 4, _T_IDS.get))
def test_transposed_operands(target, ta, tb):
    _check(matmul_module(128, 64, 96, transpose_a=ta, transpose_b=tb), target, seed=7)


@pytest.mark.parametrize("ta,tb,target", spread([(False, False), (False, True)], ALL_TARGETS, 3, _T_IDS.get))
def test_batch_matmul(target, ta, tb):
    _check(matmul_module(64, 128, 64, transpose_a=ta, transpose_b=tb, batch=3), target, seed=11)


SMALL_UNALIGNED = [(1, 1, 1), (17, 33, 65), (100, 200, 300), (3, 130, 7)]
LARGE_UNALIGNED = [(1000, 1000, 1000), (1, 4096, 4096), (4096, 1, 4096)]


@pytest.mark.parametrize("m,n,k,target", spread(SMALL_UNALIGNED, ALL_TARGETS, 3))
def test_unaligned_small(target, m, n, k):
    _check(matmul_module(m, n, k), target, seed=m + n + k)


@pytest.mark.parametrize("m,n,k,target", spread(LARGE_UNALIGNED, ALL_TARGETS, 2))
def test_unaligned_large_corners(target, m, n, k):
    """The grid's corner workgroups (where the partial tiles are) and a random one, over the
    whole K loop; the rest of the grid runs the same code on whole tiles."""
    _check(matmul_module(m, n, k), target, seed=5, exact=False, sample=5)


@pytest.mark.exhaustive
@pytest.mark.parametrize("target", ALL_TARGETS)
@pytest.mark.parametrize("m,n,k", LARGE_UNALIGNED, ids=lambda v: str(v))
def test_unaligned_large(target, m, n, k):
    _check(matmul_module(m, n, k), target, seed=5, exact=False)


@pytest.mark.parametrize("target", ALL_TARGETS)
def test_unaligned_transposed_batch(target):
    _check(matmul_module(33, 47, 70, transpose_a=True, transpose_b=True, batch=2), target, seed=13)


@pytest.mark.parametrize(
    "target,a_type,c_type",
    [
        ("gfx1100", "i8", "i32"),
        ("gfx1201", "f8E4M3FN", "f32"),
        ("gfx942", "f8E4M3FNUZ", "f32"),
        ("gfx950", "bf16", "f32"),
        ("sm_80", "i8", "i32"),
        ("sm_90a", "f16", "f16"),
        ("gfx1100", "f16", "f16"),
    ],
)
def test_unaligned_dtypes(target, a_type, c_type):
    """Bounds on 8-bit and 16-bit elements: a 128-bit global load straddles the end of a row."""
    _check(matmul_module(45, 71, 83, a_type, c_type), target, seed=17)


@pytest.mark.parametrize("target", ["gfx1100", "gfx1201"])
def test_unsigned_i8(target):
    r = simulate(matmul_module(128, 128, 128, "i8", "i32", unsigned=True), target)
    assert r.check.passed, r.check.line()


@pytest.mark.parametrize(
    "target,has",
    [("gfx942", "i8xi8->i32"), ("gfx950", "i8xi8->i32"), ("sm_80", "i8xi8->i32"), ("sm_90a", "i8xi8->i32")],
)
def test_unsigned_i8_without_instruction_is_a_clear_error(target, has):
    """No u8 matrix instruction there: a clear error naming what is missing, never a wrong result."""
    with pytest.raises(MmaflowError) as e:
        codegen_module(matmul_module(64, 64, 64, "i8", "i32", unsigned=True), target)
    msg = str(e.value)
    assert f"on {target}" in msg and "(unsigned x unsigned)" in msg and has in msg, msg


_SHARED = {
    ((96, 96, 96), False): "AA",
    ((100, 100, 100), False): "AA-unaligned",
    ((80, 80, 48), True): "AAt",
    ((33, 33, 100), True): "AAt-unaligned",
}


@pytest.mark.parametrize("shape,tb,target", spread(list(_SHARED), ALL_TARGETS, 3, _SHARED.get))
def test_one_tensor_as_both_operands(target, shape, tb):
    """A @ A and the Gram matrix A @ A^T: one binding is needed in two layouts; each operand gets
    its own LDS copy (distribute says so in the log) and the result matches numpy."""
    src = matmul_module(*shape, transpose_b=tb, shared=True)
    res = codegen_module(src, target)
    assert any("A and B are the same tensor" in line for line in res.log), res.log
    _check(src, target, seed=23)
