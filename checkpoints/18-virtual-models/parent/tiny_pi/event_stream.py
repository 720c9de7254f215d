"""EventStream: a stream of facts that ends in one final result.

A producer pushes events without waiting; a consumer reads them with
`async for` and, once the stream is over, asks for the result with
`await stream.result()`. The two sides never share a clock: events pushed
before anyone listens wait in a queue, and a consumer that listens first
waits until the next push wakes it.
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Generic, TypeVar

import trio

from tiny_pi.messages import AssistantMessage, DoneEvent, ErrorEvent, ModelEvent

T = TypeVar("T")
R = TypeVar("R")


class _Waiter(Generic[T]):
    """One consumer parked in `__anext__`, waiting for an event or for the end."""

    def __init__(self) -> None:
        self.woken = trio.Event()
        self.has_event = False
        self.event: T | None = None

    def give(self, event: T) -> None:
        """Hand this consumer an event and wake it."""
        self.event = event
        self.has_event = True
        self.woken.set()

    def finish(self) -> None:
        """Wake this consumer with no event: its iteration ends."""
        self.woken.set()


class EventStream(Generic[T, R]):
    """A queue of events from one producer, plus the result the last event settles.

    `is_complete(event)` says whether an event is terminal; `extract_result(event)`
    turns a terminal event into the stream's result. After the terminal fact
    the stream ignores every later push, so nothing can contradict it.
    """

    def __init__(
        self,
        is_complete: Callable[[T], bool],
        extract_result: Callable[[T], R],
    ) -> None:
        self._is_complete = is_complete
        self._extract_result = extract_result
        self._queue: deque[T] = deque()
        self._waiting: deque[_Waiter[T]] = deque()
        self._done = False
        self._result_ready = trio.Event()
        self._result: R | None = None

    def push(self, event: T) -> None:
        """Deliver one event; after the stream is done, do nothing.

        Synchronous on purpose: a producer never waits for its consumer.
        """
        if self._done:
            return
        if self._is_complete(event):
            self._done = True
            self._resolve(self._extract_result(event))
        if self._waiting:
            self._waiting.popleft().give(event)
        else:
            self._queue.append(event)
        if self._done:
            self._wake_all_waiters()

    def end(self, result: R) -> None:
        """Mark the stream done and settle the result, unless a terminal event already did.

        Every consumer still waiting is woken and finishes its iteration.
        """
        self._done = True
        self._resolve(result)
        self._wake_all_waiters()

    async def result(self) -> R:
        """Wait until the stream has a result, then return it."""
        await self._result_ready.wait()
        return self._result  # type: ignore[return-value]

    def __aiter__(self) -> EventStreamIterator[T, R]:
        """Each `async for` gets its own iterator; all of them share this queue."""
        return EventStreamIterator(self)

    # What a consumer's iterator may ask of the stream: the queue, the line, the end.

    @property
    def done(self) -> bool:
        """True once the stream has its terminal fact: nothing more will be pushed."""
        return self._done

    def has_queued(self) -> bool:
        """Whether an event waits in the queue for the next consumer that asks."""
        return bool(self._queue)

    def take_queued(self) -> T:
        """Remove and return the oldest queued event; ask `has_queued()` first."""
        return self._queue.popleft()

    def join_line(self, waiter: _Waiter[T]) -> None:
        """Park a consumer: the next push hands it an event, the end sends it home."""
        self._waiting.append(waiter)

    def leave_line(self, waiter: _Waiter[T]) -> bool:
        """Take a consumer out of line; False if a push or the end took it out already."""
        if waiter in self._waiting:
            self._waiting.remove(waiter)
            return True
        return False

    def give_back(self, event: T) -> None:
        """An event a cancelled consumer was handed goes to the next in line, else to the front."""
        if self._waiting:
            self._waiting.popleft().give(event)
        else:
            self._queue.appendleft(event)

    def _resolve(self, result: R) -> None:
        """Keep the first result; a later one must not replace a fact."""
        if self._result_ready.is_set():
            return
        self._result = result
        self._result_ready.set()

    def _wake_all_waiters(self) -> None:
        """Nothing will be pushed after the end, so nobody may keep waiting for it."""
        while self._waiting:
            self._waiting.popleft().finish()


class EventStreamIterator(Generic[T, R]):
    """What `async for` uses: one consumer's view of an EventStream.

    A class with `__anext__` rather than an async generator, so that leaving
    a loop early needs no clean-up of a suspended generator frame. It reads
    the stream only through the stream's consumer methods, never its fields.
    """

    def __init__(self, stream: EventStream[T, R]) -> None:
        self._stream = stream

    def __aiter__(self) -> EventStreamIterator[T, R]:
        """An iterator is its own iterable, as Python's protocol expects."""
        return self

    async def __anext__(self) -> T:
        """Take the next queued event, or wait for one; stop once the stream is done.

        The checkpoint comes first: after it, nothing else runs until this
        method awaits again, so the queue cannot empty between the look and
        the take, even with several consumers.
        """
        await trio.lowlevel.checkpoint()
        if self._stream.has_queued():
            return self._stream.take_queued()
        if self._stream.done:
            raise StopAsyncIteration
        return await self._wait_for_push()

    async def _wait_for_push(self) -> T:
        """Stand in line until a push hands us an event or the end sends us home."""
        waiter: _Waiter[T] = _Waiter()
        self._stream.join_line(waiter)
        try:
            await waiter.woken.wait()
        except trio.Cancelled:
            self._give_back(waiter)
            raise
        if not waiter.has_event:
            raise StopAsyncIteration
        return waiter.event  # type: ignore[return-value]

    def _give_back(self, waiter: _Waiter[T]) -> None:
        """A cancelled consumer must not swallow an event meant for someone else.

        Either it is still in line (leave the line, so no push picks it), or a
        push already handed it an event (pass that event on).
        """
        if not self._stream.leave_line(waiter) and waiter.has_event:
            self._stream.give_back(waiter.event)  # type: ignore[arg-type]


# Chapter 03: the stream a model call returns.


class AssistantMessageEventStream(EventStream[ModelEvent, AssistantMessage]):
    """An EventStream of model events whose result is the final assistant message.

    `done` and `error` are its two terminal events. Either one settles the
    result by itself, with the very message it carries: a failed call still
    ends in a message the transcript can keep.
    """

    def __init__(self) -> None:
        super().__init__(is_terminal, final_message)


def is_terminal(event: ModelEvent) -> bool:
    """`done` and `error` end a model call; every other event is progress."""
    return event.type in ("done", "error")


def final_message(event: ModelEvent) -> AssistantMessage:
    """The message a terminal event carries; a progress event has none to give."""
    match event:
        case DoneEvent(message=message) | ErrorEvent(error=message):
            return message
    raise ValueError(f"a {event.type!r} event is not terminal and carries no final message")
