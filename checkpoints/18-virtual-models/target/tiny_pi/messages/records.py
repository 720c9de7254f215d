"""The records of the message IR: who produced a fact, what was said, why it stopped.

Three messages say who produced a fact (the user, the model, a tool); two
content blocks say what was said and what was asked for. Every record
carries its discriminator (`role` or `type`), so a saved transcript names
each record exactly as the original course does.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Literal, Union, get_args

import attrs
from attrs import field, frozen
from attrs.validators import in_, instance_of, optional

DoneReason = Literal["stop", "length", "toolUse"]
ErrorReason = Literal["error", "aborted"]
StopReason = Literal[DoneReason, ErrorReason]
"""Why a model call ended, and so what the agent does next:

stop -> the turn is over; toolUse -> validate and run the requested tools;
length -> keep what was said, never run a possibly cut-off call;
error / aborted -> keep the partial message and the reason, end the run.
"""

DONE_REASONS: tuple[str, ...] = get_args(DoneReason)
ERROR_REASONS: tuple[str, ...] = get_args(ErrorReason)
STOP_REASONS: tuple[str, ...] = get_args(StopReason)


def now_ms() -> int:
    """The current time in milliseconds, the unit every timestamp uses."""
    return int(time.time() * 1000)


# Validators and converters the records share.

is_str = instance_of(str)
is_int = instance_of(int)


def as_tuple(blocks: Iterable[Any]) -> tuple[Any, ...]:
    """Content may arrive as any sequence; it is kept as a tuple nobody can append to."""
    return tuple(blocks)


def blocks_of(*allowed: type) -> Callable[[Any, attrs.Attribute[Any], Any], None]:
    """A validator: every block of a content tuple is one of `allowed`."""
    names = " or ".join(cls.__name__ for cls in allowed)

    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        for block in value:
            if not isinstance(block, allowed):
                owner = type(instance).__name__
                raise TypeError(f"{owner}.{attribute.name} may only hold {names}, got {block!r}")

    return check


# Content blocks: what was said, and what was asked for.


@frozen
class TextContent:
    """Words meant for a reader."""

    type: Literal["text"] = field(default="text", init=False)
    text: str = field(validator=is_str)


@frozen
class ToolCall:
    """A request to run a tool; `id` pairs it with its result.

    `arguments` is whatever the model produced: nothing here proves it fits
    the tool. `raw_arguments` keeps the provider's original text, which
    matters most when it was cut off.
    """

    type: Literal["toolCall"] = field(default="toolCall", init=False)
    id: str = field(validator=is_str)
    name: str = field(validator=is_str)
    arguments: Any
    raw_arguments: str | None = field(default=None, validator=optional(is_str))


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

    input: int = field(default=0, validator=is_int)
    output: int = field(default=0, validator=is_int)
    total_tokens: int = field(default=0, validator=is_int)
    cache_read: int | None = field(default=None, validator=optional(is_int))
    cache_write: int | None = field(default=None, validator=optional(is_int))


# Messages: who produced a fact.


@frozen
class UserMessage:
    """What the user said."""

    role: Literal["user"] = field(default="user", init=False)
    content: tuple[TextContent, ...] = field(converter=as_tuple, validator=blocks_of(TextContent))
    timestamp: int = field(factory=now_ms, validator=is_int)


@frozen
class AssistantMessage:
    """What the model said and asked for, in order, and why it stopped."""

    role: Literal["assistant"] = field(default="assistant", init=False)
    content: tuple[AssistantContent, ...] = field(
        converter=as_tuple, validator=blocks_of(TextContent, ToolCall)
    )
    provider: str = field(validator=is_str)
    model: str = field(validator=is_str)
    usage: Usage = field(validator=instance_of(Usage))
    stop_reason: StopReason = field(validator=in_(STOP_REASONS))
    timestamp: int = field(validator=is_int)
    error_message: str | None = field(default=None, validator=optional(is_str))


@frozen
class ToolResultMessage:
    """What a tool returned for the call whose id is `tool_call_id`."""

    role: Literal["toolResult"] = field(default="toolResult", init=False)
    tool_call_id: str = field(validator=is_str)
    tool_name: str = field(validator=is_str)
    content: tuple[TextContent, ...] = field(converter=as_tuple, validator=blocks_of(TextContent))
    is_error: bool = field(validator=instance_of(bool))
    timestamp: int = field(validator=is_int)
    details: Any = None


AgentMessage = Union[UserMessage, AssistantMessage, ToolResultMessage]


@attrs.define
class AgentContext:
    """The input of one model call: the transcript so far and a system prompt.

    Mutable on purpose: the agent appends to it between calls, which is why
    a model that keeps a request must keep a copy.
    """

    messages: list[AgentMessage] = field(factory=list)
    system_prompt: str | None = field(default=None, validator=optional(is_str))
