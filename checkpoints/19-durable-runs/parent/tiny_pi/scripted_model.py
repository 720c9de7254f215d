"""ScriptedModel: a test double that plays prepared turns through the real protocol.

A turn is the final result one model call should have: an AssistantMessage,
or a ScriptedFailure. The model never stores events. It projects the turn
into the events a real provider would have sent (start, deltas, a terminal
event; see tiny_pi.projection), so one final message decides both the
event trace and the result.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Union

import attrs
from attrs import field, frozen
from attrs.validators import in_, instance_of, optional

from tiny_pi.messages import (
    ERROR_REASONS,
    AgentContext,
    AssistantMessage,
    ErrorEvent,
    ErrorReason,
    ModelEvent,
    assistant_message,
    text,
)
from tiny_pi.model_stream import ModelCallStream
from tiny_pi.projection import project

if TYPE_CHECKING:
    from tiny_pi.abort import AbortSignal

NO_MORE_RESPONSES = "ScriptedModel has no more responses"
REQUEST_ABORTED = "Request was aborted"


@frozen
class ScriptedFailure:
    """A turn that fails: why it stopped, the diagnosis, and any text produced before."""

    stop_reason: ErrorReason = field(validator=in_(ERROR_REASONS))
    error_message: str = field(validator=instance_of(str))
    partial_text: str | None = field(default=None, validator=optional(instance_of(str)))


ScriptedTurn = Union[AssistantMessage, ScriptedFailure]


def _are_turns(instance: Any, attribute: attrs.Attribute[Any], value: tuple[Any, ...]) -> None:
    """A validator: the script holds only turns the model knows how to play."""
    for turn in value:
        if not isinstance(turn, (AssistantMessage, ScriptedFailure)):
            raise TypeError(f"a turn is an AssistantMessage or a ScriptedFailure, got {turn!r}")


@attrs.define
class ScriptedModel:
    """A Model that plays `turns` in order, one per call, and keeps every request.

    `requests` holds a deep copy of each context as it was at call time, so
    later changes to the caller's context cannot rewrite what the model saw.
    `cursor` counts the calls: it is the index of the turn the next call takes.
    """

    turns: tuple[ScriptedTurn, ...] = field(converter=tuple, validator=_are_turns)
    requests: list[AgentContext] = field(factory=list, init=False)
    cursor: int = field(default=0, init=False)

    def stream(
        self,
        context: AgentContext,
        *,
        signal: AbortSignal | None = None,
        tools: Any = None,
    ) -> ModelCallStream:
        """The call: copy the request and take the turn now; play it inside `async with`.

        `tools` are accepted as a provider accepts them (chapter 07's loop
        offers them on every call) and change nothing: a script's turns are fixed.
        """
        self.requests.append(copy.deepcopy(context))
        turn = self._take_turn()

        async def produce(stream: ModelCallStream) -> None:
            for event in events_for(turn, signal):
                stream.push(event)

        return ModelCallStream(produce)

    def _take_turn(self) -> ScriptedTurn | None:
        """The turn at the cursor, or None once the script is used up; the cursor always moves."""
        turn = self.turns[self.cursor] if self.cursor < len(self.turns) else None
        self.cursor += 1
        return turn


def events_for(turn: ScriptedTurn | None, signal: AbortSignal | None) -> list[ModelEvent]:
    """Everything a consumer sees for one call, checked in this implementation's order.

    An aborted signal wins over everything, then an exhausted script; both
    end the call before any content, with a single error event.
    """
    if signal is not None and signal.aborted:
        return [_failure_before_content("aborted", REQUEST_ABORTED)]
    if turn is None:
        return [_failure_before_content("error", NO_MORE_RESPONSES)]
    return project(as_message(turn))


def as_message(turn: ScriptedTurn) -> AssistantMessage:
    """The canonical assistant message of a turn; a failure keeps its partial text."""
    if isinstance(turn, AssistantMessage):
        return turn
    content = [text(turn.partial_text)] if turn.partial_text else []
    return assistant_message(content, turn.stop_reason, error_message=turn.error_message)


def _failure_before_content(reason: ErrorReason, why: str) -> ErrorEvent:
    return ErrorEvent(reason=reason, error=assistant_message([], reason, error_message=why))
