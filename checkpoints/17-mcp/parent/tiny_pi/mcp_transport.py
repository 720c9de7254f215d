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
        raise NotImplementedError("lab 17.2: write StdioTransport.send")

    async def receive(self) -> Message | ProtocolError | None:
        """The next message, a ProtocolError for a line that is not one, or None at the end of stdout."""
        raise NotImplementedError("lab 17.2: write StdioTransport.receive")

    async def close(self) -> int:
        """End stdin, then SIGTERM, then SIGKILL, each after a grace; the exit status once it is gone."""
        raise NotImplementedError("lab 17.2: write StdioTransport.close")

    async def end_input(self) -> None:
        """Close the server's stdin: a server that reads to the end of its input then exits."""
        raise NotImplementedError("lab 17.2: write StdioTransport.end_input")

    async def exited_within(self, seconds: float) -> bool:
        """Wait up to `seconds` for the process to exit; whether it did."""
        raise NotImplementedError("lab 17.2: write StdioTransport.exited_within")
