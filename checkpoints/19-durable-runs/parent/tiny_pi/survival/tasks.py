"""Running things at once, and stopping them: nurseries, checkpoints, cancel scopes.

Chapter 02 parks consumers and cancels them, chapter 06 cancels a tool that
takes too long, chapter 07 runs a turn's tool calls in one nursery and keeps
their results in call order.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import trio

T = TypeVar("T")
Job = Callable[[], Awaitable[T]]


async def take_turns(name: str, steps: int, log: list[str]) -> None:
    """Log each step, then checkpoint.

    A checkpoint is the only place trio switches to another task or delivers
    a cancel, so the log shows exactly where that could happen.
    """
    for step in range(1, steps + 1):
        log.append(f"{name}{step}")
        await trio.lowlevel.checkpoint()


async def gather_in_order(jobs: Sequence[Job[T]]) -> list[T]:
    """Run every job at once; return the results in job order, not finish order.

    The nursery block ends only when every job has ended, so the list is
    complete when it is returned.
    """
    results: list[T | None] = [None] * len(jobs)

    async def run_one(index: int, job: Job[T]) -> None:
        results[index] = await job()

    async with trio.open_nursery() as nursery:
        for index, job in enumerate(jobs):
            nursery.start_soon(run_one, index, job)
    return results  # type: ignore[return-value]


async def within(seconds: float, job: Job[T], default: T) -> T:
    """The job's result, or `default` if it is still running after `seconds`."""
    with trio.move_on_after(seconds):
        return await job()
    return default


async def must_finish(seconds: float, job: Job[T]) -> T:
    """The job's result; if it is too slow, a TimeoutError that says how long it had."""
    try:
        with trio.fail_after(seconds):
            return await job()
    except trio.TooSlowError:
        raise TimeoutError(f"took longer than {seconds} s") from None
