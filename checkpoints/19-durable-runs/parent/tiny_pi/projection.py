"""Projection: a finished assistant message replayed as the events that built it.

Whoever already holds a whole message, a script or a server that answered
in one piece, still owes its consumer the event protocol of chapter 03:
`start`, the deltas of each block, then one terminal event. `project`
derives all of them from the message alone, so the trace and the final
result can never disagree.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from tiny_pi.messages import (
    AssistantMessage,
    DoneEvent,
    ErrorEvent,
    ModelEvent,
    StartEvent,
    TextContent,
    TextDeltaEvent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    Usage,
)


def project(message: AssistantMessage) -> list[ModelEvent]:
    """Replay a finished message as the events that would have built it, block by block.

    Every event carries its own partial: the message as it stands after that
    event, with no usage and no error yet, and "stop" as its provisional reason.
    """
    partial = attrs.evolve(message, content=(), stop_reason="stop", usage=Usage(), error_message=None)
    events: list[ModelEvent] = [StartEvent(partial=partial)]
    for index, block in enumerate(message.content):
        match block:
            case TextContent():
                partial = _with_block(partial, index, block)
                events.append(TextDeltaEvent(content_index=index, delta=block.text, partial=partial))
            case ToolCall():
                events.extend(_tool_call_events(partial, index, block))
                partial = _with_block(partial, index, block)
    events.append(_terminal(message))
    return events


def _terminal(message: AssistantMessage) -> ModelEvent:
    """The last event: `error` for the two failure reasons, `done` for the three others."""
    match message.stop_reason:
        case "error" | "aborted" as reason:
            return ErrorEvent(reason=reason, error=message)
        case reason:
            return DoneEvent(reason=reason, message=message)


def _tool_call_events(partial: AssistantMessage, index: int, call: ToolCall) -> list[ModelEvent]:
    """toolcall_delta with the raw argument text first, then toolcall_end with the call."""
    raw = call.raw_arguments
    if raw is None:
        raw = json.dumps(call.arguments, separators=(",", ":"), ensure_ascii=False)
    pending = attrs.evolve(call, arguments={}, raw_arguments=raw)
    return [
        ToolCallDeltaEvent(content_index=index, delta=raw, partial=_with_block(partial, index, pending)),
        ToolCallEndEvent(content_index=index, tool_call=call, partial=_with_block(partial, index, call)),
    ]


def _with_block(partial: AssistantMessage, index: int, block: Any) -> AssistantMessage:
    """A new partial whose content ends with `block` at position `index`."""
    return attrs.evolve(partial, content=partial.content[:index] + (block,))
