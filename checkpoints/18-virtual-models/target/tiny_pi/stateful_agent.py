"""Agent: one conversation that an application holds across runs.

`run_agent` (chapter 07) answers one request and forgets. An application
needs more: a transcript that grows prompt after prompt, a way to say
something while a run is going (`steer`) or after it (`follow_up`), a Stop
button (`abort`), and listeners that see every event with a state that is
already up to date. The Agent owns no loop of its own: each run is
`run_agent` on the shared transcript, started in the application's nursery.

Only `wait_for_idle` blocks. `prompt`, `continue_`, `steer`, `follow_up`
and `abort` return at once, so a key handler or a listener may call them.
"""

from __future__ import annotations

import sys
from collections import deque
from functools import partial
from typing import Callable, Iterable, Mapping, Sequence

import trio
from attrs import define, field

from tiny_pi.abort import AbortSignal
from tiny_pi.agent_events import AgentEndEvent, AgentEvent, AgentOutcome, AgentStartEvent, RunEnd
from tiny_pi.agent_loop import DEFAULT_MAX_TURNS, BeforeModelCall, ToolUsingModel, add_usage, keep_as_is, run_agent
from tiny_pi.agent_state import AgentState, reduce_state
from tiny_pi.messages import AgentContext, AgentMessage, AssistantMessage, UserMessage, Usage, user_message
from tiny_pi.model_catalog import PrepareRequest
from tiny_pi.tools import ToolRegistry

ABORT_GRACE = 1.0  # seconds a run has to end by itself after an abort
BUSY = "busy: a run is in progress; steer it, follow it up, abort it or wait_for_idle first"
NOT_RUNNING = "no run in progress: {what} reaches only a running agent; use prompt"
NOTHING_TO_CONTINUE = "nothing to continue: {why}"
EMPTY_TRANSCRIPT = "the transcript is empty"
ALREADY_ANSWERED = "the model has already answered; prompt with a new message"
LISTENER_RAISED = "listener {name} raised {kind}: {error}"
ABORTED_BEFORE_START = "the run was aborted before it started"
IGNORED_ABORT = f"the run did not stop within {ABORT_GRACE} s of the abort and was cancelled"

Listener = Callable[[AgentEvent], None]


class AgentError(RuntimeError):
    """A lifecycle rule was broken; the call that raised it changed nothing."""


@define
class Run:
    """What belongs to one run only: its number, its abort signal and its queues."""

    number: int
    first_new: int = 0  # where the run's own messages start in the transcript
    signal: AbortSignal = field(factory=AbortSignal)
    steering: deque[UserMessage] = field(factory=deque)
    follow_ups: deque[UserMessage] = field(factory=deque)

    def take_queued(self, end: RunEnd | None) -> list[AgentMessage]:
        """The loop's hook: every steer, in order; after a natural stop without one, one follow-up."""
        if self.steering:
            messages = list(self.steering)
            self.steering.clear()
            return messages
        if end == "stop" and self.follow_ups:
            return [self.follow_ups.popleft()]
        return []


class Agent:
    """A conversation with a model and its tools, one run at a time, watched by listeners."""

    def __init__(
        self,
        model: ToolUsingModel,
        registry: ToolRegistry,
        nursery: trio.Nursery,
        *,
        messages: Iterable[AgentMessage] = (),
        system_prompt: Mapping[str, str] | None = None,
        max_turns: int = DEFAULT_MAX_TURNS,
    ) -> None:
        self._model = model
        self.before_model_call: BeforeModelCall = keep_as_is  # the loop's seam; set it before a run
        self.prepare_request: PrepareRequest | None = None  # chapter 18: a router, asked before each request
        self._registry = registry
        self._nursery = nursery
        self._max_turns = max_turns
        self._context = AgentContext(messages=list(messages))
        self._sections: dict[str, str] = dict(system_prompt or {})
        self._listeners: list[Listener] = []
        self._state = AgentState()
        self._runs = 0
        self._run: Run | None = None
        self._idle = trio.Event()
        self._idle.set()

    @property
    def state(self) -> AgentState:
        """The state after the last event; a frozen record, safe to keep."""
        return self._state

    @property
    def messages(self) -> tuple[AgentMessage, ...]:
        """The transcript as it is now: a copy, so nobody can change the agent's own."""
        return tuple(self._context.messages)

    @property
    def system_prompt(self) -> str | None:
        """The sections' texts, in the order they were first set, a blank line apart."""
        return "\n\n".join(self._sections.values()) or None

    def set_system_section(self, name: str, text: str | None) -> None:
        """Set one named section of the system prompt, or remove it with None; the next run uses it."""
        if text is None:
            self._sections.pop(name, None)
        else:
            self._sections[name] = text

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Tell `listener` every event from now on; call what this returns to stop."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def prompt(self, text: str) -> None:
        """Start a run that answers `text`, on the transcript of every earlier run."""
        self._refuse_if_busy()
        self._context.messages.append(user_message(text))
        self._start_run()

    def continue_(self) -> None:
        """Start a run on the transcript as it is, e.g. after a run that ended in an error."""
        self._refuse_if_busy()
        why = nothing_to_continue(self._context.messages)
        if why is not None:
            raise AgentError(NOTHING_TO_CONTINUE.format(why=why))
        self._start_run()

    def replace_messages(self, messages: Iterable[AgentMessage]) -> None:
        """Start the next run from `messages` (a compacted transcript); refused during a run."""
        self._refuse_if_busy()
        self._context.messages = list(messages)

    def steer(self, text: str) -> None:
        """Say `text` to the running run: it goes with the next model call, once the turn's tools are done."""
        self._running("steer").steering.append(user_message(text))

    def follow_up(self, text: str) -> None:
        """Ask `text` once the running run has stopped by itself; it keeps the run going."""
        self._running("follow_up").follow_ups.append(user_message(text))

    def abort(self) -> None:
        """Stop the running run, if there is one: the model call and the tools get the signal."""
        if self._run is not None:
            self._run.signal.abort()

    @property
    def aborting(self) -> bool:
        """True from abort() until the run's agent_end: asked to stop, not stopped yet."""
        return self._run is not None and self._run.signal.aborted

    async def wait_for_idle(self) -> None:
        """Return once no run is going, including runs that listeners started."""
        await trio.lowlevel.checkpoint()
        while self._run is not None:
            await self._idle.wait()

    def _refuse_if_busy(self) -> None:
        if self._run is not None:
            raise AgentError(BUSY)

    def _running(self, what: str) -> Run:
        if self._run is None:
            raise AgentError(NOT_RUNNING.format(what=what))
        return self._run

    def _start_run(self) -> None:
        """Make the run current now, so that a second prompt is refused even before its task starts."""
        self._runs += 1
        run = Run(self._runs)
        self._run = run
        self._idle = trio.Event()
        self._context.system_prompt = self.system_prompt
        self._nursery.start_soon(self._play, run)

    async def _play(self, run: Run) -> None:
        """One run, however it ends: every run gives exactly one agent_end."""
        emit = partial(self._receive, run)
        run.first_new = len(self._context.messages)
        if run.signal.aborted:  # aborted before its task began: nothing may reach the model
            emit(AgentStartEvent())
            emit(AgentEndEvent(self._aborted(run.first_new, ABORTED_BEFORE_START)))
            return
        outcome = None
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel_if_ignored, run.signal, scope)
                outcome = await run_agent(
                    self._model, self._context, self._registry, signal=run.signal,
                    max_turns=self._max_turns, on_event=emit, take_queued=run.take_queued,
                    before_model_call=partial(self._before_model_call, run), prepare_request=self.prepare_request,
                )
                nursery.cancel_scope.cancel()  # the run ended: stop watching the signal
        if outcome is None:  # cancelled: the model (or a tool) ignored the abort
            emit(AgentEndEvent(self._aborted(run.first_new, IGNORED_ABORT)))

    async def _before_model_call(self, run: Run, messages: list[AgentMessage]) -> list[AgentMessage]:
        """The seam, followed here too: a cancelled run's outcome must still name exactly its own messages.

        What the seam returns keeps the run's own messages at its end, so a
        shorter past moves their start by as many places as the list shrank.
        """
        given = len(messages)  # counted first: the seam may change the list it is given
        kept = await self.before_model_call(messages)
        run.first_new = max(run.first_new + len(kept) - given, 0)
        return kept

    def _aborted(self, first_new: int, why: str) -> AgentOutcome:
        """The outcome of a run the Agent ended itself, from what the transcript got."""
        messages = tuple(self._context.messages[first_new:])
        usage = Usage()
        for message in messages:
            if isinstance(message, AssistantMessage):
                usage = add_usage(usage, message.usage)
        turns = self._state.turn if self._state.running else 0
        return AgentOutcome("aborted", turns, usage, messages, error_message=why)

    def _receive(self, run: Run, event: AgentEvent) -> None:
        """Update the state first, then tell the listeners: they see the state the event made."""
        self._state = reduce_state(self._state, run.number, event)
        if event.type == "agent_end" and self._run is run:
            self._run = None  # idle before anyone hears of the end: a listener may prompt again
            self._idle.set()
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception as error:  # one broken listener must not silence the others
                report_listener_error(listener, error)


async def cancel_if_ignored(signal: AbortSignal, scope: trio.CancelScope) -> None:
    """After an abort, give the run ABORT_GRACE seconds to end by itself, then cancel it."""
    await signal.wait()
    await trio.sleep(ABORT_GRACE)
    scope.cancel()


def nothing_to_continue(messages: Sequence[AgentMessage]) -> str | None:
    """Why a run cannot go on from `messages`, or None when it can."""
    if not messages:
        return EMPTY_TRANSCRIPT
    last = messages[-1]
    if isinstance(last, AssistantMessage) and last.stop_reason not in ("error", "aborted"):
        return ALREADY_ANSWERED
    return None


def report_listener_error(listener: Listener, error: Exception) -> None:
    """One line on stderr: the run goes on, and so do the other listeners."""
    name = getattr(listener, "__qualname__", type(listener).__qualname__)
    print(LISTENER_RAISED.format(name=name, kind=type(error).__name__, error=error), file=sys.stderr)
