"""`mmaflow-codegen`: the per-executable codegen as a tool for iree-compile's preprocess hook.

    iree-compile in.mlir --iree-hal-target-device=hip --iree-rocm-target=gfx1100 \\
        --iree-hal-preprocess-executables-with=mmaflow-codegen -o out.vmfb

IREE runs the tool once per hal.executable at the end of the executable-sources phase (stdin:
the executable as text; stdout: its replacement). The tool runs exactly the pipeline
``mmaflow compile`` runs (``pipeline.codegen_executable``). It is its own guard: when it takes a
dispatch it checks that the function it returns is handed back (no_pipeline) and holds the
intended matrix instructions; any failure exits non-zero, which makes iree-compile fail rather
than fall back to its own codegen.

Two halves. The tool process is ``codegen_client`` (standard library only, fast to start), which
hands the executable to the codegen server here: ``serve`` imports IREE's bindings and the
pipeline once, warms what every request needs, and answers each connection in a forked worker
(the hook tool's one executable, or ``codegen_many``'s stream of them), so executables still run
in parallel. ``main`` here runs the pipeline in its own process (the
client's fallback, and ``MMAFLOW_CODEGEN_SERVER=0``).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

from mmaflow.compiler.driver.codegen_client import (
    IDLE_SECONDS,
    announce,
    ask_on,
    reach_server,
    recv,
    send,
    server_enabled,
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mmaflow-codegen", description=__doc__.split("\n")[0])
    p.add_argument("--target", help="mmaflow target (default: the executable variant's arch)")
    p.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--quiet", action="store_true", help="do not show decisions on iree-compile's stderr")
    p.add_argument("--dump-after", help=argparse.SUPPRESS)
    p.add_argument("--dump-dir", help=argparse.SUPPRESS)
    p.add_argument(
        "--no-tuning-table", action="store_true", help="configure with the heuristic alone, not the measured table"
    )
    p.add_argument("--serve", metavar="SOCKET", help=argparse.SUPPRESS)
    return p


_NONE_TEXT = {"copy": "cp.async", "persistent": 0}


def tool_argv(options) -> list[str]:
    """The tool arguments that make it run with ``options`` (a ``pipeline.CodegenOptions``)."""
    argv = [f"--target={options.target}"] if options.target else []
    # (config.overrides_from's values back to text: copy=cp.async and persistent=0 are held as None)
    argv += [f"--config={k}={_NONE_TEXT.get(k, v) if v is None else v}" for k, v in sorted(options.overrides.items())]
    if options.dump_after:
        argv.append(f"--dump-after={options.dump_after}")
    if options.dump_dir:
        argv.append(f"--dump-dir={options.dump_dir}")
    if not options.tuned:
        argv.append("--no-tuning-table")
    return argv


# ---- the work ------------------------------------------------------------------------------------
_local = threading.local()


def _context():
    """This thread's MLIR context, reused by every request it runs (creating one registers every
    dialect: about 12 ms). The server makes its own before forking, so workers inherit it."""
    ctx = getattr(_local, "ctx", None)
    if ctx is None:
        from mmaflow.compiler.core.mlir import new_context

        ctx = _local.ctx = new_context()
        ctx.load_all_available_dialects()
    return ctx


def run_request(argv: list[str], text: str, source: str = "<stdin>") -> dict:
    """Run the pipeline on one executable: {"result": ExecutableResult wire form} or {"error":
    the MmaflowError's wire form, "code": its exit code, "shown": the line to show}."""
    from pathlib import Path

    from mmaflow.compiler.core.config import parse_overrides
    from mmaflow.compiler.core.errors import MmaflowError, to_wire
    from mmaflow.compiler.pipeline.pipeline import CodegenOptions, codegen_executable_text
    from mmaflow.compiler.verify import check_handed_back

    try:
        args = _parser().parse_args(argv)
    except SystemExit:  # argparse has printed why (to the server's log, or the tool's stderr)
        return {
            "code": 2,
            "error": {
                "class": "InputError",
                "message": f"bad tool arguments: {' '.join(argv)}",
                "stage": None,
                "location": None,
                "hint": None,
            },
            "shown": f"mmaflow-codegen: error: bad tool arguments: {' '.join(argv)}",
        }
    try:
        options = CodegenOptions(
            target=args.target,
            overrides=parse_overrides(args.config),
            dump_after=args.dump_after,
            dump_dir=Path(args.dump_dir) if args.dump_dir else None,
            tuned=not args.no_tuning_table,
        )
        result = codegen_executable_text(text, options, source=source, ctx=_context())
        if result.taken:
            check_handed_back(result.text, result.name, ctx=_context())
    except MmaflowError as e:
        return {"code": e.exit_code, "error": to_wire(e), "shown": f"mmaflow-codegen: error: {e}"}
    except Exception as e:  # a bug: say so, with the type, never a silent success
        message = f"internal error: {type(e).__name__}: {e}"
        return {
            "code": 70,
            "error": {"class": "CodegenError", "message": message, "stage": None, "location": source, "hint": None},
            "shown": f"mmaflow-codegen: error: {source}: {message}",
        }
    return {"code": 0, "result": result.to_wire()}


def codegen_many(items: list[tuple[str, str]], options) -> list:
    """``pipeline.ExecutableResult`` of each (name, executable text), computed in parallel by the
    codegen server (the way the hook tool runs), or here when it cannot be reached.

    One connection per core, each served by one forked worker that answers executable after
    executable (a fork per executable costs about 7 ms of page copying, as much as leaving a
    dispatch); the connections take the executables from one queue, likely contractions first
    (``_likely_costly``: the longest jobs first keep both cores busy to the end)."""
    import queue
    from concurrent.futures import ThreadPoolExecutor

    from mmaflow.compiler.core.errors import from_wire
    from mmaflow.compiler.pipeline.results import ExecutableResult

    argv = tool_argv(options)
    use_server = server_enabled() and len(items) > 1
    todo: queue.SimpleQueue = queue.SimpleQueue()
    for i in sorted(range(len(items)), key=lambda i: not _likely_costly(items[i][1])):
        todo.put(i)
    responses: list = [None] * len(items)

    def worker() -> None:
        sock = reach_server() if use_server else None
        try:
            while True:
                try:
                    i = todo.get_nowait()
                except queue.Empty:
                    return
                name, text = items[i]
                response = ask_on(sock, argv, text, source=name) if sock is not None else None
                if response is None:
                    if sock is not None:  # loud: the server failed this executable
                        sock.close()
                        sock = None
                    response = run_request(argv, text, source=name)
                    if use_server and "result" in response:
                        response["result"]["log"].insert(
                            0,
                            f"mmaflow: note {name}: the codegen server did not "
                            "answer; ran the pipeline in this process",
                        )
                responses[i] = response
        finally:
            if sock is not None:
                sock.close()

    n = max(1, min(len(items), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=n) as pool:
        for f in [pool.submit(worker) for _ in range(n)]:
            f.result()
    for response in responses:
        if response["code"] != 0:
            raise from_wire(response["error"])
    return [ExecutableResult.from_wire(r["result"]) for r in responses]


def _likely_costly(text: str) -> bool:
    """Whether an executable probably holds a contraction mmaflow compiles (a reduction with a
    multiply): only the order of the work depends on it, never the result."""
    return (
        ("reduction" in text and ("arith.mulf" in text or "arith.muli" in text))
        or "linalg.matmul" in text
        or "linalg.batch_matmul" in text
    )


# What the bindings import the first time they meet an op of these dialects (``linalg`` builds
# every named op in Python: 0.25 s). Imported once in the server, not in every worker.
_LAZY_DIALECTS = ("affine", "builtin", "complex", "hal", "iree_gpu", "linalg", "math", "nvvm", "rocdl", "util")


def _warm() -> None:
    """What every request needs whatever its executable: the dialects loaded (C++ and Python),
    the transform scripts parsed, the pass pipelines built, in this thread's context."""
    import importlib

    from iree.compiler import passmanager

    from mmaflow.compiler.core.mlir import parse_module
    from mmaflow.compiler.pipeline.script import script_text

    for name in _LAZY_DIALECTS:
        importlib.import_module(f"iree.compiler.dialects.{name}")
    ctx = _context()
    for name in ("matmul.mlir", "batch_matmul.mlir"):
        parse_module(script_text(name), ctx, source=name)
    with ctx:
        passmanager.PassManager.parse("builtin.module(func.func(canonicalize,cse,lower-affine,canonicalize,cse))")


def serve(path: str) -> int:
    """Import the pipeline and warm it once, then answer each connection in a forked worker,
    which inherits all of it. Contexts are single-threaded (``mlir.new_context``), so the server
    has no thread a fork would lose. Exits after ``IDLE_SECONDS`` without a request, or when
    asked to stop."""
    import select
    import signal
    import socket

    _warm()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # workers reap themselves
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # --stop: leave through the cleanup below
    tmp = f"{path}.{os.getpid()}"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(tmp)
    srv.listen(64)
    mine = os.stat(tmp).st_ino
    os.replace(tmp, path)  # clients see the socket only once it accepts
    last = time.monotonic()
    try:
        while True:
            ready, _, _ = select.select([srv], [], [], 0.5)
            if not ready:
                if time.monotonic() - last > IDLE_SECONDS or not os.path.exists(path):
                    return 0
                continue
            conn, _ = srv.accept()
            last = time.monotonic()
            if os.fork() == 0:  # the worker: the connection's executables, one after another
                srv.close()
                try:
                    while (request := recv(conn)) is not None:
                        if request.get("stop"):
                            send(conn, {"stopping": True})
                            os.kill(os.getppid(), signal.SIGTERM)
                            break
                        send(conn, run_request(request["argv"], request["stdin"], request.get("source", "<stdin>")))
                finally:
                    conn.close()
                    os._exit(0)
            conn.close()
    finally:
        srv.close()
        _leave(path, mine)


def _leave(path: str, inode: int) -> None:
    """Remove the socket if it is still this server's, and clear the pid in the lock file."""
    import fcntl

    with open(f"{path}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if os.stat(path).st_ino == inode:
                os.unlink(path)
        except OSError:
            pass
        lock.seek(0)
        if lock.read().strip() == str(os.getpid()):
            lock.truncate(0)


def main(argv: list[str] | None = None) -> int:
    """The tool running the pipeline in its own process (``codegen_client`` is the usual tool
    process; it runs this when the server is off or cannot be reached)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    if args.serve:
        return serve(args.serve)
    response = run_request(argv, sys.stdin.read())
    if response["code"] != 0:
        announce([response["shown"]], False)  # an error is shown even with --quiet
        print(response["shown"], file=sys.stderr)
        return response["code"]
    result = response["result"]
    announce(result["log"], args.quiet)
    sys.stdout.write(result["text"] + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
