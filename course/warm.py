"""A warm worker: pay for importing pytest once, then fork a clean child per run.

Starting an interpreter and importing pytest, trio and attrs costs more than
running a chapter's focused tests. The worker is started once per `course`
command with the isolated environment of a cold run, imports those libraries
(never `tiny_pi`, never a snapshot's tests), and forks one child per run:
each child enters the snapshot, starts its own session and process group,
and exits. Isolation stays as strong as a fresh interpreter for what
matters: a child can only import the `tiny_pi` of its own snapshot, because
no process before it ever imported one.

Protocol, one Unix-socket connection per run: the client sends one JSON line
(`cwd`, `args`) with the write end of its output pipe attached (SCM_RIGHTS);
the worker answers `{"pid": N}` once the child runs and `{"exit": N}` when it
has ended.
"""

from __future__ import annotations

import array
import gc
import importlib
import json
import os
import signal
import socket
import sys

CORE = ("pytest", "trio", "attrs")


def preload(extra: list[str]) -> None:
    """Import what every run needs (pytest's built-in plugins too) plus what the chapters ask for."""
    for name in (*CORE, *extra):
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    from _pytest.config import default_plugins

    for plugin in default_plugins:
        try:
            importlib.import_module(f"_pytest.{plugin}")
        except ImportError:
            pass
    # pytest calls gc.collect() several times per session; frozen objects are
    # skipped, so a child does not walk (and copy) the whole preloaded heap.
    gc.collect()
    gc.freeze()


def serve(listener: socket.socket) -> None:
    """Accept runs forever; each connection is handed to a forked supervisor."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # supervisors reap themselves
    while True:
        connection, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _supervise(connection)
            os._exit(0)
        connection.close()


def _receive(connection: socket.socket) -> tuple[dict[str, object], int]:
    fds = array.array("i")
    message, ancillary, _, _ = connection.recvmsg(65536, socket.CMSG_SPACE(fds.itemsize))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    buffer = message
    while not buffer.endswith(b"\n"):
        more = connection.recv(65536)
        if not more:
            break
        buffer += more
    return json.loads(buffer), fds[0]


def _supervise(connection: socket.socket) -> None:
    """Fork the run, report its pid, wait, report its exit status."""
    request, output_fd = _receive(connection)
    pid = os.fork()
    if pid == 0:
        connection.close()
        _run_child(request, output_fd)
    os.close(output_fd)
    connection.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    connection.sendall(json.dumps({"exit": code}).encode() + b"\n")
    connection.close()


def _run_child(request: dict[str, object], output_fd: int) -> None:
    """Become a fresh pytest run in the snapshot: own session, own output, own cwd."""
    os.setsid()
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    os.close(output_fd)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    cwd = str(request["cwd"])
    os.chdir(cwd)
    sys.path.insert(0, cwd)  # what `python -m pytest` does with the current directory
    sys.argv = ["pytest", *request["args"]]  # type: ignore[misc]
    code = 3
    try:
        import pytest

        code = int(pytest.main(list(request["args"])))  # type: ignore[call-overload]
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main() -> None:
    """`python -P warm.py FD [MODULE...]`: FD is a listening Unix socket inherited from the client."""
    listener = socket.socket(fileno=int(sys.argv[1]))
    preload(sys.argv[2:])
    os.write(1, b"ready\n")
    serve(listener)


if __name__ == "__main__":
    main()
