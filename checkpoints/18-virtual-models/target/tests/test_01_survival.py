"""Chapter 01: the Python the later chapters rely on, one lab per tool.

How async code runs in this course's tests: no pytest plugin. A test is a
plain function that defines `async def main()` and hands it to `trio.run`,
under a short `trio.fail_after`, so code that never ends fails in two
seconds instead of hanging the run. Every later chapter's tests do the same.
"""

import attrs
import pytest
import trio
import trio.testing

from tiny_pi.survival.channels import consume, pipeline, produce
from tiny_pi.survival.protocols import Box, Speaker, introduce
from tiny_pi.survival.records import Note, tagged
from tiny_pi.survival.streams import Countdown, collect, countdown
from tiny_pi.survival.tasks import gather_in_order, must_finish, take_turns, within

LIMIT = 2  # seconds; every test here needs a few milliseconds


def run(async_fn, *args):
    """Run one async function to its end under the time limit, as every test here does."""

    async def main():
        with trio.fail_after(LIMIT):
            return await async_fn(*args)

    return trio.run(main)


# Lab 1.1: async generators and `async for` ----------------------------------


def test_async_gen_counts_down_in_order():
    assert run(collect, countdown(3)) == [3, 2, 1]


def test_async_gen_and_the_class_form_agree():
    assert run(collect, Countdown(4)) == run(collect, countdown(4)) == [4, 3, 2, 1]


def test_async_gen_zero_ends_at_once():
    assert run(collect, countdown(0)) == []
    assert run(collect, Countdown(0)) == []


def test_async_gen_negative_start_ends_at_once_in_both_forms():
    # range(-1, 0, -1) is empty, so the class must stop below zero too, not count down forever.
    assert run(collect, countdown(-1)) == []
    assert run(collect, Countdown(-1)) == []


def test_async_gen_class_raises_stop_async_iteration_when_over():
    async def main():
        numbers = Countdown(1)
        assert await numbers.__anext__() == 1
        with pytest.raises(StopAsyncIteration):
            await numbers.__anext__()

    run(main)


# Lab 1.2: nurseries, checkpoints, cancel scopes ------------------------------


def test_checkpoint_is_where_tasks_take_turns():
    async def main():
        log: list[str] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(take_turns, "a", 2, log)
            nursery.start_soon(take_turns, "b", 2, log)
        return log

    log = run(main)
    # trio does not promise who starts first, only that nobody runs past a checkpoint alone.
    assert sorted(log[:2]) == ["a1", "b1"]
    assert sorted(log[2:]) == ["a2", "b2"]


def test_checkpoint_is_where_a_cancel_arrives():
    async def main():
        log: list[str] = []
        with trio.CancelScope() as scope:
            scope.cancel()
            await take_turns("a", 3, log)
        return log, scope.cancelled_caught

    assert run(main) == (["a1"], True)


def test_nursery_results_come_back_in_job_order():
    async def main():
        finished: list[str] = []

        def job(name, delay):
            async def work():
                await trio.sleep(delay)
                finished.append(name)
                return name

            return work

        results = await gather_in_order([job("slow", 0.05), job("fast", 0)])
        return results, finished

    assert run(main) == (["slow", "fast"], ["fast", "slow"])


def test_cancel_scope_move_on_returns_the_default():
    async def forever():
        await trio.sleep_forever()

    async def quick():
        return "done"

    assert run(within, 0.01, forever, "gave up") == "gave up"
    assert run(within, 1, quick, "gave up") == "done"


def test_deadline_fail_after_says_how_long_it_waited():
    async def forever():
        await trio.sleep_forever()

    with pytest.raises(TimeoutError) as raised:
        run(must_finish, 0.01, forever)
    assert str(raised.value) == "took longer than 0.01 s"


def test_deadline_timeout_is_raised_from_none():
    async def forever():
        await trio.sleep_forever()

    with pytest.raises(TimeoutError) as raised:
        run(must_finish, 0.01, forever)
    # `from None` sets no cause and hides the TooSlowError it was raised in.
    assert raised.value.__cause__ is None
    assert raised.value.__suppress_context__


# Lab 1.3: memory channels ----------------------------------------------------


def test_channel_pipeline_delivers_every_item_in_order():
    assert run(pipeline, ["a", "b", "c"]) == ["a", "b", "c"]
    assert run(pipeline, ["a", "b", "c"], 10) == ["a", "b", "c"]


def test_channel_closed_after_sending_still_delivers_the_buffer():
    async def main():
        send, receive = trio.open_memory_channel[str](5)
        await produce(send, ["x", "y"])  # sends both, then closes: nobody has read yet
        return await consume(receive)

    assert run(main) == ["x", "y"]


def test_channel_left_open_keeps_the_consumer_waiting():
    async def main():
        send, receive = trio.open_memory_channel[str](5)
        await send.send("x")
        with trio.move_on_after(0.05) as scope:
            await consume(receive)
        return scope.cancelled_caught

    assert run(main) is True


def test_channel_send_waits_for_a_reader_without_buffer():
    async def main():
        send, receive = trio.open_memory_channel[str](0)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce, send, ["x"])
            await trio.testing.wait_all_tasks_blocked()
            # The producer is parked in send(): with no buffer, it waits for a reader.
            assert receive.statistics().tasks_waiting_send == 1
            assert await consume(receive) == ["x"]

    run(main)


# Lab 1.4: frozen attrs records -----------------------------------------------


def test_record_is_frozen_and_compared_by_value():
    note = Note("user", "hello")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        note.text = "changed"  # type: ignore[misc]
    assert note == Note("user", "hello")
    assert {note, Note("user", "hello")} == {note}


def test_record_validators_refuse_bad_values():
    with pytest.raises(ValueError, match="'role' must be in"):
        Note("robot", "hello")
    with pytest.raises(ValueError) as raised:
        Note("user", "   ")
    assert str(raised.value) == "text must not be blank"
    with pytest.raises(TypeError):
        Note("user", "hello", tags=["a list"])  # type: ignore[arg-type]


def test_record_evolve_makes_a_new_record():
    note = Note("assistant", "hi")
    again = tagged(tagged(note, "greeting"), "short")
    assert (note.tags, again.tags) == ((), ("greeting", "short"))
    assert again.text == "hi"


def test_record_evolve_validates_again():
    with pytest.raises(ValueError) as raised:
        attrs.evolve(Note("user", "hello"), text="")
    assert str(raised.value) == "text must not be blank"


# Lab 1.5: typing.Protocol and generics ---------------------------------------


class Robot:
    def __init__(self, name):
        self.name = name

    def say(self, text):
        return text.upper()


class Parrot:
    name = "polly"

    def say(self, text):
        return f"{text}, {text}"


def test_protocol_fits_classes_without_a_common_base():
    assert introduce([Robot("r2"), Parrot()]) == ["I AM R2", "I am polly, I am polly"]


def test_protocol_checked_at_run_time_by_shape():
    assert isinstance(Robot("r2"), Speaker)
    assert not isinstance("a string", Speaker)


def test_generic_box_keeps_and_maps_its_value():
    box = Box(21)
    assert box.get() == 21
    assert box.map(lambda n: n * 2).map(str).get() == "42"
    assert box.get() == 21
