"""What a model is to the rest of tiny_pi: two small protocols, no implementation.

Any object with these methods is a model (the scripted model of chapter 04,
the real provider of chapter 05); nothing has to inherit from anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, AsyncIterator, Protocol

from tiny_pi.messages.events import ModelEvent
from tiny_pi.messages.records import AgentContext, AssistantMessage

if TYPE_CHECKING:
    from tiny_pi.abort import AbortSignal


class ModelStream(Protocol):
    """What a model call returns: events to iterate, then the final message.

    It is also an async context manager: production runs inside
    `async with stream:`, and leaving the block stops whatever still runs.
    """

    async def __aenter__(self) -> ModelStream: ...

    async def __aexit__(self, *exc_info: Any) -> bool | None: ...

    def __aiter__(self) -> AsyncIterator[ModelEvent]: ...

    async def result(self) -> AssistantMessage: ...


class Model(Protocol):
    """Anything that turns a context into a stream of model events.

    `stream()` is synchronous: it takes the request now and returns the
    stream; the events are produced once the caller enters the stream.
    """

    def stream(self, context: AgentContext, *, signal: AbortSignal | None = None) -> ModelStream: ...
