"""Memory channels: a producer task hands items to a consumer task.

Closing the sending side is how a consumer learns there is nothing more:
its `async for` ends once the buffer is empty. Chapter 02's end() plays the
same part for an EventStream.
"""

from __future__ import annotations

from collections.abc import Sequence

import trio


async def produce(send: trio.MemorySendChannel[str], items: Sequence[str]) -> None:
    """Send every item, then close the channel by leaving `async with`."""
    async with send:
        for item in items:
            await send.send(item)


async def consume(receive: trio.MemoryReceiveChannel[str]) -> list[str]:
    """Read until the channel is closed and empty."""
    async with receive:
        return [item async for item in receive]


async def pipeline(items: Sequence[str], buffer: int = 0) -> list[str]:
    """Pass items from a producer task to this task through a channel of `buffer` slots."""
    send, receive = trio.open_memory_channel[str](buffer)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(produce, send, items)
        received = await consume(receive)
    return received
