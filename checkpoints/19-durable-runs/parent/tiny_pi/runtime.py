"""Runtime: one conversation that every mode drives the same way, kept on disk as it goes.

Chapter 09's Agent answers one prompt at a time and refuses a second;
chapters 10 to 12 wired a session log, compaction, resources and
extensions around it inside agent.py. The Runtime owns all of that: the
model, the tools (chapter 12's extension tools are in the registry it is
given), the system prompt (chapter 12's sections, from the resources), the
extensions' listeners, the session log and the compaction checked before
every model call (chapter 11's Compactor, moved here). A mode (text, JSON
lines, an interactive terminal) only hands it prompts and renders its events.

Its rules:
- a prompt given while another runs is queued, and answered in order;
- an entry is appended only after the agent has produced its message, and a
  system prompt entry only when the prompt differs from the last recorded one;
- a prompt is made valid text first (a byte of argv or stdin that is not
  UTF-8 arrives as a lone surrogate, which becomes U+FFFD, as in chapter 05);
- a failed write poisons the runtime: every later prompt fails with that error,
  whatever failed (the disk, or an entry JSON text cannot hold, like a NaN);
- `flush` waits until the queue is answered; `dispose` waits for that too,
  closes the log (every entry already on disk) and refuses new prompts;
- a resumed session's activated tools are active again (chapter 15): the
  patches on its path say which, so the first request declares them still;
- with a router (chapter 18), every request of the loop is routed, and a
  state a route changed is written as a router_state entry after the
  messages the session recorder saves at the same event.
"""

from __future__ import annotations

import math
import sys
from typing import Mapping, Sequence

import trio

from tiny_pi.agent_events import AgentEvent, AgentOutcome
from tiny_pi.agent_loop import DEFAULT_MAX_TURNS, ToolUsingModel
from tiny_pi.compaction import (
    SUMMARY_INTRO,
    CompactionError,
    ContextLimits,
    Cut,
    context_tokens,
    find_cut,
    fixed_tokens,
    keep_budget,
    summarise,
    summary_message,
)
from tiny_pi.extensions import Extension, subscribe_listeners
from tiny_pi.messages import AgentMessage, Usage, text_of, user_message
from tiny_pi.providers.chunks import valid_text
from tiny_pi.routing import Router
from tiny_pi.session import OpenSession, SessionRecorder
from tiny_pi.session_writer import SessionWriteError
from tiny_pi.stateful_agent import Agent, Listener
from tiny_pi.tools import ToolRegistry

DISPOSED = "the runtime is disposed: it takes no more prompts"
POISONED = "the session log failed, so the runtime takes no more prompts: {failure}"
BUSY = "busy: a prompt is being answered; wait for it, or press Ctrl-C"
NO_LIMITS = "no compaction: the runtime was given no context limits"
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
        system_prompt: Mapping[str, str] | None = None,
        extensions: Sequence[Extension] = (),
        session: OpenSession | None = None,
        limits: ContextLimits | None = None,
        max_turns: int = DEFAULT_MAX_TURNS,
        router: Router | None = None,
    ) -> None:
        resumed = session.messages if session is not None else ()
        if session is not None:
            registry.activate(session.declared)  # what a tool_search activated before the reopen
        self.agent = Agent(model, registry, nursery, messages=resumed, system_prompt=system_prompt, max_turns=max_turns)
        self.recorded_prompt = session.system_prompt if session is not None else ""
        self.recorder = None
        if session is not None:  # subscribed first: on disk before any mode hears of the event
            self.recorder = SessionRecorder(session.writer, self.agent, session.ids)
            self.agent.subscribe(self.record)
        subscribe_listeners(self.agent, extensions)
        self.compactor = None
        if limits is not None:  # with a session or without one; checked before every model call
            measured_from = session.measured_from if session is not None else 0
            self.compactor = Compactor(model, registry, self.agent, limits, self.recorder, measured_from)
            self.agent.before_model_call = self.compactor.before_call
        self.router = router
        if router is not None:  # chapter 18: subscribed after the recorder, so the turn's messages come first
            self.agent.prepare_request = router.prepare_request
            self.agent.subscribe(self.save_router_states)
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

    @property
    def system_prompt(self) -> str:
        """The system prompt the next model call is sent ("" for none): the agent's sections, joined."""
        return self.agent.system_prompt or ""

    def subscribe(self, listener: Listener) -> None:
        """Tell `listener` every agent event, after the session log has it."""
        self.agent.subscribe(listener)

    def prompt(self, text: str) -> None:
        """Queue `text` as valid text; it is answered after every prompt queued before it."""
        text = valid_text(text)
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
            self.agent.steer(valid_text(text))
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
        if self.compactor is None:
            raise RuntimeRefused(NO_LIMITS)
        await self.compactor.all_but_newest()

    def record(self, event: AgentEvent) -> None:
        """The session listener: a write that fails, for any reason, aborts the run and poisons the runtime."""
        try:
            self.recorder(event)
        except Exception as error:  # the disk, or a ValueError from encode; the run is aborted already
            self.poison(error)

    def save_router_states(self, event: AgentEvent) -> None:
        """Each state the router changed, as a router_state entry; with no session, it is dropped."""
        if event.type not in ("turn_start", "agent_end"):
            return
        for model, state in self.router.take_unsaved():
            if self.recorder is not None and self.failure is None:
                try:
                    self.recorder.writer.append_router_state(model, state)
                except Exception as error:  # as in record: the run stops, the runtime is poisoned
                    self.agent.abort()
                    self.poison(error)

    def poison(self, error: Exception) -> None:
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
                except (SessionWriteError, ValueError) as error:  # a system prompt entry not written
                    self.poison(error)
            self._pending -= 1
            if self._pending == 0:
                self._drained.set()

    async def _answer(self, text: str) -> None:
        """One prompt: compact if it would not fit, note a changed system prompt, run, wait."""
        self.last_outcome = None
        if self.compactor is not None:
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
                await self.compactor.before_prompt(text)
            except CompactionError as error:
                message = f"compaction failed: {error}; the session is unchanged"
                print(message, file=sys.stderr)
                return AgentOutcome("error", 0, Usage(), (), error_message=message)
        if self._compacting.cancelled_caught:
            return AgentOutcome("aborted", 0, Usage(), (), error_message=ABORTED_COMPACTING)
        return None


class Compactor:
    """Keeps one conversation within N - R: checked before each prompt, and before each later model call.

    Before a prompt the check runs while the prompt is not yet in the
    transcript, so a failed summary call changes nothing. The loop's
    `before_model_call` runs it before every later call of the run, whose tool
    round trips may outgrow N - R. With a session the recorder writes each
    compaction to the file; without one, the summary replaces the old
    messages in memory only.
    """

    def __init__(
        self, model: ToolUsingModel, registry: ToolRegistry, agent: Agent, limits: ContextLimits,
        recorder: SessionRecorder | None = None, measured_from: int = 0,
    ) -> None:
        self.model = model
        self.registry = registry
        self.agent = agent
        self.limits = limits
        self.recorder = recorder
        self.measured_from = measured_from  # usage before this message measured a context no longer sent
        self.prompt_checked = False  # the run's first call was checked before its prompt
        self.said: set[str] = set()  # the notices given since the last prompt

    async def before_prompt(self, prompt: str) -> None:
        """Compact for the prompt's first model call; a CompactionError leaves everything as it was.

        The prompt is the newest interaction, so everything before it may be
        summarised: the check runs on the transcript with the prompt at its end,
        and the prompt is taken off again, for the run adds it.
        """
        self.said.clear()
        self.prompt_checked = True
        checked = await self.compacted([*self.agent.messages, user_message(prompt)])
        self.agent.replace_messages(checked[:-1])

    async def before_call(self, messages: list[AgentMessage]) -> list[AgentMessage]:
        """The loop's seam: compact before a later call of the run; a failed summary sends the context as it is."""
        if self.prompt_checked:
            self.prompt_checked = False
            return messages
        try:
            return await self.compacted(messages)
        except CompactionError as error:
            print(f"compaction failed: {error}; sending the context as it is", file=sys.stderr)
            return messages

    async def all_but_newest(self) -> None:
        """Summarise every interaction but the newest, however few tokens they hold (/compact)."""
        self.said.clear()
        messages = self.agent.messages
        newest = find_cut(messages, budget=0)  # keeps the newest interaction only
        cut = Cut(newest.index, newest.kept_tokens, False)  # kept whole, and not a budget to warn about
        tokens = context_tokens(messages, self.fixed(), self.measured_from)
        self.agent.replace_messages(await self.summarised(messages, cut, tokens))

    async def compacted(self, messages: Sequence[AgentMessage]) -> list[AgentMessage]:
        """`messages`, or the summary and the kept messages if `messages` would exceed N - R."""
        tokens = context_tokens(messages, self.fixed(), self.measured_from)
        if tokens <= self.limits.window - self.limits.reserve:
            return list(messages)
        cut = find_cut(messages, keep_budget(self.limits.window, self.limits.reserve, self.fixed()))
        return await self.summarised(messages, cut, tokens)

    async def summarised(self, messages: Sequence[AgentMessage], cut: Cut, tokens: int) -> list[AgentMessage]:
        """The summary of the messages before `cut`, then the rest; recorded when there is a session."""
        limit = self.limits.window - self.limits.reserve
        if cut.newest_over_budget:
            self.say_once("newest", f"compaction: the newest interaction alone (~{cut.kept_tokens} tokens) "
                                    "is over the budget; it is kept whole")
        if only_a_summary(messages[: cut.index]):
            self.say_once("nothing", "compaction: nothing older to summarise; sending the context as it is")
            if tokens > limit:  # a /compact of a context within the limit is no call over it
                say_over_limit(tokens, limit)
            return list(messages)
        summary = await summarise(self.model, messages[: cut.index])
        if self.recorder is not None:
            self.recorder.record_compaction(summary, cut.index, tokens)
        kept = [summary_message(summary), *messages[cut.index :]]
        self.measured_from = len(kept)
        after = context_tokens(kept, self.fixed(), self.measured_from)
        print(f"[compaction] ~{tokens} -> ~{after} tokens: {cut.index} messages summarised, "
              f"{len(messages) - cut.index} kept", file=sys.stderr)
        if after > limit:  # a long summary, or a newest interaction over budget
            say_over_limit(after, limit)
        return kept

    def fixed(self) -> int:
        """The tokens sent with every call whatever the transcript: the system prompt and the tools' specs."""
        return fixed_tokens(self.agent.system_prompt, self.registry.specs())

    def say_once(self, kind: str, line: str) -> None:
        """A notice on stderr, once per prompt: the checks before the run's later calls would repeat it."""
        if kind not in self.said:
            self.said.add(kind)
            print(line, file=sys.stderr)


def say_over_limit(tokens: int, limit: int) -> None:
    """Every call that goes out over N - R is said, each time: the server may refuse it or cut it."""
    print(f"compaction: the next model call sends ~{tokens} tokens, over N - R = {limit}", file=sys.stderr)


def only_a_summary(messages: Sequence[AgentMessage]) -> bool:
    """True for no messages, or an earlier summary alone: summarising it again would gain nothing."""
    return all(text_of(message).startswith(SUMMARY_INTRO) for message in messages)
