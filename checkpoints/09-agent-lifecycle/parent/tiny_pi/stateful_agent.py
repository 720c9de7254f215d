"""Agent: one conversation that an application holds across runs.

`run_agent` (chapter 07) answers one request and forgets. An application
needs more: a transcript that grows prompt after prompt, a way to say
something while a run is going (`steer`) or after it (`follow_up`), a Stop
button (`abort`), and listeners that see every event with a state that is
already up to date. The Agent owns no loop of its own: each run is
`run_agent` on the shared transcript, started in the application's nursery.

Only `wait_for_idle` blocks. `prompt`, `continue_`, `steer`, `follow_up`
and `abort` return at once, so a key handler or a listener may call them.

Starter file of chapter 09: the constructor, the records and the names are
given; labs 9.2 to 9.4 write the behaviour.
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Iterable, Mapping, Sequence

import trio
from attrs import define, field

from tiny_pi.abort import AbortSignal
from tiny_pi.agent_events import AgentEvent, RunEnd
from tiny_pi.agent_loop import DEFAULT_MAX_TURNS, ToolUsingModel
from tiny_pi.agent_state import AgentState
from tiny_pi.messages import AgentContext, AgentMessage, UserMessage
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
    signal: AbortSignal = field(factory=AbortSignal)
    steering: deque[UserMessage] = field(factory=deque)
    follow_ups: deque[UserMessage] = field(factory=deque)

    def take_queued(self, end: RunEnd | None) -> list[AgentMessage]:
        """The loop's hook: every steer, in order; after a natural stop without one, one follow-up."""
        raise NotImplementedError("lab 9.3: what the next model call carries")


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
        raise NotImplementedError("lab 9.2: the system prompt")

    def set_system_section(self, name: str, text: str | None) -> None:
        """Set one named section of the system prompt, or remove it with None; the next run uses it."""
        raise NotImplementedError("lab 9.2: the system prompt")

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Tell `listener` every event from now on; call what this returns to stop."""
        raise NotImplementedError("lab 9.2: listeners")

    def prompt(self, text: str) -> None:
        """Start a run that answers `text`, on the transcript of every earlier run."""
        raise NotImplementedError("lab 9.2: prompt")

    def continue_(self) -> None:
        """Start a run on the transcript as it is, e.g. after a run that ended in an error."""
        raise NotImplementedError("lab 9.2: continue_")

    def steer(self, text: str) -> None:
        """Say `text` to the running run: it goes with the next model call, once the turn's tools are done."""
        raise NotImplementedError("lab 9.3: steer")

    def follow_up(self, text: str) -> None:
        """Ask `text` once the running run has stopped by itself; it keeps the run going."""
        raise NotImplementedError("lab 9.3: follow_up")

    def abort(self) -> None:
        """Stop the running run, if there is one: the model call and the tools get the signal."""
        raise NotImplementedError("lab 9.4: abort")

    @property
    def aborting(self) -> bool:
        """True from abort() until the run's agent_end: asked to stop, not stopped yet."""
        raise NotImplementedError("lab 9.4: aborting")

    async def wait_for_idle(self) -> None:
        """Return once no run is going, including runs that listeners started."""
        raise NotImplementedError("lab 9.2: wait_for_idle")


def nothing_to_continue(messages: Sequence[AgentMessage]) -> str | None:
    """Why a run cannot go on from `messages`, or None when it can."""
    raise NotImplementedError("lab 9.2: continue_")
