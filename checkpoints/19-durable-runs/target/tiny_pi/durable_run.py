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

        def change(tx: Transaction) -> None:
            entry = put_entry(tx, user_message(text))
            put_task(tx, generation_task(len(tx.list("tasks")), entry.index + 1, turn=1))

        await self.session.commit(change)

    async def run(self) -> None:
        """Run pending tasks, first in line first, until none is left."""
        while (task := next_pending(self.tasks())) is not None:
            if task.kind == GENERATION:
                await self.start(task)
                await self.run_generation(task)
            else:
                await self.run_round(task)

    async def start(self, task: Task) -> None:
        """Commit that `task` is running; its work starts after this returns."""
        await self.session.commit(lambda tx: put_task(tx, moved(current(tx, task.id), RUNNING)))

    async def run_generation(self, task: Task) -> None:
        """One model request: a cut reply first becomes an aborted entry, then the request goes out."""
        if "partial" in task.checkpoint:
            await self.session.commit(lambda tx: keep_cut_reply(tx, task.id))
        messages = self.request_messages(task.input["context"])
        reply, terminal = await self.stream_reply(task, messages)

        def change(tx: Transaction) -> None:
            entry = put_entry(tx, reply)
            if reply.stop_reason == "toolUse":
                for call in tool_calls(reply):
                    put_task(tx, tool_task(len(tx.list("tasks")), entry.id, call.id, task.input["turn"]))
            put_task(tx, moved(current(tx, task.id), COMPLETED, checkpoint={"phase": "request"}))

        await self.session.commit(change)
        self.on_event(terminal)

    def request_messages(self, context: int) -> list[AgentMessage]:
        """The entries before `context`, without the aborted and error replies: no model is sent those."""
        return [entry.message for entry in self.entries() if entry.index < context and not failed_reply(entry.message)]

    async def stream_reply(self, task: Task, messages: list[AgentMessage]) -> tuple[AssistantMessage, Any]:
        """Stream the request; each partial is committed before its event goes on. Returns the reply and its terminal event."""
        context = AgentContext(messages=messages, system_prompt=self.system_prompt)
        stream = self.model.stream(context, signal=self.signal, tools=self.registry.declared())
        terminal = None
        async with stream:
            async for event in stream:
                if event.type in PARTIAL_EVENTS:
                    await self.save_partial(task, event.partial)
                if event.type in TERMINAL_EVENTS:
                    terminal = event  # shown once the reply is committed
                else:
                    self.on_event(event)
            return await stream.result(), terminal

    async def save_partial(self, task: Task, partial: AssistantMessage) -> None:
        """Put the reply so far into the task's checkpoint."""
        checkpoint = {"phase": "request", "partial": to_data(partial)}
        await self.session.commit(lambda tx: put_task(tx, attrs.evolve(current(tx, task.id), checkpoint=checkpoint)))

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
        if task.checkpoint["phase"] == "execute":
            if task.checkpoint["replay"] == SAFE and self.policy(call.name) == SAFE:
                await self.execute(task, attrs.evolve(call, arguments=task.checkpoint["arguments"]))
            else:
                result = interrupted_result(call)
                await self.settle(task, result, FAILED, error="interrupted")
                self.on_event(ToolExecutionEndEvent(call, result))
            return
        intent = {"phase": "execute", "arguments": call.arguments, "replay": self.policy(call.name)}
        await self.session.commit(lambda tx: put_task(tx, attrs.evolve(current(tx, task.id), checkpoint=intent)))
        await self.execute(task, call)

    async def execute(self, task: Task, call: ToolCall) -> None:
        """Run the call outside any commit, then settle its result."""
        self.on_event(ToolExecutionStartEvent(call))
        result = await execute_tool_call(call, self.registry, signal=self.signal)
        await self.settle(task, result, COMPLETED)
        self.on_event(ToolExecutionEndEvent(call, result))

    async def settle(self, task: Task, result: ToolResultMessage, status: str, error: str | None = None) -> None:
        """Commit the result and the task's end; the round's last result also commits the next request."""

        def change(tx: Transaction) -> None:
            entry = put_entry(tx, result)
            put_task(tx, moved(current(tx, task.id), status, error=error))
            turn = task.input["turn"]
            if round_settled(tx, task.input["assistant"]) and turn < self.max_turns:
                put_task(tx, generation_task(len(tx.list("tasks")), entry.index + 1, turn=turn + 1))

        await self.session.commit(change)


def reopen(tx: Transaction) -> None:
    """The change that opens a store: every running task back to pending, checkpoint kept."""
    for task in reopened([task_from_data(data) for data in tx.list("tasks")]):
        put_task(tx, task)


def keep_cut_reply(tx: Transaction, task_id: str) -> None:
    """The change that keeps a reply cut by a crash: an aborted entry, and a checkpoint without it."""
    task = current(tx, task_id)
    partial = message_from_data(task.checkpoint["partial"])
    put_entry(tx, attrs.evolve(partial, stop_reason="aborted", error_message=CUT_OFF))
    put_task(tx, attrs.evolve(task, checkpoint={"phase": "request"}))


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
    tasks = [task_from_data(data) for data in tx.list("tasks")]
    return all(task.status in (COMPLETED, FAILED) for task in tasks
               if task.kind == TOOL and task.input["assistant"] == assistant)


def tool_calls(message: AssistantMessage) -> list[ToolCall]:
    """The reply's tool calls, in order."""
    return [block for block in message.content if isinstance(block, ToolCall)]


def failed_reply(message: AgentMessage) -> bool:
    """An aborted or error reply: kept in the conversation, never sent again."""
    return isinstance(message, AssistantMessage) and message.stop_reason in ERROR_REASONS


def interrupted_result(call: ToolCall) -> ToolResultMessage:
    """The result a call gets when it may have run and must not run again."""
    message = INTERRUPTED.format(name=call.name)
    return attrs.evolve(error_result(call, message), details={"error": "interrupted", "message": message})


def unfinished(tasks: Sequence[Task]) -> list[Task]:
    """The tasks a later `run` would still take up."""
    return [task for task in tasks if task.status not in (COMPLETED, FAILED)]
