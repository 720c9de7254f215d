"""The agent loop: call the model, run the tools it asks for, and go round again.

One run is a sequence of turns. A turn streams the model with the
transcript and the registry's tool specs, forwarding every event as it
arrives, and appends the assistant message. If the model stopped for
`toolUse`, the turn runs its calls concurrently through the tool contract and
appends the results in call order; calls that name the same path wait for
each other, in call order. The run ends when a turn stops for any other
reason, when the signal is aborted, or at the turn limit.

Between turns the loop asks `take_queued` whether someone has more to say
(chapter 09's Agent steers a run and queues follow-ups through it): what it
returns is appended before the next model call, and keeps a stopping run going.
Before every model call it awaits `before_model_call` with the transcript, and
goes on with the messages that returns (chapter 11's compaction puts a summary
in place of older ones).

From chapter 15 on, a turn asks tiny_pi.tool_patches for the request's tools:
a registry that uses exposure gets a patch appended to the transcript first
when its declared set changed. The turn's calls are checked against the
names that request declared, whatever a call of the same turn activates.

From chapter 18 on, a run may have a `prepare_request` hook (a router,
tiny_pi.routing): awaited before each model request, after the declaration
patch, it answers the model that sends this one request. Without a hook
there is no call at all, so the order of events is chapter 09's. With one,
a failed call that another model might answer (tiny_pi.fallback) is sent
again once, as a retry: the hook sees the failed reply and picks the model.
"""

from __future__ import annotations

import os
from typing import Awaitable, Callable, Protocol, Sequence

import trio

from tiny_pi.abort import AbortSignal
from tiny_pi.agent_events import (
    AgentEndEvent,
    AgentEvent,
    AgentOutcome,
    AgentStartEvent,
    RunEnd,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from tiny_pi.fallback import fallback_reason
from tiny_pi.messages import AgentContext, AgentMessage, AssistantMessage, ModelStream, ToolCall, ToolResultMessage, Usage
from tiny_pi.model_catalog import ModelRequest, PrepareRequest, request_reason, unrouted_reply
from tiny_pi.projection import project
from tiny_pi.tool_execution import execute_tool_call
from tiny_pi.tool_patches import next_request_tools
from tiny_pi.tools import Tool, ToolRegistry

DEFAULT_MAX_TURNS = 10

Emit = Callable[[AgentEvent], None]

TakeQueued = Callable[[RunEnd | None], Sequence[AgentMessage]]
"""Asked after a turn that ran tools (None) or stopped (`stop`): the messages waiting for the model."""

BeforeModelCall = Callable[[list[AgentMessage]], Awaitable[list[AgentMessage]]]
"""Awaited before each model call with a copy of the transcript: what it returns is sent, and kept."""


class ToolUsingModel(Protocol):
    """A model whose calls are offered tools: ScriptedModel and OpenAICompatibleModel both are."""

    def stream(
        self,
        context: AgentContext,
        *,
        signal: AbortSignal | None = None,
        tools: Sequence[Tool] | None = None,
    ) -> ModelStream: ...


def ignore(event: AgentEvent) -> None:
    """The default listener: a run needs nobody watching it."""


def nothing_queued(end: RunEnd | None) -> Sequence[AgentMessage]:
    """The default queue: a run that nobody steers."""
    return ()


async def keep_as_is(messages: list[AgentMessage]) -> list[AgentMessage]:
    """The default before a model call: the transcript goes as it is."""
    return messages


async def run_agent(
    model: ToolUsingModel,
    context: AgentContext,
    registry: ToolRegistry,
    *,
    signal: AbortSignal | None = None,
    max_turns: int = DEFAULT_MAX_TURNS,
    on_event: Emit = ignore,
    take_queued: TakeQueued = nothing_queued,
    before_model_call: BeforeModelCall = keep_as_is,
    prepare_request: PrepareRequest | None = None,
) -> AgentOutcome:
    """Run turns on `context` until the model stops; every fact goes to `on_event` as it happens.

    The caller appends the user's message first; the run appends the rest,
    including what `take_queued` hands over after a turn that ran tools or stopped.
    """
    if max_turns < 1:
        raise ValueError(f"max_turns must be at least 1, got {max_turns}")
    signal = signal if signal is not None else AbortSignal()
    first_new = len(context.messages)
    usage = Usage()
    turn = 0
    end: RunEnd | None = None
    retried = False  # chapter 18: the last turn was the one retry of a failed call
    on_event(AgentStartEvent())
    while end is None and turn < max_turns:
        turn += 1
        messages = await before_model_call(list(context.messages))
        first_new = max(first_new + len(messages) - len(context.messages), 0)  # fewer older messages
        context.messages = messages
        message = await run_turn(model, context, registry, turn, signal, on_event, prepare_request)
        usage = add_usage(usage, message.usage)
        end = run_end(message, signal)
        if end in (None, "stop"):
            queued = take_queued(end)
            context.messages.extend(queued)
            if queued:
                end = None  # a steer or a follow-up waits: the model must answer it
        if prepare_request is not None:  # chapter 18: a failed call may go once more, to the model the hook picks
            end, retried = retry_decision(message, end, retried, turns_left=turn < max_turns)
    if end is None:
        end = "turn_limit"  # the model still wants tools: say so, never stop silently
    outcome = AgentOutcome(
        stop_reason=end,
        turns=turn,
        usage=usage,
        messages=tuple(context.messages[first_new:]),
        error_message=error_message(end, context, max_turns),
    )
    on_event(AgentEndEvent(outcome))
    return outcome


async def run_turn(
    model: ToolUsingModel,
    context: AgentContext,
    registry: ToolRegistry,
    turn: int,
    signal: AbortSignal,
    on_event: Emit,
    prepare_request: PrepareRequest | None = None,
) -> AssistantMessage:
    """One model call, and the tools it asks for; both land in the transcript."""
    tools = next_request_tools(context.messages, registry)  # a patch, if any, before turn_start saves it
    on_event(TurnStartEvent(turn))
    message = await stream_message(model, context, tools, signal, on_event, prepare_request)
    context.messages.append(message)
    results: list[ToolResultMessage] = []
    if message.stop_reason == "toolUse":
        calls = [block for block in message.content if isinstance(block, ToolCall)]
        results = await run_tools(calls, registry, signal, on_event, [tool.name for tool in tools])
        context.messages.extend(results)
    on_event(TurnEndEvent(turn, message, tuple(results)))
    return message


async def stream_message(
    model: ToolUsingModel,
    context: AgentContext,
    tools: Sequence[Tool],
    signal: AbortSignal,
    on_event: Emit,
    prepare_request: PrepareRequest | None = None,
) -> AssistantMessage:
    """Stream one model call with `tools`, forwarding each event the moment it arrives.

    With a hook, the hook is awaited first and answers the model for this
    request; a hook that raises ends the turn with an error reply, and no
    model is called.
    """
    if prepare_request is not None:  # without a hook, no call: nothing changes for chapters 07-17
        raise NotImplementedError("lab 18.2: ask prepare_request for the model of this request")
    stream = model.stream(context, signal=signal, tools=list(tools))
    async with stream:
        async for event in stream:
            on_event(event)
        return await stream.result()


def play(message: AssistantMessage, on_event: Emit) -> AssistantMessage:
    """Forward the events of a message no model streamed (chapter 04's projection), and return it."""
    raise NotImplementedError("lab 18.2: write play")


def retry_decision(
    message: AssistantMessage, end: RunEnd | None, retried: bool, turns_left: bool
) -> tuple[RunEnd | None, bool]:
    """(end, retried) after a turn: a failure another model may answer goes again, once, if a turn is left."""
    # Starter of lab 18.4, which replaces this line: until then no failed call is retried,
    # so labs 18.2 and 18.3 run with a hook and end a failed turn as chapter 09 did.
    return end, False


async def run_tools(
    calls: list[ToolCall], registry: ToolRegistry, signal: AbortSignal, on_event: Emit,
    declared: Sequence[str] | None = None,
) -> list[ToolResultMessage]:
    """Run the calls concurrently; return their results in call order, not finishing order.

    Calls on one path still run one after another, in call order: each
    waits for the call queued before it on that path. Each call is checked
    against `declared`, the names of the request that produced it.
    """
    results: dict[int, ToolResultMessage] = {}

    async def run_one(index: int, call: ToolCall, before: trio.Event | None, done: trio.Event) -> None:
        if before is not None:
            await before.wait()
        results[index] = await execute_tool_call(call, registry, signal=signal, declared=declared)
        registry.after_tool_call(call, results[index])
        on_event(ToolExecutionEndEvent(call, results[index]))
        done.set()  # the next call on this path may start, whatever this one's result

    for call in calls:
        on_event(ToolExecutionStartEvent(call))
    async with trio.open_nursery() as nursery:
        for index, (call, (before, done)) in enumerate(zip(calls, path_queue(calls))):
            nursery.start_soon(run_one, index, call, before, done)
    return [results[index] for index in range(len(calls))]


def path_queue(calls: list[ToolCall]) -> list[tuple[trio.Event | None, trio.Event]]:
    """For each call, the event of the call before it on the same path (None: go at once) and its own.

    Built before any call starts, from the calls' order alone: which task
    trio happens to run first cannot change who goes first on a path.
    """
    last: dict[str, trio.Event] = {}
    places: list[tuple[trio.Event | None, trio.Event]] = []
    for call in calls:
        done = trio.Event()
        path = path_of(call)
        places.append((last.get(path) if path is not None else None, done))
        if path is not None:
            last[path] = done
    return places


def path_of(call: ToolCall) -> str | None:
    """The path a call names, spelled one way (`./a/../b.txt` is `b.txt`), or None."""
    path = (call.arguments or {}).get("path")
    return os.path.normpath(path) if isinstance(path, str) else None


def run_end(message: AssistantMessage, signal: AbortSignal) -> RunEnd | None:
    """Why the run ends after this turn, or None to go round again."""
    if signal.aborted:
        return "aborted"
    if message.stop_reason == "toolUse":
        return None
    return message.stop_reason


def error_message(end: RunEnd, context: AgentContext, max_turns: int) -> str | None:
    """What went wrong, for the runs that did not end well."""
    if end == "turn_limit":
        return f"turn limit reached: the model still wanted tools after {max_turns} turns"
    last = context.messages[-1]
    if isinstance(last, AssistantMessage) and last.error_message:
        return last.error_message
    if end == "aborted":
        return "the run was aborted while tools were running"
    return None


def add_usage(total: Usage, more: Usage) -> Usage:
    """Token counts summed over turns; a count nobody reported adds nothing."""
    return Usage(
        input=total.input + more.input,
        output=total.output + more.output,
        total_tokens=total.total_tokens + more.total_tokens,
        cache_read=(total.cache_read or 0) + (more.cache_read or 0),
        cache_write=(total.cache_write or 0) + (more.cache_write or 0),
    )
