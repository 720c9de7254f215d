"""The tool contract: one call in, exactly one ToolResultMessage out, whatever happens.

The model asks; it cannot be trusted to ask for a tool that exists, with
arguments that parsed and fit. The tool runs; it cannot be trusted not to
raise, or to return what it promised. Every one of those failures becomes an
error result the model can read and act on, so the transcript keeps a result
for every call and the agent loop never has to catch anything.

The one thing this module never turns into a result is trio.Cancelled from
outside: that belongs to whoever cancelled, and must keep unwinding.
"""

from __future__ import annotations

from typing import Any

import trio

from tiny_pi.abort import AbortSignal, cancel_on_abort
from tiny_pi.messages import TextContent, ToolCall, ToolResultMessage, now_ms, text
from tiny_pi.schema import schema_problems
from tiny_pi.tools import Tool, ToolRegistry


async def execute_tool_call(
    call: ToolCall, registry: ToolRegistry, *, signal: AbortSignal
) -> ToolResultMessage:
    """Run `call` and return its one result; never raises, except to let a cancellation through."""
    tool = registry.get(call.name)
    if tool is None:
        available = ", ".join(registry.names) or "none"
        return error_result(call, f"Tool {call.name!r} not found (available tools: {available})")
    if call.arguments is None:
        return error_result(call, unparsed_message(call))
    problems = schema_problems(tool.parameters, call.arguments)
    if problems:
        return error_result(call, f"Invalid arguments for tool {call.name!r}: " + "; ".join(problems))
    if signal.aborted:
        return error_result(call, f"Tool {call.name!r} was not run: the run was aborted")
    denial = await registry.before_tool_call(call)
    if denial is not None:  # an extension's hook said no: the tool never runs
        return error_result(call, denial)
    return await run_tool(tool, call, signal)


async def run_tool(tool: Tool, call: ToolCall, signal: AbortSignal) -> ToolResultMessage:
    """Run a checked call inside a scope that the abort signal cancels."""
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(cancel_on_abort, signal, scope)
            result = await attempt(tool, call, signal)
            nursery.cancel_scope.cancel()  # the tool is over: stop watching the signal
    if scope.cancel_called:  # cut off, or it finished while ignoring the abort
        return error_result(call, f"Tool {call.name!r} was aborted before it finished")
    return result


async def attempt(tool: Tool, call: ToolCall, signal: AbortSignal) -> ToolResultMessage:
    """One run of the tool: its content blocks, or its exception, as a result."""
    try:
        content = await tool.execute(call.arguments, signal=signal)
    except Exception as error:  # the tool's failure is a result, not a crash
        return error_result(call, f"Tool {call.name!r} failed: {type(error).__name__}: {error}")
    return result_of(call, content)


def result_of(call: ToolCall, content: Any) -> ToolResultMessage:
    """The success result, once the tool's return value proves to be content blocks."""
    if isinstance(content, (str, bytes)) or not isinstance(content, (list, tuple)):
        return error_result(call, returned_wrong_type(call, content))
    if not all(isinstance(block, TextContent) for block in content):
        return error_result(call, returned_wrong_type(call, content))
    return ToolResultMessage(
        tool_call_id=call.id,
        tool_name=call.name,
        content=tuple(content),
        is_error=False,
        timestamp=now_ms(),
    )


def error_result(call: ToolCall, message: str) -> ToolResultMessage:
    """A result that tells the model what went wrong with its call."""
    return ToolResultMessage(
        tool_call_id=call.id,
        tool_name=call.name,
        content=(text(message),),
        is_error=True,
        timestamp=now_ms(),
    )


def unparsed_message(call: ToolCall) -> str:
    """Arguments that never became a JSON object: a cut-off or garbled reply is never run."""
    return (
        f"Tool {call.name!r} was not run: its arguments are not a JSON object "
        f"(raw text: {call.raw_arguments!r})"
    )


def returned_wrong_type(call: ToolCall, content: Any) -> str:
    """A tool broke its promise: name the type it returned instead of text blocks."""
    return f"Tool {call.name!r} returned {type(content).__name__}, not a list of text blocks"
