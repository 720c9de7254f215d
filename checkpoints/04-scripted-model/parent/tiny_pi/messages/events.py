"""Model events: how an assistant message comes into being, one fact at a time.

Progress events (`start`, `text_delta`, `toolcall_delta`, `toolcall_end`)
carry a snapshot of the message so far; exactly one terminal event (`done`
or `error`) carries the message the transcript keeps.
"""

from __future__ import annotations

from typing import Literal, Union

from attrs import field, frozen
from attrs.validators import in_, instance_of

from tiny_pi.messages.records import (
    DONE_REASONS,
    ERROR_REASONS,
    AssistantMessage,
    DoneReason,
    ErrorReason,
    ToolCall,
    is_int,
    is_str,
)

_a_message = instance_of(AssistantMessage)


@frozen
class StartEvent:
    """The call has started; `partial` has no content yet."""

    type: Literal["start"] = field(default="start", init=False)
    partial: AssistantMessage = field(validator=_a_message)


@frozen
class TextDeltaEvent:
    """More text arrived for the block at `content_index`."""

    type: Literal["text_delta"] = field(default="text_delta", init=False)
    content_index: int = field(validator=is_int)
    delta: str = field(validator=is_str)
    partial: AssistantMessage = field(validator=_a_message)


@frozen
class ToolCallDeltaEvent:
    """More argument text arrived for the tool call at `content_index`."""

    type: Literal["toolcall_delta"] = field(default="toolcall_delta", init=False)
    content_index: int = field(validator=is_int)
    delta: str = field(validator=is_str)
    partial: AssistantMessage = field(validator=_a_message)


@frozen
class ToolCallEndEvent:
    """The tool call at `content_index` is complete (not yet proven runnable)."""

    type: Literal["toolcall_end"] = field(default="toolcall_end", init=False)
    content_index: int = field(validator=is_int)
    tool_call: ToolCall = field(validator=instance_of(ToolCall))
    partial: AssistantMessage = field(validator=_a_message)


@frozen
class DoneEvent:
    """Terminal: the call finished normally; `message` is what the transcript keeps."""

    type: Literal["done"] = field(default="done", init=False)
    reason: DoneReason = field(validator=in_(DONE_REASONS))
    message: AssistantMessage = field(validator=_a_message)


@frozen
class ErrorEvent:
    """Terminal: the call failed or was aborted; `error` keeps the partial message."""

    type: Literal["error"] = field(default="error", init=False)
    reason: ErrorReason = field(validator=in_(ERROR_REASONS))
    error: AssistantMessage = field(validator=_a_message)


ModelEvent = Union[
    StartEvent, TextDeltaEvent, ToolCallDeltaEvent, ToolCallEndEvent, DoneEvent, ErrorEvent
]
