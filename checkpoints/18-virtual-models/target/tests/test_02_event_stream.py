"""Chapter 02: the event stream keeps producer and consumers apart in time.

Every test runs its own `trio.run` under a short `trio.fail_after`, so a
stream that never ends fails in a second instead of hanging the run.
Tests wait with `trio.testing.wait_all_tasks_blocked()` ("everyone else is
parked now"), never on the order in which a nursery starts its tasks.
"""

import trio
import trio.testing

from tiny_pi.event_stream import EventStream

LIMIT = 2  # seconds; every test here needs a few milliseconds


def make_stream() -> EventStream[str, str]:
    """Events are strings; "done:<result>" is the terminal event."""
    return EventStream(
        is_complete=lambda event: event.startswith("done:"),
        extract_result=lambda event: event.removeprefix("done:"),
    )


async def collect(stream: EventStream[str, str]) -> list[str]:
    """Read a stream to its end and return what this consumer saw."""
    return [event async for event in stream]


# Lab 2.1: the queue and the terminal result ---------------------------------


def test_queue_keeps_events_for_a_late_consumer():
    async def main():
        with trio.fail_after(LIMIT):
            stream = make_stream()
            stream.push("a")
            stream.push("b")
            stream.push("done:ok")
            # Nobody has listened yet, and the result is already settled.
            assert await stream.result() == "ok"
            assert await collect(stream) == ["a", "b", "done:ok"]

    trio.run(main)


def test_no_second_fact_after_terminal_event():
    async def main():
        with trio.fail_after(LIMIT):
            stream = make_stream()
            stream.push("a")
            stream.push("done:ok")
            stream.push("late")
            stream.push("done:again")
            seen = await collect(stream)
            result = await stream.result()
            # One assertion, so a failure shows both what was read and the result.
            assert (seen, result) == (["a", "done:ok"], "ok")

    trio.run(main)


def test_first_fact_wins_over_a_later_end():
    async def main():
        with trio.fail_after(LIMIT):
            stream = make_stream()
            stream.push("done:first")
            stream.end("second")
            assert await stream.result() == "first"
            assert await collect(stream) == ["done:first"]

    trio.run(main)


# Lab 2.2: waking the consumers that wait -------------------------------------


def test_waiting_consumer_is_woken_by_push_and_end():
    async def main():
        with trio.fail_after(LIMIT):
            stream = make_stream()
            seen: list[str] = []

            async def consume():
                async for event in stream:
                    seen.append(event)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(consume)
                await trio.testing.wait_all_tasks_blocked()  # it waits first
                stream.push("x")
                await trio.testing.wait_all_tasks_blocked()
                assert seen == ["x"]
                stream.end("A")
            # The nursery closed, so the consumer's loop has ended.
            assert seen == ["x"]
            assert await stream.result() == "A"

    trio.run(main)


def test_end_wakes_every_waiting_consumer():
    async def main():
        with trio.fail_after(LIMIT):
            stream = make_stream()
            finished: list[str] = []

            async def consume(name: str):
                assert await collect(stream) == []
                finished.append(name)

            async with trio.open_nursery() as nursery:
                for name in ("first", "second", "third"):
                    nursery.start_soon(consume, name)
                await trio.testing.wait_all_tasks_blocked()
                assert finished == []
                stream.end("over")
                await trio.testing.wait_all_tasks_blocked()
                assert sorted(finished) == ["first", "second", "third"]
            assert await stream.result() == "over"

    trio.run(main)


def test_each_event_goes_to_one_waiting_consumer():
    async def main():
        with trio.fail_after(LIMIT):
            stream = make_stream()
            seen: dict[str, list[str]] = {"left": [], "right": []}

            async def consume(name: str):
                async for event in stream:
                    seen[name].append(event)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(consume, "left")
                nursery.start_soon(consume, "right")
                await trio.testing.wait_all_tasks_blocked()  # both wait
                stream.push("a")  # to the consumer that waited longest
                stream.push("b")  # to the other one
                stream.push("c")  # nobody waits any more: into the queue
                await trio.testing.wait_all_tasks_blocked()
                stream.end("over")
            firsts = sorted([seen["left"][0], seen["right"][0]])
            assert firsts == ["a", "b"]
            assert sorted(seen["left"] + seen["right"]) == ["a", "b", "c"]

    trio.run(main)


def test_cancelled_waiting_consumer_leaves_the_line():
    async def main():
        with trio.fail_after(LIMIT):
            stream = make_stream()
            impatient = trio.CancelScope()
            kept: list[str] = []

            async def consume_until_cancelled():
                with impatient:
                    async for event in stream:
                        kept.append(event)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(consume_until_cancelled)
                await trio.testing.wait_all_tasks_blocked()
                impatient.cancel()
            # The cancelled consumer is gone; its place in line must be too.
            stream.push("x")
            stream.end("over")
            assert kept == []
            assert await collect(stream) == ["x"]

    trio.run(main)


def test_cancelled_waiting_consumer_gives_back_its_event():
    async def main():
        with trio.fail_after(LIMIT):
            stream = make_stream()
            impatient = trio.CancelScope()
            kept: list[str] = []
            patient: list[str] = []

            async def consume_until_cancelled():
                with impatient:
                    async for event in stream:
                        kept.append(event)

            async def consume():
                async for event in stream:
                    patient.append(event)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(consume_until_cancelled)
                await trio.testing.wait_all_tasks_blocked()  # first in line
                nursery.start_soon(consume)
                await trio.testing.wait_all_tasks_blocked()  # second in line
                impatient.cancel()
                # No checkpoint in between: the push reaches the first consumer
                # in line, which is cancelled but has not yet run to leave.
                stream.push("x")
                await trio.testing.wait_all_tasks_blocked()
                # One assertion, so a failure shows who got "x".
                assert (kept, patient) == ([], ["x"])
                stream.end("over")

    trio.run(main)


def test_cancelled_waiting_consumer_lets_cancelled_reach_its_scope():
    async def main():
        with trio.fail_after(LIMIT):
            stream = make_stream()
            impatient = trio.CancelScope()
            after_the_loop: list[bool] = []

            async def consume_until_cancelled():
                with impatient:
                    async for event in stream:
                        pass
                    # Only a loop that ended on its own gets here.
                    after_the_loop.append(True)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(consume_until_cancelled)
                await trio.testing.wait_all_tasks_blocked()
                impatient.cancel()
            # One assertion: did code after the loop run, and did the scope catch its Cancelled?
            assert (after_the_loop, impatient.cancelled_caught) == ([], True)

    trio.run(main)
