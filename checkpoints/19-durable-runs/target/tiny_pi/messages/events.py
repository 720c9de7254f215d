"""Model events: how an assistant message comes into being, one fact at a time.

Progress events (`start`, `text_delta`, `toolcall_delta`, `toolcall_end`)
carry a snapshot of the message so far; exactly one terminal event (`done`
or `error`) carries the message the transcript keeps. From chapter 05 on a
snapshot may be lazy: built only when somebody reads it.
"""

from __future__ import annotations

from typing import Any, Callable, Literal, Union

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


class LazyPartial:
    """A partial message built the first time somebody reads it, then kept.

    `LazyPartial(build, *args)` stands for `build(*args)`, like
    `functools.partial`, but calls it at most once. A provider streams
    thousands of deltas: an eager snapshot per event copies the whole text so
    far every time, which makes a long reply quadratic in time and memory
    (chapter 05, section 11). A lazy one holds only what it needs to build
    the message later, and pays for the copy when, and if, it is read.
    """

    __slots__ = ("_build", "_args", "_message")

    def __init__(self, build: Callable[..., AssistantMessage], *args: Any) -> None:
        self._build = build
        self._args = args
        self._message: AssistantMessage | None = None

    def __call__(self) -> AssistantMessage:
        if self._message is None:
            self._message = self._build(*self._args)
        return self._message


def built(partial: AssistantMessage | LazyPartial) -> AssistantMessage:
    """The message a partial stands for; a lazy one is built on its first read."""
    return partial if isinstance(partial, AssistantMessage) else partial()


def _partial_field() -> Any:
    """An event's snapshot, eager or lazy, compared and printed as the message it stands for.

    The attribute is `_partial`; attrs drops the underscore from the argument,
    so `TextDeltaEvent(0, "Hi", partial=message)` reads as it always did.
    """
    return field(
        validator=instance_of((AssistantMessage, LazyPartial)),
        eq=built,
        repr=lambda partial: repr(built(partial)),
    )


class _HasPartial:
    """`event.partial` is always an AssistantMessage, whichever kind the event stored."""

    __slots__ = ()
    _partial: AssistantMessage | LazyPartial

    @property
    def partial(self) -> AssistantMessage:
        """The message exactly as it stood at this event."""
        return built(self._partial)


@frozen
class StartEvent(_HasPartial):
    """The call has started; `partial` has no content yet."""

    type: Literal["start"] = field(default="start", init=False)
    _partial: AssistantMessage | LazyPartial = _partial_field()


@frozen
class TextDeltaEvent(_HasPartial):
    """More text arrived for the block at `content_index`."""

    type: Literal["text_delta"] = field(default="text_delta", init=False)
    content_index: int = field(validator=is_int)
    delta: str = field(validator=is_str)
    _partial: AssistantMessage | LazyPartial = _partial_field()


@frozen
class ToolCallDeltaEvent(_HasPartial):
    """More argument text arrived for the tool call at `content_index`."""

    type: Literal["toolcall_delta"] = field(default="toolcall_delta", init=False)
    content_index: int = field(validator=is_int)
    delta: str = field(validator=is_str)
    _partial: AssistantMessage | LazyPartial = _partial_field()


@frozen
class ToolCallEndEvent(_HasPartial):
    """The tool call at `content_index` is complete (not yet proven runnable)."""

    type: Literal["toolcall_end"] = field(default="toolcall_end", init=False)
    content_index: int = field(validator=is_int)
    tool_call: ToolCall = field(validator=instance_of(ToolCall))
    _partial: AssistantMessage | LazyPartial = _partial_field()


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
