"""Run a RunSpec on a run host and read the verdict; a pool of hosts for one command.

Every point here is a bug someone hit: two snapshots both contain `tiny_pi`,
so a shared process imports the wrong one (each run is a fresh child that
has imported pytest, never `tiny_pi`); a stream that never ends hangs the
whole course (the host stops the run at its time limit); a test prints
100 MB (output is kept as head and tail); a summary line is not a contract
(verdicts come from the host's report lines).
"""

from __future__ import annotations

import array
import json
import os
import socket
import sys
import time
from typing import Sequence

import trio

from course import hosts
from course.errors import CourseError, UsageError
from course.results import Reports, RunResult, outcome_of
from course.runspec import RunSpec
from course.safe_text import printable

OUTPUT_HEAD = 64 * 1024
OUTPUT_TAIL = 192 * 1024
REPORTS_LIMIT = 64 * 1024 * 1024  # report lines read at most per run
START_LIMIT = 20.0  # seconds a host may take to import pytest
# After the host reported the end of a run (everything of it killed), the rest
# of its output is read for at most this long.
OUTPUT_GRACE = 2.0
# How long past the time limit the course waits for a host that went silent.
HOST_GRACE = 10.0


class HostError(CourseError):
    """A run host did not start, went away or broke its protocol."""


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
        middle = f"\n[... {self.dropped} bytes of output left out ...]\n".encode() if self.dropped else b""
        return bytes(self.head + middle + self.tail).decode("utf-8", "replace")


class Host:
    """The course's side of one run host: runs one spec at a time."""

    def __init__(self, spawned: hosts.Spawned) -> None:
        self.spawned = spawned
        self.control = trio.socket.from_stdlib_socket(spawned.control)
        self._buffer = b""
        self.broken = False

    @classmethod
    async def start(cls, spawned: hosts.Spawned) -> Host:
        host = cls(spawned)
        try:
            with trio.move_on_after(START_LIMIT):
                message = await host._next()
                if message.get("ready") is True:
                    return host
                raise HostError(f"the test runner could not start ({message.get('error')})")
            raise HostError(f"the test runner did not start within {START_LIMIT:g} s")
        except HostError as error:
            host.close()
            raise HostError(f"{error}: is pytest installed for {sys.executable}?") from None
        except BaseException:
            host.close()
            raise

    async def _next(self) -> dict[str, object]:
        while b"\n" not in self._buffer:
            chunk = await self.control.recv(4096)
            if not chunk:
                raise HostError("the run host went away")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        message = json.loads(line)
        if not isinstance(message, dict):
            raise HostError(f"the run host sent {message!r}")
        return message

    async def run(self, spec: RunSpec) -> RunResult:
        """Run `spec` on this host; on any way out but a verdict, the host is closed."""
        output_read, output_write = os.pipe()
        reports_read, reports_write = os.pipe()
        fds = array.array("i", [output_write, reports_write]).tobytes()
        started = time.monotonic()
        try:
            request = json.dumps(spec.message()).encode() + b"\n"
            await self.control.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
        except OSError as error:
            for fd in (output_read, reports_read):
                os.close(fd)
            self.close()
            raise HostError(f"the run host went away: {error}") from None
        finally:
            os.close(output_write)
            os.close(reports_write)
        output = _BoundedOutput()
        reports = Reports()
        ended: dict[str, object] = {}
        try:
            async with trio.open_nursery() as nursery:
                drained = trio.Event()

                async def read_all() -> None:
                    async with trio.open_nursery() as readers:
                        readers.start_soon(_drain, trio.lowlevel.FdStream(output_read), output)
                        readers.start_soon(_read_reports, trio.lowlevel.FdStream(reports_read), reports)
                    drained.set()

                nursery.start_soon(read_all)
                try:
                    with trio.move_on_after(spec.time_limit + HOST_GRACE):
                        await self._next()  # {"pid": N}
                        ended = await self._next()
                except HostError:
                    ended = {"exit": None}  # a test killed its host: the kernel killed the run
                if not ended:
                    self.close(patience=0)  # silent past its limit (stopped?): ended at once, runs and all
                elif "timed_out" not in ended:
                    self.close()
                with trio.move_on_after(OUTPUT_GRACE):
                    await drained.wait()
                nursery.cancel_scope.cancel()
        except BaseException:
            self.close()  # cancelled (Ctrl-C) or the host broke: it sweeps the run as it exits
            raise
        exit_code = ended.get("exit")
        timed_out = bool(ended.get("timed_out")) or not ended
        if not isinstance(exit_code, int):
            exit_code = None
        return RunResult(
            outcome=outcome_of(exit_code, timed_out, reports),
            exit_code=exit_code,
            tests=reports.cases(),
            output=printable(output.text()),
            duration=time.monotonic() - started,
            time_limit=spec.time_limit,
            args=spec.args,
            reported=reports.finish is not None,
            running=reports.running if timed_out else "",
            memory_limit=spec.memory_limit,
        )

    def close(self, patience: float = 5.0) -> None:
        self.broken = True
        self.spawned.kill(patience)


async def _drain(stream: trio.lowlevel.FdStream, output: _BoundedOutput) -> None:
    async with stream:
        while chunk := await stream.receive_some(65536):
            output.add(chunk)


async def _read_reports(stream: trio.lowlevel.FdStream, reports: Reports) -> None:
    pending = b""
    total = 0
    async with stream:
        while chunk := await stream.receive_some(65536):
            total += len(chunk)
            if total > REPORTS_LIMIT:
                continue  # a test flooding the reporter's descriptor: the rest is not read
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                reports.feed(line)


def parallel_runs() -> int:
    """How many runs a command makes at once: COURSE_JOBS if set, else one per core.

    Each run at once needs a host of its own, and a host costs an interpreter
    and an import of pytest. Where several commands already share the cores
    (a class's practice dirs checked in a loop, the course's own test suite
    under pytest-xdist), fewer at once starts fewer hosts and loses no time.
    """
    value = os.environ.get("COURSE_JOBS", "")
    if not value:
        return max(1, os.cpu_count() or 1)
    if not (value.isascii() and value.isdigit()) or int(value) < 1:
        raise UsageError(f"COURSE_JOBS must be a whole number of at least 1, not {value!r}")
    return int(value)


class RunPool:
    """The runs of one command: parallel up to `parallel_runs()`, on hosts it starts and ends.

    Use as `async with RunPool() as pool:`; every host lives exactly as long
    as the block. A host serves one run at a time and is reused for the next
    (so a command's second run costs a fork, not a start-up), unless
    `reuse` is off or COURSE_WARM=0, when every run gets a host of its own.
    """

    def __init__(self, preload: Sequence[str] = (), *, reuse: bool = True) -> None:
        self._limiter = trio.CapacityLimiter(parallel_runs())
        self._preload = tuple(dict.fromkeys(preload))
        self._reuse = reuse and os.environ.get("COURSE_WARM", "1") != "0"
        self._idle: list[Host] = []
        self._all: list[Host] = []
        self.spawned_hosts = 0  # how many hosts this pool started (tests count them)

    async def __aenter__(self) -> RunPool:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        for host in self._all:
            host.close()
        self._idle.clear()
        self._all.clear()

    async def _host(self, env: dict[str, str]) -> Host:
        for host in self._idle:
            if host.spawned.env == env:
                self._idle.remove(host)
                return host
        adopted = hosts.take(env) if self._reuse else None
        host = None
        if adopted is not None:
            try:
                host = await Host.start(adopted)
            except HostError:
                pass  # the early host died (killed, out of memory): start one now
        if host is None:
            self.spawned_hosts += 1
            host = await Host.start(hosts.spawn(self._preload, env))
        self._all.append(host)
        return host

    async def run(self, spec: RunSpec) -> RunResult:
        """One isolated run; waits for a free core first."""
        async with self._limiter:
            host = await self._host(dict(spec.env))
            result = await host.run(spec)
            if self._reuse and not host.broken:
                self._idle.append(host)
            else:
                host.close()
            return result

