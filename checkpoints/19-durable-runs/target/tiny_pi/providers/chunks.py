"""From Chat Completions chunks to model events.

`ChunkAssembler` reads one SSE data payload at a time and answers with the
model events it implies. It owns the partial message: text blocks, tool
calls merged by their wire `index`, the finish reason, the usage. A wire
problem never escapes as an exception: a malformed chunk, an invalid JSON
payload or a contradiction becomes one terminal error event that keeps
the partial message.

What reaches the transcript is valid Unicode. JSON may escape one half of
a surrogate pair (`"\\ud83d"`), and a server that cuts an emoji between
two chunks sends its halves in two deltas: a high surrogate at the end of
a delta waits for the next delta of the same block, and any surrogate left
alone becomes U+FFFD. Parsed arguments get the same treatment, since the
model's own JSON may escape a lone half too.

Every event carries its own snapshot of the message, and a long reply is
tens of thousands of deltas, so a snapshot must not copy the text so far:
a block's text is kept as a list of pieces, and an event's partial is a
`LazyPartial` that remembers how many pieces each block had. The text is
joined only if somebody reads that partial.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from tiny_pi.messages import (
    AssistantContent,
    AssistantMessage,
    DoneEvent,
    ErrorEvent,
    ErrorReason,
    LazyPartial,
    ModelEvent,
    StartEvent,
    StopReason,
    TextContent,
    TextDeltaEvent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    Usage,
    now_ms,
)
from tiny_pi.providers.wire import (
    WireError,
    error_text,
    expect_int,
    expect_list,
    expect_object,
    expect_str,
    optional_str,
    parse_json,
    shorten,
)


def stop_reason_for(finish_reason: str | None, has_calls: bool) -> StopReason:
    """Cross-check the provider's finish_reason against what actually arrived."""
    match finish_reason:
        case "tool_calls" | "function_call" if has_calls:
            return "toolUse"
        case "tool_calls" | "function_call":
            raise WireError(f"finish_reason {finish_reason!r} but no tool call arrived")
        case "stop" | None:
            return "toolUse" if has_calls else "stop"
        case "length":
            return "length"
        case "content_filter":
            raise WireError("the provider withheld the reply: finish_reason 'content_filter'")
        case _:
            raise WireError(f"unknown finish_reason {finish_reason!r}")


def usage_from_wire(wire: object, path: str = "usage") -> Usage:
    """The usage ledger: prompt tokens split into fresh input, cache reads and cache writes."""
    usage = expect_object(wire, path)
    details_path = f"{path}.prompt_tokens_details"
    details = expect_object(usage.get("prompt_tokens_details") or {}, details_path)
    prompt = count(usage, "prompt_tokens", path)
    cache_read = count(details, "cached_tokens", details_path)
    cache_write = count(details, "cache_write_tokens", details_path)
    fresh = prompt - cache_read - cache_write
    output = count(usage, "completion_tokens", path)  # reasoning tokens are already inside
    return Usage(
        input=fresh,
        output=output,
        total_tokens=fresh + cache_read + cache_write + output,
        cache_read=cache_read,
        cache_write=cache_write,
    )


def count(wire: dict[str, Any], key: str, path: str) -> int:
    """A token count; a missing or null count is 0."""
    value = wire.get(key)
    return 0 if value is None else expect_int(value, f"{path}.{key}")


def wire_index(fragment: dict[str, Any], path: str) -> int | None:
    """The fragment's `index`, or None when the server left it out (older Ollama, Gemini)."""
    index = fragment.get("index")
    return None if index is None else expect_int(index, f"{path}.index")


def valid_text(text: str) -> str:
    """`text` as valid Unicode: a surrogate pair becomes its character, a lone half U+FFFD."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def hold_high_surrogate(text: str) -> tuple[str, str]:
    """`text` split before a high surrogate at its very end: its pair may open the next delta."""
    if text and "\ud800" <= text[-1] <= "\udbff":
        return text[:-1], text[-1]
    return text, ""


def valid_values(value: Any) -> Any:
    """Parsed JSON with every string, key or value, made valid text."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        return {valid_text(key): valid_values(item) for key, item in value.items()}
    if isinstance(value, list):
        return [valid_values(item) for item in value]
    return value


def parse_arguments(raw: str) -> dict[str, Any] | None:
    """The arguments of a finished call, or None when the text is not a JSON object."""
    if raw.strip() == "":
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return valid_values(value) if isinstance(value, dict) else None


def unparsed(block: AssistantContent) -> AssistantContent:
    """A tool call nobody may run: arguments None, the raw text kept for diagnosis."""
    if isinstance(block, ToolCall):
        return attrs.evolve(block, arguments=None)
    return block


def with_text(block: AssistantContent, text: str) -> AssistantContent:
    """The block holding `text`: a text block's words, or a tool call's raw arguments."""
    if isinstance(block, ToolCall):
        return attrs.evolve(block, raw_arguments=text)
    return TextContent(text)


class ChunkAssembler:
    """One model call's chunks in, its model events out; the partial message lives here."""

    def __init__(self, provider: str, model: str, secret: str | None = None) -> None:
        self._provider = provider
        self._model = model
        self._secret = secret  # scrubbed from every error message
        self._timestamp = now_ms()
        # Every block as it began (a call also gets what the finish decided about its
        # arguments). A tuple, replaced and never changed: events share it, uncopied.
        self._blocks: tuple[AssistantContent, ...] = ()
        # The text of block i (a call's raw arguments) is "".join(self._pieces[i]). The
        # lists only grow, so a list's length says exactly how far its block had come.
        self._pieces: list[list[str]] = []
        # A high surrogate that ended block i's last delta, waiting for its pair ("" if none).
        self._held: list[str] = []
        self._text_index: int | None = None  # the text block still growing, if any
        # The wire index of a tool call -> the content index of the call it names now
        # (None: the index some servers leave out).
        self._calls: dict[int | None, int] = {}
        self._finish_reason: str | None = None
        self._stop_reason: StopReason | None = None
        self._usage = Usage()
        self.closed = False  # a terminal event has been produced

    def start(self) -> StartEvent:
        """The first event: an empty partial."""
        return StartEvent(self._snapshot())

    def feed(self, data: str) -> list[ModelEvent]:
        """The events one SSE data payload implies; `[DONE]` ends the stream."""
        if self.closed:
            return []
        try:
            if data == "[DONE]":
                return [self.end()]
            return self._read_chunk(expect_object(parse_json(data), "chunk"))
        except WireError as error:
            return [self.fail(str(error))]

    def end(self) -> ModelEvent:
        """The terminal event once the stream is over: done, if a finish_reason came."""
        if self._stop_reason is None:
            return self.fail("the stream ended before a finish_reason arrived")
        self.closed = True
        return DoneEvent(self._stop_reason, self._final(self._stop_reason))

    def fail(self, message: str, reason: ErrorReason = "error") -> ErrorEvent:
        """The terminal error event; the partial message stays, no call in it can run."""
        if self._secret:
            message = message.replace(self._secret, "[redacted]")
        message = shorten(message)
        if self._stop_reason != "toolUse":
            self._blocks = tuple(unparsed(block) for block in self._blocks)
        self.closed = True
        return ErrorEvent(reason, self._final(reason, message))

    def _read_chunk(self, chunk: dict[str, Any]) -> list[ModelEvent]:
        if chunk.get("error") is not None:
            reported = error_text(chunk["error"])
            raise WireError(f"the provider reported an error mid-stream: {reported}")
        if chunk.get("usage") is not None:
            self._usage = usage_from_wire(chunk["usage"])
        choices = expect_list(chunk.get("choices") or [], "choices")
        if not choices:
            return []  # the trailing usage chunk has `choices: []` (or null, or none)
        choice = expect_object(choices[0], "choices[0]")
        events = self._read_delta(expect_object(choice.get("delta") or {}, "choices[0].delta"))
        finish_reason = optional_str(choice.get("finish_reason"), "choices[0].finish_reason")
        if finish_reason:  # some servers send "" on every chunk until the real reason
            events += self._finish(finish_reason)
        return events

    def _read_delta(self, delta: dict[str, Any]) -> list[ModelEvent]:
        """Only `content` and `tool_calls` are read; reasoning, refusal & co. never enter."""
        content = optional_str(delta.get("content"), "choices[0].delta.content")
        fragments = expect_list(delta.get("tool_calls") or [], "choices[0].delta.tool_calls")
        if self._finish_reason is not None and (content or fragments):
            raise WireError(f"content arrived after finish_reason {self._finish_reason!r}")
        events: list[ModelEvent] = []
        if content:
            events += self._on_text(content)
        for position, fragment in enumerate(fragments):
            path = f"choices[0].delta.tool_calls[{position}]"
            events.append(self._on_fragment(expect_object(fragment, path), path))
        return events

    def _on_text(self, delta: str) -> list[TextDeltaEvent]:
        """Extend the growing text block; text after a tool call opens a new one."""
        if self._text_index is None:
            self._text_index = self._grow(TextContent(""))
        delta = self._append(self._text_index, delta)
        if not delta:
            return []  # the delta was half a pair: it is announced with its other half
        return [TextDeltaEvent(self._text_index, delta, self._snapshot())]

    def _on_fragment(self, fragment: dict[str, Any], path: str) -> ToolCallDeltaEvent:
        """Merge one tool-call fragment into the call with the same wire index."""
        index = wire_index(fragment, path)
        call_id = optional_str(fragment.get("id"), f"{path}.id")
        function = expect_object(fragment.get("function") or {}, f"{path}.function")
        piece = optional_str(function.get("arguments"), f"{path}.function.arguments") or ""
        if index not in self._calls or self._names_another_call(index, call_id):
            self._calls[index] = self._open_call(call_id, function, path)
        content_index = self._calls[index]
        piece = self._append(content_index, piece)
        return ToolCallDeltaEvent(content_index, piece, self._snapshot())

    def _append(self, content_index: int, piece: str) -> str:
        """Add a delta to a block as valid text; a trailing high surrogate waits for its pair."""
        piece, self._held[content_index] = hold_high_surrogate(self._held[content_index] + piece)
        piece = valid_text(piece)
        self._pieces[content_index].append(piece)  # never `text + delta`: that copies it all
        return piece

    def _settle(self, content_index: int) -> None:
        """The block grows no more: a high surrogate still waiting is a lone one, U+FFFD."""
        if self._held[content_index]:
            self._held[content_index] = ""
            self._pieces[content_index].append("\ufffd")

    def _names_another_call(self, index: int | None, call_id: str | None) -> bool:
        """A new id on an open index starts a new call: some servers give every call index 0."""
        call = self._blocks[self._calls[index]]
        return bool(call_id) and isinstance(call, ToolCall) and call_id != call.id

    def _open_call(self, call_id: str | None, function: dict[str, Any], path: str) -> int:
        """The first fragment of a call: the only one that must carry its id and name."""
        if not call_id:
            raise WireError(f"{path}.id is missing: the first fragment of a call must carry it")
        name = expect_str(function.get("name"), f"{path}.function.name")
        if self._text_index is not None:
            self._settle(self._text_index)
        self._text_index = None
        return self._grow(ToolCall(id=call_id, name=name, arguments={}, raw_arguments=""))

    def _grow(self, block: AssistantContent) -> int:
        """Add a block whose text will arrive in pieces; return its content index."""
        self._blocks += (block,)
        self._pieces.append([])
        self._held.append("")
        return len(self._blocks) - 1

    def _finish(self, finish_reason: str) -> list[ModelEvent]:
        """Record why the call ended; finished tool calls get their parsed arguments."""
        if self._finish_reason not in (None, finish_reason):
            was = self._finish_reason
            raise WireError(f"finish_reason changed from {was!r} to {finish_reason!r}")
        if self._finish_reason is not None:
            return []
        calls = [i for i, block in enumerate(self._blocks) if isinstance(block, ToolCall)]
        self._stop_reason = stop_reason_for(finish_reason, bool(calls))
        self._finish_reason = finish_reason
        if self._stop_reason == "length":
            self._blocks = tuple(unparsed(block) for block in self._blocks)
            return []  # a cut-off call is never parsed, never announced as complete
        return [self._end_call(content_index) for content_index in calls]

    def _end_call(self, content_index: int) -> ToolCallEndEvent:
        """A finished call: its raw arguments joined and parsed, once."""
        self._settle(content_index)
        raw = "".join(self._pieces[content_index])
        call = with_text(self._blocks[content_index], raw)
        call = attrs.evolve(call, arguments=parse_arguments(raw))
        blocks = self._blocks
        self._blocks = (*blocks[:content_index], call, *blocks[content_index + 1 :])
        return ToolCallEndEvent(content_index, call, self._snapshot())

    def _snapshot(self) -> LazyPartial:
        """This event's partial: the blocks tuple and each block's piece count, O(blocks).

        Nothing is joined now. Because the blocks tuple is never changed and the
        piece lists only grow, these two are enough to build, later, the message
        exactly as it stands now.
        """
        sizes = tuple(map(len, self._pieces))  # how many pieces each block has now
        return LazyPartial(self._message_at, self._blocks, sizes, self._usage)

    def _final(self, stop_reason: StopReason, error: str | None = None) -> AssistantMessage:
        """The terminal message, built at once: it is the one the transcript keeps."""
        for content_index in range(len(self._blocks)):
            self._settle(content_index)
        sizes = tuple(map(len, self._pieces))
        return self._message_at(self._blocks, sizes, self._usage, stop_reason, error)

    def _message_at(
        self,
        blocks: tuple[AssistantContent, ...],
        sizes: tuple[int, ...],
        usage: Usage,
        stop_reason: StopReason = "stop",
        error: str | None = None,
    ) -> AssistantMessage:
        """The message whose block i holds the first sizes[i] pieces of its text.

        `self._pieces` may have grown since `blocks` and `sizes` were taken: zip
        stops at the blocks of that moment, and `[:size]` at their pieces.
        """
        content = tuple(
            with_text(block, "".join(pieces[:size]))
            for block, pieces, size in zip(blocks, self._pieces, sizes)
        )
        return AssistantMessage(
            content=content,
            provider=self._provider,
            model=self._model,
            usage=usage,
            stop_reason=stop_reason,
            timestamp=self._timestamp,
            error_message=error,
        )
