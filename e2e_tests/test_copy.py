"""The copy family (compiler/kernels/copy/, docs/kernels/copy.md): IREE's slow_memcpy dispatches (a static slice
of one binding tensor stored into another) taken on every target, each access as wide as the rows' alignment
allows, right on the lane executor (random data, sentinel bytes around every tensor, IREE's byte offsets), and a
copy the kernel does not take left to IREE with its reason."""

from __future__ import annotations

import pytest
from conftest import ALL_TARGETS, spread

from mmaflow.compiler.core.errors import UnsupportedError
from mmaflow.compiler.driver.bridge import codegen_module
from mmaflow.compiler.kernels import registry
from mmaflow.compiler.kernels.copy.kernel import plan_copy
from mmaflow.runtime.model_check import check_executable


def _slice_module(shape, offsets, sizes, elem, dynamic_rows=False):
    """A function returning a slice of its argument: IREE copies it in a slow_memcpy dispatch."""
    t = "x".join(["?" if dynamic_rows and i == 0 else str(s) for i, s in enumerate(shape)]) + f"x{elem}"
    r = "x".join(map(str, sizes)) + f"x{elem}"
    ones = ", ".join("1" for _ in shape)
    return f"""
func.func @main(%a: tensor<{t}>) -> tensor<{r}> {{
  %s = tensor.extract_slice %a[{", ".join(map(str, offsets))}] [{", ".join(map(str, sizes))}] [{ones}]
      : tensor<{t}> to tensor<{r}>
  return %s : tensor<{r}>
}}
"""


# (shape, offsets, sizes, element type, the access bytes the rows' alignment allows)
CASES = [
    ((2, 8, 96), (0, 0, 32), (2, 8, 32), "f16", 16),  # GPT-2's Q / K / V out of the fused projection, smaller
    ((4, 10, 7), (1, 2, 3), (2, 5, 4), "f32", 4),  # rows start 12 bytes into a 28-byte row: 4-byte accesses
    ((3, 40), (0, 8), (3, 16), "i8", 8),  # 16-byte rows at byte 8 of 40
    ((2, 3, 50, 16), (0, 1, 0, 8), (2, 2, 50, 8), "bf16", 16),  # four dims, the last half taken
    ((5, 6), (1, 1), (3, 3), "f16", 2),  # 6-byte rows: one element an access
]


@pytest.mark.parametrize(
    "shape,offsets,sizes,elem,width,target",
    spread(CASES, ALL_TARGETS, 2, row_id=lambda c: f"{c[3]}-{'x'.join(map(str, c[0]))}"),
)
def test_copies_on_the_executor(shape, offsets, sizes, elem, width, target):
    res = codegen_module(_slice_module(shape, offsets, sizes, elem), target, require_matmul=False)
    (exe,) = res.taken
    assert exe.facts.is_copy and exe.facts.expect.global_load_bits == 8 * width
    rec = exe.facts.problem
    assert (rec.sizes, rec.src_shape, rec.src_offsets, rec.dst_offsets) == (sizes, shape, offsets, (0,) * len(shape))
    assert plan_copy(rec, target).width == width
    (site,) = check_executable(exe, seed=3)
    assert site.passed, site.line()
    assert set(site.stats.global_loads) == {width} and set(site.stats.global_stores) == {width}


def test_a_copy_with_run_time_sizes_is_left_to_iree_with_its_reason():
    res = codegen_module(
        _slice_module((4, 96), (0, 32), (4, 32), "f16", dynamic_rows=True), "sm_90a", require_matmul=False
    )
    assert not res.taken
    assert res.log == [
        "mmaflow: left  main_dispatch_0: a copy: the tensor read has dynamic dimensions; IREE compiles it"
    ]


def test_what_the_plan_refuses():
    family = registry.direct_family("copy")
    res = codegen_module(_slice_module((2, 8, 96), (0, 0, 32), (2, 8, 32), "f16"), "gfx942", require_matmul=False)
    rec = res.taken[0].facts.problem
    big = rec.__class__(**{**rec.__dict__, "src_shape": (2, 8, 2**30), "sizes": (2, 8, 32)})
    with pytest.raises(UnsupportedError, match="AMD buffer accesses reach 2 GiB"):
        family.plan(big, "gfx942")
    assert family.plan(big, "sm_90a").width == 16
    with pytest.raises(UnsupportedError, match="elements of whole bytes"):
        family.plan(rec.__class__(**{**rec.__dict__, "elem": "i4"}), "sm_90a")


def test_a_misaligned_access_is_caught(monkeypatch):
    """The plan's width promised where the rows do not start on it (the f32 case's 12-byte row offset at 16
    bytes): the executor refuses the access, as the GPU faults on it."""
    from mmaflow.compiler.kernels.copy import kernel

    monkeypatch.setattr(kernel, "_row_alignment", lambda *a: 16)
    shape, offsets, sizes, elem, _ = CASES[1]
    res = codegen_module(_slice_module(shape, offsets, sizes, elem), "sm_80", require_matmul=False)
    (exe,) = res.taken
    assert exe.facts.expect.global_load_bits == 128
    with pytest.raises(Exception, match="promising 16-byte alignment starts at byte"):
        check_executable(exe, seed=3)
