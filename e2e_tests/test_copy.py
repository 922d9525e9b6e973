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


REFUSED = [
    (  # IREE copies within one buffer through one read-write subspan
        """func.func @main(%t: tensor<8x64xf16>) -> tensor<8x64xf16> {
  %s = tensor.extract_slice %t[0, 0] [4, 32] [1, 1] : tensor<8x64xf16> to tensor<4x32xf16>
  %r = tensor.insert_slice %s into %t[2, 16] [4, 32] [1, 1] : tensor<4x32xf16> into tensor<8x64xf16>
  return %r : tensor<8x64xf16>
}""",
        "the copy reads and writes one tensor",
    ),
    (  # a concatenation: each half stored into part of the result
        """func.func @main(%a: tensor<4x32xf16>, %b: tensor<4x32xf16>) -> tensor<4x64xf16> {
  %c = tensor.concat dim(1) %a, %b : (tensor<4x32xf16>, tensor<4x32xf16>) -> tensor<4x64xf16>
  return %c : tensor<4x64xf16>
}""",
        r"a store into part of a larger tensor \(\[4, 32\] into \[4, 64\] at \[0, (0|32)\]\)",
    ),
    (
        """func.func @main(%a: tensor<4x64xcomplex<f32>>) -> tensor<4x32xcomplex<f32>> {
  %s = tensor.extract_slice %a[0, 16] [4, 32] [1, 1] : tensor<4x64xcomplex<f32>> to tensor<4x32xcomplex<f32>>
  return %s : tensor<4x32xcomplex<f32>>
}""",
        r"a copy of complex<f32> \(the kernel copies elements of whole bytes",
    ),
]


@pytest.mark.parametrize("source,why", REFUSED, ids=["in-place", "concat", "complex"])
def test_copies_the_kernel_does_not_take_are_left_with_the_reason(source, why):
    """A copy within one buffer (in place: overlapping or not, one subspan), a store into part of a larger
    tensor (the executor's reference checks whole stores), an element type that is not bytes: left to IREE,
    named, nothing taken."""
    import re

    res = codegen_module(source, "sm_90a", require_matmul=False)
    assert not res.taken, [e.name for e in res.taken]
    lines = [x for x in res.log if x.startswith("mmaflow: left  ")]
    assert lines and all(re.search("a copy: " + why + ".*; IREE compiles it", x) for x in lines), res.log


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


def test_verify_refuses_a_copy_of_narrower_accesses():
    """check_copy_isa: 128-bit loads planned, a 32-bit load or a 64-bit store in the PTX is refused, each named."""
    from types import SimpleNamespace

    from mmaflow.compiler.core import attrs
    from mmaflow.compiler.core.errors import VerificationError
    from mmaflow.compiler.verify import check_copy_isa

    facts = SimpleNamespace(expect=attrs.Expectations(global_load_bits=128, k_tiles=0, mma_per_k_tile=0))
    good = "ld.global.nc.v4.b32 {%r1, %r2, %r3, %r4}, [%rd1];\nst.global.v4.b32 [%rd2], {%r1, %r2, %r3, %r4};"
    report = SimpleNamespace(counts={"global_load_b128": 1}, vgpr_spills=0, sgpr_spills=0)
    check_copy_isa(report, good, "k", facts)
    narrow_load = SimpleNamespace(counts={"global_load_b128": 1, "global_load_b32": 1}, vgpr_spills=0, sgpr_spills=0)
    with pytest.raises(VerificationError, match=r"narrower global loads too \(global_load_b32\)"):
        check_copy_isa(narrow_load, good, "k", facts)
    with pytest.raises(VerificationError, match=r"stores narrower than 128 bits \(st.global.v2.b32\)"):
        check_copy_isa(report, good + "\nst.global.v2.b32 [%rd3], {%r1, %r2};", "k", facts)
    with pytest.raises(VerificationError, match="registers spilled"):
        check_copy_isa(report, good + "\nst.local.b32 [%rd4], %r1;", "k", facts)
