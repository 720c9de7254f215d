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

from pathlib import Path
from typing import Union

from attrs import frozen

from tiny_pi.messages import AgentMessage

VERSION = 1
HEADER_FIELDS = ("type", "version", "id", "timestamp")
ENTRY_FIELDS = {
    "message": ("type", "id", "parent_id", "message"),
    "model_change": ("type", "id", "parent_id", "model"),
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


Entry = Union[MessageEntry, ModelChangeEntry]


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
    raise NotImplementedError("lab 10.1: read and check a session file")


def branch_path(session: Session, leaf_id: str | None) -> list[Entry]:
    """The entries from the root to `leaf_id`, in that order; other branches are left out."""
    raise NotImplementedError("lab 10.4: the path from the root to a leaf")


def context_messages(path: list[Entry]) -> list[AgentMessage]:
    """What the model is sent: the messages of the path, without the metadata."""
    raise NotImplementedError("lab 10.4: the messages of a path")
