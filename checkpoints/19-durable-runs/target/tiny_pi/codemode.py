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
    execution = Execution(dict(tools or {}), timeout)
    try:
        process = await trio.lowlevel.open_process(
            [sys.executable, str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except OSError as error:
        return ScriptResult(False, error=ScriptError("sandbox", f"the worker did not start: {error}"))
    try:
        start = {"type": "start", "code": code, "tools": list(execution.tools), "memory_limit": memory_limit}
        return await execution.run(process, start, signal)
    finally:
        with trio.CancelScope(shield=True):  # on every path, a cancellation from outside too
            await end_process(process)


async def end_process(process: trio.Process) -> None:
    """Kill the worker if it still runs, and wait for it: nothing outlives the script."""
    if process.returncode is None:
        process.kill()
    await process.wait()
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            await stream.aclose()


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
        with trio.move_on_after(self.timeout) as deadline:
            async with trio.open_nursery() as nursery:
                if signal is not None:
                    nursery.start_soon(self.watch, signal, nursery.cancel_scope)
                self.ending = await self.converse(process, start, nursery)
                nursery.cancel_scope.cancel()  # the ending is known: stop watch, and the calls still running
        if deadline.cancelled_caught and self.ending is None:
            self.ending = self.failed("timeout", f"the script ran past its deadline of {self.timeout:g} s")
        assert self.ending is not None
        return attrs.evolve(self.ending, output=tuple(self.output), pid=process.pid)

    async def watch(self, signal: AbortSignal, scope: trio.CancelScope) -> None:
        await signal.wait()
        self.ending = self.failed("aborted", "the run was aborted")
        scope.cancel()

    async def converse(self, process: trio.Process, start: dict[str, Any], nursery: trio.Nursery) -> ScriptResult:
        """Send `start`, then answer the worker's lines until its `done` (or its end)."""
        await self.send(process, start)
        lines = LineReader(process.stdout)
        while True:
            try:
                line = await lines.next()
            except ValueError as error:  # a value, arguments or output over MAX_LINE
                return self.failed("script", str(error))
            if line is None:
                status = await process.wait()
                return self.failed("sandbox", f"the worker exited with status {status} before the script settled")
            try:
                message = json.loads(line)
                kind = message["type"]
            except (ValueError, KeyError, TypeError):
                return self.failed("sandbox", "the worker sent a line that is not a protocol message")
            if kind == "output":
                self.note(str(message["text"]))
            elif kind == "call":
                nursery.start_soon(self.answer, process, message)
            elif kind == "done":
                return self.finished(message)

    def finished(self, message: dict[str, Any]) -> ScriptResult:
        """The worker's `done`: the value parsed here, on the host side, or the script's error."""
        if message["ok"]:
            value = None if message["value"] is None else json.loads(message["value"])
            return ScriptResult(True, value)
        error = message["error"]
        return ScriptResult(False, error=ScriptError("script", str(error["message"]), str(error["name"])))

    async def answer(self, process: trio.Process, message: dict[str, Any]) -> None:
        """Run one tool the script called and send its result back; its failure becomes the script's error."""
        try:
            tool = self.tools.get(message["name"])
            if tool is None:
                raise LookupError(f"no tool is called {message['name']!r}")
            value = await tool(json.loads(message["args"]), message["id"])  # n: the script's n-th call
            reply = {"type": "result", "id": message["id"], "ok": True, "value": json.dumps(value)}
        except Exception as error:  # the script sees it thrown where it awaited
            reply = {"type": "result", "id": message["id"], "ok": False, "error": str(error) or type(error).__name__}
        await self.send(process, reply)

    async def send(self, process: trio.Process, message: dict[str, Any]) -> None:
        """One JSON line to the worker; a worker that is gone is noticed by the reader instead."""
        assert process.stdin is not None
        async with self.write_lock:
            try:
                await process.stdin.send_all((json.dumps(message) + "\n").encode())
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass

    def note(self, line: str) -> None:
        """Keep console output up to OUTPUT_LIMIT characters, then one line that says it was cut."""
        if self.cut:
            return
        room = OUTPUT_LIMIT - self.output_chars
        if len(line) <= room:
            self.output.append(line)
            self.output_chars += len(line)
            return
        if room > 0:
            self.output.append(line[:room])
        self.output.append(f"[output cut at {OUTPUT_LIMIT} characters]")
        self.output_chars, self.cut = OUTPUT_LIMIT, True

    def failed(self, kind: str, message: str) -> ScriptResult:
        return ScriptResult(False, error=ScriptError(kind, message))


class LineReader:
    """Lines from a byte stream, one at a time; None at its end."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.buffer = bytearray()

    async def next(self) -> str | None:
        """The next line, without its newline; None at the end; a ValueError for one over MAX_LINE bytes."""
        while b"\n" not in self.buffer and len(self.buffer) <= MAX_LINE:
            chunk = await self.stream.receive_some(65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, _, rest = bytes(self.buffer).partition(b"\n")
        if len(line) > MAX_LINE:
            raise ValueError(f"the script sent more than {MAX_LINE} bytes in one line (a value, arguments or output)")
        self.buffer = bytearray(rest)
        return line.decode("utf-8", errors="replace")


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
        return {tool.name: self.caller(tool.name) for tool in self.registry.callable()}

    def caller(self, name: str) -> ScriptTool:
        async def call(arguments: Any, number: int) -> Any:
            return await self.call(name, arguments, number)

        return call

    async def call(self, name: str, arguments: Any, number: int) -> dict[str, Any]:
        """The script's call `number` through the tool contract, in script scope: `{text, details?}`, or it raises."""
        self.count += 1
        call = ToolCall(id=f"{self.parent_id}/{number}", name=name,
                        arguments=arguments if isinstance(arguments, dict) else None,
                        raw_arguments=json.dumps(arguments))
        record = self.start(call, arguments)
        try:
            result = await execute_tool_call(call, self.registry, signal=self.signal, scope=SCRIPT)
        except BaseException:  # cancelled (trio may wrap it in a group): the script ended before its answer
            self.settle(record, "cancelled")
            raise
        if result.is_error:
            message = text_of(result)
            self.settle(record, "cancelled" if self.signal.aborted else "error", message)
            raise RuntimeError(message)
        self.settle(record, "ok")
        reply: dict[str, Any] = {"text": text_of(result)}
        if result.details is not None:
            reply["details"] = result.details
        return reply

    def start(self, call: ToolCall, arguments: Any) -> CallRecord | None:
        """The call's record, while there is room; its arguments only within the byte limits."""
        if len(self.records) >= MAX_RECORDS:
            self.complete = False
            return None
        size = len(json.dumps(arguments).encode())
        record = CallRecord(call.id, call.name, argument_bytes=size)
        if size > MAX_ARGUMENT_BYTES or self.argument_bytes + size > MAX_TOTAL_ARGUMENT_BYTES:
            self.complete = False
        else:
            record.arguments = arguments
            self.argument_bytes += size
        self.records.append(record)
        return record

    def settle(self, record: CallRecord | None, status: str, error: str | None = None) -> None:
        if record is None:
            return
        record.status = status
        if error is not None:
            record.error = error[:MAX_ERROR_CHARS]

    def summary(self) -> dict[str, Any]:
        """What the parent result's details keep: the records, how many calls, whether all are there."""
        records = sorted(self.records, key=lambda record: int(record.id.rsplit("/", 1)[1]))  # the script's order
        return {"calls": [attrs.asdict(record) for record in records], "count": self.count,
                "complete": self.complete}


CODE_PARAMETERS = {
    "type": "object",
    "properties": {"code": {"type": "string", "description": "the body of an async JavaScript function"}},
    "required": ["code"],
}


def codemode_description(registry: ToolRegistry) -> str:
    """What the model reads: how a script calls tools, and the tools it may call."""
    lines = [
        "Run JavaScript in a sandbox: `code` is the body of an async function; `return` a JSON value.",
        "Call a tool with `await tools.NAME(args)`: it gives {text, details?} or throws the tool's error.",
        "Promise.all runs calls at once. console.log prints; there are no timers, files, network or modules.",
        "Tools a script may call:",
    ]
    for tool in registry.callable():
        first = tool.description.strip().split("\n", 1)[0]
        lines.append(f"- tools.{tool.name}: {first}")
    return "\n".join(lines)


def codemode_tool(
    registry: ToolRegistry, *, timeout: float = DEFAULT_TIMEOUT, memory_limit: int = DEFAULT_MEMORY_LIMIT,
) -> Tool:
    """The model-only `codemode` tool of `registry`: register it there (`registry.register(...)`)."""

    async def execute(arguments: dict[str, Any], *, signal: AbortSignal) -> Reply:
        nested = NestedCalls(registry, current_call_id(), signal)
        result = await run_script(arguments["code"], nested.tools(), timeout=timeout,
                                  memory_limit=memory_limit, signal=signal)
        details = {"ok": result.ok, "output": list(result.output), "nested_calls": nested.summary()}
        if result.error is not None:
            details["error"] = {"kind": result.error.kind, "message": result.error.message}
        return Reply([text(report(result))], details=details, is_error=not result.ok)

    return Tool(CODEMODE, codemode_description(registry), CODE_PARAMETERS, execute, exposure=MODEL_ONLY)


def report(result: ScriptResult) -> str:
    """The text the model reads: the output, then the value as JSON, or the error."""
    lines = list(result.output)
    if result.ok:
        lines.append(json.dumps(result.value, ensure_ascii=False))
    else:
        assert result.error is not None
        name = f"{result.error.name}: " if result.error.name else ""
        lines.append(f"Script failed ({result.error.kind}): {name}{result.error.message}")
    return "\n".join(lines)
