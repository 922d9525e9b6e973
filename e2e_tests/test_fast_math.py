"""The NVIDIA epilogue's own erf (compiler/fast_math.py): as accurate as IREE's lowering, no
division, and what the kernels actually run (the lane executor evaluates the emitted ops)."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import handed_back
from mmaflow.compiler import fast_math
from mmaflow.runtime.modules import EPILOGUES, epilogue_module

_erf = np.vectorize(math.erf, otypes=[np.float64])
# MLIR's rational approximation, which IREE 3.13 emits for math.erf: about 2.5e-7 absolute.
IREE_ERF_ABS_ERROR = 2.5e-7


def _grid() -> np.ndarray:
    dense = np.linspace(-6.0, 6.0, 1_200_001)
    edges = [0.0, -0.0, 1e-30, -1e-30, 1e-8, np.nextafter(np.float32(1), np.float32(0)), 1.0,
             np.nextafter(np.float32(1), np.float32(2)), -1.0, 3.999, 4.0, 4.001, 30.0, -30.0, 1e30]
    return np.concatenate([dense, edges]).astype(np.float32)


def test_erf_is_as_accurate_as_irees_lowering():
    x = _grid()
    got = fast_math.erf_reference_f32(x)
    ref = _erf(x.astype(np.float64))
    err = np.abs(got.astype(np.float64) - ref)
    assert err.max() <= 1.3e-7 < IREE_ERF_ABS_ERROR, (err.max(), x[err.argmax()])
    small = np.abs(x) < 1
    rel = err[small] / np.maximum(np.abs(ref[small]), np.finfo(np.float64).tiny)
    assert rel.max() <= 2e-7, (rel.max(), x[small][rel.argmax()])
    assert np.all(got[x == 0] == 0) and np.all(np.signbit(got[x == 0]) == np.signbit(x[x == 0]))
    assert np.all(np.abs(got) <= 1)
    assert np.all(np.sign(got) == np.sign(x))  # odd, and exactly 0 only at 0


def test_erf_special_values():
    got = fast_math.erf_reference_f32(np.array([np.inf, -np.inf, np.nan], np.float32))
    assert got[0] == 1.0 and got[1] == -1.0 and np.isnan(got[2])


def test_erf_coefficients_are_reproducible():
    small, large = fast_math.fit_coefficients()
    assert np.array_equal(np.float32(small), np.float32(fast_math.ERF_SMALL))
    assert np.array_equal(np.float32(large), np.float32(fast_math.ERF_LARGE))


def test_a_wrong_coefficient_is_caught():
    """The accuracy check above can fail: one coefficient's last digit off breaks it."""
    saved = fast_math.ERF_LARGE
    try:
        fast_math.ERF_LARGE = saved[:3] + (saved[3] * 1.001,) + saved[4:]
        err = np.abs(fast_math.erf_reference_f32(_grid()) - _erf(_grid().astype(np.float64)))
        assert err.max() > 1.3e-7
    finally:
        fast_math.ERF_LARGE = saved


def _gelu_module():
    return epilogue_module(64, 96, 64, **EPILOGUES["bias_n_gelu_f16"])


@pytest.mark.parametrize("target,expanded", [("sm_80", True), ("sm_90a", True), ("gfx942", False)])
def test_erf_is_expanded_on_nvidia_only(target, expanded):
    text = handed_back(_gelu_module(), target)
    assert ("= math.erf " not in text) == expanded  # the op (the problem attribute names it too)
    assert ("= nvvm.ex2 " in text) == expanded


def test_gelu_epilogue_ptx_has_no_division(tmp_path):
    """The whole way to PTX on the default sm_90a kernel (wgmma): one ex2.approx per element,
    no IEEE division; ptxas: no spills."""
    from mmaflow.compiler.report import ptxas_info
    src = tmp_path / "gelu.mlir"
    src.write_text(_gelu_module())
    mmaflow = Path(sys.executable).parent / "mmaflow"
    subprocess.run([str(mmaflow), "compile", str(src), "--target", "sm_90a", "-o", str(tmp_path / "g.vmfb"),
                    "--dump-dir", str(tmp_path / "d")], check=True, capture_output=True)
    (ptx,) = (tmp_path / "d" / "iree").glob("*.ptx")
    text = ptx.read_text()
    assert "div.rn.f32" not in text
    assert text.count("ex2.approx.ftz.f32") >= 1
    info = ptxas_info(text, "sm_90a", 256)
    assert info["vgpr_spills"] == 0, info
