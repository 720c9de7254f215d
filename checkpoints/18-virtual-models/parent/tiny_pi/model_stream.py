"""ModelCallStream: a model stream that owns the task producing its events.

A model call has two moments. The call itself is synchronous and returns a
stream at once. Production happens later, inside `async with stream:`,
which opens a nursery and starts the producer in it. Leaving the block
cancels the producer if it is still running: no producer outlives the
code that consumes it.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import AsyncIterator, Awaitable, Callable, Literal

import trio

from tiny_pi.event_stream import AssistantMessageEventStream, EventStreamIterator
from tiny_pi.messages import AssistantMessage, ModelEvent

Producer = Callable[["ModelCallStream"], Awaitable[None]]

NEVER_ENTERED = (
    "this model stream was never entered: write `async with stream:` and iterate it "
    "or await its result inside the block; its producer only runs there"
)
CLOSED_EARLY = (
    "this model stream was closed before it finished: leaving `async with` "
    "cancelled its producer, so there is no final message"
)


class ModelCallStream(AssistantMessageEventStream):
    """The stream a model call returns; `async with` runs `produce(stream)` in a nursery.

    `produce` pushes the events and must end with a `done` or `error` event.
    Iterating or awaiting the result before the block has been entered raises
    RuntimeError at once instead of waiting for events that would never come.
    """

    def __init__(self, produce: Producer) -> None:
        super().__init__()
        self._produce = produce
        self._state: Literal["new", "open", "closed"] = "new"
        self._lifetime: AbstractAsyncContextManager[None] | None = None

    async def __aenter__(self) -> ModelCallStream:
        """Start the producer in a nursery that stays open until the caller's block ends."""
        if self._state != "new":
            raise RuntimeError("a model stream can be entered only once")
        self._state = "open"
        self._lifetime = self._producing()
        await self._lifetime.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        """The caller's block is over: end `_producing`, which stops the producer."""
        assert self._lifetime is not None
        return await self._lifetime.__aexit__(exc_type, exc, traceback)

    @asynccontextmanager
    async def _producing(self) -> AsyncIterator[None]:
        """The producer's nursery, written as every nursery is; it lives as long as the caller's block.

        When the block ends, the producer is cancelled if it still runs and
        the nursery waits until it has stopped: no producer outlives its consumer.
        """
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._run_producer)
                try:
                    yield
                finally:
                    self._state = "closed"
                    nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The nursery wraps even a single exception in a group; the caller
            # of `async with stream:` should see its own exception unchanged.
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise

    def __aiter__(self) -> EventStreamIterator[ModelEvent, AssistantMessage]:
        """Iterate the events; refuse at once if the stream cannot deliver them."""
        self._check_usable()
        return super().__aiter__()

    async def result(self) -> AssistantMessage:
        """The final message; refuse at once if the stream cannot produce it."""
        self._check_usable()
        return await super().result()

    def _check_usable(self) -> None:
        if self._state == "new":
            raise RuntimeError(NEVER_ENTERED)
        if self._state == "closed" and not self.done:
            raise RuntimeError(CLOSED_EARLY)

    async def _run_producer(self) -> None:
        """Run the producer; returning without a terminal event is a bug, not a hang."""
        await self._produce(self)
        if not self.done:
            raise RuntimeError("the producer of a model stream returned without a done or error event")
