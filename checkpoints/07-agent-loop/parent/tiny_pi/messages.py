"""The message IR: the shape in which an agent saves, replays and sends a conversation.

Three messages say who produced a fact (the user, the model, a tool); two
content blocks say what was said and what was asked for. Model events say how
an assistant message came into being; the message itself is what the
transcript keeps. Every record carries its wire discriminator (`role` or
`type`), so a saved transcript reads exactly like the original course's.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Iterable, Literal, Protocol, Sequence, Union

import attrs
from attrs import field, frozen
from attrs.validators import in_, instance_of, optional

if TYPE_CHECKING:
    from tiny_pi.abort import AbortSignal

StopReason = Literal["stop", "length", "toolUse", "error", "aborted"]
"""Why a model call ended, and so what the agent does next:

stop -> the turn is over; toolUse -> validate and run the requested tools;
length -> keep what was said, never run a possibly cut-off call;
error / aborted -> keep the partial message and the reason, end the run.
"""

STOP_REASONS: tuple[str, ...] = ("stop", "length", "toolUse", "error", "aborted")
DONE_REASONS: tuple[str, ...] = ("stop", "length", "toolUse")
ERROR_REASONS: tuple[str, ...] = ("error", "aborted")


def now_ms() -> int:
    """The current time in milliseconds, the unit every timestamp uses."""
    return int(time.time() * 1000)


def _as_tuple(blocks: Iterable[Any]) -> tuple[Any, ...]:
    """Content may arrive as any sequence; it is kept as a tuple nobody can append to."""
    return tuple(blocks)


def _blocks_of(*allowed: type) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    """A validator: every block of a content tuple is one of `allowed`."""
    names = " or ".join(cls.__name__ for cls in allowed)

    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        for block in value:
            if not isinstance(block, allowed):
                owner = type(instance).__name__
                raise TypeError(f"{owner}.{attribute.name} may only hold {names}, got {block!r}")

    return check


_str = instance_of(str)
_int = instance_of(int)


# Content blocks: what was said, and what was asked for.


@frozen
class TextContent:
    """Words meant for a reader."""

    type: Literal["text"] = field(default="text", init=False)
    text: str = field(validator=_str)


@frozen
class ToolCall:
    """A request to run a tool; `id` pairs it with its result.

    `arguments` is whatever the model produced: nothing here proves it fits
    the tool. `raw_arguments` keeps the provider's original text, which
    matters most when it was cut off.
    """

    type: Literal["toolCall"] = field(default="toolCall", init=False)
    id: str = field(validator=_str)
    name: str = field(validator=_str)
    arguments: Any
    raw_arguments: str | None = field(default=None, validator=optional(_str))


AssistantContent = Union[TextContent, ToolCall]


@frozen
class Usage:
    """Token counts of one model call, kept with the message they paid for.

    `input` counts only the fresh prompt tokens. `cache_read` and `cache_write`
    (chapter 05) count the prompt tokens a provider served from, or wrote to,
    its prompt cache: they are priced differently, so the ledger keeps them
    apart. None means nobody reported them, which also keeps transcripts
    saved before chapter 05 loadable.
    """

    input: int = field(default=0, validator=_int)
    output: int = field(default=0, validator=_int)
    total_tokens: int = field(default=0, validator=_int)
    cache_read: int | None = field(default=None, validator=optional(_int))
    cache_write: int | None = field(default=None, validator=optional(_int))


# Messages: who produced a fact.


@frozen
class UserMessage:
    """What the user said."""

    role: Literal["user"] = field(default="user", init=False)
    content: tuple[TextContent, ...] = field(converter=_as_tuple, validator=_blocks_of(TextContent))
    timestamp: int = field(factory=now_ms, validator=_int)


@frozen
class AssistantMessage:
    """What the model said and asked for, in order, and why it stopped."""

    role: Literal["assistant"] = field(default="assistant", init=False)
    content: tuple[AssistantContent, ...] = field(
        converter=_as_tuple, validator=_blocks_of(TextContent, ToolCall)
    )
    provider: str = field(validator=_str)
    model: str = field(validator=_str)
    usage: Usage = field(validator=instance_of(Usage))
    stop_reason: StopReason = field(validator=in_(STOP_REASONS))
    timestamp: int = field(validator=_int)
    error_message: str | None = field(default=None, validator=optional(_str))


@frozen
class ToolResultMessage:
    """What a tool returned for the call whose id is `tool_call_id`."""

    role: Literal["toolResult"] = field(default="toolResult", init=False)
    tool_call_id: str = field(validator=_str)
    tool_name: str = field(validator=_str)
    content: tuple[TextContent, ...] = field(converter=_as_tuple, validator=_blocks_of(TextContent))
    is_error: bool = field(validator=instance_of(bool))
    timestamp: int = field(validator=_int)
    details: Any = None


AgentMessage = Union[UserMessage, AssistantMessage, ToolResultMessage]


@attrs.define
class AgentContext:
    """The input of one model call: the transcript so far and a system prompt.

    Mutable on purpose: the agent appends to it between calls, which is why
    a model that keeps a request must keep a copy.
    """

    messages: list[AgentMessage] = field(factory=list)
    system_prompt: str | None = None


# Model events: how an assistant message comes into being.

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
    content_index: int = field(validator=_int)
    delta: str = field(validator=_str)
    _partial: AssistantMessage | LazyPartial = _partial_field()


@frozen
class ToolCallDeltaEvent(_HasPartial):
    """More argument text arrived for the tool call at `content_index`."""

    type: Literal["toolcall_delta"] = field(default="toolcall_delta", init=False)
    content_index: int = field(validator=_int)
    delta: str = field(validator=_str)
    _partial: AssistantMessage | LazyPartial = _partial_field()


@frozen
class ToolCallEndEvent(_HasPartial):
    """The tool call at `content_index` is complete (not yet proven runnable)."""

    type: Literal["toolcall_end"] = field(default="toolcall_end", init=False)
    content_index: int = field(validator=_int)
    tool_call: ToolCall = field(validator=instance_of(ToolCall))
    _partial: AssistantMessage | LazyPartial = _partial_field()


@frozen
class DoneEvent:
    """Terminal: the call finished normally; `message` is what the transcript keeps."""

    type: Literal["done"] = field(default="done", init=False)
    reason: Literal["stop", "length", "toolUse"] = field(validator=in_(DONE_REASONS))
    message: AssistantMessage = field(validator=_a_message)


@frozen
class ErrorEvent:
    """Terminal: the call failed or was aborted; `error` keeps the partial message."""

    type: Literal["error"] = field(default="error", init=False)
    reason: Literal["error", "aborted"] = field(validator=in_(ERROR_REASONS))
    error: AssistantMessage = field(validator=_a_message)


ModelEvent = Union[
    StartEvent, TextDeltaEvent, ToolCallDeltaEvent, ToolCallEndEvent, DoneEvent, ErrorEvent
]


class ModelStream(Protocol):
    """What a model call returns: events to iterate, then the final message.

    It is also an async context manager: production runs inside
    `async with stream:`, and leaving the block stops whatever still runs.
    """

    async def __aenter__(self) -> ModelStream: ...

    async def __aexit__(self, *exc_info: Any) -> bool | None: ...

    def __aiter__(self) -> AsyncIterator[ModelEvent]: ...

    async def result(self) -> AssistantMessage: ...


class Model(Protocol):
    """Anything that turns a context into a stream of model events.

    `stream()` is synchronous: it takes the request now and returns the
    stream; the events are produced once the caller enters the stream.
    """

    def stream(self, context: AgentContext, *, signal: AbortSignal | None = None) -> ModelStream: ...


# Helpers that keep examples and tests short.


def text(value: str) -> TextContent:
    """A text block."""
    return TextContent(value)


def user_message(value: str, timestamp: int = 0) -> UserMessage:
    """A user message holding one text block (timestamp 0 keeps examples reproducible)."""
    return UserMessage((text(value),), timestamp=timestamp)


def assistant_message(
    content: Sequence[AssistantContent],
    stop_reason: StopReason = "stop",
    **overrides: Any,
) -> AssistantMessage:
    """An assistant message from the scripted model, unless `overrides` say otherwise."""
    fields: dict[str, Any] = {
        "provider": "scripted",
        "model": "scripted-v1",
        "usage": Usage(),
        "timestamp": 0,
    }
    fields.update(overrides)
    return AssistantMessage(content=tuple(content), stop_reason=stop_reason, **fields)


def text_of(message: AgentMessage) -> str:
    """The text blocks of a message, one per line; tool calls are left out.

    A lossy view for display and search: it reads the message and never
    changes it. Save and replay the message itself, never this view.
    """
    return "\n".join(block.text for block in message.content if block.type == "text")


# Saving and replaying: a strict JSON form with the original course's wire names.


class TranscriptError(ValueError):
    """Saved data does not have the exact shape of the IR; the message names the key."""


_MESSAGE_CLASSES: dict[str, type] = {
    "user": UserMessage,
    "assistant": AssistantMessage,
    "toolResult": ToolResultMessage,
}
_BLOCK_CLASSES: dict[str, type] = {"text": TextContent, "toolCall": ToolCall}


def to_json(messages: Sequence[AgentMessage]) -> str:
    """Save a transcript as a JSON array that `from_json` turns back into equal messages."""
    return json.dumps([to_wire(message) for message in messages], ensure_ascii=False, indent=2)


def from_json(document: str) -> list[AgentMessage]:
    """Rebuild a transcript saved by `to_json`, refusing any unknown or missing key."""
    data = json.loads(document)
    if not isinstance(data, list):
        raise TranscriptError(f"a transcript is a JSON array, got {type(data).__name__}")
    return [from_wire(item, f"messages[{index}]") for index, item in enumerate(data)]


def to_wire(record: Any) -> dict[str, Any]:
    """One record as plain JSON data: camelCase keys, unset optional keys left out."""
    wire: dict[str, Any] = {}
    for attribute in attrs.fields(type(record)):
        value = getattr(record, attribute.name)
        if value is None and attribute.default is None:
            continue
        wire[wire_name(attribute.name)] = _value_to_wire(value)
    return wire


def from_wire(data: Any, where: str = "message") -> AgentMessage:
    """Rebuild one message from `to_wire` data; `where` says which one in errors."""
    cls = _pick_class(_MESSAGE_CLASSES, "role", data, where)
    message: AgentMessage = _record_from_wire(cls, data, where)
    return message


def wire_name(name: str) -> str:
    """tool_call_id -> toolCallId: Python names outside, the course's names on the wire."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _value_to_wire(value: Any) -> Any:
    if attrs.has(type(value)):
        return to_wire(value)
    if isinstance(value, tuple):
        return [_value_to_wire(item) for item in value]
    return value


def _pick_class(classes: dict[str, type], key: str, data: Any, where: str) -> type:
    """Read the discriminator (`role` or `type`) and choose the record class."""
    if not isinstance(data, dict):
        raise TranscriptError(f"{where}: expected a JSON object, got {type(data).__name__}")
    if key not in data:
        raise TranscriptError(f"{where}: missing key {key!r}")
    if data[key] not in classes:
        raise TranscriptError(f"{where}: unknown {key} {data[key]!r}")
    return classes[data[key]]


def _record_from_wire(cls: type, data: Any, where: str) -> Any:
    """Build `cls` from a JSON object whose keys are exactly its wire names."""
    if not isinstance(data, dict):
        raise TranscriptError(f"{where}: expected a JSON object, got {type(data).__name__}")
    by_key = {wire_name(attribute.name): attribute for attribute in attrs.fields(cls)}
    _check_keys(data, by_key, where)
    values = {
        attribute.name: _field_from_wire(attribute.name, data[key], f"{where}.{key}")
        for key, attribute in by_key.items()
        if attribute.init and key in data
    }
    try:
        return cls(**values)
    except (TypeError, ValueError) as error:
        reason = error.args[0] if error.args else error  # attrs adds details after the text
        raise TranscriptError(f"{where}: {reason}") from error


def _check_keys(data: dict[str, Any], by_key: dict[str, attrs.Attribute[Any]], where: str) -> None:
    """Exact keys: nothing unknown, and only fields that default to None may be missing."""
    for key in data:
        if key not in by_key:
            raise TranscriptError(f"{where}: unknown key {key!r}")
    for key, attribute in by_key.items():
        if key not in data and attribute.default is not None:
            raise TranscriptError(f"{where}: missing key {key!r}")


def _field_from_wire(name: str, value: Any, where: str) -> Any:
    """Nested records need rebuilding; every other value is taken as it is."""
    if name == "usage":
        return _record_from_wire(Usage, value, where)
    if name != "content":
        return value
    if not isinstance(value, list):
        raise TranscriptError(f"{where}: expected a JSON array, got {type(value).__name__}")
    return tuple(_block_from_wire(block, f"{where}[{index}]") for index, block in enumerate(value))


def _block_from_wire(data: Any, where: str) -> AssistantContent:
    block: AssistantContent = _record_from_wire(
        _pick_class(_BLOCK_CLASSES, "type", data, where), data, where
    )
    return block
