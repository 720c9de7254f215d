"""What a model is to the rest of tiny_pi: two small protocols, no implementation.

Any object with these methods is a model (the scripted model of chapter 04,
the real provider of chapter 05); nothing has to inherit from anything.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Protocol

from tiny_pi.messages.events import ModelEvent
from tiny_pi.messages.records import AgentContext, AssistantMessage


class ModelStream(Protocol):
    """What a model call returns: events to iterate, then the final message."""

    def __aiter__(self) -> AsyncIterator[ModelEvent]: ...

    async def result(self) -> AssistantMessage: ...


class Model(Protocol):
    """Anything that turns a context into a stream of model events."""

    def stream(self, context: AgentContext, *, signal: Any = None) -> ModelStream: ...
