"""ModelCallStream: a model stream that owns the task producing its events.

A model call has two moments. The call itself is synchronous and returns a
stream at once. Production happens later, inside `async with stream:`,
which opens a nursery and starts the producer in it. Leaving the block
cancels the producer if it is still running: no producer outlives the
code that consumes it.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Awaitable, Callable, Literal

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
        self._nursery_manager: AbstractAsyncContextManager[trio.Nursery] | None = None
        self._nursery: trio.Nursery | None = None

    async def __aenter__(self) -> ModelCallStream:
        """Open the nursery and start the producer: production begins here."""
        if self._state != "new":
            raise RuntimeError("a model stream can be entered only once")
        self._nursery_manager = trio.open_nursery()
        self._nursery = await self._nursery_manager.__aenter__()
        self._state = "open"
        self._nursery.start_soon(self._run_producer)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        """Cancel the producer if it still runs, wait for it, and close the nursery."""
        assert self._nursery is not None and self._nursery_manager is not None
        self._state = "closed"
        self._nursery.cancel_scope.cancel()
        try:
            return await self._nursery_manager.__aexit__(exc_type, exc, traceback)
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
        if self._state == "closed" and not self._done:
            raise RuntimeError(CLOSED_EARLY)

    async def _run_producer(self) -> None:
        """Run the producer; returning without a terminal event is a bug, not a hang."""
        await self._produce(self)
        if not self._done:
            raise RuntimeError("the producer of a model stream returned without a done or error event")
