"""The lane executor runs Hopper warpgroup MMA at the NVVM level (runtime/executor/wgmma.py): the
device probe kernel (docs/kernels/hopper_wgmma.md: exact on the H100) matches numpy here too, and each ordering
mistake the async semantics allow fails loudly instead of giving numbers."""

from __future__ import annotations

import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from mmaflow.compiler.core.mlir import new_context, parse_module
from mmaflow.runtime.executor import ExecutorError
from mmaflow.runtime.simulate import check_matmul

PROBE = Path(__file__).parent / "data" / "wgmma_probe_nvvm.mlir"


@cache
def _probe_text() -> str:
    out = subprocess.run(
        [sys.executable, "-m", "mmaflow.compiler.cli", "opt", str(PROBE), "--from", "hand-back", "--target", "sm_90a"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout


def _run(text: str, exact: bool = True):
    return check_matmul(parse_module(text, new_context()), exact=exact)


@pytest.mark.parametrize("exact", [True, False], ids=["integers", "random"])
def test_probe_kernel_matches_numpy(exact):
    r = _run(_probe_text(), exact)
    assert r.check.passed, r.check.detail
    assert not r.stats.races
    assert r.stats.matrix_ops == 4  # four m64n64k16 of the one warpgroup


def _mutate(old: str, new: str, count: int = 1) -> str:
    text = _probe_text()
    assert text.count(old) == count, f"{old!r} occurs {text.count(old)} times"
    return text.replace(old, new)


def test_accumulator_read_before_wait_fails():
    text = _mutate("nvvm.wgmma.wait.group.sync.aligned 0\n", "\n")
    with pytest.raises(ExecutorError, match="before wgmma.wait_group"):
        _run(text)


def test_wait_one_leaves_the_only_group_pending():
    text = _mutate("nvvm.wgmma.wait.group.sync.aligned 0\n", "nvvm.wgmma.wait.group.sync.aligned 1\n")
    with pytest.raises(ExecutorError, match="before wgmma.wait_group"):
        _run(text)


def test_missing_commit_fails():
    text = _mutate("nvvm.wgmma.commit.group.sync.aligned\n", "\n")
    with pytest.raises(ExecutorError, match="before wgmma.wait_group"):
        _run(text)


def test_missing_wgmma_fence_fails():
    text = _mutate("nvvm.wgmma.fence.aligned\n", "\n")
    with pytest.raises(ExecutorError, match="no wgmma.fence"):
        _run(text)


def test_missing_proxy_fence_fails():
    text = re.sub(r"nvvm\.fence\.proxy <async\.shared>, space = <cta>\n", "\n", _probe_text(), count=1)
    assert text != _probe_text()
    with pytest.raises(ExecutorError, match="generic proxy with no nvvm.fence.proxy"):
        _run(text)


def test_missing_barrier_is_a_race():
    text = _probe_text()
    i = text.index("nvvm.fence.proxy <async.shared>")
    j = text.index("gpu.barrier", i)
    r = _run(text[:j] + text[j + len("gpu.barrier") :])
    assert any("wgmma.mma_async reads thread" in x for x in r.stats.races), r.stats.races


def test_store_to_shared_memory_a_pending_wgmma_reads_fails():
    # Overwrite the first element of A's tile between the last wgmma and its wait.
    text = _probe_text()
    alloc = re.search(
        r"(%\S+) = memref\.alloc\(\) alignment = 1024 : (memref<4096xf16, #gpu\.address_space<workgroup>>)", text
    )
    assert alloc, "the probe's first workgroup tile"
    name, mtype = alloc.groups()
    store = (
        f"%zz_c0 = arith.constant 0 : index\n %zz_x = arith.constant 1.0 : f16\n"
        f" memref.store %zz_x, {name}[%zz_c0] : {mtype}\n"
    )
    text = _mutate("nvvm.wgmma.commit.group.sync.aligned\n", "nvvm.wgmma.commit.group.sync.aligned\n" + store)
    with pytest.raises(ExecutorError, match="that a wgmma.mma_async still reads"):
        _run(text)
