"""From Chat Completions chunks to model events.

`ChunkAssembler` reads one SSE data payload at a time and answers with the
model events it implies. It owns the partial message: text blocks, tool
calls merged by their wire `index`, the finish reason, the usage. A wire
problem never escapes as an exception: a malformed chunk, an invalid JSON
payload or a contradiction becomes one terminal error event that keeps
the partial message.

Every event carries its own snapshot of the message, and a long reply is
tens of thousands of deltas, so a snapshot must not copy the text so far:
a block's text is kept as a list of pieces, and an event's partial is a
`LazyPartial` that remembers how many pieces each block had. The text is
joined only if somebody reads that partial.

Labs 5.3 to 5.7 starter: the names are given; write the bodies (and the
state the assembler needs in `__init__`). Each stub names the lab that
first needs it.
"""

from __future__ import annotations

from typing import Any

from tiny_pi.messages import (
    AssistantContent,
    ErrorEvent,
    ErrorReason,
    ModelEvent,
    StartEvent,
    StopReason,
    Usage,
)


def stop_reason_for(finish_reason: str | None, has_calls: bool) -> StopReason:
    """Cross-check the provider's finish_reason against what actually arrived."""
    raise NotImplementedError("lab 5.3: the finish-reason cross-check")


def usage_from_wire(wire: object, path: str = "usage") -> Usage:
    """The usage ledger: prompt tokens split into fresh input, cache reads and cache writes."""
    raise NotImplementedError("lab 5.6: the usage ledger")


def wire_index(fragment: dict[str, Any], path: str) -> int | None:
    """The fragment's `index`, or None when the server left it out (older Ollama, Gemini)."""
    raise NotImplementedError("lab 5.4: a fragment's wire index")


def valid_text(text: str) -> str:
    """`text` as valid Unicode: a surrogate pair becomes its character, a lone half U+FFFD."""
    raise NotImplementedError("lab 5.5: valid text")


def hold_high_surrogate(text: str) -> tuple[str, str]:
    """`text` split before a high surrogate at its very end: its pair may open the next delta."""
    raise NotImplementedError("lab 5.5: hold back half a surrogate pair")


def valid_values(value: Any) -> Any:
    """Parsed JSON with every string, key or value, made valid text."""
    raise NotImplementedError("lab 5.5: valid text in parsed arguments")


def parse_arguments(raw: str) -> dict[str, Any] | None:
    """The arguments of a finished call, or None when the text is not a JSON object."""
    raise NotImplementedError("lab 5.4: parse a finished call's arguments")


def unparsed(block: AssistantContent) -> AssistantContent:
    """A tool call nobody may run: arguments None, the raw text kept for diagnosis."""
    raise NotImplementedError("lab 5.3: make a tool call unrunnable")


def with_text(block: AssistantContent, text: str) -> AssistantContent:
    """The block holding `text`: a text block's words, or a tool call's raw arguments."""
    raise NotImplementedError("lab 5.3: a block holding its text")


class ChunkAssembler:
    """One model call's chunks in, its model events out; the partial message lives here."""

    def __init__(self, provider: str, model: str, secret: str | None = None) -> None:
        raise NotImplementedError("lab 5.3: the assembler's state")

    def start(self) -> StartEvent:
        """The first event: an empty partial."""
        raise NotImplementedError("lab 5.3: the start event")

    def feed(self, data: str) -> list[ModelEvent]:
        """The events one SSE data payload implies; `[DONE]` ends the stream."""
        raise NotImplementedError("lab 5.3: one data payload in, model events out")

    def end(self) -> ModelEvent:
        """The terminal event once the stream is over: done, if a finish_reason came."""
        raise NotImplementedError("lab 5.3: the terminal event at the end of the stream")

    def fail(self, message: str, reason: ErrorReason = "error") -> ErrorEvent:
        """The terminal error event; the partial message stays, no call in it can run."""
        raise NotImplementedError("lab 5.3: the terminal error event")
