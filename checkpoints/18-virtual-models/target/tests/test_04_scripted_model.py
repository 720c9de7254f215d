"""Chapter 04: one ScriptedModel instance plays two turns through the real protocol.

Run alone with `python -m pytest tests/test_04_scripted_model.py`. Every
async body runs under a short `trio.fail_after`, so a stream that never ends
fails fast instead of hanging. The tests synchronise on events (a consumer
waits for the next one), never on the order in which trio starts tasks.
"""

import pytest
import trio

from tiny_pi.scripted_model import ScriptedFailure, ScriptedModel
from tiny_pi.model_stream import ModelCallStream
from tiny_pi.messages import (
    AgentContext,
    StartEvent,
    ToolCall,
    Usage,
    assistant_message,
    text,
    text_of,
    user_message,
)

TIME_LIMIT = 1.0


async def play(stream):
    """Enter a stream, read it to the end, and return its events and its result."""
    async with stream:
        events = [event async for event in stream]
    return events, await stream.result()


def types_of(events):
    return [event.type for event in events]


# Lab 4.1: the cursor, request snapshots and text turns


def test_turns_play_in_order_and_requests_are_snapshots():
    model = ScriptedModel([assistant_message([text("look first")]), assistant_message([text("turn two")])])
    first_context = AgentContext([user_message("request one")])

    async def main():
        with trio.fail_after(TIME_LIMIT):
            first = model.stream(first_context)
            # The call already happened: the request is kept and the turn taken.
            assert (len(model.requests), model.cursor) == (1, 1)
            first_context.messages.append(user_message("appended afterwards"))
            first_events, first_result = await play(first)
            second = model.stream(AgentContext([user_message("request two")]))
            second_events, second_result = await play(second)
        return first_events, first_result, second_events, second_result

    first_events, first_result, second_events, second_result = trio.run(main)

    assert types_of(first_events) == ["start", "text_delta", "done"]
    assert text_of(first_result) == "look first"
    assert types_of(second_events) == ["start", "text_delta", "done"]
    assert text_of(second_result) == "turn two"
    assert model.cursor == 2
    assert len(model.requests) == 2
    assert len(model.requests[0].messages) == 1
    assert model.requests[1].messages == [user_message("request two")]


def test_text_turn_partials_grow_with_each_event():
    turn = assistant_message([text("Hello"), text("world")], usage=Usage(3, 2, 5))
    model = ScriptedModel([turn])

    async def main():
        with trio.fail_after(TIME_LIMIT):
            return await play(model.stream(AgentContext([user_message("hi")])))

    events, result = trio.run(main)

    start, first, second, done = events
    assert types_of(events) == ["start", "text_delta", "text_delta", "done"]
    assert start.partial.content == ()
    assert (start.partial.stop_reason, start.partial.usage) == ("stop", Usage())
    assert (first.content_index, first.delta) == (0, "Hello")
    assert first.partial.content == (text("Hello"),)
    assert (second.content_index, second.delta) == (1, "world")
    assert second.partial.content == (text("Hello"), text("world"))
    assert done.reason == "stop"
    assert done.message is turn
    assert result is turn


# Lab 4.2: tool calls and failure turns


def test_tool_call_turn_projects_toolcall_delta_then_end():
    call = ToolCall(id="c1", name="read", arguments={"path": "README.md"})
    turn = assistant_message([text("look first"), call], "toolUse")
    model = ScriptedModel([turn])

    async def main():
        with trio.fail_after(TIME_LIMIT):
            return await play(model.stream(AgentContext([user_message("read the README")])))

    events, result = trio.run(main)

    assert types_of(events) == ["start", "text_delta", "toolcall_delta", "toolcall_end", "done"]
    delta, end, done = events[2:]
    raw = '{"path":"README.md"}'
    assert (delta.content_index, delta.delta) == (1, raw)
    assert delta.partial.content == (
        text("look first"),
        ToolCall(id="c1", name="read", arguments={}, raw_arguments=raw),
    )
    assert end.content_index == 1
    assert end.tool_call == call
    assert end.partial.content == (text("look first"), call)
    assert done.reason == "toolUse"
    assert result is turn


def test_tool_call_turn_prefers_the_raw_argument_text():
    raw = '{"path": "README.md"}'
    call = ToolCall(id="c1", name="read", arguments={"path": "README.md"}, raw_arguments=raw)
    model = ScriptedModel([assistant_message([call], "toolUse")])

    async def main():
        with trio.fail_after(TIME_LIMIT):
            return await play(model.stream(AgentContext()))

    events, _ = trio.run(main)

    assert types_of(events) == ["start", "toolcall_delta", "toolcall_end", "done"]
    assert events[1].delta == raw
    assert events[1].partial.content[0].arguments == {}


def test_failure_turn_keeps_partial_text_and_diagnostics():
    failure = ScriptedFailure("error", "rate limited", partial_text="working on")
    model = ScriptedModel([failure])

    async def main():
        with trio.fail_after(TIME_LIMIT):
            return await play(model.stream(AgentContext([user_message("hi")])))

    events, result = trio.run(main)

    assert types_of(events) == ["start", "text_delta", "error"]
    assert events[1].delta == "working on"
    assert events[2].reason == "error"
    assert events[2].error is result
    assert (result.stop_reason, result.error_message) == ("error", "rate limited")
    assert text_of(result) == "working on"


# Lab 4.3: exhausted and aborted calls, and the stream's lifecycle
# (AbortSignal is imported inside its tests, so the file imports before lab 4.3)


def test_exhausted_script_ends_in_a_single_error_event():
    model = ScriptedModel([])

    async def main():
        with trio.fail_after(TIME_LIMIT):
            return await play(model.stream(AgentContext([user_message("hi")])))

    events, result = trio.run(main)

    assert types_of(events) == ["error"]
    assert events[0].reason == "error"
    assert result.content == ()
    assert (result.stop_reason, result.error_message) == ("error", "ScriptedModel has no more responses")
    assert (len(model.requests), model.cursor) == (1, 1)


def test_pre_aborted_signal_ends_in_aborted_error_and_consumes_the_turn():
    from tiny_pi.abort import AbortSignal

    model = ScriptedModel([assistant_message([text("never played")]), assistant_message([text("next")])])
    signal = AbortSignal()
    signal.abort()

    async def main():
        with trio.fail_after(TIME_LIMIT):
            aborted = await play(model.stream(AgentContext([user_message("hi")]), signal=signal))
            following = await play(model.stream(AgentContext([user_message("again")])))
        return aborted, following

    (events, result), (_, next_result) = trio.run(main)

    assert types_of(events) == ["error"]
    assert events[0].reason == "aborted"
    assert (result.stop_reason, result.error_message) == ("aborted", "Request was aborted")
    assert len(model.requests) == 2
    assert text_of(next_result) == "next"


def test_abort_signal_wakes_waiters_and_cancels_a_scope():
    from tiny_pi.abort import AbortSignal, cancel_on_abort

    signal = AbortSignal()
    woken = []

    async def waiter():
        await signal.wait()
        woken.append(signal.aborted)

    async def main():
        with trio.fail_after(TIME_LIMIT):
            assert not signal.aborted
            async with trio.open_nursery() as nursery:
                nursery.start_soon(waiter)  # outside the scope: nothing cancels it
                with trio.CancelScope() as scope:
                    nursery.start_soon(cancel_on_abort, signal, scope)
                    signal.abort()
                    await trio.sleep_forever()  # only the cancelled scope ends this
            return scope.cancelled_caught

    assert trio.run(main) is True
    assert woken == [True]


def test_never_entered_stream_raises_a_clear_error():
    model = ScriptedModel([assistant_message([text("unplayed")])])

    async def main():
        with trio.fail_after(TIME_LIMIT):
            stream = model.stream(AgentContext())
            with pytest.raises(RuntimeError, match="never entered"):
                async for _ in stream:
                    pass
            with pytest.raises(RuntimeError, match="async with"):
                await stream.result()

    trio.run(main)


def test_leaving_early_cancels_the_producer():
    cancelled = []

    async def produce(stream):
        stream.push(StartEvent(partial=assistant_message([])))
        try:
            await trio.sleep_forever()  # a slow provider that never finishes
        except trio.Cancelled:
            cancelled.append(True)
            raise

    async def main():
        with trio.fail_after(TIME_LIMIT):
            stream = ModelCallStream(produce)
            async with stream:
                async for event in stream:
                    assert event.type == "start"
                    break
            # Leaving the block waited for the producer to be cancelled.
            assert cancelled == [True]
            with pytest.raises(RuntimeError, match="closed before it finished"):
                await stream.result()

    trio.run(main)
