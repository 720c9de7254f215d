"""Reading a session log: a JSON Lines file that is either whole or refused.

A session file is a header line, then one entry per line:

    {"type": "session", "version": 1, "id": "3f9c0a1b", "timestamp": 1700000000000}
    {"type": "model_change", "id": "a1", "parent_id": null, "model": "llama3.2"}
    {"type": "message", "id": "b2", "parent_id": "a1", "message": {"role": "user", ...}}

Every entry names its parent, so the entries form a tree; the conversation
the model sees is one path of it, from the root to a leaf. The newline that
ends a line is its commit mark: a last line without one was never committed.

Reading refuses anything it would have to guess about, with the physical
line number (the header is line 1): a line that is not JSON, a value JSON
cannot hold, an unknown type or field, a reused id, a parent that is not an
earlier entry, a message chapter 03's loader refuses, an uncommitted write.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Union

from attrs import frozen

from tiny_pi.messages import AgentMessage, TranscriptError
from tiny_pi.messages.transcript import message_from_data

VERSION = 1
HEADER_FIELDS = ("type", "version", "id", "timestamp")
ENTRY_FIELDS = {
    "message": ("type", "id", "parent_id", "message"),
    "model_change": ("type", "id", "parent_id", "model"),
    "compaction": ("type", "id", "parent_id", "summary", "first_kept_id", "tokens_before"),
}
UNCOMMITTED = (
    "uncommitted write: the last line has no final newline (a write cut off mid-way); "
    "to repair, delete that line, or end it with a newline if it is whole"
)


class SessionError(ValueError):
    """The file is not a session this reader can trust; says where and why."""

    def __init__(self, path: Path, line: int | None, reason: str) -> None:
        super().__init__(f"{path}:{line}: {reason}" if line is not None else f"{path}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


@frozen
class MessageEntry:
    """A message of the conversation, at line `line` of the file."""

    id: str
    parent_id: str | None
    line: int
    message: AgentMessage
    type: str = "message"


@frozen
class ModelChangeEntry:
    """Metadata: from here on, the conversation talks to `model`. Never sent to a model."""

    id: str
    parent_id: str | None
    line: int
    model: str
    type: str = "model_change"


@frozen
class CompactionEntry:
    """Metadata: from here on, `summary` stands for every message before `first_kept_id`."""

    id: str
    parent_id: str | None
    line: int
    summary: str
    first_kept_id: str
    tokens_before: int
    type: str = "compaction"


Entry = Union[MessageEntry, ModelChangeEntry, CompactionEntry]


@frozen
class Session:
    """A session as read: its id, its entries in file order, and a skipped tail's line, if any."""

    path: Path
    id: str
    entries: tuple[Entry, ...]
    uncommitted_line: int | None = None

    @property
    def last_id(self) -> str | None:
        """The id of the last entry in the file: where a run resumes by default."""
        return self.entries[-1].id if self.entries else None


def read_session(path: Path, *, skip_uncommitted: bool = False) -> Session:
    """Read and check every line of `path`; any doubt is a SessionError naming the line."""
    lines = path.read_bytes().split(b"\n")
    tail = lines.pop()  # after the last newline: b"" when every line was committed
    uncommitted_line = None
    if tail:
        if not skip_uncommitted:
            raise SessionError(path, len(lines) + 1, UNCOMMITTED)
        uncommitted_line = len(lines) + 1
    if not lines:
        raise SessionError(path, 1, "no session header: the file is empty")
    session_id = check_header(parse_line(path, 1, lines[0]), path)
    entries: list[Entry] = []
    lines_by_id: dict[str, int] = {}
    for number, raw in enumerate(lines[1:], start=2):
        entry = entry_from_data(parse_line(path, number, raw), path, number, lines_by_id)
        lines_by_id[entry.id] = number
        entries.append(entry)
    return Session(path, session_id, tuple(entries), uncommitted_line)


def parse_line(path: Path, number: int, raw: bytes) -> dict[str, Any]:
    """One line as a JSON object, or a SessionError: NaN and infinities are not JSON."""
    try:
        data = json.loads(
            raw.decode("utf-8"),
            parse_constant=refuse_constant,
            parse_float=finite_float,
            object_pairs_hook=unique_keys,
        )
    except UnicodeDecodeError as error:
        raise SessionError(path, number, f"not UTF-8: {error.reason}") from error
    except json.JSONDecodeError as error:
        raise SessionError(path, number, f"not JSON: {error.msg} (column {error.colno})") from error
    except ValueError as error:
        raise SessionError(path, number, str(error)) from error
    if not isinstance(data, dict):
        raise SessionError(path, number, f"expected a JSON object, got {type(data).__name__}")
    check_text(data, path, number)
    return data


def check_text(data: dict[str, Any], path: Path, number: int) -> None:
    """JSON may escape half a UTF-16 pair (`\\udce9`): valid JSON, but no text to show or send."""
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as error:
        code = ord(error.object[error.start])
        raise SessionError(path, number, f"a lone surrogate \\u{code:04x} is not Unicode text") from error


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A key given twice: json would keep the last one and drop the other without a word."""
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise ValueError(f"the key {key!r} appears twice")
        data[key] = value
    return data


def refuse_constant(name: str) -> Any:
    """json calls this for NaN, Infinity and -Infinity, which Python accepts and JSON does not."""
    raise ValueError(f"{name} is not a JSON value")


def finite_float(text: str) -> float:
    """A number like 1e999 overflows to infinity: refused like the word Infinity."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of range for a JSON number")
    return value


def check_header(data: dict[str, Any], path: Path) -> str:
    """Line 1: exactly the header's fields, a version this reader knows; returns the session id."""
    if data.get("type") != "session":
        raise SessionError(path, 1, f"expected the session header, got type {data.get('type')!r}")
    check_fields(data, HEADER_FIELDS, path, 1)
    if data["version"] != VERSION:
        raise SessionError(path, 1, f"unsupported version {data['version']!r} (this reader knows {VERSION})")
    if not isinstance(data["id"], str) or not data["id"]:
        raise SessionError(path, 1, f"a session id is a non-empty string, got {data['id']!r}")
    return data["id"]


def check_fields(data: dict[str, Any], fields: tuple[str, ...], path: Path, number: int) -> None:
    """Exactly `fields`: an unknown one may carry meaning this reader would drop."""
    for key in data:
        if key not in fields:
            raise SessionError(path, number, f"unknown field {key!r}")
    for key in fields:
        if key not in data:
            raise SessionError(path, number, f"missing field {key!r}")


def entry_from_data(data: dict[str, Any], path: Path, number: int, lines_by_id: dict[str, int]) -> Entry:
    """One entry line, checked against the entries before it."""
    kind = data.get("type")
    if not isinstance(kind, str) or kind not in ENTRY_FIELDS:  # a list is no dict key: check the type first
        raise SessionError(path, number, f"unknown entry type {kind!r}")
    check_fields(data, ENTRY_FIELDS[kind], path, number)
    entry_id, parent_id = data["id"], data["parent_id"]
    if not isinstance(entry_id, str) or not entry_id:
        raise SessionError(path, number, f"an id is a non-empty string, got {entry_id!r}")
    if entry_id in lines_by_id:
        raise SessionError(path, number, f"id {entry_id!r} is already used by line {lines_by_id[entry_id]}")
    if parent_id is not None and not isinstance(parent_id, str):
        raise SessionError(path, number, f"a parent_id is null or a string, got {parent_id!r}")
    if parent_id is None and lines_by_id:
        raise SessionError(path, number, "parent_id is null, but only the first entry is a root")
    if parent_id is not None and parent_id not in lines_by_id:
        raise SessionError(path, number, f"parent_id {parent_id!r} names no earlier entry")
    if kind == "model_change":
        if not isinstance(data["model"], str):
            raise SessionError(path, number, f"a model is a string, got {data['model']!r}")
        return ModelChangeEntry(entry_id, parent_id, number, data["model"])
    if kind == "compaction":
        return compaction_from_data(data, path, number, lines_by_id)
    try:
        message = message_from_data(data["message"])
    except TranscriptError as error:
        raise SessionError(path, number, f"message refused: {error}") from error
    return MessageEntry(entry_id, parent_id, number, message)


def branch_path(session: Session, leaf_id: str | None) -> list[Entry]:
    """The entries from the root to `leaf_id`, in that order; other branches are left out."""
    by_id = {entry.id: entry for entry in session.entries}
    path: list[Entry] = []
    current = leaf_id
    while current is not None:
        entry = by_id[current]
        path.append(entry)
        current = entry.parent_id
    path.reverse()
    return path


def context_messages(path: list[Entry]) -> list[AgentMessage]:
    """What the model is sent: the messages of the path, without the metadata."""
    return [entry.message for entry in path if isinstance(entry, MessageEntry)]


def compaction_from_data(data: dict[str, Any], path: Path, number: int, lines_by_id: dict[str, int]) -> CompactionEntry:
    """A compaction entry: a text summary, an earlier entry to keep from, a whole token count."""
    if not isinstance(data["summary"], str):
        raise SessionError(path, number, f"a summary is a string, got {data['summary']!r}")
    if data["first_kept_id"] not in lines_by_id:
        raise SessionError(path, number, f"first_kept_id {data['first_kept_id']!r} names no earlier entry")
    tokens = data["tokens_before"]
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
        raise SessionError(path, number, f"tokens_before is a whole number, got {tokens!r}")
    return CompactionEntry(data["id"], data["parent_id"], number, data["summary"], data["first_kept_id"], tokens)
