"""Chapter 03: a complete tool round trip saved as messages.

Run alone with `python -m pytest tests/test_03_message_ir.py`. Every async
body runs under a short `trio.fail_after`, so a stream that never ends fails
fast instead of hanging the run.
"""

import json

import pytest
import trio

from tiny_pi.messages import (
    DoneEvent,
    ErrorEvent,
    StartEvent,
    TextDeltaEvent,
    ToolCall,
    ToolResultMessage,
    Usage,
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
