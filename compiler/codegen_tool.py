"""`mmaflow-codegen`: the per-executable codegen as a tool for iree-compile's preprocess hook.

    iree-compile in.mlir --iree-hal-target-device=hip --iree-rocm-target=gfx1100 \\
        --iree-hal-preprocess-executables-with=mmaflow-codegen -o out.vmfb

IREE runs the tool once per hal.executable at the end of the executable-sources phase (stdin:
the executable as text; stdout: its replacement). The tool runs exactly the pipeline
``mmaflow compile`` runs (``pipeline.codegen_executable``). It is its own guard: when it takes a
dispatch it checks that the function it returns is handed back (no_pipeline) and holds the
intended matrix instructions; any failure exits non-zero, which makes iree-compile fail rather
than fall back to its own codegen.

Loud: iree-compile keeps a tool's stderr to itself (a temporary file, shown only as a path when
the tool fails), so the tool writes its decisions -- taken / left with the reason, the config,
errors -- to iree-compile's own stderr (``/proc/<iree-compile>/fd/2``), one write per executable.
``--quiet`` turns that off; ``MMAFLOW_CODEGEN_LOG=FILE`` appends them to a file instead.

Fast: importing IREE's compiler bindings takes longer than the work on most executables, and
iree-compile starts one tool process per executable. The first tool of an iree-compile run
therefore starts a server bound to that iree-compile process (it exits with it, or when idle);
the server imports the pipeline once and forks a worker per executable, so executables still run
in parallel. Every tool process is a small client that forwards its arguments and stdin and relays
the answer (importing nothing heavy). ``MMAFLOW_CODEGEN_SERVER=0`` runs the pipeline in the tool
process itself; so does a tool whose server cannot be reached, saying so.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import sys
import time

SERVER_ENV = "MMAFLOW_CODEGEN_SERVER"
LOG_ENV = "MMAFLOW_CODEGEN_LOG"
IDLE_SECONDS = 30.0  # a server with no client for this long exits, even if its iree-compile lives on
START_SECONDS = 60.0  # how long a client waits for a new server to come up


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mmaflow-codegen", description=__doc__.split("\n")[0])
    p.add_argument("--target", help="mmaflow target (default: the executable variant's arch)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--quiet", action="store_true", help="do not show decisions on iree-compile's stderr")
    p.add_argument("--dump-after", help=argparse.SUPPRESS)
    p.add_argument("--dump-dir", help=argparse.SUPPRESS)
    p.add_argument("--serve", metavar="SOCKET", help=argparse.SUPPRESS)
    p.add_argument("--parent", type=int, default=0, help=argparse.SUPPRESS)
    return p


def tool_argv(options) -> list[str]:
    """The tool arguments that make it run with ``options`` (a ``pipeline.CodegenOptions``)."""
    argv = [f"--target={options.target}"] if options.target else []
    argv += [f"--config={k}={v}" for k, v in sorted(options.overrides.items())]
    if options.dump_after:
        argv.append(f"--dump-after={options.dump_after}")
    if options.dump_dir:
        argv.append(f"--dump-dir={options.dump_dir}")
    return argv


# ---- the work ------------------------------------------------------------------------------------
def run_request(argv: list[str], text: str, source: str = "<stdin>") -> dict:
    """Run the pipeline on one executable: {"result": ExecutableResult wire form} or {"error":
    the MmaflowError's wire form, "code": its exit code}."""
    from pathlib import Path

    from .config import parse_overrides
    from .errors import MmaflowError, to_wire
    from .pipeline import CodegenOptions, codegen_executable_text
    from .verify import check_handed_back
    args = _parser().parse_args(argv)
    try:
        options = CodegenOptions(target=args.target, overrides=parse_overrides(args.config),
                                 dump_after=args.dump_after, dump_dir=Path(args.dump_dir) if args.dump_dir else None)
        result = codegen_executable_text(text, options, source=source)
        if result.taken:
            check_handed_back(result.text, result.name)
    except MmaflowError as e:
        return {"code": e.exit_code, "error": to_wire(e)}
    except Exception as e:  # a bug: say so, with the type, never a silent success
        return {"code": 70, "error": {"class": "CodegenError", "message": f"internal error: {type(e).__name__}: {e}",
                                      "stage": None, "location": source, "hint": None}}
    return {"code": 0, "result": result.to_wire()}


def codegen_many(items: list[tuple[str, str]], options) -> list:
    """``pipeline.ExecutableResult`` of each (name, executable text), computed in parallel by this
    process's codegen server (the way the hook tool runs), or here when it cannot be reached."""
    from concurrent.futures import ThreadPoolExecutor

    from .errors import from_wire
    from .pipeline import ExecutableResult
    argv = tool_argv(options)
    use_server = os.environ.get(SERVER_ENV, "1") != "0" and len(items) > 1

    def one(item):
        name, text = item
        response = None
        if use_server:
            try:
                response = _via_server(argv, text, os.getpid(), source=name)
            except OSError:
                response = None
        if response is None:
            response = run_request(argv, text, source=name)
        if response["code"] != 0:
            raise from_wire(response["error"])
        return ExecutableResult.from_wire(response["result"])
    with ThreadPoolExecutor(max_workers=max(1, min(len(items), os.cpu_count() or 1))) as pool:
        return list(pool.map(one, items))


# ---- framing ---------------------------------------------------------------------------------------
def _send(sock: socket.socket, obj: dict) -> None:
    data = json.dumps(obj).encode()
    sock.sendall(struct.pack("!Q", len(data)) + data)


def _recv(sock: socket.socket) -> dict | None:
    def exactly(n: int) -> bytes | None:
        chunks, got = [], 0
        while got < n:
            chunk = sock.recv(min(n - got, 1 << 20))
            if not chunk:
                return None
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)
    head = exactly(8)
    if head is None:
        return None
    body = exactly(struct.unpack("!Q", head)[0])
    return None if body is None else json.loads(body)


# ---- the server ------------------------------------------------------------------------------------
def _socket_path(parent: int) -> str:
    """A per-user, per-iree-compile socket (the server serves one iree-compile run)."""
    base = os.environ.get("XDG_RUNTIME_DIR") or f"/tmp/mmaflow-{os.getuid()}"
    os.makedirs(base, mode=0o700, exist_ok=True)
    import hashlib
    here = os.path.dirname(os.path.abspath(__file__))
    key = hashlib.sha256(f"{sys.executable}\0{here}".encode()).hexdigest()[:12]
    return os.path.join(base, f"codegen-{parent}-{key}.sock")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _warm() -> None:
    """What every request needs whatever its executable: the dialects loaded, the transform
    scripts parsed, the pass pipelines built (in a single-threaded context, dropped after)."""
    from iree.compiler import passmanager

    from .mlir import new_context, parse_module
    from .stages.script import script_text
    ctx = new_context()
    ctx.load_all_available_dialects()
    for name in ("matmul.mlir", "batch_matmul.mlir"):
        parse_module(script_text(name), ctx, source=name)
    with ctx:
        passmanager.PassManager.parse("builtin.module(func.func(canonicalize,cse,lower-affine,canonicalize,cse))")


def serve(path: str, parent: int) -> int:
    """Import the pipeline once, then answer each connection in a forked worker. Until one
    dispatch was taken, requests are answered in the server itself: the caches that fills (dialects,
    the transform interpreter, pass pipelines) are then inherited by every worker. Contexts are
    single-threaded (``mlir.new_context``), so the server has no thread a fork would lose."""
    import select
    import signal
    from . import pipeline, verify  # noqa: F401  (the imports are the point)
    _warm()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # workers reap themselves
    tmp = f"{path}.{os.getpid()}"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(tmp)
    srv.listen(64)
    os.replace(tmp, path)  # clients see the socket only once it accepts
    last, warm = time.monotonic(), False
    try:
        while True:
            ready, _, _ = select.select([srv], [], [], 0.2)
            if not ready:
                if (parent and not _alive(parent)) or time.monotonic() - last > IDLE_SECONDS:
                    return 0
                continue
            conn, _ = srv.accept()
            last = time.monotonic()
            if not warm:
                with conn:
                    request = _recv(conn)
                    if request is not None:
                        response = run_request(request["argv"], request["stdin"], request.get("source", "<stdin>"))
                        warm = response.get("result", {}).get("taken", False)
                        _send(conn, response)
                continue
            if os.fork() == 0:  # the worker: one executable
                srv.close()
                try:
                    request = _recv(conn)
                    if request is not None:
                        _send(conn, run_request(request["argv"], request["stdin"], request.get("source", "<stdin>")))
                finally:
                    conn.close()
                    os._exit(0)
            conn.close()
    finally:
        srv.close()
        for leftover in (path, f"{path}.lock"):
            try:
                os.unlink(leftover)
            except OSError:
                pass


def _connect(path: str) -> socket.socket | None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return s
    except OSError:
        s.close()
        return None


def start_server(parent: int) -> str:
    """Start the codegen server serving ``parent``'s lifetime unless one runs or is starting (its
    pid is kept in the lock file); return its socket path, without waiting for it."""
    import fcntl
    import subprocess
    path = _socket_path(parent)
    with open(f"{path}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _probe(path):
            return path
        lock.seek(0)
        starting = lock.read().strip()
        if starting.isdigit() and _alive(int(starting)):
            return path  # another client started it; it is still importing
        if os.path.exists(path):
            os.unlink(path)  # a stale socket of a server that is gone
        proc = subprocess.Popen([sys.executable, "-m", "mmaflow.compiler.codegen_tool", "--serve", path,
                                 "--parent", str(parent)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        lock.seek(0)
        lock.truncate()
        lock.write(str(proc.pid))
    return path


def _probe(path: str) -> bool:
    s = _connect(path)
    if s is None:
        return False
    s.close()
    return True


def _via_server(argv: list[str], text: str, parent: int, source: str = "<stdin>") -> dict | None:
    """The answer from ``parent``'s codegen server (started if need be), or None when it cannot be
    reached or dies before answering."""
    path = _socket_path(parent)
    sock = _connect(path)
    if sock is None:
        start_server(parent)
        deadline = time.monotonic() + START_SECONDS
        while sock is None and time.monotonic() < deadline:
            time.sleep(0.02)
            sock = _connect(path)
    if sock is None:
        return None
    with sock:
        _send(sock, {"argv": argv, "stdin": text, "source": source})
        return _recv(sock)


# ---- the client ------------------------------------------------------------------------------------
def _announce(lines: list[str], quiet: bool) -> None:
    """Show ``lines`` where the user of iree-compile sees them (one write: parallel tools do not
    interleave)."""
    if quiet or not lines:
        return
    text = "".join(line + "\n" for line in lines).encode()
    target = os.environ.get(LOG_ENV)
    path = target or f"/proc/{os.getppid()}/fd/2"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | (os.O_CREAT if target else 0), 0o644)
    except OSError:
        sys.stderr.buffer.write(text)  # not Linux, or no access: at least iree-compile's stderr file
        return
    try:
        os.write(fd, text)
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    if args.serve:
        return serve(args.serve, args.parent)
    text = sys.stdin.read()
    response = None
    if os.environ.get(SERVER_ENV, "1") != "0":
        try:
            response = _via_server(argv, text, os.getppid())
        except OSError:
            response = None
        if response is None:
            _announce(["mmaflow-codegen: the codegen server could not be reached; running in this process"],
                      args.quiet)
    if response is None:
        response = run_request(argv, text)
    if response["code"] != 0:
        from .errors import from_wire
        message = f"mmaflow-codegen: error: {from_wire(response['error'])}"
        _announce([message], False)  # an error is shown even with --quiet
        print(message, file=sys.stderr)
        return response["code"]
    result = response["result"]
    _announce(result["log"], args.quiet)
    sys.stdout.write(result["text"] + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
