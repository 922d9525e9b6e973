"""Kernel-only timing's parsing (runtime/ncu.py): no GPU needed, Nsight Compute's CSV as it
prints it (the program's own output first, units chosen per kernel)."""

import pytest

from mmaflow.runtime.ncu import MARKER, NcuError, kernel_time, parse_csv, per_call, split_at_markers

HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
    '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
)


def _row(i: int, name: str, unit: str, value: str, metric: str = "gpu__time_duration.sum") -> str:
    return (
        f'"{i}","77","python3","h","{name}","1","7","(256, 1, 1)","(32, 16, 1)","0","9.0",'
        f'"Command line profiler metrics","{metric}","{unit}","{value}"'
    )


def _csv(rows: list[str]) -> str:
    return "==PROF== Connected to process 77\nthe program's own output\n" + "\n".join([HEADER] + rows) + "\n"


def test_parse_csv_units_and_thousands():
    text = _csv(
        [
            _row(0, "init", "nsecond", "1,500"),
            _row(1, "mm", "usecond", "651.20"),
            _row(1, "mm", "msecond", "9", metric="sm__cycles_elapsed.avg"),
            _row(2, "mm", "msecond", "0.65"),
        ]
    )
    assert parse_csv(text) == [("init", 0.0015), ("mm", pytest.approx(0.6512)), ("mm", 0.65)]


def test_parse_csv_unknown_unit_is_an_error():
    with pytest.raises(NcuError, match="unknown unit"):
        parse_csv(_csv([_row(0, "mm", "cycle", "10")]))


def test_per_call_finds_the_repeated_block_after_initializers():
    names = ["init_a", "init_b"] + ["fill", "mm"] * 6
    assert per_call(names, 5) == 2
    assert per_call(["mm"] * 6, 5) == 1


def test_per_call_refuses_calls_that_differ():
    with pytest.raises(NcuError, match="do not repeat"):
        per_call(["a", "b", "a", "c", "a", "b"], 3)


def test_kernel_time_sums_each_call_and_takes_the_median(tmp_path, monkeypatch):
    """A stand-in ncu (a script on PATH printing the CSV) for the whole path: the median over
    the calls of the per-call sum, the initializer left out."""
    rows = [_row(0, "init", "usecond", "100")]
    per = [(3.0, 1.0), (2.0, 1.0), (5.0, 1.0)]  # two kernels per call
    for i, (x, y) in enumerate(per):
        rows += [_row(2 * i + 1, "matmul", "usecond", str(x * 1000)), _row(2 * i + 2, "bias", "usecond", str(y * 1000))]
    csv_file = tmp_path / "out.csv"
    csv_file.write_text(_csv(rows))
    ncu = tmp_path / "ncu"
    ncu.write_text(f"#!/bin/sh\ncat {csv_file}\n")
    ncu.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    kt = kernel_time(["true"], 3, "stand-in")
    assert kt.calls == [4.0, 3.0, 6.0]
    assert kt.ms == 4.0
    assert kt.kernels == ("matmul", "bias")
    assert kt.per_kernel == (3.0, 1.0)  # each kernel's median over the calls, launch order


def test_kernel_time_without_ncu_names_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(NcuError, match="not on PATH"):
        kernel_time(["true"], 3, "x")


def test_one_run_splits_at_the_marker_kernels():
    """A suite's one ncu run: each item's kernels follow a marker; an item of two kernels a call
    (torch's GEMM + a reduction) sums them; the warm-up call before the last ``calls`` is dropped."""
    mk = (f"{MARKER}_dispatch_0_elementwise_4_f32", 0.001)
    a = [("matmul_dispatch_0", t) for t in (9.0, 1.0, 2.0, 3.0)]  # warm-up 9, then 3 calls
    b = [(n, t) for t in (5.0, 4.0, 4.5, 6.0) for n in ("gemm", "reduce")]
    times = split_at_markers([("init", 1.0), mk, *a, mk, *b], 2, 3, "test")
    assert [t.ms for t in times] == [2.0, 9.0] and times[0].calls == [1.0, 2.0, 3.0]
    assert times[1].kernels == ("gemm", "reduce") and times[1].per_kernel == (4.5, 4.5)
    with pytest.raises(NcuError, match="2 marker kernels for 3 items"):
        split_at_markers([mk, *a, mk, *b], 3, 3, "test")
    with pytest.raises(NcuError):  # an item whose calls differ
        split_at_markers([mk, *a[:2], ("other", 1.0), a[3]], 1, 3, "test")
