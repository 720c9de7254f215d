"""Server-sent events, decoded as the bytes arrive.

A streaming provider answers with `text/event-stream`: lines of
`field: value`, one event per group of lines, a blank line after each
event. The network cuts those bytes wherever it likes - inside a line,
inside an event, inside a UTF-8 character - so the decoder keeps what it
has not finished and never reads the same byte twice.
"""

from __future__ import annotations

import codecs
import re

from attrs import frozen

LINE_BREAK = re.compile(r"\r\n|\r|\n")
"""The only line ends SSE knows. Not str.splitlines: it also splits on
U+2028, U+2029, U+0085 and more, which JSON strings may carry raw."""


@frozen
class ServerSentEvent:
    """One event: its type and its `data:` lines joined with "\\n"."""

    data: str
    event: str = "message"


class SSEDecoder:
    """Feed it bytes as they arrive; it returns the events those bytes complete."""

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._at_start = True  # nothing decoded yet: a byte-order mark may come first
        self._line_parts: list[str] = []  # the line still being received, in pieces
        self._after_cr = False  # the last text ended in "\r": a "\n" may follow
        self._data: list[str] = []  # the data lines of the event being built
        self._event_type = ""

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Decode one network read; return the events it completed."""
        return self._feed_text(self._utf8.decode(chunk))

    def close(self) -> list[ServerSentEvent]:
        """The body is over: flush the last line and the last event, blank line or not."""
        events = self._feed_text(self._utf8.decode(b"", final=True))
        if self._line_parts:
            events += self._take_line("".join(self._line_parts))
            self._line_parts = []
        event = self._dispatch()
        return events + [event] if event else events

    def _feed_text(self, text: str) -> list[ServerSentEvent]:
        """Cut new text into lines; only this text is scanned, never the old."""
        if not text:
            return []
        if self._at_start:
            self._at_start = False
            text = text.removeprefix("\ufeff")  # the spec's UTF-8 decode drops one leading BOM
            if not text:
                return []
        if self._after_cr and text[0] == "\n":
            text = text[1:]  # the second half of a CRLF cut by the network
        self._after_cr = text.endswith("\r")
        events: list[ServerSentEvent] = []
        start = 0
        for line_end in LINE_BREAK.finditer(text):
            self._line_parts.append(text[start : line_end.start()])
            events += self._take_line("".join(self._line_parts))
            self._line_parts = []
            start = line_end.end()
        if start < len(text):
            self._line_parts.append(text[start:])
        return events

    def _take_line(self, line: str) -> list[ServerSentEvent]:
        """Apply one complete line; a blank line dispatches the event built so far."""
        if line == "":
            event = self._dispatch()
            return [event] if event else []
        if line.startswith(":"):
            return []  # a comment, such as ": keep-alive"
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event_type = value
        return []  # id, retry and unknown fields do not matter here

    def _dispatch(self) -> ServerSentEvent | None:
        """The event built so far, if it has data; then start a new one."""
        data, event_type = self._data, self._event_type
        self._data, self._event_type = [], ""
        if not data:
            return None
        return ServerSentEvent("\n".join(data), event_type or "message")
