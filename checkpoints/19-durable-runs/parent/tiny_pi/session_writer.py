"""Appending to a session log: one entry, one line, on disk before `append` returns.

Each append makes the entry's line at once (so a later change to the
message is not stored), writes it with its newline (the commit mark),
flushes Python's buffer and asks the kernel to put it on the disk
(`os.fsync`). Only then does the agent go on, so a crash at any moment
loses at most the entry that was being written, and leaves it torn, which
the reader refuses to guess about.

After an I/O failure the writer does not know what reached the disk, so
it refuses every later append with the same error: a half-known file is
never written to again by this process.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any, BinaryIO, Iterable

from tiny_pi.messages import AgentMessage, now_ms
from tiny_pi.messages.transcript import to_data
from tiny_pi.session_log import VERSION


class SessionWriteError(RuntimeError):
    """The log could not be written, now or earlier in this process."""


class SessionWriter:
    """Appends entries to one session file, each one a child of the one before."""

    def __init__(self, path: Path, *, leaf_id: str | None, ids: Iterable[str]) -> None:
        self.path = path
        self.leaf_id = leaf_id  # the parent of the next entry
        self.failure: str | None = None
        self._ids = set(ids)
        self._file: BinaryIO = path.open("ab")

    @classmethod
    def create(cls, path: Path) -> SessionWriter:
        """Start a new session file with its header; a file that exists is never overwritten."""
        header = {"type": "session", "version": VERSION, "id": new_id(()), "timestamp": now_ms()}
        with path.open("xb") as file:
            write_durably(file, encode(header))
        fsync_directory(path.parent)  # the new name, too, must survive a crash
        return cls(path, leaf_id=None, ids=())

    def append_message(self, message: AgentMessage) -> str:
        """Store `message` as it is now, as a child of the last entry; returns its id."""
        return self.append("message", {"message": to_data(message)})

    def append_model_change(self, model: str) -> str:
        """Note that the conversation talks to `model` from here on; returns the entry's id."""
        return self.append("model_change", {"model": model})

    def append_system_prompt(self, text: str) -> str:
        """Note that the system prompt is `text` from here on; returns the entry's id."""
        return self.append("system_prompt", {"text": text})

    def append_router_state(self, model: str, state: dict[str, Any]) -> str:
        """Note virtual model `model`'s new state (chapter 18); returns the entry's id."""
        return self.append("router_state", {"model": model, "state": state})

    def append_compaction(self, summary: str, first_kept_id: str, tokens_before: int) -> str:
        """Note that `summary` replaces the messages before `first_kept_id`; nothing is removed."""
        fields = {"summary": summary, "first_kept_id": first_kept_id, "tokens_before": tokens_before}
        return self.append("compaction", fields)

    def append(self, kind: str, fields: dict[str, Any]) -> str:
        """One entry: its line is made now, written, flushed and synced before this returns."""
        if self.failure is not None:
            raise SessionWriteError(self.failure)
        entry_id = new_id(self._ids)
        line = encode({"type": kind, "id": entry_id, "parent_id": self.leaf_id, **fields})
        try:
            write_durably(self._file, line)
        except OSError as error:
            self.failure = f"cannot write {self.path}: {error}"
            raise SessionWriteError(self.failure) from error
        self._ids.add(entry_id)
        self.leaf_id = entry_id
        return entry_id

    def close(self) -> None:
        """Close the file; every entry is already on disk."""
        self._file.close()


def encode(data: dict[str, Any]) -> bytes:
    """One committed line: compact JSON (NaN refused, as JSON has none), then the newline."""
    return json.dumps(data, ensure_ascii=False, allow_nan=False).encode("utf-8") + b"\n"


def write_durably(file: BinaryIO, line: bytes) -> None:
    """Write, empty Python's buffer into the kernel, and wait until the kernel has it on disk."""
    file.write(line)
    file.flush()
    os.fsync(file.fileno())


def fsync_directory(directory: Path) -> None:
    """Make a new file's name durable: its directory entry lives in the directory."""
    handle = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def new_id(taken: Iterable[str]) -> str:
    """Eight hex digits, random, not among `taken`: short enough to type after --branch."""
    taken = set(taken)
    while True:
        candidate = secrets.token_hex(4)
        if candidate not in taken:
            return candidate
