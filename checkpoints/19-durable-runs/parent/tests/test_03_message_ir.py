"""Chapter 03: a complete tool round trip saved as messages.

Run alone with `python -m pytest tests/test_03_message_ir.py`. Every async
body runs under a short `trio.fail_after`, so a stream that never ends fails
fast instead of hanging the run.
"""

import json
import time

import attrs
import pytest
import trio

from tiny_pi.messages import (
    DoneEvent,
    ErrorEvent,
    StartEvent,
    TextDeltaEvent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolResultMessage,
    Usage,
    UserMessage,
    assistant_message,
    text,
    text_of,
    user_message,
)
from tiny_pi.event_stream import AssistantMessageEventStream  # after messages: it builds on them

TIME_LIMIT = 1.0


def readme_transcript():
    """The README round trip: a request, an explained tool call, its result."""
    return [
        user_message("Please read the README, then tell me the project name.", timestamp=1_000),
        assistant_message(
            [
                text("I will read the project description first."),
                ToolCall(id="call_1", name="read", arguments={"path": "README.md"}),
            ],
            "toolUse",
            usage=Usage(input=18, output=12, total_tokens=30),
            timestamp=1_010,
        ),
        ToolResultMessage(
            tool_call_id="call_1",
            tool_name="read",
            content=[text("# tiny-pi\nA small agent runtime.")],
            is_error=False,
            timestamp=1_020,
        ),
    ]


# Lab 3.1


def test_text_projection_skips_tool_calls_and_keeps_content():
    call = ToolCall(id="call_1", name="read", arguments={"path": "README.md"})
    message = assistant_message([text("Look first."), call, text("Then answer.")], "toolUse")
    content_before = message.content

    assert text_of(message) == "Look first.\nThen answer."
    assert message.content == content_before
    assert message.content[1] is call
    assert call.arguments == {"path": "README.md"}


def test_records_are_frozen_and_start_with_a_fixed_discriminator():
    user, assistant, result = readme_transcript()
    done = DoneEvent(reason="toolUse", message=assistant)

    assert [user.role, assistant.role, result.role] == ["user", "assistant", "toolResult"]
    assert [block.type for block in assistant.content] + [done.type] == ["text", "toolCall", "done"]
    assert isinstance(result.content, tuple)  # built from a list
    for record in (user, assistant, result, *assistant.content, done):
        first = attrs.fields(type(record))[0]
        assert first.name in ("role", "type") and not first.init  # fixed, never passed in
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            setattr(record, first.name, "changed")


def test_record_content_refuses_a_block_it_may_not_hold():
    call = ToolCall(id="c1", name="read", arguments={})

    with pytest.raises(TypeError, match=r"UserMessage\.content may only hold TextContent, got ToolCall\("):
        UserMessage([call])
    with pytest.raises(
        TypeError, match=r"AssistantMessage\.content may only hold TextContent or ToolCall, got 'hello'"
    ):
        assistant_message(["hello"])


def test_record_timestamp_is_the_time_each_message_is_built():
    before = int(time.time() * 1000)
    first = UserMessage([text("one")])
    time.sleep(0.01)
    second = UserMessage([text("two")])
    after = time.time() * 1000

    assert isinstance(first.timestamp, int)
    assert before <= first.timestamp < second.timestamp <= after  # milliseconds, not import time


def test_record_events_keep_done_and_error_reasons_apart():
    message = assistant_message([])

    with pytest.raises(ValueError, match=r"'reason' must be in \('stop', 'length', 'toolUse'\)"):
        DoneEvent(reason="error", message=message)
    with pytest.raises(ValueError, match=r"'reason' must be in \('error', 'aborted'\)"):
        ErrorEvent(reason="stop", error=message)


# Lab 3.2


def test_error_terminal_ends_the_stream_by_itself():
    failed = assistant_message([text("half an ans")], "error", error_message="socket reset")

    async def main():
        with trio.fail_after(TIME_LIMIT):
            stream = AssistantMessageEventStream()
            stream.push(ErrorEvent(reason="error", error=failed))  # no end() call
            seen = [event.type async for event in stream]
            result = await stream.result()
        assert seen == ["error"]
        assert result is failed
        assert result.error_message == "socket reset"

    trio.run(main)


def test_done_terminal_arrives_after_progress_events():
    final = assistant_message([text("tiny-pi")])
    empty = assistant_message([])

    async def main():
        with trio.fail_after(TIME_LIMIT):
            stream = AssistantMessageEventStream()
            stream.push(StartEvent(partial=empty))
            stream.push(TextDeltaEvent(content_index=0, delta="tiny-pi", partial=final))
            stream.push(DoneEvent(reason="stop", message=final))
            seen = [event.type async for event in stream]
            result = await stream.result()
        assert seen == ["start", "text_delta", "done"]
        assert result is final

    trio.run(main)


def test_terminal_events_are_done_and_error_only():
    from tiny_pi.event_stream import final_message, is_terminal  # the lab 3.1 stand-in lacks them

    partial = assistant_message([])
    call = ToolCall(id="call_1", name="read", arguments={})
    progress = [
        StartEvent(partial=partial),
        TextDeltaEvent(content_index=0, delta="I will", partial=partial),
        ToolCallDeltaEvent(content_index=1, delta="{", partial=partial),
        ToolCallEndEvent(content_index=1, tool_call=call, partial=partial),
    ]

    assert [is_terminal(event) for event in progress] == [False, False, False, False]
    assert is_terminal(DoneEvent(reason="stop", message=partial))
    assert is_terminal(ErrorEvent(reason="aborted", error=partial))
    with pytest.raises(ValueError, match=r"a 'start' event is not terminal and carries no final message"):
        final_message(progress[0])
    with pytest.raises(ValueError, match=r"a 'toolcall_end' event is not terminal"):
        final_message(progress[3])


# Lab 3.3: the JSON functions are imported inside each test, so that this
# file already imports in labs 3.1 and 3.2, before they exist.


def test_json_round_trip_keeps_transcript_keys_and_values():
    from tiny_pi.messages import from_json, to_json

    transcript = readme_transcript()

    saved = to_json(transcript)
    data = json.loads(saved)

    assert [set(item) for item in data] == [
        {"role", "content", "timestamp"},
        {"role", "content", "provider", "model", "usage", "stopReason", "timestamp"},
        {"role", "toolCallId", "toolName", "content", "isError", "timestamp"},
    ]
    assert data[1]["content"][1] == {
        "type": "toolCall",
        "id": "call_1",
        "name": "read",
        "arguments": {"path": "README.md"},
    }
    assert data[1]["usage"] == {"input": 18, "output": 12, "totalTokens": 30}
    assert data[2]["toolCallId"] == data[1]["content"][1]["id"]
    assert from_json(saved) == transcript


def test_json_load_names_an_unknown_key():
    from tiny_pi.messages import TranscriptError, from_json, to_json

    data = json.loads(to_json(readme_transcript()))
    data[1]["stop_reason"] = data[1].pop("stopReason")

    with pytest.raises(TranscriptError, match=r"messages\[1\]: unknown key 'stop_reason'"):
        from_json(json.dumps(data))


def test_json_load_names_a_missing_key():
    from tiny_pi.messages import TranscriptError, from_json, to_json

    data = json.loads(to_json(readme_transcript()))
    del data[2]["toolCallId"]

    with pytest.raises(TranscriptError, match=r"messages\[2\]: missing key 'toolCallId'"):
        from_json(json.dumps(data))


DELETED = object()  # an edit that removes the key instead of setting it


@pytest.mark.parametrize(
    "path, value, expected",
    [
        ((0,), ["hello"], "messages[0]: expected a JSON object, got list"),
        ((0, "role"), DELETED, "messages[0]: missing key 'role'"),
        ((0, "role"), "robot", "messages[0]: unknown role 'robot'"),
        ((0, "content"), "hello", "messages[0].content: expected a JSON array, got str"),
        ((1, "content", 1, "type"), "image", "messages[1].content[1]: unknown type 'image'"),
        ((1, "usage", "totalTokens"), "30", "messages[1].usage: 'total_tokens' must be <class 'int'>"),
    ],
    ids=["not_an_object", "no_role", "unknown_role", "content_not_an_array", "unknown_block", "refused_value"],
)
def test_json_load_says_where_the_data_is_wrong(path, value, expected):
    from tiny_pi.messages import TranscriptError, from_json, to_json

    data = json.loads(to_json(readme_transcript()))
    *parents, last = path
    holder = data
    for step in parents:
        holder = holder[step]
    if value is DELETED:
        del holder[last]
    else:
        holder[last] = value

    with pytest.raises(TranscriptError) as raised:
        from_json(json.dumps(data))
    assert expected in str(raised.value)


def test_json_load_refuses_text_that_is_not_a_transcript():
    from tiny_pi.messages import TranscriptError, from_json

    with pytest.raises(TranscriptError, match=r"invalid JSON: Expecting value at character 0"):
        from_json("")
    with pytest.raises(TranscriptError, match=r"a transcript is a JSON array, got dict"):
        from_json('{"role": "user"}')
