"""The stdio transport: an MCP server is a child process that speaks JSON-RPC lines on its stdin and stdout.

The client writes one message per line to the server's stdin and reads
the server's stdout through chapter 17's LineFramer. `receive` gives the
next message, a ProtocolError for a line that is not one (the connection
lives on: a server that prints a stray line to stdout has not hung up),
or None once stdout has ended.

Closing takes three steps, each after a grace: end stdin (a well-behaved
server exits when its input ends), then SIGTERM, then SIGKILL. Close
always waits for the process, so when it returns the server is gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections import deque
from typing import Mapping, Sequence

import trio

from tiny_pi.jsonrpc import LineFramer, Message, ProtocolError, decode_line, encode

CLOSE_GRACE = 2.0  # seconds for each of the first two steps of close


class TransportClosed(ConnectionError):
    """The server's pipes are closed: nothing more can be sent."""


class StdioTransport:
    """One server process and its two pipes."""

    def __init__(self, process: trio.Process, *, grace: float = CLOSE_GRACE) -> None:
        self.process = process
        self.grace = grace
        self.framer = LineFramer()
        self.lines: deque[bytes] = deque()
        self.ended = False
        self.write_lock = trio.Lock()

    @classmethod
    async def start(
        cls, command: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
        grace: float = CLOSE_GRACE,
    ) -> StdioTransport:
        """Start the server; an OSError when its command cannot run (no such file, not executable)."""
        process = await trio.lowlevel.open_process(
            list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env={**os.environ, **(env or {})}, cwd=cwd,
        )
        return cls(process, grace=grace)

    @property
    def pid(self) -> int:
        return self.process.pid

    async def send(self, message: Message) -> None:
        """Write one message as one line; a TransportClosed once the server's stdin is gone."""
        assert self.process.stdin is not None
        async with self.write_lock:  # two tasks' lines must never interleave
            try:
                await self.process.stdin.send_all(encode(message))
            except (trio.BrokenResourceError, trio.ClosedResourceError) as error:
                raise TransportClosed("the MCP server's stdin is closed") from error

    async def receive(self) -> Message | ProtocolError | None:
        """The next message, a ProtocolError for a line that is not one, or None at the end of stdout."""
        assert self.process.stdout is not None
        while not self.lines:
            if self.ended:
                return None
            try:
                chunk = await self.process.stdout.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                chunk = b""
            if not chunk:
                self.ended = True
                if self.framer.pending.strip():
                    return ProtocolError("the server's output ended in the middle of a line")
                return None
            self.lines.extend(self.framer.feed(chunk))
        try:
            return decode_line(self.lines.popleft())
        except ProtocolError as error:
            return error

    async def close(self) -> int:
        """End stdin, then SIGTERM, then SIGKILL, each after a grace; the exit status once it is gone."""
        with trio.CancelScope(shield=True):  # the server must not outlive a caller that was cancelled
            await self.end_input()
            if not await self.exited_within(self.grace):
                self.process.send_signal(signal.SIGTERM)
                if not await self.exited_within(self.grace):
                    self.process.kill()
            status = await self.process.wait()
            if self.process.stdout is not None:
                await self.process.stdout.aclose()
            return status

    async def end_input(self) -> None:
        """Close the server's stdin: a server that reads to the end of its input then exits."""
        if self.process.stdin is not None:
            await self.process.stdin.aclose()

    async def exited_within(self, seconds: float) -> bool:
        """Wait up to `seconds` for the process to exit; whether it did."""
        with trio.move_on_after(seconds):
            await self.process.wait()
        return self.process.returncode is not None
