"""The tool contract: one call in, exactly one ToolResultMessage out, whatever happens.

The model asks; it cannot be trusted to ask for a tool that exists, with
arguments that parsed and fit. The tool runs; it cannot be trusted not to
raise, or to return what it promised. Every one of those failures becomes an
error result the model can read and act on, so the transcript keeps a result
for every call and the agent loop never has to catch anything.

The one thing this module never turns into a result is trio.Cancelled from
outside: that belongs to whoever cancelled, and must keep unwinding.

From chapter 15 on a call also has a caller, its scope: the model may call
what the request it answered declared, a script what the registry's
`callable()` holds. The scope is checked right after the unknown-tool check,
before the arguments are looked at; a refused call gets its error result
like any other, and its tool never runs.

From chapter 16 on a tool may return a Reply instead of its blocks, when it
has details for the program besides the text for the model, or its own
verdict (codemode's failed script); and a running tool can ask for the id of
the call it serves (`current_call_id()`), to name the calls it makes itself.
A tool that fails inside a nursery of its own is described by the one
exception that failed it, not by the group trio wrapped it in.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Sequence

import attrs
import trio
from attrs import field, frozen

from tiny_pi.abort import AbortSignal, cancel_on_abort
from tiny_pi.messages import TextContent, ToolCall, ToolResultMessage, now_ms, text
from tiny_pi.schema import schema_problems
from tiny_pi.tool_exposure import MODEL, SCOPES, SCRIPT
from tiny_pi.tools import Tool, ToolRegistry

CALL_ID: ContextVar[str] = ContextVar("CALL_ID", default="call")


@frozen
class Reply:
    """What a tool may return instead of its blocks: the text, details for the program, its verdict."""

    content: tuple[TextContent, ...] = field(converter=tuple)
    details: Any = None
    is_error: bool = False


def current_call_id() -> str:
    """The id of the call the running tool serves (`call` outside any tool)."""
    return CALL_ID.get()


async def execute_tool_call(
    call: ToolCall, registry: ToolRegistry, *, signal: AbortSignal,
    scope: str = MODEL, declared: Sequence[str] | None = None,
) -> ToolResultMessage:
    """Run `call` and return its one result; raises only for an unknown scope, or to let a cancellation through.

    `declared`: the names the request that produced the call declared (the
    agent loop passes them); None means the registry's declared set now.
    """
    allowed = in_scope(registry, scope, declared)
    tool = registry.get(call.name)
    if tool is None:
        available = ", ".join(allowed) or "none"
        return error_result(call, f"Tool {call.name!r} not found (available tools: {available})")
    refusal = scope_refusal(call, scope, allowed)
    if refusal is not None:  # the caller may not call it: the tool never runs
        return error_result(call, refusal)
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


def in_scope(registry: ToolRegistry, scope: str, declared: Sequence[str] | None) -> list[str]:
    """The names `scope` may call: the request's declared set for the model, `callable()` for a script."""
    if scope not in SCOPES:
        raise ValueError(f"a scope is one of {', '.join(SCOPES)}, got {scope!r}")
    if scope == SCRIPT:
        return [tool.name for tool in registry.callable()]
    if declared is None:
        return [tool.name for tool in registry.declared()]
    return list(declared)


def scope_refusal(call: ToolCall, scope: str, allowed: Sequence[str]) -> str | None:
    """Why `call` may not run for its caller, or None; `allowed` is what `in_scope` gave."""
    if call.name in allowed:
        return None
    if scope == SCRIPT:
        return f"Tool {call.name!r} was not run: a script may not call it"
    return f"Tool {call.name!r} was not run: the request that called it did not declare it"


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
    token = CALL_ID.set(call.id)
    try:
        content = await tool.execute(call.arguments, signal=signal)
    except Exception as error:  # the tool's failure is a result, not a crash
        return error_result(call, failure(call, error))
    finally:
        CALL_ID.reset(token)
    if isinstance(content, Reply):
        result = result_of(call, content.content)
        if result.is_error:  # its blocks were not text blocks after all
            return result
        return attrs.evolve(result, details=content.details, is_error=content.is_error)
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


def failure(call: ToolCall, error: Exception) -> str:
    """What the model reads about a tool that raised: the one exception inside groups of one.

    A tool that runs tasks of its own (codemode's nursery) fails with an
    ExceptionGroup whose text says only how many exceptions it holds.
    """
    while isinstance(error, ExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return f"Tool {call.name!r} failed: {type(error).__name__}: {error}"


def unparsed_message(call: ToolCall) -> str:
    """Arguments that never became a JSON object: a cut-off or garbled reply is never run."""
    return (
        f"Tool {call.name!r} was not run: its arguments are not a JSON object "
        f"(raw text: {call.raw_arguments!r})"
    )


def returned_wrong_type(call: ToolCall, content: Any) -> str:
    """A tool broke its promise: name the type it returned instead of text blocks."""
    return f"Tool {call.name!r} returned {type(content).__name__}, not a list of text blocks"
