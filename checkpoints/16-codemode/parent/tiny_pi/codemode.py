"""Codemode: the model writes a script, and the script calls tools in a sandbox.

    result = await run_script("return 1 + 1")              # ScriptResult(ok=True, value=2, ...)
    registry.register(codemode_tool(registry))            # the model-only `codemode` tool

`run_script` starts a fresh worker process (tiny_pi/codemode_worker.py, one
QuickJS interpreter) for every script, talks JSON lines to it, and ends it
on every path: a script that returns or throws, one that can never settle,
one past its deadline, an abort, a worker that dies. It never raises for
anything the script did: every ending is a ScriptResult, ok or not.

`NestedCalls` turns the registry's callable set into the script's `tools`:
each `await tools.NAME(args)` is a ToolCall with id `<parent>/<n>`, run
through chapter 06's execute_tool_call in script scope. The nested calls
never enter the transcript; the parent result's details keep a bounded
record of them (names, statuses, small arguments; never their results).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Awaitable, Callable, Mapping

import attrs
import trio
from attrs import define, frozen

from tiny_pi.abort import AbortSignal
from tiny_pi.messages import ToolCall, text, text_of
from tiny_pi.tool_execution import Reply, current_call_id, execute_tool_call
from tiny_pi.tool_exposure import MODEL_ONLY, SCRIPT
from tiny_pi.tools import Tool, ToolRegistry

WORKER = Path(__file__).with_name("codemode_worker.py")
DEFAULT_TIMEOUT = 30.0  # seconds for the whole script, its tool calls included
DEFAULT_MEMORY_LIMIT = 64 * 1024 * 1024  # bytes the interpreter may allocate
OUTPUT_LIMIT = 8000  # characters of console output kept per script
MAX_LINE = 4 * 1024 * 1024  # bytes of one protocol line from the worker
MAX_RECORDS = 64  # nested calls recorded; later ones still run, and are counted
MAX_ARGUMENT_BYTES = 2048  # bytes of one call's arguments kept in its record
MAX_TOTAL_ARGUMENT_BYTES = 8192  # bytes of arguments kept over all records
MAX_ERROR_CHARS = 300  # characters of a failed call's message kept in its record
CODEMODE = "codemode"

ScriptTool = Callable[[Any, int], Awaitable[Any]]  # await tool(args, n) -> a JSON value; raise to fail


@frozen
class ScriptError:
    """Why a script did not succeed: `kind` is script, timeout, aborted or sandbox."""

    kind: str
    message: str
    name: str | None = None  # the script's error class (TypeError, SyntaxError, ...)


@frozen
class ScriptResult:
    """One script's ending: its value (parsed JSON) or its error, and what it printed."""

    ok: bool
    value: Any = None
    error: ScriptError | None = None
    output: tuple[str, ...] = ()
    pid: int | None = None  # the worker's process id, ended before this result exists


async def run_script(
    code: str, tools: Mapping[str, ScriptTool] | None = None, *, timeout: float = DEFAULT_TIMEOUT,
    memory_limit: int = DEFAULT_MEMORY_LIMIT, signal: AbortSignal | None = None,
) -> ScriptResult:
    """Run `code` (an async JavaScript function body) in a fresh worker; never raises for the script."""
    raise NotImplementedError("lab 16.2: run_script")


async def end_process(process: trio.Process) -> None:
    """Kill the worker if it still runs, and wait for it: nothing outlives the script."""
    raise NotImplementedError("lab 16.2: end_process")


class Execution:
    """The host's side of one script: the conversation with its worker, and how it ended."""

    def __init__(self, tools: dict[str, ScriptTool], timeout: float) -> None:
        self.tools = tools
        self.timeout = timeout
        self.output: list[str] = []
        self.output_chars = 0
        self.cut = False  # the output reached OUTPUT_LIMIT: what follows is dropped
        self.ending: ScriptResult | None = None
        self.write_lock = trio.Lock()

    async def run(self, process: trio.Process, start: dict[str, Any], signal: AbortSignal | None) -> ScriptResult:
        """Converse until `done`, the deadline, an abort or the worker's end."""
        raise NotImplementedError("lab 16.2: run")

    async def watch(self, signal: AbortSignal, scope: trio.CancelScope) -> None:
        raise NotImplementedError("lab 16.2: watch")

    async def converse(self, process: trio.Process, start: dict[str, Any], nursery: trio.Nursery) -> ScriptResult:
        """Send `start`, then answer the worker's lines until its `done` (or its end)."""
        raise NotImplementedError("lab 16.2: converse")

    def finished(self, message: dict[str, Any]) -> ScriptResult:
        """The worker's `done`: the value parsed here, on the host side, or the script's error."""
        raise NotImplementedError("lab 16.2: finished")

    async def answer(self, process: trio.Process, message: dict[str, Any]) -> None:
        """Run one tool the script called and send its result back; its failure becomes the script's error."""
        raise NotImplementedError("lab 16.2: answer")

    async def send(self, process: trio.Process, message: dict[str, Any]) -> None:
        """One JSON line to the worker; a worker that is gone is noticed by the reader instead."""
        raise NotImplementedError("lab 16.2: send")

    def note(self, line: str) -> None:
        """Keep console output up to OUTPUT_LIMIT characters, then one line that says it was cut."""
        raise NotImplementedError("lab 16.2: note (its cap: lab 16.4)")

    def failed(self, kind: str, message: str) -> ScriptResult:
        return ScriptResult(False, error=ScriptError(kind, message))


class LineReader:
    """Lines from a byte stream, one at a time; None at its end."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.buffer = bytearray()

    async def next(self) -> str | None:
        """The next line, without its newline; None at the end; a ValueError for one over MAX_LINE bytes."""
        raise NotImplementedError("lab 16.2: next")


@define
class CallRecord:
    """One nested call as the parent result keeps it: never its result."""

    id: str
    name: str
    status: str = "running"  # then ok, error or cancelled
    arguments: Any = None  # left out (None) when over the byte limits
    argument_bytes: int = 0
    error: str | None = None


class NestedCalls:
    """The script's `tools` for one codemode call, and the bounded record of what it called."""

    def __init__(self, registry: ToolRegistry, parent_id: str, signal: AbortSignal) -> None:
        self.registry = registry
        self.parent_id = parent_id
        self.signal = signal
        self.records: list[CallRecord] = []
        self.count = 0
        self.complete = True  # False once a record was left out or its arguments were
        self.argument_bytes = 0

    def tools(self) -> dict[str, ScriptTool]:
        """One script tool per tool of the callable set, in registration order."""
        raise NotImplementedError("lab 16.3: tools")

    def caller(self, name: str) -> ScriptTool:
        raise NotImplementedError("lab 16.3: caller")

    async def call(self, name: str, arguments: Any, number: int) -> dict[str, Any]:
        """The script's call `number` through the tool contract, in script scope: `{text, details?}`, or it raises."""
        raise NotImplementedError("lab 16.3: call")

    def start(self, call: ToolCall, arguments: Any) -> CallRecord | None:
        """The call's record, while there is room; its arguments only within the byte limits."""
        raise NotImplementedError("lab 16.3: start")

    def settle(self, record: CallRecord | None, status: str, error: str | None = None) -> None:
        raise NotImplementedError("lab 16.3: settle")

    def summary(self) -> dict[str, Any]:
        """What the parent result's details keep: the records, how many calls, whether all are there."""
        raise NotImplementedError("lab 16.3: summary")


CODE_PARAMETERS = {
    "type": "object",
    "properties": {"code": {"type": "string", "description": "the body of an async JavaScript function"}},
    "required": ["code"],
}


def codemode_description(registry: ToolRegistry) -> str:
    """What the model reads: how a script calls tools, and the tools it may call."""
    raise NotImplementedError("lab 16.3: codemode_description (its final text: lab 16.5)")


def codemode_tool(
    registry: ToolRegistry, *, timeout: float = DEFAULT_TIMEOUT, memory_limit: int = DEFAULT_MEMORY_LIMIT,
) -> Tool:
    """The model-only `codemode` tool of `registry`: register it there (`registry.register(...)`)."""
    raise NotImplementedError("lab 16.3: codemode_tool")


def report(result: ScriptResult) -> str:
    """The text the model reads: the output, then the value as JSON, or the error."""
    raise NotImplementedError("lab 16.3: report")
