"""Work as tasks: what a durable run still has to do, kept as records in the store.

Each model request is a `generation` task, each tool call a `tool` task.
A task moves pending -> running -> completed or failed, and every move is
committed before the work it announces starts or is seen. A `running` task
in a store that is being opened has nobody running it any more (the
process that did is gone), so opening turns it back to `pending`; its
checkpoint says how far it got, and the task decides from there.

Entries are the conversation: a message, written once, with its place
(`index`). Ids follow from counts (`e0`, `e1`, ... and `t0`, `t1`, ...), so
two runs of the same story give the same records.
"""

from __future__ import annotations

from typing import Any, Sequence

import attrs
from attrs import field, frozen
from attrs.validators import in_, instance_of

from tiny_pi.messages import AgentMessage
from tiny_pi.messages.transcript import message_from_data, to_data

GENERATION, TOOL = "generation", "tool"
PENDING, RUNNING, COMPLETED, FAILED = "pending", "running", "completed", "failed"
STATUSES = (PENDING, RUNNING, COMPLETED, FAILED)
SAFE, UNSAFE = "safe", "unsafe"
MOVES = {PENDING: (RUNNING,), RUNNING: (COMPLETED, FAILED)}  # running -> pending is reopen's alone


class TaskError(ValueError):
    """A move the task lifecycle does not allow, like completed -> running."""


@frozen
class Task:
    """One unit of work: its kind, its place in line, where it stands, and how far it got."""

    id: str = field(validator=instance_of(str))
    kind: str = field(validator=in_((GENERATION, TOOL)))
    order: int = field(validator=instance_of(int))
    status: str = field(validator=in_(STATUSES))
    input: dict[str, Any] = field(validator=instance_of(dict))
    checkpoint: dict[str, Any] = field(validator=instance_of(dict))
    error: str | None = None


@frozen
class Entry:
    """One message of the conversation at place `index`, as the store keeps it."""

    id: str
    index: int
    message: AgentMessage


def task_to_data(task: Task) -> dict[str, Any]:
    """The task as a JSON record."""
    return attrs.asdict(task)


def task_from_data(data: dict[str, Any]) -> Task:
    """A task record read back from the store."""
    return Task(**data)


def entry_to_data(entry: Entry) -> dict[str, Any]:
    """The entry as a JSON record: the message in chapter 03's transcript shape."""
    return {"id": entry.id, "index": entry.index, "message": to_data(entry.message)}


def entry_from_data(data: dict[str, Any]) -> Entry:
    """An entry record read back from the store."""
    return Entry(data["id"], data["index"], message_from_data(data["message"], where=data["id"]))


def moved(task: Task, status: str, **changes: Any) -> Task:
    """`task` with its new status (and any other changed field); TaskError for a move the lifecycle forbids."""
    if status not in MOVES.get(task.status, ()):
        raise TaskError(f"task {task.id} cannot move from {task.status} to {status}")
    return attrs.evolve(task, status=status, **changes)


def reopened(tasks: Sequence[Task]) -> list[Task]:
    """The running tasks, back to pending with their checkpoints: nobody runs them any more."""
    return [attrs.evolve(task, status=PENDING) for task in tasks if task.status == RUNNING]


def next_pending(tasks: Sequence[Task]) -> Task | None:
    """The pending task first in line, or None when nothing is left to do."""
    waiting = [task for task in tasks if task.status == PENDING]
    return min(waiting, key=lambda task: task.order) if waiting else None


def generation_task(order: int, context: int, turn: int) -> Task:
    """Model request number `turn` of a prompt, for the entries before `context` (and no later one)."""
    return Task(f"t{order}", GENERATION, order, PENDING, {"context": context, "turn": turn}, {"phase": "request"})


def tool_task(order: int, assistant: str, call_id: str, turn: int) -> Task:
    """The call `call_id` of the assistant entry `assistant` (made in turn `turn`), still to be run."""
    inputs = {"assistant": assistant, "call": call_id, "turn": turn}
    return Task(f"t{order}", TOOL, order, PENDING, inputs, {"phase": "call"})
