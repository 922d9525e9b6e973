"""The two ways in (`mmaflow compile` in-process, `iree-compile $(mmaflow flags ...)` with the
preprocess hook) on what real users do: their own IREE dump flags, a shell where mmaflow's
environment is not activated, modules whose identical dispatches IREE merges."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
EXAMPLE = REPO / "examples" / "matmul_256_f16.mlir"
TWO = REPO / "lit_tests" / "Inputs" / "two_matmuls.mlir"


def _run(*cmd, env=None):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)


@pytest.mark.exhaustive
def test_the_users_own_dump_flag_is_honoured(tmp_path):
    """`--iree-flag=--iree-hal-dump-executable-files-to=DIR`: IREE dumps there, and mmaflow still
    finds and verifies the ISA (it reads it from the user's directory)."""
    dump = tmp_path / "dumps"
    r = _run(
        BIN / "mmaflow",
        "compile",
        EXAMPLE,
        "--target",
        "sm_80",
        "-o",
        tmp_path / "out.vmfb",
        f"--iree-flag=--iree-hal-dump-executable-files-to={dump}",
    )
    assert r.returncode == 0, r.stderr
    assert "mmaflow: verified mm_dispatch_0:" in r.stderr
    assert list(dump.glob("*.ptx")), sorted(p.name for p in dump.iterdir())
    r = _run(
        BIN / "mmaflow",
        "compile",
        EXAMPLE,
        "--target",
        "gfx1100",
        "-o",
        tmp_path / "amd.vmfb",
        f"--iree-flag=--iree-hal-dump-executable-binaries-to={tmp_path / 'bins'}",
    )
    assert r.returncode == 0 and "mmaflow: verified mm_dispatch_0:" in r.stderr, r.stderr
    assert list((tmp_path / "bins").glob("*.hsaco"))


@pytest.mark.exhaustive
def test_flags_work_from_a_shell_without_the_environment(tmp_path):
    """IREE finds a preprocess tool only by bare name: `mmaflow flags` hands IREE `env
    /abs/python -I -S /abs/codegen_client.py` (through a response file), which works when mmaflow's
    environment is not on PATH."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    flags = _run(BIN / "mmaflow", "flags", "--target", "gfx942", env=env)
    assert flags.returncode == 0, flags.stderr
    rsp = flags.stdout.split()[-1]
    assert rsp.startswith("@") and "driver/codegen_client.py" in Path(rsp[1:]).read_text(), flags.stdout
    assert "=env " in Path(rsp[1:]).read_text() and " -I -S " in Path(rsp[1:]).read_text()
    r = _run(BIN / "iree-compile", EXAMPLE, *flags.stdout.split(), "-o", tmp_path / "out.vmfb", env=env)
    assert r.returncode == 0, r.stderr
    assert "mmaflow: taken mm_dispatch_0" in r.stderr
    ours = _run(BIN / "mmaflow", "compile", EXAMPLE, "--target", "gfx942", "-o", tmp_path / "ours.vmfb")
    assert ours.returncode == 0, ours.stderr
    assert (tmp_path / "out.vmfb").read_bytes() == (tmp_path / "ours.vmfb").read_bytes()


def test_merged_executables_are_checked_at_every_call_site():
    """Two identical matmuls: IREE compiles one executable and dispatches it twice, the second
    time writing at a non-zero offset (a push constant). Each call site is checked."""
    r = _run(BIN / "mmaflow", "run", TWO, "--target", "gfx942", "--device", "sim")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS two_dispatch_0 (call 1 of 2)" in r.stdout and "PASS two_dispatch_0 (call 2 of 2)" in r.stdout
    assert "outputs binding 2 @ 49152" in r.stdout, r.stdout


@pytest.mark.exhaustive
def test_the_hook_without_its_server_gives_the_same_bytes(tmp_path):
    flags = _run(BIN / "mmaflow", "flags", "--target", "sm_80").stdout.split()
    a = _run(BIN / "iree-compile", TWO, *flags, "-o", tmp_path / "a.vmfb")
    b = _run(
        BIN / "iree-compile", TWO, *flags, "-o", tmp_path / "b.vmfb", env={**os.environ, "MMAFLOW_CODEGEN_SERVER": "0"}
    )
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert (tmp_path / "a.vmfb").read_bytes() == (tmp_path / "b.vmfb").read_bytes()
    assert "mmaflow: taken two_dispatch_0" in a.stderr and "mmaflow: taken two_dispatch_0" in b.stderr


@pytest.mark.exhaustive
def test_amd_resources_are_read_for_kernels_with_quoted_names(tmp_path):
    """iree-turbine's entry points hold a `$`, which YAML quotes in the .amdgpu_metadata
    ('main$async_dispatch_2_...'): registers, spills and LDS are still read for every kernel."""
    model = REPO / "e2e_tests" / "models" / "gpt2_block_f16.mlir"
    r = _run(BIN / "mmaflow", "compile", model, "--target", "gfx942", "-o", tmp_path / "out.vmfb")
    assert r.returncode == 0, r.stderr
    verified = [line for line in r.stderr.splitlines() if line.startswith("mmaflow: verified")]
    assert len(verified) == 9, r.stderr  # 6 matmuls, 3 copies
    for line in verified:
        assert "None" not in line and re.search(
            r"\d+ VGPRs, \d+ SGPRs, 0 VGPR / 0 SGPR spills, \d+ bytes LDS, "
            r"\d+ waves/SIMD",
            line,
        ), line


@pytest.mark.exhaustive
def test_the_baseline_report_finds_kernels_with_quoted_names():
    """`mmaflow report --baseline iree` on an iree-turbine model (AMD kernel labels hold a `$`):
    IREE's default pipeline is reported for each dispatch mmaflow takes, with its resources."""
    model = REPO / "e2e_tests" / "models" / "gpt2_block_f16.mlir"
    r = _run(BIN / "mmaflow", "report", model, "--target", "gfx942", "--baseline", "iree", "--json")
    assert r.returncode == 0, r.stderr
    import json

    d = json.loads(r.stdout)
    assert len(d["mmaflow"]) == 9, list(d["mmaflow"])  # 6 matmuls, 3 copies
    for kernel, ours in d["mmaflow"].items():
        theirs = d["iree"][kernel]
        assert isinstance(ours["vgprs"], int) and isinstance(theirs["vgprs"], int), (kernel, theirs)
        if "slow_memcpy" not in kernel:
            assert theirs["counts"].get("matrix", 0) > 0, (kernel, theirs["counts"])
