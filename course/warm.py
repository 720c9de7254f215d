"""A warm worker: pay for importing pytest once, then fork a clean child per run.

Starting an interpreter and importing pytest, trio and attrs costs more than
running a chapter's focused tests. The worker is started once per `course`
command with the isolated environment of a cold run, imports those libraries
(never `tiny_pi`, never a snapshot's tests), and forks one child per run:
each child enters the snapshot, starts its own session and process group,
and exits. Isolation stays as strong as a fresh interpreter for what
matters: a child can only import the `tiny_pi` of its own snapshot, because
no process before it ever imported one.

Protocol, one Unix-socket connection per request. A run: the client sends
one JSON line (`cwd`, `args`, `token`) with the write end of its output pipe
attached (SCM_RIGHTS); the worker answers `{"pid": N}` once the child runs
and `{"exit": N}` when it has ended and every process it left behind is
killed. More imports: `{"preload": [MODULE...]}`, answered `{"ready": true}`
once they are imported in the worker itself, so every later child has them.

That second request lets the `course` command start a worker with the core
libraries before it knows which chapter it will run (course/launch.py): the
worker's imports then overlap the command's own, and the chapter's extra
libraries are asked for once the command knows them.
"""

from __future__ import annotations

import array
import gc
import importlib
import json
import os
import shutil
import signal
import socket
import sys
import time

CORE = ("pytest", "trio", "attrs")
RECEIVE_LIMIT = 10.0
# The course's own pytest plugins, importable by top-level name (see course/run_plugins/).
PLUGINS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_plugins")


def preload(extra: list[str]) -> None:
    """Import what every run needs (pytest's built-in plugins too) plus what the chapters ask for."""
    sys.path.append(PLUGINS)
    plugins = sorted(name[:-3] for name in os.listdir(PLUGINS) if name.startswith("_course_") and name.endswith(".py"))
    _import_all([*CORE, *extra, *plugins])
    from _pytest.config import default_plugins

    for plugin in default_plugins:
        try:
            importlib.import_module(f"_pytest.{plugin}")
        except ImportError:
            pass
    for name in plugins:  # a plugin that patches pytest does it once, here, for every child
        install = getattr(sys.modules.get(name), "install", None)
        if install is not None:
            install()
    _freeze()


def _import_all(names: list[str]) -> None:
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            pass  # the run that needs it will say so, in its own output


def _freeze() -> None:
    # pytest calls gc.collect() several times per session; frozen objects are
    # skipped, so a child does not walk (and copy) the whole preloaded heap.
    gc.collect()
    gc.freeze()


def serve(listener: socket.socket) -> None:
    """Accept requests forever: preloads are served here, each run by a forked supervisor."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # supervisors reap themselves
    worker = os.getpid()
    while True:
        connection, _ = listener.accept()
        connection.settimeout(RECEIVE_LIMIT)  # a client that connects and never writes must not stall the rest
        try:
            request, fds = _receive(connection)
        except (OSError, ValueError):
            connection.close()
            continue
        connection.settimeout(None)
        for extra in fds[1:]:
            os.close(extra)
        output_fd = fds[0] if fds else -1
        names = request.get("preload")
        if isinstance(names, list):
            _import_all([str(name) for name in names])
            _freeze()
            _answer(connection, {"ready": True})
        elif output_fd >= 0 and os.fork() == 0:  # a run needs somewhere to write its output
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _supervise(connection, request, output_fd, worker)
            os._exit(0)
        if output_fd >= 0:
            os.close(output_fd)
        connection.close()


def _answer(connection: socket.socket, message: dict[str, object]) -> None:
    try:
        connection.sendall(json.dumps(message).encode() + b"\n")
    except OSError:
        pass  # the client went away; nothing to tell


def _receive(connection: socket.socket) -> tuple[dict[str, object], list[int]]:
    """One request: its JSON line, and every file descriptor that came with it."""
    fds = array.array("i")
    message, ancillary, _, _ = connection.recvmsg(65536, socket.CMSG_SPACE(4 * fds.itemsize))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - (len(data) % fds.itemsize)])
    try:
        buffer = message
        while not buffer.endswith(b"\n"):
            more = connection.recv(65536)
            if not more:
                break
            buffer += more
        request = json.loads(buffer)
        if not isinstance(request, dict):
            raise ValueError("a request is a JSON object")
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return request, list(fds)


def _supervise(connection: socket.socket, request: dict[str, object], output_fd: int, worker: int) -> None:
    """Fork the run, report its pid, wait, clear up what it left, report its exit status.

    The supervisor is a child subreaper: a process the run started that
    escaped its process group (setsid, a double fork) and was orphaned is
    re-parented here instead of to init, so it can be killed before the
    run is reported finished, whatever it did to its environment. If the
    worker dies (the command was killed outright), the kernel tells the
    supervisor, which kills the run and everything it left, at once.
    """
    runs: list[int] = []

    def stop(*_: object) -> None:
        for pid in runs:
            _kill_group(pid)
        _kill_strays()
        os._exit(1)

    signal.signal(signal.SIGTERM, stop)
    _on_parent_death(signal.SIGTERM, worker)
    _become_subreaper()
    supervisor = os.getpid()
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        connection.close()
        _on_parent_death(signal.SIGKILL, supervisor)
        _run_child(request, output_fd)
    runs.append(pid)
    os.close(output_fd)
    try:
        connection.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
    except OSError:  # the client went away: nobody waits for this run any more
        stop()
    _kill_strays()
    _answer(connection, {"exit": code})
    connection.close()


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _become_subreaper() -> None:
    """prctl(PR_SET_CHILD_SUBREAPER, 1) on Linux; elsewhere the process group has to do."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # 36 = PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _children() -> list[int]:
    """Live children of this process, from /proc (orphans re-parented here included)."""
    me = str(os.getpid())
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1].decode() == me and fields[0] != b"Z":
            found.append(int(name))
    return found


def _kill_strays() -> None:
    """Kill and reap every remaining descendant; killing one orphans its children to us."""
    for _ in range(100):
        strays = _children()
        for pid in strays:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        if not strays:
            return
        time.sleep(0.005)


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
    # The run's token: processes it starts carry it, so the client can find escapees.
    os.environ["COURSE_RUN_ID"] = str(request.get("token", ""))
    # As a cold run starts (runner._START_PYTEST): the snapshot first, the plugins last, argv[0] 'pytest'.
    sys.path.insert(0, cwd)
    sys.argv = ["pytest", *request["args"]]  # type: ignore[misc]
    code = 3
    try:
        import pytest

        code = int(pytest.main(list(request["args"])))  # type: ignore[call-overload]
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _on_parent_death(number: int, parent: int) -> None:
    """Linux: have the kernel send signal `number` when `parent` dies, even by SIGKILL.

    Nothing of the worker may outlive the `course` command: the worker asks
    for this against the command, each supervisor against the worker, each
    run against its supervisor. If the parent is already gone, act now.
    """
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, number, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os.kill(os.getpid(), number)


def _leave(folder: str) -> None:
    """The command died: take the socket's folder along, then go."""
    shutil.rmtree(folder, ignore_errors=True)
    os._exit(0)


def main() -> None:
    """`python -P warm.py FD PARENT [MODULE...]`: FD is a listening Unix socket inherited from PARENT."""
    listener = socket.socket(fileno=int(sys.argv[1]))
    folder = os.path.dirname(listener.getsockname())
    signal.signal(signal.SIGTERM, lambda *_: _leave(folder))
    _on_parent_death(signal.SIGTERM, int(sys.argv[2]))
    preload(sys.argv[3:])
    os.write(1, b"ready\n")
    serve(listener)


if __name__ == "__main__":
    main()
