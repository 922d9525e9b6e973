"""Shared helpers for the end-to-end tests: build matmul modules, run mmaflow's pipeline on them
(IREE front + mmaflow stages, no GPU needed) and execute the result on the lane executor."""

from __future__ import annotations

import collections
import functools

import numpy as np
import pytest

from mmaflow.compiler.core.mlir import new_context, parse_module
from mmaflow.compiler.driver.bridge import codegen_module
from mmaflow.compiler.pipeline.pipeline import CodegenOptions
from mmaflow.runtime.modules import (  # noqa: F401 (re-exported: the tests import the module builders from here)
    dynamic_module,
    epilogue_module,
    matmul_module,
    matmul_source,
)
from mmaflow.runtime.simulate import check_matmul

ALL_TARGETS = ["gfx1100", "gfx1201", "gfx942", "gfx950", "sm_80", "sm_90a"]


def _param_id(value) -> str:
    return "-".join(map(str, value)) if isinstance(value, tuple) else str(value)


def spread(rows, columns, keep: int, row_id=_param_id, column_id=_param_id) -> list:
    """pytest params for every (row, column) pair, ``row + column`` as the arguments (a tuple is
    spread out, anything else is one argument); the default set runs row i on ``keep`` columns
    only, rotating (columns i * keep .. i * keep + keep - 1, modulo their count), so that every
    column keeps cases when len(rows) * keep >= len(columns); the other pairs are marked
    exhaustive (the README's second test command, which CI runs too)."""
    if len(rows) * keep < len(columns):
        raise ValueError(f"{len(rows)} rows x {keep} leave some of the {len(columns)} columns without a case")
    out = []
    for i, row in enumerate(rows):
        chosen = {(i * keep + j) % len(columns) for j in range(keep)}
        for c, col in enumerate(columns):
            args = (row if isinstance(row, tuple) else (row,)) + (col if isinstance(col, tuple) else (col,))
            out.append(
                pytest.param(
                    *args, id=f"{row_id(row)}-{column_id(col)}", marks=() if c in chosen else pytest.mark.exhaustive
                )
            )
    return out


@functools.lru_cache(maxsize=None)
def layout_table(layout):
    """(lane, op slot, row, col) of every element of a single-instruction layout, as arrays."""
    import numpy as np

    lanes, slots, rows, cols = [], [], [], []
    for lane in range(layout.wave_size):
        for e in range(layout.elements):
            r, c = layout.coords(lane, e)
            lanes.append(lane)
            slots.append(layout.op_index(e))
            rows.append(r)
            cols.append(c)
    return tuple(np.array(x) for x in (lanes, slots, rows, cols))


@functools.lru_cache(maxsize=256)
def handed_back(source: str, target: str, overrides: tuple = ()) -> str:
    """The hal.executable text after hand-back of the module's one matmul."""
    res = codegen_module(source, target, options=CodegenOptions(overrides=dict(overrides)))
    (exe,) = res.taken
    return exe.text


def mutant(cls, attr: str, value, source: str, target: str = "sm_90a", overrides: dict | None = None):
    """The taken executable of ``source`` compiled with the mutation hook ``cls.attr`` set to
    ``value`` (restored after; compiled afresh: ``handed_back``'s cache keys on the arguments)."""
    old = getattr(cls, attr)
    setattr(cls, attr, value)
    try:
        (exe,) = codegen_module(source, target, options=CodegenOptions(overrides=dict(overrides or {}))).taken
        return exe
    finally:
        setattr(cls, attr, old)


def swap_scale_buffers(monkeypatch, owner, method: str) -> None:
    """Mutation: ``owner.method`` (a rewriter's scale loads) runs with the A and B scale buffers
    exchanged, so that each lane reads the other operand's scale of its position."""
    real = getattr(owner, method)

    def swapped(self, *args):
        self.scale_buffers = self.scale_buffers[::-1]
        try:
            return real(self, *args)
        finally:
            self.scale_buffers = self.scale_buffers[::-1]

    monkeypatch.setattr(owner, method, swapped)


def simulate(
    source: str,
    target: str,
    overrides: dict | None = None,
    *,
    seed: int = 0,
    exact: bool = False,
    epilogue=None,
    sizes: dict | None = None,
    sample: int = 0,
):
    text = handed_back(source, target, tuple(sorted((overrides or {}).items())))
    module = parse_module(text, new_context())
    return check_matmul(module, seed=seed, exact=exact, epilogue=epilogue, sizes=sizes, sample=sample)


@pytest.fixture
def sim():
    return simulate


def attention_ptx_without_spills(
    tmp_path, module_text: str, arch: str, workgroup_size: int, mnemonic: str = "mma.sync.aligned.m16n8k16"
) -> str:
    """A handed-back flash-attention module through iree-compile (from executable sources) to PTX:
    the kernel's matrix instruction (``mnemonic``: mma.sync, or sm_90a's wgmma.mma_async), no local
    memory, and ptxas's registers within 255 (65536 / ``workgroup_size`` when lower) with no
    spills. Returns the PTX."""
    import subprocess
    import sys
    from pathlib import Path

    from mmaflow.compiler.report import ptxas_info

    (tmp_path / "k.mlir").write_text(module_text)
    subprocess.run(
        [
            str(Path(sys.executable).parent / "iree-compile"),
            str(tmp_path / "k.mlir"),
            "--compile-from=executable-sources",
            "--iree-hal-target-device=cuda",
            f"--iree-cuda-target={arch}",
            f"--iree-hal-dump-executable-files-to={tmp_path / 'd'}",
            "-o",
            str(tmp_path / "k.vmfb"),
        ],
        check=True,
    )
    (ptx,) = (tmp_path / "d").glob("*.ptx")
    text = ptx.read_text()
    assert mnemonic in text and "ld.local" not in text and "st.local" not in text
    info = ptxas_info(text, arch, workgroup_size)
    assert info["vgpr_spills"] == 0 and info["vgprs"] <= min(255, 65536 // workgroup_size), info
    return text


def fake_cuda_torch(**fields):
    """A stand-in ``torch`` module for the bench's run half on a machine without a GPU: CUDA
    reported present, events that time every call as 1 ms, and ``fields`` (the ops a test
    provides: ``mm``, ``_scaled_mm``, ``from_numpy``, dtype names ...)."""
    import types

    class Event:
        def __init__(self, enable_timing=False):
            pass

        def record(self):
            pass

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return 1.0

    cuda = types.SimpleNamespace(
        is_available=lambda: True, get_device_name=lambda: "fake", synchronize=lambda: None, Event=Event
    )
    return types.SimpleNamespace(__version__="fake", cuda=cuda, **fields)


# IREE's host CPU target: the bench's run half is exercised here on modules built for it.
CPU_FLAGS = [
    "--iree-hal-target-device=local",
    "--iree-hal-local-target-device-backends=llvm-cpu",
    "--iree-llvmcpu-target-cpu=generic",
]


def compile_for_cpu(source: str) -> bytes:
    """``source`` compiled by IREE's default pipeline for the host CPU (a .vmfb's bytes)."""
    from iree.compiler import compile_str

    return compile_str(source, extra_args=CPU_FLAGS)


def run_builds_on_cpu(monkeypatch) -> None:
    """The bench's run half loads every .vmfb on IREE's local-task driver (the builds are CPU ones),
    whatever driver the manifest names."""
    from mmaflow.runtime import iree_runner

    class CpuModule(iree_runner.CompiledModule):
        def __init__(self, vmfb, driver):
            super().__init__(vmfb, "local-task")

    monkeypatch.setattr(iree_runner, "CompiledModule", CpuModule)


class FakeTensor:
    """A numpy stand-in for a torch tensor, with what the bench's torch recipes call on one."""

    def __init__(self, x):
        self.x = np.asarray(x)

    def cuda(self):
        return self

    cpu = cuda

    @property
    def shape(self):
        return self.x.shape

    def float(self):
        return FakeTensor(self.x.astype(np.float32))

    def numpy(self):
        return self.x

    def abs(self):
        return FakeTensor(abs(self.x))

    def to(self, dtype):  # bf16: torch's rounding of f32 values that are bf16 already
        return self

    def transpose(self, i, j):
        return FakeTensor(np.swapaxes(self.x, i, j))

    def __matmul__(self, other):
        return FakeTensor(self.x @ other.x)


def compiled_ptx(tmp_path, source: str, target: str) -> str:
    """The PTX of ``source`` built the whole way by ``mmaflow compile`` (IREE's own dump of it)."""
    import subprocess
    import sys
    from pathlib import Path

    src = tmp_path / "module.mlir"
    src.write_text(source)
    mmaflow = Path(sys.executable).parent / "mmaflow"
    dump = tmp_path / "dump"
    args = [
        str(mmaflow),
        "compile",
        str(src),
        "--target",
        target,
        "-o",
        str(tmp_path / "m.vmfb"),
        "--dump-dir",
        str(dump),
    ]
    subprocess.run(args, check=True, capture_output=True)
    (ptx,) = (dump / "iree").glob("*.ptx")
    return ptx.read_text()


def sm90a_ptxas(tmp_path, ptx: str) -> str:
    """``ptxas -arch=sm_90a -v`` on ``ptx``: it assembles and spills nothing. Returns its output
    (for the caller's own checks: serialized wgmma, injected waits, registers)."""
    import subprocess

    from mmaflow.compiler.report import ptxas_path

    exe = ptxas_path()
    assert exe is not None, "ptxas is missing: pip install -e '.[test]' installs nvidia-cuda-nvcc-cu12"
    (tmp_path / "k.ptx").write_text(ptx)
    r = subprocess.run(
        [exe, "-arch=sm_90a", "-v", str(tmp_path / "k.ptx"), "-o", str(tmp_path / "k.cubin")],
        capture_output=True,
        text=True,
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "0 bytes spill stores" in out, out
    return out


# (target, config overrides) -- gfx1100 in wave32 and wave64.
TARGETS = [
    ("gfx1100", {}),
    ("gfx1100", {"wave_size": 64}),
    ("gfx1201", {}),
    ("gfx942", {}),
    ("gfx950", {}),
    ("sm_80", {}),
    ("sm_90a", {}),
]

# Dtype pairs per target family (inputs, output): everything the catalogue has an instruction for
# (fp8 on sm_90a has no mma.sync instruction: the warpgroup kernel's alone).
DTYPES = {
    "gfx1100": [("f16", "f32"), ("bf16", "f32"), ("f16", "f16"), ("bf16", "bf16"), ("i8", "i32")],
    "gfx1201": [
        ("f16", "f32"),
        ("bf16", "f32"),
        ("f16", "f16"),
        ("bf16", "bf16"),
        ("i8", "i32"),
        ("f8E4M3FN", "f32"),
        ("f8E5M2", "f32"),
    ],
    "gfx942": [("f16", "f32"), ("bf16", "f32"), ("i8", "i32"), ("f8E4M3FNUZ", "f32"), ("f8E5M2FNUZ", "f32")],
    "gfx950": [("f16", "f32"), ("bf16", "f32"), ("i8", "i32"), ("f8E4M3FN", "f32"), ("f8E5M2", "f32")],
    "sm_80": [("f16", "f32"), ("bf16", "f32"), ("f16", "f16"), ("i8", "i32")],
    "sm_90a": [("f16", "f32"), ("bf16", "f32"), ("f16", "f16"), ("i8", "i32")],
}


# The default set's budget (README: the default command, lit then pytest, under 10 minutes on 2
# cores). In these modules -- the heaviest of the default set, measured with `--durations=0` on a
# 2-core workstation (fabbc47: 25-121 s of test time each; thinned further when the set reached
# 10:55, lit 3:16 and pytest 7:42, at 04bb09e: 16-61 s each; again at 9:57 on 2026-11-30, the
# 4/6-bit and block-scaled tests added: 14-54 s each; and at 9:48 the same day, lit 2:39 and pytest
# 7:05: the fifteen heaviest modules, 18-44 s each) -- a parametrized test keeps every
# THIN[module]-th of its cases still in the default set (its first among them, in collection order);
# the others are marked exhaustive and run by the README's second command, which CI runs too.
# Unparametrized tests and the cases `spread` already chose stay as they are.
THIN = {
    "test_isa_quality.py": 8,
    "test_models.py": 8,
    "test_attention_route.py": 8,
    "test_wgmma_kernel.py": 9,
    "test_executor_numerics.py": 8,
    "test_decode.py": 12,
    "test_coverage.py": 8,
    "test_wgmma_fp8.py": 12,
    "test_epilogue.py": 6,
    "test_warp_specialized.py": 8,
    "test_dynamic.py": 5,
    "test_tma_ring.py": 5,
    "test_runtime.py": 5,
    "test_version.py": 3,
    "test_split_k.py": 5,
    "test_bad_inputs.py": 3,
    "test_routes.py": 2,
    "test_persistent.py": 5,
    "test_mfma_f32_f64.py": 2,
    "test_store_pairs.py": 2,
    "test_weight_only.py": 5,
    "test_sweep.py": 2,
    "test_flash_attention.py": 2,
    "test_flash_attention_mask.py": 2,
    "test_flash_attention_amd.py": 2,
    "test_executor_checks.py": 2,
}


def pytest_collection_modifyitems(config, items):
    """Mark all but every THIN-th default-set case of each parametrized test of a THIN module
    exhaustive (before ``-m 'not exhaustive'`` deselects; conftest hooks run before the mark
    plugin's)."""
    seen: collections.Counter = collections.Counter()
    for item in items:
        k = THIN.get(item.path.name)
        if not k or getattr(item, "callspec", None) is None or item.get_closest_marker("exhaustive"):
            continue
        key = (item.path.name, item.originalname)
        if seen[key] % k:
            item.add_marker(pytest.mark.exhaustive)
        seen[key] += 1


def both_routes_and_verify(src, target: str, tmp_path) -> tuple[str, str, str]:
    """``src`` (a path) built by the preprocess hook (`iree-compile $(mmaflow flags)`) and by
    `mmaflow compile`: both succeed with the same .vmfb, and `mmaflow verify` accepts the hook's
    build. Returns the stderr of the hook build, of `mmaflow compile` and of `mmaflow verify`."""
    import subprocess
    import sys
    from pathlib import Path

    bin_dir = Path(sys.executable).parent

    def run(*args):
        return subprocess.run([str(a) for a in args], capture_output=True, text=True)

    flags = run(bin_dir / "mmaflow", "flags", "--target", target)
    assert flags.returncode == 0, flags.stderr
    stock = run(bin_dir / "iree-compile", src, *flags.stdout.split(), "-o", tmp_path / "stock.vmfb")
    assert stock.returncode == 0, stock.stderr[-3000:]
    ours = run(bin_dir / "mmaflow", "compile", src, "--target", target, "-o", tmp_path / "ours.vmfb")
    assert ours.returncode == 0, ours.stderr[-3000:]
    assert (tmp_path / "stock.vmfb").read_bytes() == (tmp_path / "ours.vmfb").read_bytes()
    v = run(bin_dir / "mmaflow", "verify", tmp_path / "stock.vmfb", "--source", src, "--target", target)
    assert v.returncode == 0, v.stdout + v.stderr
    return stock.stderr, ours.stderr, v.stderr
