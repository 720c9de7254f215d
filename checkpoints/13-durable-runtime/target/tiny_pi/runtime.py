"""Runtime: one conversation that every mode drives the same way, kept on disk as it goes.

Chapter 09's Agent answers one prompt at a time and refuses a second;
chapters 10 and 11 wired a session log and compaction around it inside
agent.py. The Runtime owns all of that: the model, the tools, the system
prompt, the session log and compaction. A mode (text, JSON lines, an
interactive terminal) only hands it prompts and renders its events.

Its rules:
- a prompt given while another runs is queued, and answered in order;
- an entry is appended only after the agent has produced its message, and a
  system prompt entry only when the prompt differs from the last recorded one;
- a failed write poisons the runtime: every later prompt fails with that error;
- `flush` waits until the queue is answered; `dispose` waits for that too,
  closes the log (every entry already on disk) and refuses new prompts.
"""

from __future__ import annotations

import math
import sys

import trio

from tiny_pi.agent_events import AgentEvent, AgentOutcome
from tiny_pi.agent_loop import DEFAULT_MAX_TURNS, ToolUsingModel
from tiny_pi.compaction import (
    CompactionError,
    ContextLimits,
    Cut,
    context_tokens,
    estimate_tokens,
    find_cut,
    fixed_tokens,
    keep_budget,
    summarise,
)
from tiny_pi.messages import Usage, user_message
from tiny_pi.session import OpenSession, SessionRecorder
from tiny_pi.session_writer import SessionWriteError
from tiny_pi.stateful_agent import Agent, Listener
from tiny_pi.tools import ToolRegistry

DISPOSED = "the runtime is disposed: it takes no more prompts"
POISONED = "the session log failed, so the runtime takes no more prompts: {failure}"
BUSY = "busy: a prompt is being answered; wait for it, or press Ctrl-C"
NO_SESSION = "compaction needs a session: start with --session FILE"
ABORTED_COMPACTING = "aborted while compacting: the prompt was not sent"


class RuntimeRefused(RuntimeError):
    """The runtime will not take this prompt: it is disposed, or a write failed."""


class Runtime:
    """Model, tools, system prompt, session log and compaction behind one queue of prompts."""

    def __init__(
        self,
        model: ToolUsingModel,
        registry: ToolRegistry,
        nursery: trio.Nursery,
        *,
        system_prompt: str | None = None,
        session: OpenSession | None = None,
        limits: ContextLimits | None = None,
        max_turns: int = DEFAULT_MAX_TURNS,
    ) -> None:
        sections = {"runtime": system_prompt} if system_prompt else None
        resumed = session.messages if session is not None else ()
        self.agent = Agent(model, registry, nursery, messages=resumed, system_prompt=sections, max_turns=max_turns)
        self.model = model
        self.registry = registry
        self.limits = limits
        self.system_prompt = system_prompt or ""
        self.recorded_prompt = session.system_prompt if session is not None else ""
        self.recorder = None
        if session is not None:  # subscribed first: on disk before any mode hears of the event
            self.recorder = SessionRecorder(session.writer, self.agent, session.ids, session.measured_from)
            self.agent.subscribe(self.record)
        self.failure: str | None = None
        self.disposed = False
        self.last_outcome: AgentOutcome | None = None
        self._compacting = trio.CancelScope()  # the compaction before a prompt; abort cancels it
        self._pending = 0
        self._drained = trio.Event()
        self._drained.set()
        self._send, receive = trio.open_memory_channel[str](math.inf)
        nursery.start_soon(self._work, receive)

    @property
    def busy(self) -> bool:
        """True while a prompt is queued or being answered."""
        return self._pending > 0

    def subscribe(self, listener: Listener) -> None:
        """Tell `listener` every agent event, after the session log has it."""
        self.agent.subscribe(listener)

    def prompt(self, text: str) -> None:
        """Queue `text`; it is answered after every prompt queued before it."""
        if self.failure is not None:
            raise RuntimeRefused(POISONED.format(failure=self.failure))
        if self.disposed:
            raise RuntimeRefused(DISPOSED)
        if self._pending == 0:
            self._drained = trio.Event()
        self._pending += 1
        self._send.send_nowait(text)

    def steer(self, text: str) -> None:
        """Say `text` to the running prompt; with none running, it is queued as a prompt."""
        if self.agent.state.running:
            self.agent.steer(text)
        else:
            self.prompt(text)

    def abort(self) -> None:
        """Stop the prompt being answered, or the compaction before it; the queued ones still run."""
        self._compacting.cancel()
        self.agent.abort()

    async def flush(self) -> None:
        """Return once every queued prompt is answered (or dropped after a failure)."""
        await trio.lowlevel.checkpoint()
        while self._pending:
            await self._drained.wait()

    async def dispose(self) -> None:
        """Answer the queue, then close the log: every entry is on disk. Later prompts are refused."""
        await self.flush()
        self.disposed = True
        self._send.close()
        if self.recorder is not None:
            self.recorder.writer.close()

    async def compact(self) -> None:
        """Summarise every interaction but the newest now (the /compact command)."""
        if self.busy:
            raise RuntimeRefused(BUSY)
        if self.recorder is None:
            raise RuntimeRefused(NO_SESSION)
        messages = self.agent.messages
        fixed = fixed_tokens(self.agent.system_prompt, self.registry.specs())
        newest = find_cut(messages, budget=0)  # keeps the newest interaction only
        tokens = context_tokens(messages, fixed, self.recorder.measured_from)
        await self._compact(Cut(newest.index, newest.kept_tokens, False), tokens)

    def record(self, event: AgentEvent) -> None:
        """The session listener: a write that fails aborts the run and poisons the runtime."""
        try:
            self.recorder(event)
        except SessionWriteError as error:  # the recorder has aborted the run already
            self.poison(error)

    def poison(self, error: SessionWriteError) -> None:
        """Remember the first failed write: from now on every prompt fails with it."""
        if self.failure is None:
            self.failure = str(error)
            print(f"session: {error}; the runtime takes no more prompts", file=sys.stderr)

    async def _work(self, receive: trio.MemoryReceiveChannel[str]) -> None:
        """The queue's one consumer: prompts are answered one at a time, in the order given."""
        async for text in receive:
            if self.failure is None:
                try:
                    await self._answer(text)
                except SessionWriteError as error:
                    self.poison(error)
            self._pending -= 1
            if self._pending == 0:
                self._drained.set()

    async def _answer(self, text: str) -> None:
        """One prompt: compact if it would not fit, note a changed system prompt, run, wait."""
        self.last_outcome = None
        if self.recorder is not None and self.limits is not None:
            self.last_outcome = await self._compact_before(text)
            if self.last_outcome is not None:  # failed or aborted: the prompt is not sent
                return
        self._record_system_prompt()
        self.agent.prompt(text)
        await self.agent.wait_for_idle()
        self.last_outcome = self.agent.state.outcome

    def _record_system_prompt(self) -> None:
        """Append a system prompt entry when (and only when) it differs from the last one recorded."""
        if self.recorder is not None and self.system_prompt != self.recorded_prompt:
            self.recorder.writer.append_system_prompt(self.system_prompt)
            self.recorded_prompt = self.system_prompt

    async def _compact_before(self, text: str) -> AgentOutcome | None:
        """Compact if `text` would not fit; the outcome of a prompt that cannot be sent, else None."""
        with trio.CancelScope() as self._compacting:
            try:
                await self._compact_if_over(text)
            except CompactionError as error:
                message = f"compaction failed: {error}; the session is unchanged"
                print(message, file=sys.stderr)
                return AgentOutcome("error", 0, Usage(), (), error_message=message)
        if self._compacting.cancelled_caught:
            return AgentOutcome("aborted", 0, Usage(), (), error_message=ABORTED_COMPACTING)
        return None

    async def _compact_if_over(self, prompt: str) -> None:
        """Before the prompt's first model call: if the context would not fit, send a summary instead."""
        messages = self.agent.messages
        fixed = fixed_tokens(self.agent.system_prompt, self.registry.specs())
        added = estimate_tokens(user_message(prompt))
        tokens = context_tokens(messages, fixed, self.recorder.measured_from) + added
        if tokens <= self.limits.window - self.limits.reserve:
            return
        cut = find_cut(messages, keep_budget(self.limits.window, self.limits.reserve, fixed))
        after = await self._compact(cut, tokens, added)
        if after > self.limits.window - self.limits.reserve:  # a long summary, or a newest interaction over budget
            print(f"compaction: the summary and the kept messages still exceed "
                  f"{self.limits.window - self.limits.reserve} tokens; sending them anyway", file=sys.stderr)

    async def _compact(self, cut: Cut, tokens: int, added: int = 0) -> int:
        """Summarise the messages before `cut`, record it, go on from the summary and the kept.

        Returns the tokens of the context from now on plus `added` (the coming prompt); 0 when nothing was cut.
        """
        messages = self.agent.messages
        if cut.newest_over_budget:
            print(f"compaction: the newest interaction alone (~{cut.kept_tokens} tokens) "
                  "is over the budget; it is kept whole", file=sys.stderr)
        if cut.index == 0:
            print("compaction: nothing older to summarise; sending the context as it is", file=sys.stderr)
            return 0
        summary = await summarise(self.model, messages[: cut.index])
        self.agent.replace_messages(self.recorder.record_compaction(summary, cut.index, tokens))
        fixed = fixed_tokens(self.agent.system_prompt, self.registry.specs())
        after = context_tokens(self.agent.messages, fixed, self.recorder.measured_from) + added
        print(f"[compaction] ~{tokens} -> ~{after} tokens: {cut.index} messages summarised, "
              f"{len(messages) - cut.index} kept", file=sys.stderr)
        return after
