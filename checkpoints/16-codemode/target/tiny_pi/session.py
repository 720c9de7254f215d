"""The session as the agent uses it, and as you look at it.

`open_session` resumes a session file (or starts one) for
`python -m tiny_pi.agent --session FILE [--branch ID]`, and
`SessionRecorder`, an Agent listener, saves every new message before the
next model call. Run this module to see a session's tree:

    python -m tiny_pi.session FILE

One line per entry (id, role or kind, first words), in file order; the
entries after a fork are indented, each branch's first one marked `+`,
and the last entry, where a run resumes, is marked `<- last`. A tool patch
(chapter 15) shows its changes: `system: tools -edit +edit +write`.
"""

from __future__ import annotations

import argparse
import stat
import sys
from pathlib import Path
from typing import Iterable

from attrs import frozen

from tiny_pi.agent_events import AgentEvent
from tiny_pi.messages import AgentMessage, ToolCall, text_of
from tiny_pi.compaction import summary_message
from tiny_pi.session_log import (
    UNCOMMITTED,
    CompactionEntry,
    Entry,
    MessageEntry,
    ModelChangeEntry,
    Session,
    SessionError,
    SystemPromptEntry,
    branch_path,
    read_session,
)
from tiny_pi.session_writer import SessionWriter
from tiny_pi.tool_patches import ToolsPatch, replay
from tiny_pi.stateful_agent import Agent

WORDS = 60  # characters of a message shown in the tree
NOT_A_FILE = "{kind}, not a regular file; a session is a regular file, or a new path to start one"
KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a named pipe",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


@frozen
class OpenSession:
    """A session ready for a run: what the model is sent first, and where new entries go."""

    messages: tuple[AgentMessage, ...]
    writer: SessionWriter
    ids: tuple[str | None, ...] = ()  # each message's entry id; None for a compaction's summary
    measured_from: int = 0  # a usage reported before this message measured a context no longer sent
    system_prompt: str = ""  # the last system prompt recorded on the path; "" for none
    declared: tuple[str, ...] = ()  # the tools the path's patches declare, compacted away or not


def open_session(path: Path, branch: str | None, model: str) -> OpenSession:
    """Resume `path` at `branch` (default: its last entry), or start it; note a change of model."""
    if not session_exists(path):
        if branch is not None:
            raise SessionError(path, None, f"--branch {branch}: the session does not exist yet")
        entries: list[Entry] = []
        writer = SessionWriter.create(path)
    else:
        session = read_session(path)
        ids = [entry.id for entry in session.entries]
        if branch is not None and branch not in ids:
            raise SessionError(path, None, f"--branch {branch}: no entry has this id")
        leaf_id = branch if branch is not None else session.last_id
        entries = branch_path(session, leaf_id)
        writer = SessionWriter(path, leaf_id=leaf_id, ids=ids)
    context, measured_from = resumed_context(path, entries)  # refused before anything is appended
    if current_model(entries) != model:
        writer.append_model_change(model)
    messages, ids = tuple(m for _, m in context), tuple(i for i, _ in context)
    declared = tuple(spec["name"] for spec in replay(e.message for e in entries if isinstance(e, MessageEntry)))
    return OpenSession(messages, writer, ids, measured_from, current_system_prompt(entries), declared)


def resumed_context(path: Path, entries: list[Entry]) -> tuple[list[tuple[str | None, AgentMessage]], int]:
    """(entry id, message) as the model is sent them, from the latest compaction: its summary, then the kept.

    Also where trusted usage starts: the kept messages before the compaction
    carry counts of a longer context, the messages after it do not.
    """
    compactions = [index for index, entry in enumerate(entries) if isinstance(entry, CompactionEntry)]
    if not compactions:
        return [(entry.id, entry.message) for entry in entries if isinstance(entry, MessageEntry)], 0
    latest = entries[compactions[-1]]
    ids = [entry.id for entry in entries]
    if latest.first_kept_id not in ids:
        raise SessionError(path, latest.line, f"first_kept_id {latest.first_kept_id!r} is not on this path")
    kept = [(e.id, e.message) for e in entries[ids.index(latest.first_kept_id) :] if isinstance(e, MessageEntry)]
    before = sum(isinstance(e, MessageEntry) for e in entries[ids.index(latest.first_kept_id) : compactions[-1]])
    return [(None, summary_message(latest.summary)), *kept], 1 + before


def session_exists(path: Path) -> bool:
    """True for a regular file, False for no file at all; anything else is refused before it is opened.

    Opening a named pipe waits for a writer that may never come, /dev/zero
    never ends, and a symbolic link to nothing cannot be created (the name
    exists): so the type is looked at first, with stat, which opens nothing.
    """
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if path.is_symlink():
            raise SessionError(path, None, NOT_A_FILE.format(kind="a symbolic link to nothing")) from None
        return False
    if not stat.S_ISREG(mode):
        kind = KINDS.get(stat.S_IFMT(mode), "something else")
        raise SessionError(path, None, NOT_A_FILE.format(kind=kind))
    return True


def current_model(entries: list[Entry]) -> str | None:
    """The model named by the last model change on the path, if any."""
    changes = [entry.model for entry in entries if isinstance(entry, ModelChangeEntry)]
    return changes[-1] if changes else None


def current_system_prompt(entries: list[Entry]) -> str:
    """The text of the last system prompt entry on the path; "" when none was recorded."""
    prompts = [entry.text for entry in entries if isinstance(entry, SystemPromptEntry)]
    return prompts[-1] if prompts else ""


class SessionRecorder:
    """An Agent listener: before each model call, and at a run's end, the new messages go to disk.

    `turn_start` comes right before the model call, after the user's message,
    the last turn's results and any steer are in the transcript. If a write
    fails, for any reason (the disk, or an entry JSON text cannot hold: a
    NaN, a lone surrogate), the run is aborted before that call: nothing
    reaches the model that the log does not hold.
    """

    def __init__(self, writer: SessionWriter, agent: Agent, ids: Iterable[str | None] = ()) -> None:
        self.writer = writer
        self.agent = agent
        self.failed = False  # a save failed: the log is behind the transcript for good
        self.saved = len(agent.messages)  # what the session already holds
        self.ids = list(ids)  # the entry id of each saved message
        self.pending: tuple[str, int] | None = None  # a compaction waiting for its first kept message

    def __call__(self, event: AgentEvent) -> None:
        if event.type not in ("turn_start", "agent_end"):
            return
        if self.failed:  # reported once already: only keep every later model call from going out
            self.agent.abort()
            return
        try:
            self.save_new_messages()
        except Exception:  # not only SessionWriteError: a ValueError from encode, too
            self.failed = True
            self.agent.abort()
            raise

    def save_new_messages(self) -> None:
        """Append every message the transcript gained since the last save, in order."""
        for message in self.agent.messages[self.saved :]:
            self.ids.append(self.writer.append_message(message))
            self.saved += 1
            if self.pending is not None:  # a compaction that keeps from this message on
                self.writer.append_compaction(self.pending[0], self.ids[-1], self.pending[1])
                self.pending = None

    def record_compaction(self, summary: str, cut: int, tokens_before: int) -> None:
        """Save what is unsaved, then append the compaction entry; the summary (no entry of its own) comes first.

        A cut after every saved message (before a prompt, all of the past
        summarised) keeps from the prompt, which has no entry yet: the
        compaction entry follows the prompt's, when the next save writes it.
        """
        self.save_new_messages()
        if cut == len(self.ids):
            self.pending = (summary, tokens_before)
        else:
            self.writer.append_compaction(summary, self.ids[cut], tokens_before)
        self.ids = [None, *self.ids[cut:]]
        self.saved = len(self.ids)


def tree_lines(session: Session) -> list[str]:
    """One line per entry, depth first in file order; each branch after a fork starts with `+`."""
    children: dict[str | None, list[Entry]] = {}
    for entry in session.entries:
        children.setdefault(entry.parent_id, []).append(entry)
    lines = []
    stack = [(entry, 0, False) for entry in reversed(children.get(None, []))]
    while stack:
        entry, indent, starts_branch = stack.pop()
        lead = "  " * (indent - 1) + "+ " if starts_branch else "  " * indent
        mark = "  <- last" if entry.id == session.last_id else ""
        lines.append(f"{lead}{entry.id} {describe(entry)}{mark}")
        below = children.get(entry.id, [])
        fork = len(below) > 1  # a straight line of entries stays where it is
        stack.extend((child, indent + fork, fork) for child in reversed(below))
    return lines


def describe(entry: Entry) -> str:
    """`user: What is this ...`, `assistant: I will read [read]`, `model_change: llama3.2`."""
    if isinstance(entry, ModelChangeEntry):
        return f"model_change: {entry.model}"
    if isinstance(entry, CompactionEntry):
        return f"compaction: keeps from {entry.first_kept_id}, was ~{entry.tokens_before} tokens"
    if isinstance(entry, SystemPromptEntry):
        return f"system_prompt: {' '.join(entry.text.split())[:WORDS]}"
    message = entry.message
    if isinstance(message, ToolsPatch):
        return f"system: tools {patch_words(message)}"
    words = " ".join(text_of(message).split())
    if len(words) > WORDS:
        words = words[: WORDS - 3] + "..."
    calls = [block.name for block in getattr(message, "content", ()) if isinstance(block, ToolCall)]
    if calls:
        words = f"{words} [{', '.join(calls)}]".strip()
    return f"{message.role}: {words}"


def patch_words(patch: ToolsPatch) -> str:
    """`-edit +edit +write`: each removal, then each addition, in the order they apply."""
    removed = [f"-{item['name']}" for item in patch.tools_removed or ()]
    added = [f"+{spec['name']}" for spec in patch.tools_added or ()]
    return " ".join(removed + added)


def main(argv: list[str] | None = None) -> int:
    """Print the tree of a session; a torn last line is skipped with a warning, never repaired."""
    parser = argparse.ArgumentParser(prog="python -m tiny_pi.session", description="Show a session's tree.")
    parser.add_argument("file", type=Path, help="a session file written by python -m tiny_pi.agent --session")
    args = parser.parse_args(argv)
    try:
        session = read_session(args.file, skip_uncommitted=True)
    except (SessionError, OSError) as error:
        print(error, file=sys.stderr)
        return 2
    if session.uncommitted_line is not None:
        print(f"warning: {args.file}:{session.uncommitted_line}: {UNCOMMITTED}; not shown", file=sys.stderr)
    print(f"session {session.id}: {len(session.entries)} entries")
    for line in tree_lines(session):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
