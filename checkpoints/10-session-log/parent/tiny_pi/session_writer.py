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
        raise NotImplementedError("lab 10.5: create a session file")

    def append_message(self, message: AgentMessage) -> str:
        """Store `message` as it is now, as a child of the last entry; returns its id."""
        raise NotImplementedError("lab 10.5: append a message")

    def append_model_change(self, model: str) -> str:
        """Note that the conversation talks to `model` from here on; returns the entry's id."""
        raise NotImplementedError("lab 10.5: append a model change")

    def append(self, kind: str, fields: dict[str, Any]) -> str:
        """One entry: its line is made now, written, flushed and synced before this returns."""
        raise NotImplementedError("lab 10.5: append one entry durably")

    def close(self) -> None:
        """Close the file; every entry is already on disk."""
        self._file.close()


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
