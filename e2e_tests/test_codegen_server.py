"""The hook tool's two halves (``compiler/driver/codegen_client.py``, ``compiler/driver/codegen_tool.py``):
one server shared by successive builds, stopped on request, replaced when mmaflow's files change;
a client that says so and still gives the right executable when the server fails it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from mmaflow.compiler.driver import codegen_client

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TWO = REPO / "lit_tests" / "Inputs" / "two_matmuls.mlir"


def _env(tmp_path: Path, **extra) -> dict:
    """A private server directory for the test; short, since a socket path has at most 107 bytes."""
    run = Path(tempfile.mkdtemp(prefix="mf", dir="/tmp"))
    (tmp_path / "run").symlink_to(run)
    return {**os.environ, "XDG_RUNTIME_DIR": str(run), "HOME": str(tmp_path), **extra}


def _run(*cmd, env, stdin=None):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, input=stdin)


def _executable_sources(tmp_path: Path, target_flags: list[str], source: Path = TWO) -> str:
    """The (last) hal.executable IREE hands the hook for ``source`` (through a tool that saves it)."""
    saver = tmp_path / "save.sh"
    saver.write_text(f"#!/bin/sh\ntee {tmp_path / 'exe.mlir'}\n")
    r = _run(
        BIN / "iree-compile",
        source,
        *target_flags,
        f"--iree-hal-preprocess-executables-with=sh {saver}",
        "-o",
        tmp_path / "plain.vmfb",
        env=os.environ,
    )
    assert r.returncode == 0, r.stderr
    return (tmp_path / "exe.mlir").read_text()


def test_one_server_serves_successive_builds_and_stops_on_request(tmp_path, monkeypatch):
    env = _env(tmp_path)
    monkeypatch.setenv("XDG_RUNTIME_DIR", env["XDG_RUNTIME_DIR"])
    path = Path(codegen_client.socket_path())
    flags = _run(BIN / "mmaflow", "flags", "--target", "gfx942", env=env)
    assert flags.returncode == 0, flags.stderr
    deadline = time.monotonic() + 60
    while not path.exists() and time.monotonic() < deadline:  # `mmaflow flags` started it
        time.sleep(0.1)
    assert path.exists(), "mmaflow flags did not start the codegen server"
    pid = int(Path(f"{path}.lock").read_text())
    for i in range(2):
        r = _run(BIN / "iree-compile", TWO, *flags.stdout.split(), "-o", tmp_path / f"{i}.vmfb", env=env)
        assert r.returncode == 0, r.stderr
        assert "mmaflow: taken two_dispatch_0" in r.stderr
        assert int(Path(f"{path}.lock").read_text()) == pid, "a second build started a second server"
    assert (tmp_path / "0.vmfb").read_bytes() == (tmp_path / "1.vmfb").read_bytes()
    assert [p.name for p in (tmp_path / "run").glob("codegen-*.sock")] == [path.name], (
        "the hook tool (python -I -S) and mmaflow flags found different servers"
    )
    stop = _run(BIN / "mmaflow-codegen", "--stop", env=env)
    assert stop.returncode == 0 and "server stopped" in stop.stdout, stop.stdout + stop.stderr
    deadline = time.monotonic() + 10
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not path.exists(), "the server left its socket behind"
    assert "no server was running" in _run(BIN / "mmaflow-codegen", "--stop", env=env).stdout


def test_a_changed_mmaflow_file_means_another_server(tmp_path, monkeypatch):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.py").write_text("x = 1\n")
    monkeypatch.setattr(codegen_client, "HERE", str(pkg))
    before = codegen_client._fingerprint()
    assert codegen_client._fingerprint() == before
    (pkg / "a.py").write_text("x = 22\n")
    assert codegen_client._fingerprint() != before
    monkeypatch.setattr(codegen_client, "HERE", str(REPO / "compiler"))
    assert codegen_client._fingerprint() != before


def test_a_server_that_fails_the_client_is_reported_and_the_tool_still_answers(tmp_path, monkeypatch):
    """A 'server' that accepts and hangs up (a worker killed by a crash in the bindings): the tool
    says so where iree-compile's user sees it and runs the pipeline in its own process, giving the
    same executable the real server gives."""
    exe = _executable_sources(tmp_path, ["--iree-hal-target-device=hip", "--iree-rocm-target=gfx942"])
    env = _env(tmp_path, MMAFLOW_CODEGEN_LOG=str(tmp_path / "decisions.log"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", env["XDG_RUNTIME_DIR"])
    path = codegen_client.socket_path()
    good = _run(BIN / "mmaflow-codegen", env=env, stdin=exe)  # the real server
    assert good.returncode == 0, good.stderr
    assert _run(BIN / "mmaflow-codegen", "--stop", env=env).returncode == 0
    deadline = time.monotonic() + 60  # (a loaded 2-core machine: the server's exit can take a while)
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(path), "the stopped server left its socket"

    broken = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    broken.bind(path)
    broken.listen(4)

    def hang_up():
        for _ in range(2):
            conn, _ = broken.accept()
            conn.close()

    t = threading.Thread(target=hang_up, daemon=True)
    t.start()
    try:
        r = _run(BIN / "mmaflow-codegen", env=env, stdin=exe)
    finally:
        broken.close()
        os.unlink(path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == good.stdout
    log = (tmp_path / "decisions.log").read_text()
    assert "worker died without answering; running in this process" in log, log
    assert log.count("mmaflow: taken two_dispatch_0") == 2, log


def test_a_server_that_cannot_start_is_reported_at_once(tmp_path):
    """A server that dies while starting (here a sitecustomize makes it exit): the tool does not
    wait out the start-up timeout; it says so and runs the pipeline in its own process."""
    exe = _executable_sources(tmp_path, ["--iree-hal-target-device=hip", "--iree-rocm-target=gfx942"])
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nif '--serve' in sys.argv:\n    sys.exit(3)\n")
    env = _env(
        tmp_path,
        MMAFLOW_CODEGEN_LOG=str(tmp_path / "decisions.log"),
        PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
    )
    start = time.monotonic()
    r = _run(BIN / "mmaflow-codegen", env=env, stdin=exe)
    assert time.monotonic() - start < 30, "the client waited for a server that had died"
    assert r.returncode == 0, r.stderr
    log = (tmp_path / "decisions.log").read_text()
    assert "codegen server could not be reached (its log: " in log and "running in this process" in log, log
    assert "mmaflow: taken two_dispatch_0" in log, log


def _shared_log(tmp_path: Path, env: dict, flags: str) -> str:
    """A shell whose stdout and stderr are one regular file, written before and after iree-compile."""
    script = f"echo before; iree-compile {TWO} {flags} -o {tmp_path / 'out.vmfb'}; echo after; echo after again >&2"
    log = tmp_path / "build.log"
    with open(log, "w") as f:
        r = subprocess.run(["sh", "-c", script], stdout=f, stderr=subprocess.STDOUT, env=env)
    assert r.returncode == 0, log.read_text()
    return log.read_text()


@pytest.mark.exhaustive
def test_the_stock_routes_lines_survive_a_log_file_shared_with_the_shell(tmp_path):
    """``sh -c '...; iree-compile ... $(mmaflow flags ...); ...' > log 2>&1``: the hook writes its
    lines into the file the shell and iree-compile share, and what the shell writes afterwards
    comes after them instead of over them."""
    env = _env(tmp_path, MMAFLOW_CODEGEN_SERVER="0", PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    expected = [
        "before",
        "mmaflow: taken two_dispatch_0: 128x96x64 f16 x f16 -> f32 on gfx942",
        "mmaflow: config two_dispatch_0: MFMA_F32_16x16x16_F16 wave64",
        "mmaflow: note two_dispatch_0: config chosen by the heuristic (tuning table gfx942 has no entry for ",
        "after",
        "after again",
    ]
    # mmaflow flags inside the shell: it shares the file too
    lines = _shared_log(tmp_path, env, "$(mmaflow flags --target gfx942)").splitlines()
    assert [next((i for i, line in enumerate(lines) if line.startswith(e)), None) for e in expected] == list(
        range(len(expected))
    ), lines
    # flags computed beforehand: the hook alone keeps its lines intact
    flags = _run(BIN / "mmaflow", "flags", "--target", "gfx942", env=env)
    assert flags.returncode == 0, flags.stderr
    lines = _shared_log(tmp_path, env, flags.stdout.strip()).splitlines()
    assert [next((i for i, line in enumerate(lines) if line.startswith(e)), None) for e in expected] == list(
        range(len(expected))
    ), lines


def test_mmaflow_flags_puts_a_regular_file_stderr_in_append_mode(tmp_path):
    """The fallback where the hook cannot write through iree-compile's own open file: ``mmaflow
    flags`` sharing the log puts it in append mode, so every writer appends."""
    import fcntl

    env = _env(tmp_path, MMAFLOW_CODEGEN_SERVER="0")
    with open(tmp_path / "err.log", "w") as f:
        assert not fcntl.fcntl(f.fileno(), fcntl.F_GETFL) & os.O_APPEND
        r = subprocess.run([BIN / "mmaflow", "flags", "--target", "gfx942"], stdout=subprocess.PIPE, stderr=f, env=env)
        assert r.returncode == 0
        assert fcntl.fcntl(f.fileno(), fcntl.F_GETFL) & os.O_APPEND


def test_a_long_runtime_dir_is_passed_over_for_a_socket_path_that_fits(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / ("x" * 120)))
    path = codegen_client.socket_path()
    assert len(path.encode()) <= 96 and path.startswith(f"/tmp/mmaflow-{os.getuid()}/"), path


def test_bad_tool_arguments_are_refused_by_name(tmp_path):
    r = _run(BIN / "mmaflow-codegen", "--bogus", env=_env(tmp_path), stdin="")
    assert r.returncode == 2 and "mmaflow-codegen: error: bad tool arguments: --bogus" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def _fake_server(path: str, answers_per_connection: int | None):
    """A server on ``path`` that answers requests as the real worker does (``run_request``), each
    connection until the client closes it or after ``answers_per_connection`` answers (then it
    hangs up: a worker that died); returns (thread, stop, connections, requests)."""
    from mmaflow.compiler.driver.codegen_tool import run_request

    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(16)
    srv.settimeout(0.1)
    seen = {"connections": 0, "requests": 0}
    stop = threading.Event()

    def serve_one(conn):
        with conn:
            answered = 0
            while (request := codegen_client.recv(conn)) is not None:
                if answers_per_connection is not None and answered == answers_per_connection:
                    return
                seen["requests"] += 1
                codegen_client.send(conn, run_request(request["argv"], request["stdin"], request["source"]))
                answered += 1

    def loop():
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            seen["connections"] += 1
            threading.Thread(target=serve_one, args=(conn,), daemon=True).start()
        srv.close()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    return t, stop, seen


def test_codegen_many_streams_executables_over_one_connection_per_core(tmp_path, monkeypatch):
    """``mmaflow compile``'s codegen: one connection (one forked worker) per core answers
    executable after executable; results equal the in-process pipeline's, in the input order; a
    worker that dies mid-stream costs only a loud note, never a wrong or missing executable."""
    from mmaflow.compiler.driver.codegen_tool import codegen_many
    from mmaflow.compiler.pipeline.results import CodegenOptions

    flags = ["--iree-hal-target-device=hip", "--iree-rocm-target=gfx942"]
    left = _executable_sources(tmp_path, flags, REPO / "lit_tests" / "Inputs" / "elementwise.mlir")
    exe = _executable_sources(tmp_path, flags)
    items = [(f"exe{i}", exe if i % 2 else left) for i in range(7)]
    options = CodegenOptions(target="gfx942")
    monkeypatch.setenv("MMAFLOW_CODEGEN_SERVER", "0")
    alone = [r.to_wire() for r in codegen_many(items, options)]  # (timings aside, below)
    assert [r["taken"] for r in alone] == [bool(i % 2) for i in range(7)]
    monkeypatch.setenv("MMAFLOW_CODEGEN_SERVER", "1")
    env = _env(tmp_path)
    monkeypatch.setenv("XDG_RUNTIME_DIR", env["XDG_RUNTIME_DIR"])
    path = codegen_client.socket_path()
    for per_connection in (None, 1):
        t, stop, seen = _fake_server(path, per_connection)
        try:
            served = [r.to_wire() for r in codegen_many(items, options)]
        finally:
            stop.set()
            t.join()
            os.unlink(path)
        cores = min(len(items), os.cpu_count() or 1)
        notes = [i for i, r in enumerate(served) if "the codegen server did not answer" in r["log"][0]]
        for r in served:
            if r["log"][0].startswith("mmaflow: note"):
                r["log"].pop(0)
        assert [{k: v for k, v in r.items() if k != "timings"} for r in served] == [
            {k: v for k, v in r.items() if k != "timings"} for r in alone
        ]
        assert seen["connections"] == cores
        if per_connection is None:
            assert seen["requests"] == len(items) and not notes
        else:  # each worker answered one, then died: the rest ran here, each said so
            assert seen["requests"] == cores and len(notes) == len(items) - cores
