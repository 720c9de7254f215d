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
import shutil
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

# Variables that would let the caller's environment change a snapshot's results.
_DROPPED_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTEST_ADDOPTS", "PYTEST_PLUGINS")


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
            parts.append(f"pytest exited with status {self.exit_code}")
        return ", ".join(parts)

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


def isolated_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a test run: the caller's, minus what could leak in."""
    env = dict(os.environ if base is None else base)
    for name in _DROPPED_ENV:
        env.pop(name, None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def pytest_command(
    snapshot: Path,
    report: Path,
    selection: Sequence[str],
    plugins: Sequence[str] = (),
) -> list[str]:
    """The exact command line of an isolated run (also shown to learners)."""
    command = [
        sys.executable,
        "-m",
        "pytest",
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

    def add(self, chunk: bytes) -> None:
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

    def __init__(self, pid: int, output: trio.abc.ReceiveStream, wait: Callable[[], Awaitable[int]]) -> None:
        self.pid = pid
        self.output = output
        self.wait = wait


async def _launch_cold(command: list[str], cwd: Path) -> _Launched:
    """A brand-new interpreter: the reference behaviour, and the fallback."""
    process = await trio.lowlevel.open_process(
        command,
        cwd=str(cwd),
        env=isolated_env(),
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
    runs fall back to a cold interpreter each.
    """

    def __init__(self, process: trio.Process, folder: Path) -> None:
        self._process = process
        self._folder = folder
        self.socket_path = folder / "warm.sock"

    @classmethod
    async def start(cls, imports: Sequence[str] = ()) -> WarmWorker | None:
        if os.environ.get("COURSE_WARM", "1") == "0" or not hasattr(os, "fork"):
            return None
        folder = Path(tempfile.mkdtemp(prefix="course-warm-"))
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(folder / "warm.sock"))
            listener.listen(64)
            process = await trio.lowlevel.open_process(
                [sys.executable, "-P", str(Path(__file__).with_name("warm.py")), str(listener.fileno()), *imports],
                cwd=str(folder),
                env=isolated_env(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                pass_fds=(listener.fileno(),),
                start_new_session=True,
            )
        finally:
            listener.close()
        worker = cls(process, folder)
        assert process.stdout is not None
        with trio.move_on_after(WARM_START_LIMIT):
            if (await process.stdout.receive_some(64)).startswith(b"ready"):
                return worker
        worker.close()
        return None

    async def launch(self, args: list[str], cwd: Path) -> _Launched:
        read_end, write_end = os.pipe()
        connection = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            await connection.connect(str(self.socket_path))
            request = json.dumps({"cwd": str(cwd), "args": args}).encode() + b"\n"
            fds = array.array("i", [write_end]).tobytes()
            await connection.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
        except BaseException:
            os.close(read_end)
            connection.close()
            raise
        finally:
            os.close(write_end)
        lines = _Lines(connection)
        pid = int((await lines.next())["pid"])

        async def wait() -> int:
            try:
                return int((await lines.next())["exit"])
            finally:
                connection.close()

        return _Launched(pid, trio.lowlevel.FdStream(read_end), wait)

    def close(self) -> None:
        try:
            os.killpg(self._process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        shutil.rmtree(self._folder, ignore_errors=True)


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
) -> RunResult:
    """Run pytest in `snapshot` in a process and process group of its own.

    Waits at most `time_limit` seconds; then the whole process group is
    killed, children included, and the result says so.
    """
    snapshot = snapshot.resolve()
    with tempfile.TemporaryDirectory(prefix="course-run-") as scratch:
        report = Path(scratch) / "report.xml"
        command = pytest_command(snapshot, report, selection, plugins)
        output = _BoundedOutput()
        started = time.monotonic()
        exit_code: int | None = None
        if worker is not None:
            launched = await worker.launch(command[3:], snapshot)
        else:
            launched = await _launch_cold(command, snapshot)
        try:
            with trio.move_on_after(time_limit):
                await _drain(launched.output, output)
                exit_code = await launched.wait()
        finally:
            _kill_group(launched.pid)
            with trio.CancelScope(shield=True):
                if exit_code is None:
                    with trio.move_on_after(5):
                        await launched.wait()
        duration = time.monotonic() - started
        tests = _read_report(report, snapshot)
    outcome = TIMEOUT if exit_code is None else _outcome(exit_code, tests)
    return RunResult(
        outcome=outcome,
        exit_code=exit_code,
        tests=tests,
        output=output.text(),
        duration=duration,
        time_limit=time_limit,
        args=tuple(selection),
    )


async def _drain(stream: trio.abc.ReceiveStream, output: _BoundedOutput) -> None:
    async with stream:
        while True:
            chunk = await stream.receive_some(65536)
            if not chunk:
                return
            output.add(chunk)


def _kill_group(pid: int) -> None:
    """Kill the run and anything it left behind in its process group."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _outcome(exit_code: int, tests: tuple[TestCase, ...]) -> str:
    if exit_code == 4 and any(case.outcome == "error" and not case.name for case in tests):
        return COLLECTION_ERROR  # node ids in a module that cannot be imported
    return {0: PASSED, 1: FAILED, 2: COLLECTION_ERROR, 5: NO_TESTS}.get(exit_code, CRASHED)


def _read_report(report: Path, snapshot: Path) -> tuple[TestCase, ...]:
    """Read test verdicts from pytest's JUnit XML (absent when pytest never got that far)."""
    try:
        tree = ElementTree.parse(report)
    except (OSError, ElementTree.ParseError):
        return ()
    cases = []
    for element in tree.iter("testcase"):
        cases.append(_case(element, snapshot))
    return tuple(cases)


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
    ) -> RunResult:
        """One isolated run; waits for a free core first."""
        async with self._limiter:
            return await run_pytest(
                snapshot, selection, plugins=plugins, time_limit=time_limit, worker=self.worker
            )
