"""AgentState: what an application shows about its agent, derived from the run's events.

The state is never set by hand. `reduce_state(state, run, event)` is a pure
function: the same events, in the same order, give the same state. Each run
has a number; `agent_start` of a newer run starts a fresh state, and an event
of any other run than the current one changes nothing, so a late event of an
earlier run cannot make a running agent look idle.
"""

from __future__ import annotations

import attrs
from attrs import frozen

from tiny_pi.agent_events import AgentEvent, AgentOutcome, RunEnd
from tiny_pi.messages import ToolCall


@frozen
class AgentState:
    """One moment of the agent: running or idle, the text in flight, the calls in flight, the last end."""

    run: int = 0
    running: bool = False
    turn: int = 0
    streaming_text: str = ""
    pending_tool_calls: tuple[ToolCall, ...] = ()
    outcome: AgentOutcome | None = None

    @property
    def stop_reason(self) -> RunEnd | None:
        """How the last run ended; None before the first end, and while a run is going."""
        return self.outcome.stop_reason if self.outcome is not None else None


def reduce_state(state: AgentState, run: int, event: AgentEvent) -> AgentState:
    """The state after `event` of run number `run`; the input is never changed."""
    if event.type == "agent_start":
        return AgentState(run=run, running=True) if run > state.run else state
    if run != state.run:
        return state  # a late event of an earlier run
    match event.type:
        case "turn_start":
            return attrs.evolve(state, turn=event.turn)
        case "start" | "done" | "error":
            return attrs.evolve(state, streaming_text="")
        case "text_delta":
            return attrs.evolve(state, streaming_text=state.streaming_text + event.delta)
        case "tool_execution_start":
            return attrs.evolve(state, pending_tool_calls=state.pending_tool_calls + (event.tool_call,))
        case "tool_execution_end":
            return attrs.evolve(state, pending_tool_calls=without(state.pending_tool_calls, event.tool_call))
        case "agent_end":
            return AgentState(run=run, running=False, turn=state.turn, outcome=event.outcome)
    return state


def without(calls: tuple[ToolCall, ...], done: ToolCall) -> tuple[ToolCall, ...]:
    """The calls still waiting once `done` has its result."""
    return tuple(call for call in calls if call.id != done.id)
