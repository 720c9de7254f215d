"""A durable run: chapter 07's loop as tasks, each step committed before anyone sees it.

A prompt commits the user's entry and a generation task together. `run`
takes the pending tasks in order; each one is marked running in a commit,
and its work (a model call, a tool call) happens outside any commit. What
that work produces is committed before it is shown to a listener:

- a model call: every streamed partial goes into the task's checkpoint,
  then to the listeners; the reply, its tool tasks and the task's end are
  one commit;
- a tool call: its intent (the arguments, and the replay policy its
  registration declares) is committed before it runs; its result, the
  task's end and, once the round is settled, the next generation are one commit.

After a crash the store is the only witness. Opening it turns every
running task back to pending, and each task resumes from its checkpoint:
a tool past its intent reruns only when the stored and the current policy
both say `safe` (otherwise the model gets an `interrupted` error result);
a generation that had streamed part of a reply keeps that part as an
aborted entry and sends the same request again from scratch. Aborted and
error replies are kept for whoever reads the run, and never sent to a model.

A run is stopped by cancelling it: to the store, that is a crash.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import attrs
import trio

from tiny_pi.abort import AbortSignal
from tiny_pi.agent_events import AgentEvent, ToolExecutionEndEvent, ToolExecutionStartEvent
from tiny_pi.agent_loop import DEFAULT_MAX_TURNS, ToolUsingModel, ignore, path_queue
from tiny_pi.durable_store import DurableSession, SqliteStore, Transaction
from tiny_pi.durable_tasks import (
    COMPLETED,
    FAILED,
    GENERATION,
    PENDING,
    RUNNING,
    SAFE,
    TOOL,
    UNSAFE,
    Entry,
    Task,
    entry_from_data,
    entry_to_data,
    generation_task,
    moved,
    next_pending,
    reopened,
    task_from_data,
    task_to_data,
    tool_task,
)
from tiny_pi.messages import (
    ERROR_REASONS,
    AgentContext,
    AgentMessage,
    AssistantMessage,
    ToolCall,
    ToolResultMessage,
    user_message,
)
from tiny_pi.messages.transcript import message_from_data, to_data
from tiny_pi.tool_execution import error_result, execute_tool_call
from tiny_pi.tools import ToolRegistry

INTERRUPTED = "Tool {name!r} was interrupted and may have partially run"
CUT_OFF = "the run stopped before this reply was complete; its request was sent again"
PARTIAL_EVENTS = ("text_delta", "toolcall_delta", "toolcall_end")
TERMINAL_EVENTS = ("done", "error")


class DurableRun:
    """One conversation whose every step is a committed task; `open` it, `prompt` it, `run` it."""

    def __init__(
        self,
        session: DurableSession,
        model: ToolUsingModel,
        registry: ToolRegistry,
        *,
        replay: Mapping[str, str] | None = None,
        system_prompt: str | None = None,
        max_turns: int = DEFAULT_MAX_TURNS,
        on_event: Callable[[AgentEvent], None] = ignore,
    ) -> None:
        self.session = session
        self.model = model
        self.registry = registry
        self.replay = dict(replay or {})  # a tool not named here declares `unsafe`
        for name, policy in self.replay.items():
            if policy not in (SAFE, UNSAFE):
                raise ValueError(f"the replay policy of {name!r} is 'safe' or 'unsafe', got {policy!r}")
        self.system_prompt = system_prompt
        self.max_turns = max_turns
        self.on_event = on_event
        self.signal = AbortSignal()  # never aborted: a durable run is stopped by cancelling it

    @classmethod
    async def open(cls, store: SqliteStore, model: ToolUsingModel, registry: ToolRegistry, **options: Any) -> DurableRun:
        """The run kept in `store`, its running tasks back to pending (one commit, or none)."""
        run = cls(DurableSession(store), model, registry, **options)
        await run.session.commit(reopen)
        return run

    def tasks(self) -> list[Task]:
        """Every committed task, in line."""
        return sorted((task_from_data(data) for data in self.session.list("tasks")), key=lambda task: task.order)

    def entries(self) -> list[Entry]:
        """Every committed entry, in the conversation's order."""
        return sorted((entry_from_data(data) for data in self.session.list("entries")), key=lambda entry: entry.index)

    def messages(self) -> list[AgentMessage]:
        """The conversation as committed, aborted and error replies included."""
        return [entry.message for entry in self.entries()]

    def policy(self, name: str) -> str:
        """The replay policy the current registration declares for the tool `name`."""
        return self.replay.get(name, UNSAFE)

    async def prompt(self, text: str) -> None:
        """Commit the user's message and the generation task that answers it, together."""
        raise NotImplementedError("lab 19.3: write DurableRun.prompt")

    async def run(self) -> None:
        """Run pending tasks, first in line first, until none is left."""
        raise NotImplementedError("lab 19.3: write DurableRun.run")

    async def start(self, task: Task) -> None:
        """Commit that `task` is running; its work starts after this returns."""
        raise NotImplementedError("lab 19.3: write DurableRun.start")

    async def run_generation(self, task: Task) -> None:
        """One model request: a cut reply first becomes an aborted entry, then the request goes out."""
        raise NotImplementedError("lab 19.3: write DurableRun.run_generation")

    def request_messages(self, context: int) -> list[AgentMessage]:
        """The entries before `context`, without the aborted and error replies: no model is sent those."""
        raise NotImplementedError("lab 19.3: write DurableRun.request_messages")

    async def stream_reply(self, task: Task, messages: list[AgentMessage]) -> tuple[AssistantMessage, Any]:
        """Stream the request; each partial is committed before its event goes on. Returns the reply and its terminal event."""
        raise NotImplementedError("lab 19.3: write DurableRun.stream_reply")

    async def save_partial(self, task: Task, partial: AssistantMessage) -> None:
        """Put the reply so far into the task's checkpoint."""
        raise NotImplementedError("lab 19.3: write DurableRun.save_partial")

    async def run_round(self, first: Task) -> None:
        """The pending tool tasks of `first`'s reply, concurrently; calls on one path run in call order."""
        tasks = [task for task in self.tasks() if task.kind == TOOL and task.status == PENDING
                 and task.input["assistant"] == first.input["assistant"]]
        calls = [self.call_of(task) for task in tasks]

        async def run_one(task: Task, call: ToolCall, before: trio.Event | None, done: trio.Event) -> None:
            if before is not None:
                await before.wait()
            await self.start(task)
            await self.run_tool(task, call)
            done.set()

        async with trio.open_nursery() as nursery:
            for task, call, (before, done) in zip(tasks, calls, path_queue(calls)):
                nursery.start_soon(run_one, task, call, before, done)

    def call_of(self, task: Task) -> ToolCall:
        """The tool call a tool task stands for, read from its assistant entry."""
        reply = entry_from_data(self.session.get("entries", task.input["assistant"])).message
        return next(call for call in tool_calls(reply) if call.id == task.input["call"])

    async def run_tool(self, task: Task, call: ToolCall) -> None:
        """Commit the intent, then run; after a crash past the intent, rerun only if both policies say safe."""
        raise NotImplementedError("lab 19.4: write DurableRun.run_tool")

    async def execute(self, task: Task, call: ToolCall) -> None:
        """Run the call outside any commit, then settle its result."""
        raise NotImplementedError("lab 19.4: write DurableRun.execute")

    async def settle(self, task: Task, result: ToolResultMessage, status: str, error: str | None = None) -> None:
        """Commit the result and the task's end; the round's last result also commits the next request."""
        raise NotImplementedError("lab 19.4: write DurableRun.settle")


def reopen(tx: Transaction) -> None:
    """The change that opens a store: every running task back to pending, checkpoint kept."""
    raise NotImplementedError("lab 19.3: write reopen")


def keep_cut_reply(tx: Transaction, task_id: str) -> None:
    """The change that keeps a reply cut by a crash: an aborted entry, and a checkpoint without it."""
    raise NotImplementedError("lab 19.5: write keep_cut_reply")


def current(tx: Transaction, task_id: str) -> Task:
    """The task as this batch sees it."""
    return task_from_data(tx.get("tasks", task_id))


def put_task(tx: Transaction, task: Task) -> None:
    """Write `task` in this batch, replacing its record."""
    tx.put("tasks", task.id, task_to_data(task))


def put_entry(tx: Transaction, message: AgentMessage) -> Entry:
    """Append `message` to the conversation in this batch; returns its entry."""
    index = len(tx.list("entries"))
    entry = Entry(f"e{index}", index, message)
    tx.put("entries", entry.id, entry_to_data(entry))
    return entry


def round_settled(tx: Transaction, assistant: str) -> bool:
    """Whether every tool task of the reply `assistant` has ended, as this batch leaves them."""
    raise NotImplementedError("lab 19.4: write round_settled")


def tool_calls(message: AssistantMessage) -> list[ToolCall]:
    """The reply's tool calls, in order."""
    return [block for block in message.content if isinstance(block, ToolCall)]


def failed_reply(message: AgentMessage) -> bool:
    """An aborted or error reply: kept in the conversation, never sent again."""
    raise NotImplementedError("lab 19.3: write failed_reply")


def interrupted_result(call: ToolCall) -> ToolResultMessage:
    """The result a call gets when it may have run and must not run again."""
    raise NotImplementedError("lab 19.4: write interrupted_result")


def unfinished(tasks: Sequence[Task]) -> list[Task]:
    """The tasks a later `run` would still take up."""
    return [task for task in tasks if task.status not in (COMPLETED, FAILED)]
