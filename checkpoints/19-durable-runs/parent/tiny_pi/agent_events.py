"""The events of an agent run, and how the run ended.

The loop forwards every model event unchanged (`start`, `text_delta`, ...)
and adds its own, so a consumer sees one stream of facts in the order they
happened:

    agent_start
      turn_start(1)  <the model events of turn 1>  tool_execution_start ...
      tool_execution_end ...  turn_end(1)
      turn_start(2)  ...  turn_end(2)
    agent_end
"""

from __future__ import annotations

from typing import Literal, Union

from attrs import field, frozen
from attrs.validators import in_

from tiny_pi.messages import AgentMessage, AssistantMessage, ModelEvent, ToolCall, ToolResultMessage, Usage

RunEnd = Literal["stop", "length", "error", "aborted", "turn_limit"]
"""Why a run ended: the last turn's stop reason, or the loop's own turn limit."""

RUN_ENDS: tuple[str, ...] = ("stop", "length", "error", "aborted", "turn_limit")


@frozen
class AgentOutcome:
    """How a run ended, what it added to the transcript, and what it cost."""

    stop_reason: RunEnd = field(validator=in_(RUN_ENDS))
    turns: int
    usage: Usage
    messages: tuple[AgentMessage, ...]
    error_message: str | None = None


@frozen
class AgentStartEvent:
    """The run has started; nothing has been sent yet."""

    type: Literal["agent_start"] = field(default="agent_start", init=False)


@frozen
class TurnStartEvent:
    """Turn `turn` (1, 2, ...) is about to call the model."""

    type: Literal["turn_start"] = field(default="turn_start", init=False)
    turn: int


@frozen
class ToolExecutionStartEvent:
    """The tool call is about to run; every call of a turn gets one, in call order."""

    type: Literal["tool_execution_start"] = field(default="tool_execution_start", init=False)
    tool_call: ToolCall


@frozen
class ToolExecutionEndEvent:
    """The tool call has its result; these arrive in the order the calls finish."""

    type: Literal["tool_execution_end"] = field(default="tool_execution_end", init=False)
    tool_call: ToolCall
    result: ToolResultMessage


@frozen
class TurnEndEvent:
    """Turn `turn` is over: its assistant message and its tool results, in call order."""

    type: Literal["turn_end"] = field(default="turn_end", init=False)
    turn: int
    message: AssistantMessage
    tool_results: tuple[ToolResultMessage, ...]


@frozen
class AgentEndEvent:
    """The run is over; the last event of every run, whatever ended it."""

    type: Literal["agent_end"] = field(default="agent_end", init=False)
    outcome: AgentOutcome


AgentEvent = Union[
    AgentStartEvent,
    TurnStartEvent,
    ModelEvent,
    ToolExecutionStartEvent,
    ToolExecutionEndEvent,
    TurnEndEvent,
    AgentEndEvent,
]
