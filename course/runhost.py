"""The run host: an interpreter that has imported pytest and runs tests in forked children.

Started by the course (course/hosts.py) as `python -P runhost.py FD [MODULE...]`,
in a session of its own, with the environment of a run already in place. It
imports pytest and the listed libraries (never `tiny_pi`, never a snapshot's
tests), says it is ready, and then serves runs one at a time over the socket
FD, which only the course holds the other end of (a socketpair: nothing on
the file system, nothing a test could connect to).

Why a host at all: starting an interpreter and importing pytest costs more
than a chapter's focused tests. A host started early (before the course
command has imported itself) has paid that by the time the command knows
what to run. A host started just in time is the same program, so a run
behaves the same whichever host serves it: that is the point of having one.

Per run the course sends one JSON line (the run's spec: directory, pytest
arguments, environment, time and memory limits) with two pipe ends attached
(SCM_RIGHTS): where the run's output goes and where its test reports go.
The host forks a child that closes the socket, applies the spec, and runs
`pytest.main` with the Reporter below as a plugin object (public hooks only).
The host answers `{"pid": N}`, waits for the child at most the time limit,
then kills every process the run left behind and answers
`{"exit": CODE, "timed_out": BOOL}`.

Nothing a run starts outlives it: the host is a child subreaper, so every
orphan of the run (a daemon that called setsid, a double fork, a process
that keeps forking) becomes the host's child, and the sweep after each run
kills all of its descendants, a process group at a time. No environment
marker is involved.
If the course goes away, the socket reads as closed: the host sweeps and
exits. If the host itself is killed (a test can kill or stop its parent),
the kernel kills the run's child, and the host's orphans land on the
process that started it: its keeper, a subreaper too, which sweeps them
and exits (see `_keep`).

This file imports nothing of the course: a learner's tests must not be able
to import the tool that judges them.
"""

from __future__ import annotations

import array
import ctypes
import gc
import importlib
import json
import os
import resource
import select
import shutil
import signal
import socket
import sys
import time

EVENTS_FD = 3  # where the Reporter writes, in the run's child
CORE = ("pytest", "trio", "attrs")
TEXT_LIMIT = 16 * 1024  # longest failure text sent per report (head and tail)
REAP_INTERVAL = 0.05  # seconds between reaps of a run's exited orphans while it runs
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


class Reporter:
    """A pytest plugin object: one JSON line per fact of the run, written to EVENTS_FD.

    The course reads test outcomes from these lines, not from the terminal
    summary, and knows which test was running when time ran out. A run that
    ends without the `finish` line did not end the way pytest ends.
    """

    def __init__(self, fd: int) -> None:
        self._out = os.fdopen(fd, "w", encoding="utf-8", buffering=1)

    def _emit(self, **fields: object) -> None:
        try:
            self._out.write(json.dumps(fields) + "\n")
            self._out.flush()
        except (OSError, ValueError):
            pass  # the course stopped listening: the run is being torn down

    def pytest_collection_finish(self, session) -> None:  # type: ignore[no-untyped-def]
        self._emit(collected=[item.nodeid for item in session.items])

    def pytest_collectreport(self, report) -> None:  # type: ignore[no-untyped-def]
        if report.failed:
            self._emit(collect_error=report.nodeid, text=_cut(report.longreprtext))

    def pytest_runtest_logstart(self, nodeid: str, location) -> None:  # type: ignore[no-untyped-def]
        self._emit(start=nodeid)

    def pytest_runtest_logreport(self, report) -> None:  # type: ignore[no-untyped-def]
        path, line, _ = report.location
        self._emit(
            report=report.nodeid,
            when=report.when,
            outcome=report.outcome,
            xfail=hasattr(report, "wasxfail"),
            file=path,
            line=line,
            text=_cut(report.longreprtext) if report.failed or report.skipped else "",
        )

    def pytest_exception_interact(self, node, call, report) -> None:  # type: ignore[no-untyped-def]
        if call.excinfo is None:
            return
        self._emit(
            exception=node.nodeid,
            message=_cut(call.excinfo.exconly()),
            memory=call.excinfo.errisinstance(MemoryError),
        )

    def pytest_sessionfinish(self, session, exitstatus) -> None:  # type: ignore[no-untyped-def]
        self._emit(finish=int(exitstatus))


class ShownOnly:
    """A pytest plugin object: a learner's run makes only what the course shows or reads.

    pytest formats every failure's traceback as it happens, parsing the test
    file again for each entry: in a red run that is most of the time. The
    course shows one failure (the run's first, or the first of the lab asked
    about) and looks for a red light in the chapter's red-light tests, so
    those keep pytest's own report, and every other failure gets the one-line
    form of `--tb=line` (its `E` lines). A run for one lab runs only that
    lab's tests, then the red-light tests of other labs. Outcomes and
    exception messages are the same either way; `course test -v` runs
    without this plugin, and `course test --lab -v` with it, for the lab's
    selection, every failure in full.
    """

    def __init__(self, shown: dict) -> None:
        self._words = [str(word) for word in shown.get("lab_words", [])]
        self._nodes = [str(node) for node in shown.get("lab_nodes", [])]
        self._tests = {str(node) for node in shown.get("tests", [])}
        self._full = bool(shown.get("full", False))  # one lab, every failure in full (`course test --lab -v`)
        self._run_failed = False
        self._lab_failed = False

    def _in_lab(self, nodeid: str) -> bool:
        # The course's Lab.selects, on the data the course sent (course/runspec.py).
        base = nodeid.partition("[")[0]  # a parameter id may hold "::" of its own
        name = (base.rpartition("::")[2] + nodeid[len(base):]).lower()
        return any(word in name for word in self._words) or any(
            nodeid == node or nodeid.startswith((node + "::", node + "[")) for node in self._nodes
        )

    def _in_full(self, nodeid: str) -> bool:
        return (self._full or not self._run_failed or nodeid in self._tests
                or (not self._lab_failed and self._in_lab(nodeid)))

    def pytest_collection_modifyitems(self, config, items) -> None:  # type: ignore[no-untyped-def]
        if not (self._words or self._nodes):
            return
        # The lab's tests first, so its first failure is the run's; then the other red-light tests.
        lab = [item for item in items if self._in_lab(item.nodeid)]
        kept = lab + [item for item in items if item.nodeid in self._tests and item not in lab]
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept

    def pytest_runtest_makereport(self, item, call):  # type: ignore[no-untyped-def]
        """The report pytest's runner makes, with `--tb=line` when the failure is not shown.

        Registered after pytest's own plugins, this is asked before the runner
        (the hook stops at the first report); None leaves the report to it.
        """
        if call.excinfo is None or self._in_full(item.nodeid):
            return None  # pytest's runner makes the report, in full
        import pytest

        option = item.config.option
        style, option.tbstyle = option.tbstyle, "line"
        try:
            return pytest.TestReport.from_item_and_call(item, call)
        finally:
            option.tbstyle = style

    def pytest_runtest_logreport(self, report) -> None:  # type: ignore[no-untyped-def]
        if report.failed:
            self._run_failed = True
            self._lab_failed = self._lab_failed or self._in_lab(report.nodeid)


def _cut(text: str) -> str:
    if len(text) <= TEXT_LIMIT:
        return text
    half = TEXT_LIMIT // 2
    return f"{text[:half]}\n[... {len(text) - TEXT_LIMIT} characters left out ...]\n{text[-half:]}"


# The child: one run -------------------------------------------------------------------


def run_child(spec: dict, output: int, events: int) -> None:
    """In the forked child: become the run described by `spec`, run pytest, exit."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    os.setpgid(0, 0)  # a group of its own: the sweep kills it, and all that stays in it, in one step
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(output, 1)
    os.dup2(output, 2)
    os.dup2(events, EVENTS_FD)
    os.closerange(EVENTS_FD + 1, _max_fd())  # the socket to the host, among others
    limit = int(spec["memory_limit"] * 1024**3)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ValueError, OSError):
        pass  # a hard limit already lower than ours: keep it
    os.chdir(spec["directory"])
    os.environ.clear()
    os.environ.update(spec["env"])
    sys.path.insert(0, spec["directory"])  # what `python -m pytest` does with its cwd
    sys.argv = ["pytest", *spec["args"]]
    # A run's signals are those of pytest started at a terminal, whatever the command was started
    # under: a `course verify` under nohup (SIGHUP ignored, inherited by every host) must not hand
    # that to the tests, nor to the processes they start and signal.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    import pytest

    code = 3
    try:
        plugins: list[object] = [Reporter(EVENTS_FD)]
        if spec.get("shown") is not None:
            plugins.append(ShownOnly(spec["shown"]))
        code = int(pytest.main(list(spec["args"]), plugins=plugins))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _max_fd() -> int:
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return min(soft, 65536) if soft > 0 else 4096


# The host: serve runs, sweep after each --------------------------------------------


def main() -> None:
    control = socket.socket(fileno=int(sys.argv[1]))
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _keep(control)
    # Importing makes objects by the hundred thousand and almost no garbage, so the collector's
    # passes during the imports, and a full one after them, only delay "ready" (by about a
    # sixth). Off while importing, then frozen as the gc docs advise before forking, then on.
    gc.disable()
    try:
        importlib.import_module("pytest")
    except Exception as error:  # noqa: BLE001 - said to the course, which says it to the user
        _send(control, {"ready": False, "error": f"{type(error).__name__}: {error}"})
        _quit(control)
    for name in (*CORE, *sys.argv[2:]):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the run that needs it will say so, in its own output
            pass
    gc.freeze()  # pytest collects garbage often; frozen objects are not walked again in every child
    gc.enable()  # a run's child collects as any Python process does
    signal.signal(signal.SIGTERM, lambda *_: _quit(control))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the course's to handle
    _send(control, {"ready": True})
    while True:
        request = _receive(control)
        if request is None:
            _quit(control)
        spec, fds = request
        serve(control, spec, fds)


def _keep(control: socket.socket) -> None:
    """Fork the host and stay behind as its keeper; return only in the host.

    A test can kill or stop the process that supervises it (`os.getppid()`
    is the host). The host's orphans, daemons of a run that called setsid,
    then land on the nearest living subreaper: this keeper, which serves no
    run and starts nothing else, so everything below it belongs to runs.
    When the host is gone the keeper sweeps it all and exits. It holds no
    end of the socket, so the course reads the host's end as closed the
    moment the host dies. SIGTERM (the course giving up on a host that went
    silent, a stopped one included) kills the host: the same ending follows.
    """
    host = os.fork()
    if host == 0:
        os.setpgid(0, 0)  # a test that kills its host's whole group does not reach the keeper
        return
    control.close()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the course's to handle
    signal.signal(signal.SIGTERM, lambda *_: _signal(host, signal.SIGKILL))
    while True:
        try:
            if os.waitpid(host, 0)[0] == host:
                break
        except ChildProcessError:
            break
    _sweep(-1, None)
    os._exit(0)


def serve(control: socket.socket, spec: dict, fds: list[int]) -> None:
    """One run: fork the child, wait at most the time limit, sweep, report."""
    output, events = fds
    child = os.fork()
    if child == 0:
        try:
            run_child(spec, output, events)
        finally:
            os._exit(70)
    os.close(output)
    os.close(events)
    _send(control, {"pid": child})
    status, timed_out, cancelled = _wait(child, float(spec["time_limit"]), control)
    status = _sweep(child, status)
    _send(control, {"exit": _exit_code(status), "timed_out": timed_out})
    _forget_bytecode(spec["directory"])
    if cancelled:
        _quit(control)


def _forget_bytecode(directory: str) -> None:
    """Remove the bytecode a run compiled from the files of its directory.

    Runs write bytecode under one cache of the course's (PYTHONPYCACHEPREFIX,
    course/run_env.py), never into the directory they run in. There a library's
    bytecode serves every later run, and the copy's serves the run's own
    processes: a test that starts `python -m tiny_pi...` does not compile the
    package again. The copy's goes with the run: Python checks bytecode against
    a file's size and modification time in whole seconds, so a directory run
    again within a second of an edit (a red-light patch applied to a copy
    just run) could otherwise be judged on the code before the edit.
    """
    if not sys.pycache_prefix:
        return
    prefix = os.path.abspath(sys.pycache_prefix)
    mirror = os.path.join(prefix, os.path.abspath(directory).lstrip(os.sep))
    shutil.rmtree(mirror, ignore_errors=True)
    # ... and the folders above it that held nothing else: each run's throw-away copy has a new
    # name, so its empty parents would otherwise pile up in the cache, one per run.
    parent = os.path.dirname(mirror)
    while parent != prefix and parent.startswith(prefix + os.sep):
        try:
            os.rmdir(parent)
        except FileNotFoundError:  # nothing was compiled this deep: a folder above may still be left over
            pass
        except OSError:  # not empty: another run's, or a library's
            break
        parent = os.path.dirname(parent)


def _wait(child: int, limit: float, control: socket.socket) -> tuple[int | None, bool, bool]:
    """The child's wait status, or None when the time ran out or the course went away."""
    deadline = time.monotonic() + limit
    try:
        pidfd: int | None = os.pidfd_open(child)
    except (AttributeError, OSError):
        pidfd = None
    try:
        while True:
            # Reap every exited process, not only the child: a test that keeps forking
            # leaves its exited generations to this subreaper, and unreaped they pile up.
            status = _reap(child, None, block=False)
            if status is not None:
                return status, False, False
            left = deadline - time.monotonic()
            if left <= 0:
                return None, True, False
            watched = [control] + ([pidfd] if pidfd is not None else [])
            ready, _, _ = select.select(watched, [], [], min(left, REAP_INTERVAL))
            if control in ready:
                return None, False, True  # the course closed the socket: it is gone, or it cancelled
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _sweep(child: int, status: int | None) -> int | None:
    """Kill every descendant of this host, whole process groups at a time; reap them all.

    The run's child leads a process group of its own, so everything it starts
    shares that group unless it leaves it (setsid, setpgid), and such a
    process leads a group of its own in turn. Killing a group is one atomic
    step in the kernel, which no member can outrun by forking; killing
    processes one by one, a loop that forks and exits always has a new
    generation alive by the time the list is read again.
    """
    me = os.getpid()
    own_group = os.getpgid(0)
    for _ in range(200):
        if _childless():
            break
        found = _descendants(me)
        if not found:
            break
        for group in {group for group in found.values() if group != own_group}:
            _signal_group(group, signal.SIGKILL)
        for pid, group in found.items():
            if group == own_group:
                _signal(pid, signal.SIGKILL)
        status = _reap(child, status, block=False)
        time.sleep(0.005)
    return _reap(child, status, block=False)


def _reap(child: int, status: int | None, block: bool) -> int | None:
    """Collect every exited child (orphans of the run included); keep the run child's status."""
    while True:
        try:
            pid, code = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return status
        if pid == 0:
            return status
        if pid == child:
            status = code


def _childless() -> bool:
    """Whether nothing at all is below this process, without reading /proc.

    This process is a child subreaper: the kernel hands a dying process's
    children to it before the death can be reaped, so every descendant that
    is left is below one of its children. With no child, live or exited,
    there is nothing to sweep, and the scan of every process on the machine
    (hundreds on a desktop) is skipped at the end of nearly every run.
    """
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return False


def _descendants(root: int) -> dict[int, int]:
    """Every process below `root` that is not yet reaped, with its process group, from /proc.

    Orphans of a run are reparented to root (a child subreaper), so they are
    found here however they left their parent.
    """
    children: dict[int, list[tuple[int, int]]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()  # state, ppid, pgrp, ...
        children.setdefault(int(fields[1]), []).append((int(name), int(fields[2])))
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        for pid, group in children.get(todo.pop(), []):
            if pid not in found:
                found[pid] = group
                todo.append(pid)
    return found


def _exit_code(status: int | None) -> int | None:
    if status is None:
        return None
    return os.waitstatus_to_exitcode(status)


def _signal(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except (ProcessLookupError, PermissionError):
        pass


def _signal_group(group: int, number: int) -> None:
    try:
        os.killpg(group, number)
    except (ProcessLookupError, PermissionError):
        pass


def _prctl(option: int, value: int) -> None:
    """Linux's prctl; elsewhere nothing (the course then relies on the sweep alone)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _quit(control: socket.socket) -> None:
    _sweep(-1, None)
    control.close()
    os._exit(0)


def _send(control: socket.socket, message: dict) -> None:
    try:
        control.sendall(json.dumps(message).encode() + b"\n")
    except OSError:
        _quit(control)


def _receive(control: socket.socket) -> tuple[dict, list[int]] | None:
    """One request line with its two file descriptors; None when the course closed the socket."""
    fds = array.array("i")
    data = b""
    while not data.endswith(b"\n"):
        chunk, ancillary, _, _ = control.recvmsg(65536, socket.CMSG_SPACE(2 * fds.itemsize))
        if not chunk:
            return None
        data += chunk
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    if len(fds) != 2:
        for fd in fds:
            os.close(fd)
        return None
    return json.loads(data), list(fds)


if __name__ == "__main__":
    main()
