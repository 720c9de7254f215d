"""Async iteration, two ways: a generator function and the class it stands for.

Chapter 02's EventStream is the class form (`__aiter__` and `__anext__`);
chapter 05 reads an HTTP body with `async for`; chapter 07 loops over a
model's events the same way.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import TypeVar

import trio

T = TypeVar("T")


async def countdown(start: int) -> AsyncIterator[int]:
    """Yield start, start - 1, ..., 1, checkpointing before each number.

    The checkpoint is what makes this async: between two numbers other
    tasks may run, and a cancel may arrive.
    """
    for number in range(start, 0, -1):
        await trio.lowlevel.checkpoint()
        yield number


class Countdown:
    """The same countdown written as the protocol `async for` calls."""

    def __init__(self, start: int) -> None:
        self._next = start

    def __aiter__(self) -> Countdown:
        """An iterator is its own iterable."""
        return self

    async def __anext__(self) -> int:
        """The next number; StopAsyncIteration is how an async iterator says it is over."""
        await trio.lowlevel.checkpoint()
        if self._next <= 0:
            raise StopAsyncIteration
        number = self._next
        self._next -= 1
        return number


async def collect(items: AsyncIterable[T]) -> list[T]:
    """Read an async iterable to its end."""
    return [item async for item in items]
