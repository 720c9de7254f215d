"""Look at a durable run: its conversation and its tasks, as the store holds them.

    python -m tiny_pi.durable_view run.db

One line per entry (id, role, first words; an aborted or error reply and
an interrupted tool result say so), then one line per task (id, kind,
status, and for a tool task its call). It only reads: a FILE that is not a
durable store, or no file at all, is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path

from tiny_pi.durable_store import SqliteStore, StoreError
from tiny_pi.durable_tasks import TOOL, Entry, Task, entry_from_data, task_from_data
from tiny_pi.messages import AssistantMessage, ToolCall, ToolResultMessage, TranscriptError, text_of

WORDS = 70  # characters of a message shown


def describe_entry(entry: Entry) -> str:
    """`e1 assistant: I will read it [read]`, `e2 toolResult bash (interrupted): Tool 'bash' was ...`."""
    message = entry.message
    words = " ".join(text_of(message).split())
    if len(words) > WORDS:
        words = words[: WORDS - 3] + "..."
    role = message.role
    if isinstance(message, AssistantMessage):
        calls = [block.name for block in message.content if isinstance(block, ToolCall)]
        words = f"{words} [{', '.join(calls)}]".strip() if calls else words
        if message.stop_reason in ("aborted", "error"):
            role += f" ({message.stop_reason})"
    if isinstance(message, ToolResultMessage):
        role += f" {message.tool_name}"
        if isinstance(message.details, dict) and message.details.get("error") == "interrupted":
            role += " (interrupted)"
        elif message.is_error:
            role += " (error)"
    return f"{entry.id} {role}: {words}"


def describe_task(task: Task) -> str:
    """`t0 generation completed`, `t1 tool failed (interrupted): call c1`."""
    line = f"{task.id} {task.kind} {task.status}"
    if task.error:
        line += f" ({task.error})"
    if task.kind == TOOL:
        line += f": call {task.input['call']} of {task.input['assistant']}"
    return line


def main(argv: list[str] | None = None) -> int:
    """Print the run; a file that is not a durable store is refused in one line."""
    parser = argparse.ArgumentParser(prog="python -m tiny_pi.durable_view", description="Show a durable run.")
    parser.add_argument("file", type=Path, help="a store written by python -m tiny_pi.agent --durable")
    args = parser.parse_args(argv)
    try:
        store = SqliteStore.open(args.file, create=False)
    except StoreError as error:
        print(f"{parser.prog}: {error}", file=sys.stderr)
        return 2
    try:
        records, seq = store.read(), store.seq
        entries = sorted((entry_from_data(data) for data in records["entries"].values()), key=lambda e: e.index)
        tasks = sorted((task_from_data(data) for data in records["tasks"].values()), key=lambda t: t.order)
    except (sqlite3.Error, TranscriptError, TypeError, KeyError, ValueError) as error:
        print(f"{parser.prog}: {args.file}: a record this viewer cannot read ({error})", file=sys.stderr)
        return 2
    finally:
        store.close()
    print(f"durable run {args.file}: {len(entries)} entries, {len(tasks)} tasks, {seq} commits")
    for entry in entries:
        print(describe_entry(entry))
    for task in tasks:
        print(describe_task(task))
    return 0


if __name__ == "__main__":
    sys.exit(main())
