"""The client half of `mmaflow-codegen`, the tool iree-compile's preprocess hook runs once per
hal.executable (stdin: the executable as text; stdout: its replacement).

iree-compile starts one tool process per executable, so the tool's own start-up is paid once per
executable on IREE's critical path. This file is therefore the whole tool process: the standard
library only, run by ``mmaflow flags`` as ``python -I -S driver/codegen_client.py`` (about 30 ms where the
console script, which goes through site-packages and the package, takes about 60 ms). It forwards
its arguments and stdin to the codegen server (``codegen_tool.serve``), which imported IREE's
bindings and the pipeline once and answers each connection in a forked worker, and relays the
answer. Nothing here imports the pipeline.

The server is shared by every iree-compile and ``mmaflow compile`` of this installation and
user: one socket per (Python environment, package directory, the package's files' sizes and
times), so an edited mmaflow gets a new server, and the old one exits after ``IDLE_SECONDS``
without requests. ``mmaflow flags`` starts it, so that its imports overlap with IREE's front
phases. ``--stop`` stops it. ``MMAFLOW_CODEGEN_SERVER=0`` runs the pipeline in the tool
process itself; so does a tool whose server cannot be reached, saying so.

Loud: iree-compile keeps a tool's stderr to itself (a temporary file, shown only as a path when
the tool fails), so the tool writes its decisions -- taken / left with the reason, the config,
errors -- to iree-compile's own stderr (``/proc/<iree-compile>/fd/2``; a regular file through the
open file iree-compile writes with, so that later output does not overwrite them), one write per executable.
``--quiet`` turns that off; ``MMAFLOW_CODEGEN_LOG=FILE`` appends them to a file instead.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
import time

SERVER_ENV = "MMAFLOW_CODEGEN_SERVER"
LOG_ENV = "MMAFLOW_CODEGEN_LOG"
IDLE_SECONDS = 30.0  # a server with no request for this long exits
START_SECONDS = 60.0  # how long a client waits for a new server to come up
# What the hook says of an executable whose dense_resource data IREE did not hand it (`mmaflow bench
# --models` recognizes the refusal by it and builds such a module with `mmaflow compile`).
MISSING_RESOURCE = "whose data IREE does not hand to --iree-hal-preprocess-executables-with"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the package directory (mmaflow.compiler)


def server_enabled() -> bool:
    return os.environ.get(SERVER_ENV, "1") != "0"


# ---- where the server listens ------------------------------------------------------------------
def _fingerprint() -> str:
    """The package's files by name, size and modification time: a server runs the code it
    imported, so a changed file means another server."""
    import zlib

    items = []
    for root, dirs, files in os.walk(HERE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            st = os.stat(os.path.join(root, f))
            items.append(f"{os.path.relpath(os.path.join(root, f), HERE)}:{st.st_size}:{st.st_mtime_ns}")
    # The environment is the interpreter's directory: sys.prefix is the base installation's
    # under -S (site finds the virtual environment), and realpath would leave the venv.
    key = "\0".join([os.path.dirname(os.path.abspath(sys.executable)), HERE, *items])
    return f"{zlib.crc32(key.encode()):08x}{zlib.adler32(key.encode()):08x}"


def socket_path() -> str:
    """This installation's server socket, in a directory only this user can enter. A socket's
    path has at most 107 bytes (``sockaddr_un``): a longer $XDG_RUNTIME_DIR is passed over."""
    name = f"codegen-{_fingerprint()}.sock"
    base = os.environ.get("XDG_RUNTIME_DIR") or ""
    if not base or len(os.path.join(base, name).encode()) > 96:  # (+ ".<pid>" while binding)
        base = f"/tmp/mmaflow-{os.getuid()}"
    os.makedirs(base, mode=0o700, exist_ok=True)
    return os.path.join(base, name)


# ---- framing ---------------------------------------------------------------------------------------
def send(sock: socket.socket, obj: dict) -> None:
    data = json.dumps(obj).encode()
    sock.sendall(struct.pack("!Q", len(data)) + data)


def recv(sock: socket.socket) -> dict | None:
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


def _connect(path: str) -> socket.socket | None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        return s
    except OSError:
        s.close()
        return None


def _alive(pid: int) -> bool:
    try:  # a server this process started and that died is a zombie until reaped here
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass  # not our child
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ---- starting, reaching and stopping the server -------------------------------------------------------
def start_server() -> str:
    """Start this installation's server unless it runs or is starting (its pid is kept in the
    lock file); return its socket path without waiting for it."""
    import fcntl
    import subprocess

    path = socket_path()
    with open(f"{path}.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        probe = _connect(path)
        if probe is not None:
            probe.close()
            return path
        lock.seek(0)
        starting = lock.read().strip()
        if starting.isdigit() and _alive(int(starting)):
            return path  # another client started it; it is still importing
        if os.path.exists(path):
            os.unlink(path)  # a stale socket of a server that is gone
        with open(f"{path}.log", "w") as log:  # its stderr: why it did not start, if it does not
            proc = subprocess.Popen(
                [sys.executable, "-m", "mmaflow.compiler.driver.codegen_tool", "--serve", path],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                start_new_session=True,
                close_fds=True,
            )
        lock.seek(0)
        lock.truncate()
        lock.write(str(proc.pid))
    return path


def reach_server() -> socket.socket | None:
    """A connection to the server (started if need be), or None when it does not come up."""
    path = socket_path()
    sock = _connect(path)
    if sock is None:
        start_server()
        deadline = time.monotonic() + START_SECONDS
        while sock is None and time.monotonic() < deadline:
            time.sleep(0.01)
            sock = _connect(path)
            if sock is None and not _starting(path):
                return _connect(path)  # the server died while starting (its imports failed)
    return sock


def _starting(path: str) -> bool:
    """Whether the server whose pid is in the lock file still lives."""
    try:
        with open(f"{path}.lock") as lock:
            pid = lock.read().strip()
    except OSError:
        return False
    return pid.isdigit() and _alive(int(pid))


def ask(argv: list[str], text: str, source: str = "<stdin>", sock: socket.socket | None = None) -> dict | None:
    """The server's answer for one executable, or None when it cannot be reached or dies first."""
    sock = sock or reach_server()
    if sock is None:
        return None
    with sock:
        return ask_on(sock, argv, text, source)


def ask_on(sock: socket.socket, argv: list[str], text: str, source: str = "<stdin>") -> dict | None:
    """One executable's answer on an open connection, which stays open for the next (the worker
    serving it answers requests until the connection closes); None when the worker is gone."""
    try:
        send(sock, {"argv": argv, "stdin": text, "source": source})
        return recv(sock)
    except OSError:  # it hung up (broken pipe, reset)
        return None


def stop_server() -> bool:
    """Stop this installation's server; True if one was running."""
    sock = _connect(socket_path())
    if sock is None:
        return False
    with sock:
        send(sock, {"stop": True})
        recv(sock)
    return True


# ---- the tool process --------------------------------------------------------------------------------
def announce(lines: list[str], quiet: bool) -> None:
    """Show ``lines`` where the user of iree-compile sees them (one write: parallel tools do not
    interleave)."""
    if quiet or not lines:
        return
    text = "".join(line + "\n" for line in lines).encode()
    target = os.environ.get(LOG_ENV)
    path = target or f"/proc/{os.getppid()}/fd/2"
    fd = None if target else _shared_stderr(path)
    try:
        if fd is None:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | (os.O_CREAT if target else 0), 0o644)
    except OSError:
        sys.stderr.buffer.write(text)  # not Linux, or no access: at least iree-compile's stderr file
        return
    try:
        os.write(fd, text)
    finally:
        os.close(fd)


def _shared_stderr(path: str) -> int | None:
    """iree-compile's stderr itself, when it is a regular file: a descriptor on the same open file
    (pidfd_getfd), so that the lines advance the offset iree-compile and its shell write at.
    Opening ``/proc/<pid>/fd/2`` gives a new open file with an offset of its own: O_APPEND puts
    the lines at the end, but a shell that writes on (``sh -c '...; iree-compile ...; echo after'
    > log 2>&1``) writes at its own offset, over them. None for a pipe or terminal (opening it
    anew writes into the same stream), or where the kernel refuses (no pidfd_getfd, ptrace
    restricted): then the file is opened anew, appending -- safe when the shared file is itself in
    append mode (``>>``, or ``mmaflow flags`` run with the same stderr, which sets it)."""
    try:
        import stat

        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        import ctypes

        pidfd = os.pidfd_open(os.getppid())
    except (OSError, AttributeError, ImportError):
        return None
    try:
        syscall = ctypes.CDLL(None, use_errno=True).syscall
        syscall.restype = ctypes.c_long
        fd = syscall(ctypes.c_long(438), ctypes.c_int(pidfd), ctypes.c_int(2), ctypes.c_uint(0))  # pidfd_getfd
        return fd if fd >= 0 else None
    except (OSError, AttributeError):
        return None
    finally:
        os.close(pidfd)


def share_stderr_appending() -> None:
    """Put this process's stderr in append mode when it is a regular file (``mmaflow flags`` in
    ``sh -c '...; iree-compile ... $(mmaflow flags ...); ...' > log 2>&1``): the mode belongs to the
    open file that the shell and iree-compile share, so the hook tool's lines, which may reach the
    file only through an open file of their own, are appended after what they wrote and they
    append after them -- nothing overwrites them."""
    import fcntl
    import stat

    try:
        if stat.S_ISREG(os.fstat(2).st_mode):
            fcntl.fcntl(2, fcntl.F_SETFL, fcntl.fcntl(2, fcntl.F_GETFL) | os.O_APPEND)
    except OSError:
        pass


def missing_resource(text: str) -> str | None:
    """The first ``dense_resource`` an executable's text names without carrying its data (no
    ``dialect_resources`` section), or None. IREE 3.13 prints an executable for the preprocess hook
    without the module's resource blobs (an exported torch tensor constant is one), so whatever
    comes back names data that no longer exists."""
    import re

    if "dialect_resources" in text:
        return None
    found = re.search(r"dense_resource<([^>]+)>", text)
    return found.group(1) if found else None


def _in_process(argv: list[str], text: str | None = None) -> int:
    """Become the full tool, running the pipeline in this process: on stdin, or on ``text``
    (stdin already read) through a temporary file."""
    sys.stdout.flush()
    if text is not None:
        import tempfile

        with tempfile.TemporaryFile() as f:
            f.write(text.encode())
            f.seek(0)
            os.dup2(f.fileno(), 0)
    os.environ[SERVER_ENV] = "0"
    os.execv(sys.executable, [sys.executable, "-m", "mmaflow.compiler.driver.codegen_tool", *argv])
    return 70  # not reached


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv == ["--stop"]:
        print("mmaflow-codegen: server stopped" if stop_server() else "mmaflow-codegen: no server was running")
        return 0
    if "-h" in argv or "--help" in argv:
        return _in_process(argv)
    text = sys.stdin.read()
    missing = missing_resource(text)
    if missing is not None:
        line = (
            f"mmaflow-codegen: error: the executable uses dense_resource<{missing}>, {MISSING_RESOURCE} (its own "
            "lowering then fails with 'resource does not exist', whatever the tool returns); build this module "
            "with `mmaflow compile`"
        )
        announce([line], False)
        print(line, file=sys.stderr)
        return 1
    if not server_enabled():
        return _in_process(argv, text)
    quiet = "--quiet" in argv
    sock = reach_server()
    if sock is None:
        announce(
            [
                f"mmaflow-codegen: the codegen server could not be reached (its log: {socket_path()}.log); "
                "running in this process"
            ],
            quiet,
        )
        return _in_process(argv, text)
    response = ask(argv, text, sock=sock)
    if response is None:  # the worker died (a crash in the bindings): say so, and run it here
        announce(
            ["mmaflow-codegen: the codegen server's worker died without answering; running in this process"], False
        )
        return _in_process(argv, text)
    if response["code"] != 0:
        announce([response["shown"]], False)  # an error is shown even with --quiet
        print(response["shown"], file=sys.stderr)
        return response["code"]
    result = response["result"]
    announce(result["log"], quiet)
    sys.stdout.write(result["text"] + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
