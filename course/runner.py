"""Run a snapshot's tests in a fresh, isolated interpreter and read the verdict.

Every point here is a bug someone hit: two snapshots both contain `tiny_pi`,
so a shared process imports the wrong one; an inherited PYTHONPATH or a stray
installed plugin changes a learner's results; a stream that never ends hangs
the whole course; a summary line is not a contract, a JUnit report is.
"""

from __future__ import annotations

import array
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Awaitable, Callable, Sequence

import attrs
import trio
from attrs import frozen

from course import prestart
from course.catalog import Lab
from course.isolation import isolated_env
from course.run_plugins import DIRECTORY as PLUGIN_DIRECTORY
from course.run_plugins import LAB_SORTER, STATEMENT_CACHE

# Outcomes of one run.
PASSED = "passed"
FAILED = "failed"
COLLECTION_ERROR = "collection-error"
NO_TESTS = "no-tests"
TIMEOUT = "timeout"
CRASHED = "crashed"

OUTPUT_HEAD = 64 * 1024
OUTPUT_TAIL = 192 * 1024
DETAILS_LIMIT = 16 * 1024
WARM_START_LIMIT = 20.0
# After pytest has exited and everything of its run is killed, the rest of its
# output is read for at most this long (a process that escaped the kill may
# still hold the pipe open; it must not turn a finished run into a timeout).
OUTPUT_GRACE = 2.0
# Longest stretch of one attribute or text kept from the JUnit report (head and
# tail, each half of it): a test failing with a 100 MB message must not cost
# the course process 100 MB, nor minutes of XML parsing.
REPORT_RUN_LIMIT = 2 * DETAILS_LIMIT

# Every process of one run carries RUN_ID_VAR=<token> in its environment, so
# the ones that left its process group (setsid, a double fork) are found too.
RUN_ID_VAR = "COURSE_RUN_ID"

# Loaded into every run (see course/run_plugins/): failure reports as pytest
# prints them, without re-walking a test file's syntax tree per traceback entry.
RUN_PLUGINS = (STATEMENT_CACHE,)
# What `python -m pytest` does (the working directory first on the module path),
# plus the plugins' directory at the end, as the warm worker does for its children:
# no PYTHONPATH for a test to see, and the same argv[0] in usage messages.
_START_PYTEST = (
    "import os, sys; sys.path[0] = os.getcwd(); sys.path.append({!r}); sys.argv[0] = 'pytest'; "
    "import pytest; sys.exit(pytest.console_main())"
)


@frozen
class TestCase:
    """One test's verdict from the JUnit report."""

    file: str
    name: str
    outcome: str
    message: str = ""
    details: str = ""


@frozen
class RunResult:
    """What one isolated pytest run showed."""

    outcome: str
    exit_code: int | None
    tests: tuple[TestCase, ...]
    output: str
    duration: float
    time_limit: float
    args: tuple[str, ...] = ()
    reported: bool = True  # pytest finished its JUnit report (it does unless killed or os._exit)
    lab_counts: dict[str, tuple[int, int]] = attrs.field(factory=dict, eq=False)  # lab id -> (passed, failed)

    @property
    def passed(self) -> int:
        return sum(1 for case in self.tests if case.outcome == PASSED)

    @property
    def failed(self) -> int:
        return sum(1 for case in self.tests if case.outcome in (FAILED, "error"))

    @property
    def skipped(self) -> int:
        return sum(1 for case in self.tests if case.outcome == "skipped")

    def passed_in(self, test_file: str) -> int:
        return sum(1 for case in self.tests if case.file == test_file and case.outcome == PASSED)

    def failed_in(self, test_file: str) -> int:
        return sum(
            1 for case in self.tests if case.file == test_file and case.outcome in (FAILED, "error")
        )

    def case(self, node_id: str) -> TestCase | None:
        file, _, name = node_id.partition("::")
        name = name.replace("::", ".")
        for case in self.tests:
            if case.file == file and (case.name == name or case.name.endswith("." + name)):
                return case
        return None

    def summary(self) -> str:
        if self.outcome == TIMEOUT:
            return timeout_message(self.time_limit)
        if self.outcome == COLLECTION_ERROR and not self.passed:
            return "error during collection: the tests could not be imported"
        parts = [f"{self.passed} passed"]
        if self.failed:
            parts.append(f"{self.failed} failed")
        if self.skipped:
            parts.append(f"{self.skipped} skipped")
        if self.outcome == COLLECTION_ERROR:
            parts.append("error during collection")
        if self.outcome == CRASHED:
            return "; ".join([", ".join(parts), self.crash_reason()]) if self.tests else self.crash_reason()
        return ", ".join(parts)

    def crash_reason(self) -> str:
        """Why pytest gave no verdict of its own, in words a learner can act on."""
        code = self.exit_code
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"pytest was killed by {name} before it could report (a crash in a test, or a test killing its own process?)"
        if code == 4:
            errors = [line.strip() for line in self.output.splitlines() if line.startswith("ERROR:")]
            if errors:
                return f"pytest could not run the selection: {errors[0]}"
        if not self.reported:
            return (
                f"pytest ended with status {code} before writing its report - "
                "did a test call os._exit() or otherwise end the interpreter?"
            )
        return f"pytest exited with status {code}"

    def to_json(self) -> dict[str, object]:
        return {
            "outcome": self.outcome,
            "exit_code": self.exit_code,
            "passed": self.passed,
            "failed": self.failed,
            "skipped": self.skipped,
            "duration": round(self.duration, 3),
            "args": list(self.args),
        }


def timeout_message(limit: float) -> str:
    return f"the tests did not finish in {limit:g} s - a stream that never ends?"


def pytest_command(
    snapshot: Path,
    report: Path,
    selection: Sequence[str],
    plugins: Sequence[str] = (),
) -> list[str]:
    """The exact command line of an isolated cold run (a warm run gets the same arguments)."""
    command = [
        sys.executable,
        "-c",
        _START_PYTEST.format(str(PLUGIN_DIRECTORY)),
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(snapshot),
        "-c",
        str(snapshot / "pytest.ini"),
        f"--junitxml={report}",
        "-o",
        "junit_family=xunit1",
    ]
    for plugin in plugins:
        command += ["-p", plugin]
    command += list(selection)
    return command


class _BoundedOutput:
    """Keeps the head and the tail of a stream, so a test printing 100 MB costs nothing."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes | bytearray) -> None:
        room = OUTPUT_HEAD - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail += chunk
        extra = len(self.tail) - OUTPUT_TAIL
        if extra > 0:
            del self.tail[:extra]
            self.dropped += extra

    def text(self) -> str:
        middle = b""
        if self.dropped:
            middle = f"\n[... {self.dropped} bytes of output left out ...]\n".encode()
        return bytes(self.head + middle + self.tail).decode("utf-8", "replace")


class _Launched:
    """A started run, however it was started: its process group, output and exit."""

    def __init__(
        self,
        pid: int,
        output: trio.abc.ReceiveStream,
        wait: Callable[[], Awaitable[int]],
        close: Callable[[], None] = lambda: None,
    ) -> None:
        self.pid = pid
        self.output = output
        self.wait = wait  # may be called again after a cancelled call
        self.close = close


async def _launch_cold(command: list[str], cwd: Path, token: str) -> _Launched:
    """A brand-new interpreter: the reference behaviour, and the fallback."""
    process = await trio.lowlevel.open_process(
        command,
        cwd=str(cwd),
        env={**isolated_env(), RUN_ID_VAR: token},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    assert process.stdout is not None
    return _Launched(process.pid, process.stdout, process.wait)


class WarmWorker:
    """The client side of `course/warm.py`: one worker process per command.

    Starting it costs one interpreter start-up; every run after that costs a
    fork. When it cannot start (no fork, no Unix sockets, COURSE_WARM=0),
    runs fall back to a cold interpreter each. A worker the command started
    early (course/prestart.py) is adopted, and asked for the imports it lacks.
    """

    def __init__(self, spawned: prestart.Spawned) -> None:
        self._spawned = spawned
        self.socket_path = spawned.socket_path

    @classmethod
    async def start(cls, imports: Sequence[str] = ()) -> WarmWorker | None:
        if os.environ.get("COURSE_WARM", "1") == "0" or not hasattr(os, "fork"):
            return None
        adopted = prestart.take()
        if adopted is None:
            try:
                adopted = prestart.spawn_nowait(imports)
            except OSError:
                return None
        worker = cls(adopted)
        missing = [name for name in imports if name not in adopted.imports]
        try:
            with trio.move_on_after(WARM_START_LIMIT):
                if await worker._started() and (not missing or await worker._preload(missing)):
                    return worker
        except BaseException:
            worker.close()  # Ctrl-C while it starts: it must not outlive the command
            raise
        worker.close()
        return None

    async def _started(self) -> bool:
        """Wait for the worker's "ready" line on its stdout."""
        stdout = self._spawned.process.stdout
        assert stdout is not None
        async with trio.lowlevel.FdStream(os.dup(stdout.fileno())) as stream:
            return (await stream.receive_some(64)).startswith(b"ready")

    async def _preload(self, names: list[str]) -> bool:
        """Have the worker itself import `names`, so every child forked later has them."""
        connection = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with connection:
            try:
                await connection.connect(str(self.socket_path))
                await connection.send(json.dumps({"preload": names}).encode() + b"\n")
                return (await _Lines(connection).next()).get("ready") is True
            except OSError:  # the worker went away: runs go cold
                return False

    async def launch(self, args: list[str], cwd: Path, token: str) -> _Launched:
        read_end, write_end = os.pipe()
        connection = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            await connection.connect(str(self.socket_path))
            request = json.dumps({"cwd": str(cwd), "args": args, "token": token}).encode() + b"\n"
            fds = array.array("i", [write_end]).tobytes()
            await connection.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
        except BaseException:
            os.close(read_end)
            connection.close()
            raise
        finally:
            os.close(write_end)
        lines = _Lines(connection)
        try:
            pid = _number(await lines.next(), "pid")
        except BaseException:
            os.close(read_end)
            connection.close()
            raise

        async def wait() -> int:
            # Not closed on cancellation: the caller waits again after killing the run.
            try:
                code = _number(await lines.next(), "exit")
            except OSError:  # the worker died mid-run, and its supervisor killed the run with it
                code = -signal.SIGKILL
            connection.close()
            return code

        return _Launched(pid, trio.lowlevel.FdStream(read_end), wait, connection.close)

    def close(self) -> None:
        self._spawned.kill()


def _number(message: dict[str, object], key: str) -> int:
    value = message.get(key)
    if not isinstance(value, int):
        raise ConnectionError(f"the warm worker sent {message!r} where {key!r} was due")
    return value


class _Lines:
    """Newline-separated JSON messages from the worker."""

    def __init__(self, connection: trio.socket.SocketType) -> None:
        self._connection = connection
        self._buffer = b""

    async def next(self) -> dict[str, object]:
        while b"\n" not in self._buffer:
            chunk = await self._connection.recv(4096)
            if not chunk:
                raise ConnectionError("the warm worker went away")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)


async def run_pytest(
    snapshot: Path,
    selection: Sequence[str] = (),
    *,
    plugins: Sequence[str] = (),
    time_limit: float = 30.0,
    worker: WarmWorker | None = None,
    labs: Sequence[Lab] = (),
    lab_files: Sequence[str] = (),
) -> RunResult:
    """Run pytest in `snapshot` in a process and process group of its own.

    With `labs`, the same run also sorts its tests into those labs (see
    course/run_plugins/_course_lab_sorter.py), so one run answers for every lab.

    Waits at most `time_limit` seconds for pytest to exit. Whether it exits or
    the time runs out, everything the run started is then killed (its process
    group, and any process that left the group but carries the run's token),
    so no test can leave a process behind. The output is read while pytest
    runs and for a short grace after: a process holding the pipe open must
    not turn a run that finished into a timeout.
    """
    snapshot = snapshot.resolve()
    token = secrets.token_hex(12)
    with tempfile.TemporaryDirectory(prefix="course-run-") as scratch:
        report = Path(scratch) / "report.xml"
        command = pytest_command(snapshot, report, selection, plugins)
        lab_file = Path(scratch) / "labs.json"
        command[3:3] = [argument for name in RUN_PLUGINS for argument in ("-p", name)]
        if labs:
            command[3:3] = _lab_arguments(labs, lab_files, Path(scratch), lab_file)
        output = _BoundedOutput()
        started = time.monotonic()
        exit_code: int | None = None
        launched = None
        if worker is not None:
            try:
                launched = await worker.launch(command[3:], snapshot, token)
            except OSError:
                pass  # the worker is gone (killed, out of memory): this run goes cold
        if launched is None:
            launched = await _launch_cold(command, snapshot, token)
        try:
            async with trio.open_nursery() as nursery:
                drained = trio.Event()

                async def read_output() -> None:
                    await _drain(launched.output, output)
                    drained.set()

                nursery.start_soon(read_output)
                with trio.move_on_after(time_limit):
                    exit_code = await launched.wait()
                _kill_run(launched.pid, token)
                with trio.move_on_after(OUTPUT_GRACE):
                    await drained.wait()
                nursery.cancel_scope.cancel()
        finally:
            _kill_run(launched.pid, token)
            with trio.CancelScope(shield=True):
                if exit_code is None:
                    with trio.move_on_after(5):
                        await launched.wait()
                launched.close()
        duration = time.monotonic() - started
        tests = _read_report(report, snapshot)
        lab_counts = _read_lab_counts(lab_file) if labs else {}
    if exit_code is None:
        outcome = TIMEOUT
    elif tests is None:
        outcome = CRASHED  # pytest always writes its report unless it was cut short
    else:
        outcome = _outcome(exit_code, tests)
    return RunResult(
        outcome=outcome,
        exit_code=exit_code,
        tests=tests or (),
        output=output.text(),
        duration=duration,
        time_limit=time_limit,
        args=tuple(selection),
        reported=tests is not None,
        lab_counts=lab_counts,
    )


def _lab_arguments(labs: Sequence[Lab], files: Sequence[str], scratch: Path, out: Path) -> list[str]:
    """`-p _course_lab_sorter` and its two files: the labs' selections in, members out.

    A `-k` lab narrows `files` (the chapter's focused tests), as its own run would.
    """
    selections = {
        lab.id: {"select": lab.select, "files": list(files)} if lab.select is not None else {"nodes": list(lab.nodes)}
        for lab in labs
    }
    request = scratch / "lab-selections.json"
    request.write_text(json.dumps(selections), encoding="utf-8")
    return ["-p", LAB_SORTER, f"--course-labs={request}", f"--course-labs-out={out}"]


def _read_lab_counts(path: Path) -> dict[str, tuple[int, int]]:
    """Lab id -> (passed, failed) among the lab's tests; empty when the run never finished."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    outcomes = data["outcomes"]
    counts = {}
    for lab, members in data["members"].items():
        results = [outcomes.get(nodeid) for nodeid in members]
        counts[lab] = (results.count("passed"), sum(r not in ("passed", "skipped") for r in results))
    return counts


async def _drain(stream: trio.abc.ReceiveStream, output: _BoundedOutput) -> None:
    async with stream:
        while True:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            output.add(chunk)


def _kill_run(pid: int, token: str) -> None:
    """Kill the run and anything it left behind: its process group, then its escapees.

    A test's children share its process group and die with it. A child that
    called setsid() (a daemon, a double fork) has left the group; it still
    carries the run's token in its environment, so /proc finds it. What
    neither reaches: a process that left the group *and* scrubbed its
    environment. The warm worker's supervisor covers that case for warm runs
    (it is a child subreaper, see warm.py); for cold runs it would take a
    cgroup or a PID namespace, which a learner's machine does not give us.
    """
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    kill_marked(token)


def kill_marked(token: str) -> list[int]:
    """SIGKILL every process whose environment holds RUN_ID_VAR=token; returns their pids.

    They are stopped first and killed once no new one appears, so a process
    that forks in a loop cannot outrun the sweep.
    """
    marker = f"{RUN_ID_VAR}={token}".encode()
    stopped: list[int] = []
    for _ in range(50):
        fresh = [pid for pid in _marked_processes(marker) if pid not in stopped]
        if not fresh:
            break
        for pid in fresh:
            _signal(pid, signal.SIGSTOP)
        stopped += fresh
    for pid in stopped:
        _signal(pid, signal.SIGKILL)
    return stopped


def _marked_processes(marker: bytes) -> list[int]:
    """Pids of live processes (other than this one) whose environment holds `marker`."""
    me = os.getpid()
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []  # no /proc (not Linux): the process group is all we can reach
    for name in entries:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                environment = handle.read()
        except OSError:
            continue  # gone already, or not ours to read
        if marker in environment.split(b"\0"):
            found.append(int(name))
    return found


def _signal(pid: int, number: signal.Signals) -> None:
    try:
        os.kill(pid, number)
    except (ProcessLookupError, PermissionError):
        pass


def _outcome(exit_code: int, tests: tuple[TestCase, ...]) -> str:
    if exit_code == 4 and any(case.outcome == "error" and not case.name for case in tests):
        return COLLECTION_ERROR  # node ids in a module that cannot be imported
    return {0: PASSED, 1: FAILED, 2: COLLECTION_ERROR, 5: NO_TESTS}.get(exit_code, CRASHED)


def _read_report(report: Path, snapshot: Path) -> tuple[TestCase, ...] | None:
    """Read test verdicts from pytest's JUnit XML; None when pytest never finished it."""
    try:
        document = bounded_xml(report)
        tree = ElementTree.fromstring(document)
    except (OSError, ElementTree.ParseError):
        return None
    return tuple(_case(element, snapshot) for element in tree.iter("testcase"))


_STRUCTURE = re.compile(rb'([<>"])')
_CUT_ENTITY = re.compile(rb"^[#a-zA-Z0-9]{0,10};")


def bounded_xml(path: Path, limit: int = REPORT_RUN_LIMIT) -> bytes:
    """The report's bytes with every long attribute value or text cut to its head and tail.

    pytest's report is machine-written XML in which `<`, `>` and `"` only ever
    delimit markup (ElementTree escapes them inside values, `"` only inside
    attributes); a stretch between two of them is a value, and cutting its
    middle keeps the document well-formed, provided no entity or UTF-8
    character is cut in half. The file is read in chunks, so the memory held
    is bounded whatever a test printed into its failure message. (Parsing the
    untrimmed file is not an option: expat needs minutes and several times
    the value's size for a 100 MB attribute.)
    """
    half = limit // 2
    kept = bytearray()
    run = bytearray()
    head: bytes | None = None
    length = 0

    def flush() -> None:
        nonlocal head, length
        if head is None:
            kept.extend(run)
        else:
            start = head.decode("utf-8", "ignore").encode()
            start = start[: start.rfind(b"&")] if start.rfind(b"&") > start.rfind(b";") else start
            end = _CUT_ENTITY.sub(b"", bytes(run[-half:])).decode("utf-8", "ignore").encode()
            left_out = length - len(start) - len(end)
            kept.extend(start + f" [... {left_out} bytes left out ...] ".encode() + end)
        run.clear()
        head, length = None, 0

    def extend(piece: bytes) -> None:
        nonlocal head, length
        length += len(piece)
        run.extend(piece)
        if head is None and len(run) > limit:
            head = bytes(run[:half])
            del run[: len(run) - half]
        elif head is not None and len(run) > limit:
            del run[: len(run) - half]

    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            pieces = _STRUCTURE.split(chunk)
            extend(pieces[0])
            for index in range(1, len(pieces), 2):
                flush()
                kept.extend(pieces[index])
                extend(pieces[index + 1])
    flush()
    return bytes(kept)


def _case(element: ElementTree.Element, snapshot: Path) -> TestCase:
    file = element.get("file") or ""
    classname = element.get("classname") or ""
    name = element.get("name") or ""
    if not file and classname:
        file = classname.replace(".", "/") + ".py"
    elif not file:
        # A collection error: pytest names the module, and there is no test name.
        file, name = name.replace(".", "/") + ".py", ""
    outcome, message, details = PASSED, "", ""
    for child in element:
        if child.tag in ("failure", "error"):
            outcome = FAILED if child.tag == "failure" else "error"
            message = child.get("message") or ""
            details = (child.text or "")[-DETAILS_LIMIT:]
            if message == "collection failure":
                name = ""
            break
        if child.tag == "skipped":
            outcome, message = "skipped", child.get("message") or ""
    module = file[:-3].replace("/", ".") if file.endswith(".py") else ""
    if module and classname.startswith(module):
        inner = classname[len(module) :].lstrip(".")
        name = f"{inner}.{name}" if inner else name
    return TestCase(file=file, name=name, outcome=outcome, message=message, details=details)


class RunPool:
    """The runs of one command: parallel up to the number of cores, warm when possible.

    Use as `async with RunPool() as pool:`; the warm worker lives exactly as
    long as the block, so no process outlives the command.
    """

    def __init__(self, warm_imports: Sequence[str] = (), warm: bool = True) -> None:
        self._limiter = trio.CapacityLimiter(max(1, os.cpu_count() or 1))
        self._warm = warm
        self._warm_imports = tuple(dict.fromkeys(warm_imports))
        self.worker: WarmWorker | None = None

    async def __aenter__(self) -> RunPool:
        if self._warm:
            self.worker = await WarmWorker.start(self._warm_imports)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None

    @property
    def limiter(self) -> trio.CapacityLimiter:
        return self._limiter

    async def run(
        self,
        snapshot: Path,
        selection: Sequence[str],
        *,
        plugins: Sequence[str] = (),
        time_limit: float = 30.0,
        labs: Sequence[Lab] = (),
        lab_files: Sequence[str] = (),
    ) -> RunResult:
        """One isolated run; waits for a free core first."""
        async with self._limiter:
            return await run_pytest(
                snapshot, selection, plugins=plugins, time_limit=time_limit, worker=self.worker,
                labs=labs, lab_files=lab_files,
            )
