"""Chapter 05: the real streaming boundary.

Run alone with `python -m pytest tests/test_05_provider.py`. Everything runs
offline: httpx.MockTransport streams the fixtures below read by read, and
three tests use httpx's real transport against 127.0.0.1 (two of them start
a small HTTP server in the test's own trio run). Every async body runs under
a short `trio.fail_after`, so a stream that never ends fails fast.

The fixtures are written here, one per wire fact, as Python values: a CRLF,
a raw U+2028 or a read boundary is easier to see in code than in a file.
"""

import io
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import tracemalloc
from functools import cache, partial
from pathlib import Path

import attrs
import httpx
import pytest
import trio
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from tiny_pi.abort import AbortSignal
from tiny_pi.messages import (
    AgentContext,
    ToolCall,
    ToolResultMessage,
    Usage,
    assistant_message,
    text,
    to_json,
    user_message,
)
from tiny_pi.providers.chunks import ChunkAssembler, stop_reason_for
from tiny_pi.providers.normalize import normalize_assistant_message
from tiny_pi.providers.openai_compatible import OpenAICompatibleModel
from tiny_pi.providers.outbound import ToolSpec, build_request_body
from tiny_pi.providers.wire import WireError
from tiny_pi.sse import ServerSentEvent, SSEDecoder

TIME_LIMIT = 2.0
SECRET = "sk-test-5ecret-0123456789"

# Even without an example database, hypothesis caches what it learns about local
# source files in .hypothesis/ under the working directory: keep it out of the project.
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "tiny-pi-hypothesis")

FEW = settings(  # a modest, repeatable run; no example database written to disk
    max_examples=25,
    deadline=None,
    database=None,
    derandomize=True,
    phases=[Phase.generate, Phase.shrink],
    report_multiple_bugs=False,
)


# Fixtures: Chat Completions chunks, one helper per shape the wire uses.


def chunk(delta=None, finish_reason=None, **extra):
    """One `chat.completion.chunk` with a single choice."""
    choice = {"index": 0, "delta": delta or {}, "finish_reason": finish_reason}
    return {"id": "chatcmpl-05", "object": "chat.completion.chunk", "choices": [choice], **extra}


def says(words):
    return chunk({"content": words})


def call_begins(index, call_id, name):
    """The first fragment of a call: the only one with its id and name."""
    fragment = {"index": index, "id": call_id, "type": "function"}
    return chunk({"tool_calls": [{**fragment, "function": {"name": name, "arguments": ""}}]})


def call_continues(index, piece):
    """A later fragment: nothing but the index and a piece of the arguments."""
    return chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})


def finish(reason):
    return chunk({}, reason)


def usage_only(**usage):
    """The trailing chunk `stream_options.include_usage` asks for: no choices, only usage."""
    return {"id": "chatcmpl-05", "object": "chat.completion.chunk", "choices": [], "usage": usage}


def finish_with_usage(reason, **usage):
    """A gateway's habit: the finish_reason repeated on the usage chunk."""
    return {**usage_only(**usage), "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}


def sse(payloads, line_end="\n"):
    """The payloads as an event-stream body: `data: <json>` and a blank line each."""
    body = ""
    for payload in payloads:
        data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
        body += f"data: {data}{line_end}{line_end}"
    return body.encode("utf-8")


TEXT_ONLY = [
    chunk({"role": "assistant", "content": ""}),
    says("Hello"),
    says(", world"),
    finish("stop"),
    "[DONE]",
]

ONE_CALL = [
    chunk({"role": "assistant", "content": None}),
    call_begins(0, "call-1", "read"),
    call_continues(0, '{"path": '),
    call_continues(0, '"README.md"}'),
    finish("tool_calls"),
    "[DONE]",
]

INTERLEAVED = [
    says("Checking both."),
    call_begins(4, "call-a", "read"),
    says(" Then I compare."),
    call_begins(2, "call-b", "grep"),
    call_continues(4, '{"path": '),
    call_continues(2, '{"pattern": "tiny"}'),
    call_continues(4, '"a.txt"}'),
    finish("tool_calls"),
    "[DONE]",
]

WITH_USAGE = [
    says("Cached."),
    finish("stop"),
    usage_only(
        prompt_tokens=1200,
        completion_tokens=90,
        total_tokens=1290,
        prompt_tokens_details={"cached_tokens": 800, "cache_write_tokens": 300},
        completion_tokens_details={"reasoning_tokens": 40},
    ),
    "[DONE]",
]

CUT_BY_LENGTH = [
    says("Writing the file."),
    call_begins(0, "call-1", "write"),
    call_continues(0, '{"path": "notes.md", "content": "half a sen'),
    finish("length"),
    "[DONE]",
]

TOOL_CALLS_WITHOUT_CALLS = [says("I will use a tool."), finish("tool_calls"), "[DONE]"]
UNKNOWN_FINISH = [says("Hm."), finish("eos_token"), "[DONE]"]
CONTENT_FILTER = [says("Well"), finish("content_filter"), "[DONE]"]
CONTENT_AFTER_FINISH = [says("Done."), finish("stop"), says(" Or not."), "[DONE]"]
NO_FINISH = [says("Cut off mid"), "[DONE]"]
# Servers as they are (the lesson's section 5 and 7 cite the threads that report them).
EVERY_CALL_AT_INDEX_0 = [  # Ollama: parallel calls all at index 0, each with its own id
    call_begins(0, "call-a", "read"),
    call_continues(0, '{"path": "a.txt"}'),
    call_begins(0, "call-b", "read"),
    call_continues(0, '{"path": "b.txt"}'),
    finish("tool_calls"),
    "[DONE]",
]
NO_INDEX = [  # older Ollama, Gemini: no index at all; the id says which call starts
    chunk({"tool_calls": [{"id": "call-a", "function": {"name": "read", "arguments": '{"path": '}}]}),
    chunk({"tool_calls": [{"function": {"arguments": '"a.txt"}'}}]}),
    chunk({"tool_calls": [{"id": "call-b", "function": {"name": "grep", "arguments": "{}"}}]}),
    finish("tool_calls"),
    "[DONE]",
]
EMPTY_FINISH_REASON = [  # some servers send "" instead of null until the real reason
    chunk({"content": "Hel"}, ""),
    chunk({"content": "lo"}, ""),
    finish("stop"),
    "[DONE]",
]
NULL_CHOICES = [  # a usage chunk with `choices: null` instead of []
    says("Counted."),
    finish("stop"),
    {"object": "chat.completion.chunk", "choices": None, "usage": {"prompt_tokens": 3, "completion_tokens": 2}},
    "[DONE]",
]
ERROR_MID_STREAM = [says("Partial"), {"error": {"message": "Overloaded", "type": "server_error"}}]

KEEPALIVE_BODY = (
    b": keep-alive\n\n" + sse(TEXT_ONLY[:2]) + b":\n: still here\n\n" + sse(TEXT_ONLY[2:])
)

U2028 = "\u2028"
U2028_STREAM = [says(f"one{U2028}two\u2029three\x85four"), finish("stop"), "[DONE]"]

HTTP_ERRORS = {
    401: {"error": {"message": f"Incorrect API key provided: {SECRET}", "code": "invalid_api_key"}},
    429: {"error": {"message": "Rate limit reached for requests", "code": "rate_limit_exceeded"}},
    500: {"error": {"message": "The server had an error processing your request"}},
}

CONTEXT = AgentContext(messages=[user_message("Read the README.")], system_prompt="Be brief.")


# Helpers: play a stream, check its terminal fact.


def assemble(payloads):
    """Feed payloads straight to a ChunkAssembler; end it as an end of body would."""
    assembler = ChunkAssembler("openai-compatible", "test-model")
    events = [assembler.start()]
    for payload in payloads:
        events += assembler.feed(payload if isinstance(payload, str) else json.dumps(payload))
    if not assembler.closed:
        events.append(assembler.end())
    return events


def final(events):
    """Exactly one terminal event, and it is the last; return its message."""
    terminals = [event for event in events if event.type in ("done", "error")]
    assert len(terminals) == 1, [event.type for event in events]
    assert events[-1] is terminals[0]
    return terminals[0].message if terminals[0].type == "done" else terminals[0].error


def done(events, reason):
    """The stream ended in done(reason); on failure, show the error message."""
    message = final(events)
    assert events[-1].type == "done", message.error_message
    assert events[-1].reason == reason == message.stop_reason
    return message


def failed(events, reason="error"):
    message = final(events)
    assert events[-1].type == "error", [event.type for event in events]
    assert events[-1].reason == reason == message.stop_reason
    return message


def types(events):
    return [event.type for event in events]


def mock_model(reads, status=200, content_type="text/event-stream", seen=None, pause=None):
    """A model whose HTTP exchange is a MockTransport answering `reads`, one read at a time."""

    async def body():
        for read in reads:
            if pause is not None:
                await pause(read)
            await trio.lowlevel.checkpoint()
            yield read

    def handler(request):
        if seen is not None:
            seen.append(request)
        return httpx.Response(status, headers={"content-type": content_type}, content=body())

    return OpenAICompatibleModel(
        "http://models.test/v1", "test-model", api_key=SECRET, transport=httpx.MockTransport(handler)
    )


async def collect(model, context=CONTEXT, signal=None, on_event=None):
    """Iterate one model call to its end; return its events and its result."""
    events = []
    stream = model.stream(context, signal=signal)
    async with stream:
        async for event in stream:
            events.append(event)
            if on_event is not None:
                on_event(event)
    return events, await stream.result()


def play(model, context=CONTEXT, signal=None, on_event=None):
    """`collect` in a trio run of its own, under the time limit."""

    async def main():
        with trio.fail_after(TIME_LIMIT):
            return await collect(model, context, signal, on_event)

    return trio.run(main)


def signature(events):
    """What a consumer can observe, minus the clock."""
    steps = [(e.type, getattr(e, "content_index", None), getattr(e, "delta", None)) for e in events]
    return steps, attrs.evolve(final(events), timestamp=0)


# Lab 5.1: outbound mapping.


def readme_round_trip():
    return AgentContext(
        system_prompt="You are terse.",
        messages=[
            user_message("Read the README."),
            assistant_message(
                [text("Reading."), ToolCall("call-1", "read", {"path": "README.md"})], "toolUse"
            ),
            ToolResultMessage("call-1", "read", [text("# tiny-pi")], is_error=False, timestamp=0),
        ],
    )


def test_outbound_maps_every_role_system_prompt_first():
    wire = build_request_body("test-model", readme_round_trip())["messages"]

    assert wire == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Read the README."},
        {
            "role": "assistant",
            "content": "Reading.",
            "tool_calls": [
                {
                    "id": "call-1",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path": "README.md"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call-1", "content": "# tiny-pi"},
    ]


def test_outbound_arguments_are_a_json_string_the_model_own_text_first():
    kept = ToolCall("call-2", "grep", {"pattern": "x"}, raw_arguments='{ "pattern":"x" }')
    context = AgentContext(messages=[assistant_message([kept], "toolUse")])

    [wire] = build_request_body("test-model", context)["messages"]

    assert wire["content"] is None
    assert wire["tool_calls"][0]["function"]["arguments"] == '{ "pattern":"x" }'


def test_outbound_body_streams_with_usage_and_lists_tools():
    read = ToolSpec("read", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}})

    body = build_request_body("test-model", readme_round_trip(), tools=[read])

    assert body["model"] == "test-model"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "read", "description": "Read a file.", "parameters": read.parameters},
        }
    ]
    assert "tools" not in build_request_body("test-model", readme_round_trip())


def test_outbound_failed_assistant_messages_are_not_replayed():
    context = AgentContext(
        messages=[
            user_message("Hi."),
            assistant_message([text("Hel")], "aborted", error_message="Request was aborted"),
            assistant_message([text("Hel")], "error", error_message="HTTP 500: oops"),
            user_message("Hi again."),
        ]
    )

    wire = build_request_body("test-model", context)["messages"]

    assert [message["role"] for message in wire] == ["user", "user"]


# Lab 5.2: SSE decoding.


def decode(*reads):
    decoder = SSEDecoder()
    events = []
    for read in reads:
        events += decoder.feed(read)
    return events + decoder.close()


def test_sse_data_lines_joined_and_comments_ignored():
    body = b": keep-alive\n\ndata: first\ndata: second\n\n:x\nid: 7\nevent: ping\ndata:tight\n\n"

    assert decode(body) == [ServerSentEvent("first\nsecond"), ServerSentEvent("tight", "ping")]


def test_sse_cr_lf_and_crlf_each_end_a_line():
    assert decode(b"data: a\r\n\r\ndata: b\r\rdata: c\n\n") == [
        ServerSentEvent("a"),
        ServerSentEvent("b"),
        ServerSentEvent("c"),
    ]
    # A CRLF cut by the network is still one line end, not a line end plus a blank line.
    assert decode(b"data: a\r", b"\ndata: b\r\n\r\n") == [ServerSentEvent("a\nb")]
    # A read that is only the LF of that CRLF ends no CR itself: the next LF is a blank line.
    assert decode(b"data: a\r", b"\n", b"\n", b"data: b\n\n") == [ServerSentEvent("a"), ServerSentEvent("b")]


def test_sse_unicode_line_separators_stay_inside_a_line():
    inside = "one\u2028two\u2029three\x85four\x0bfive\x0csix\x1cseven"

    assert decode(f"data: {inside}\n\n".encode()) == [ServerSentEvent(inside)]


def test_sse_multibyte_character_split_across_reads():
    body = "data: é 漢 🙂\n\n".encode()

    assert decode(*[body[i : i + 1] for i in range(len(body))]) == [ServerSentEvent("é 漢 🙂")]


def test_sse_event_split_across_reads_is_reassembled():
    decoder = SSEDecoder()

    assert decoder.feed(b"da") == []
    assert decoder.feed(b'ta: {"a"') == []
    assert decoder.feed(b": 1}\n") == []
    assert decoder.feed(b"\ndata: next") == [ServerSentEvent('{"a": 1}')]


def test_sse_final_event_flushed_at_end_of_body():
    decoder = SSEDecoder()

    assert decoder.feed(b"data: [DONE]") == []
    assert decoder.close() == [ServerSentEvent("[DONE]")]


def test_sse_a_leading_byte_order_mark_is_dropped_and_only_there():
    bom = "\ufeff".encode()
    body = bom + b"data: first\n\ndata: \xef\xbb\xbfsecond\n\n"

    expected = [ServerSentEvent("first"), ServerSentEvent("\ufeffsecond")]
    assert decode(body) == expected
    assert decode(body[:1], body[1:2], body[2:]) == expected  # the mark cut by the network


SSE_BODY = (
    "\ufeff: keep-alive\r\n\r\n".encode()
    + "data: é漢🙂 one\u2028two\r\ndata: line two\r\n\r\n".encode()
    + b"event: note\rdata: x\r\r"
    + sse(INTERLEAVED)
)


@FEW
@given(st.lists(st.integers(0, len(SSE_BODY)), max_size=12))
def test_sse_any_split_into_reads_gives_the_same_events(cuts):
    bounds = [0, *sorted(cuts), len(SSE_BODY)]
    reads = [SSE_BODY[a:b] for a, b in zip(bounds, bounds[1:])]

    assert decode(*reads) == decode(SSE_BODY)


# Lab 5.3: chunks to events: text, and one terminal event.


def test_chunks_text_only():
    events = assemble(TEXT_ONLY)

    message = done(events, "stop")
    assert types(events) == ["start", "text_delta", "text_delta", "done"]
    assert [event.delta for event in events[1:3]] == ["Hello", ", world"]
    assert events[0].partial.content == ()
    assert events[1].partial.content == (text("Hello"),)
    assert message.content == (text("Hello, world"),)


def test_chunks_a_payload_that_is_json_but_not_an_object_is_refused():
    message = failed(assemble([says("ok"), "[1]", finish("stop"), "[DONE]"]))

    assert message.error_message == "chunk must be an object, got array"
    assert message.content == (text("ok"),)


# Lab 5.4: tool-call fragments merged by index.


def test_chunks_tool_call_id_and_name_only_on_first_fragment():
    events = assemble(ONE_CALL)

    message = done(events, "toolUse")
    assert types(events) == ["start", *["toolcall_delta"] * 3, "toolcall_end", "done"]
    assert events[1].partial.content == (ToolCall("call-1", "read", {}, ""),)
    assert events[3].partial.content == (ToolCall("call-1", "read", {}, '{"path": "README.md"}'),)
    assert events[4].tool_call == ToolCall("call-1", "read", {"path": "README.md"}, '{"path": "README.md"}')
    assert message.content == (events[4].tool_call,)


def test_chunks_interleaved_calls_are_merged_by_index():
    events = assemble(INTERLEAVED)

    message = done(events, "toolUse")
    assert message.content == (
        text("Checking both."),
        ToolCall("call-a", "read", {"path": "a.txt"}, '{"path": "a.txt"}'),
        text(" Then I compare."),
        ToolCall("call-b", "grep", {"pattern": "tiny"}, '{"pattern": "tiny"}'),
    )
    ends = [(event.content_index, event.tool_call.id) for event in events if event.type == "toolcall_end"]
    assert ends == [(1, "call-a"), (3, "call-b")]


def test_chunks_empty_text_is_no_event_but_every_fragment_is_a_delta():
    begins, first_piece, last_piece = ONE_CALL[1:4]
    payloads = [says(""), begins, first_piece, says(""), call_continues(0, ""), chunk({"content": None})]
    events = assemble([*payloads, last_piece, *ONE_CALL[4:]])

    message = done(events, "toolUse")
    assert types(events) == ["start", *["toolcall_delta"] * 4, "toolcall_end", "done"]
    assert [event.delta for event in events[1:5]] == ["", '{"path": ', "", '"README.md"}']
    assert message.content == (ToolCall("call-1", "read", {"path": "README.md"}, '{"path": "README.md"}'),)


FIRST_FRAGMENT_ERRORS = {
    "no id": (
        call_continues(0, "{}"),
        "choices[0].delta.tool_calls[0].id is missing: the first fragment of a call must carry it",
    ),
    "no name": (
        chunk({"tool_calls": [{"index": 0, "id": "call-1", "function": {"arguments": "{}"}}]}),
        "choices[0].delta.tool_calls[0].function.name must be a string, got null",
    ),
}


def test_chunks_a_first_fragment_without_an_id_or_a_name_is_refused():
    for case, (fragment, expected) in FIRST_FRAGMENT_ERRORS.items():
        message = failed(assemble([says("Reading."), fragment, finish("tool_calls"), "[DONE]"]))

        assert message.error_message == expected, case
        assert message.content == (text("Reading."),), case


def test_chunks_a_new_id_on_an_open_index_starts_a_new_call():
    events = assemble(EVERY_CALL_AT_INDEX_0)

    message = done(events, "toolUse")
    assert message.content == (
        ToolCall("call-a", "read", {"path": "a.txt"}, '{"path": "a.txt"}'),
        ToolCall("call-b", "read", {"path": "b.txt"}, '{"path": "b.txt"}'),
    )
    ends = [(event.content_index, event.tool_call.id) for event in events if event.type == "toolcall_end"]
    assert ends == [(0, "call-a"), (1, "call-b")]


def test_chunks_fragments_without_an_index_follow_the_id():
    message = done(assemble(NO_INDEX), "toolUse")

    assert message.content == (
        ToolCall("call-a", "read", {"path": "a.txt"}, '{"path": "a.txt"}'),
        ToolCall("call-b", "grep", {}, "{}"),
    )


# A server that cuts an emoji between two chunks escapes each half of its surrogate pair
# in JSON (the "\ud83d" that `json.dumps` writes here); the model's own argument JSON may
# escape a lone half too (the "\\udce9" inside the arguments text).
SPLIT_EMOJI = [
    says("smile \ud83d"),
    says("\ude00, lone \udce9"),
    call_begins(0, "call-1", "read"),
    call_continues(0, '{"path": "\ud83d'),
    call_continues(0, '\ude00.txt", "note": "caf\\udce9"}'),
    finish("tool_calls"),
    "[DONE]",
]


def streamed_pieces(events):
    return [event.delta for event in events if event.type in ("text_delta", "toolcall_delta")]


# Lab 5.5: only valid text reaches the transcript.


def test_chunks_a_surrogate_pair_split_across_deltas_is_joined_and_a_lone_one_replaced():
    events = assemble(SPLIT_EMOJI)

    message = done(events, "toolUse")
    raw = '{"path": "\U0001f600.txt", "note": "caf\\udce9"}'
    assert streamed_pieces(events) == ["smile ", "\U0001f600, lone \ufffd", "", '{"path": "', raw[10:]]
    assert message.content == (
        text("smile \U0001f600, lone \ufffd"),
        ToolCall("call-1", "read", {"path": "\U0001f600.txt", "note": "caf\ufffd"}, raw),
    )
    to_json([message]).encode("utf-8")  # the transcript is valid text: this cannot fail


def test_chunks_a_high_surrogate_still_waiting_when_its_block_ends_becomes_u_fffd():
    cut_text = [says("cut \ud83d"), call_begins(0, "call-1", "read"), *ONE_CALL[2:]]
    message = done(assemble(cut_text), "toolUse")
    assert message.content[0] == text("cut \ufffd")

    cut_call = [call_begins(0, "call-1", "read"), call_continues(0, '{"path": "a\ud83d'), finish("tool_calls")]
    message = done(assemble(cut_call), "toolUse")
    assert message.content[0].raw_arguments == '{"path": "a\ufffd'
    assert message.content[0].arguments is None  # the JSON was cut short anyway

    message = done(assemble([says("the end \ud83d"), finish("stop"), "[DONE]"]), "stop")
    assert message.content == (text("the end \ufffd"),)


# Lab 5.6: the usage ledger and the finish-reason cross-check.


def test_ledger_from_a_trailing_chunk_without_choices():
    message = done(assemble(WITH_USAGE), "stop")

    # 1200 prompt tokens = 800 read from the cache + 300 written to it + 100 fresh.
    assert message.usage == Usage(
        input=100, output=90, total_tokens=1290, cache_read=800, cache_write=300
    )


def test_ledger_a_usage_chunk_with_null_choices_is_read():
    message = done(assemble(NULL_CHOICES), "stop")

    assert message.usage == Usage(input=3, output=2, total_tokens=5, cache_read=0, cache_write=0)


def test_finish_length_keeps_a_half_written_call_unparsed():
    events = assemble(CUT_BY_LENGTH)

    message = done(events, "length")
    assert "toolcall_end" not in types(events)
    call = message.content[1]
    assert call.arguments is None
    assert call.raw_arguments == '{"path": "notes.md", "content": "half a sen'
    assert message.content[0] == text("Writing the file.")


def test_finish_stop_with_calls_means_tool_use():
    events = assemble([*ONE_CALL[:-2], finish("stop"), "[DONE]"])

    assert done(events, "toolUse").content[0].arguments == {"path": "README.md"}


def test_finish_tool_calls_without_calls_is_an_error():
    message = failed(assemble(TOOL_CALLS_WITHOUT_CALLS))

    assert message.error_message == "finish_reason 'tool_calls' but no tool call arrived"
    assert message.content == (text("I will use a tool."),)


def test_finish_unknown_or_filtered_reason_is_an_error_naming_it():
    assert "eos_token" in failed(assemble(UNKNOWN_FINISH)).error_message
    assert "content_filter" in failed(assemble(CONTENT_FILTER)).error_message


FINISH_ERRORS = {
    # (finish_reason, did calls arrive?) -> the WireError stop_reason_for raises
    ("tool_calls", False): "finish_reason 'tool_calls' but no tool call arrived",
    ("content_filter", True): "the provider withheld the reply: finish_reason 'content_filter'",
    ("eos_token", False): "unknown finish_reason 'eos_token'",
}


def test_finish_stop_reason_for_raises_a_wire_error_for_its_error_rows():
    for (finish_reason, has_calls), expected in FINISH_ERRORS.items():
        with pytest.raises(WireError) as raised:
            stop_reason_for(finish_reason, has_calls)
        assert str(raised.value) == expected

    assert [stop_reason_for("stop", True), stop_reason_for(None, False)] == ["toolUse", "stop"]


def test_finish_content_after_it_is_an_error_keeping_the_partial():
    message = failed(assemble(CONTENT_AFTER_FINISH))

    assert message.error_message == "content arrived after finish_reason 'stop'"
    assert message.content == (text("Done."),)


def test_finish_a_stream_ending_without_one_is_an_error():
    for payloads in (NO_FINISH, NO_FINISH[:-1]):  # with and without [DONE]
        message = failed(assemble(payloads))
        assert message.error_message == "the stream ended before a finish_reason arrived"
        assert message.content == (text("Cut off mid"),)


def test_finish_an_empty_reason_means_not_finished_yet():
    assert done(assemble(EMPTY_FINISH_REASON), "stop").content == (text("Hello"),)


def test_finish_a_repeated_reason_ends_the_calls_once():
    repeated = finish_with_usage("tool_calls", prompt_tokens=3, completion_tokens=2)
    events = assemble([*ONE_CALL[:-1], repeated, "[DONE]"])

    assert types(events).count("toolcall_end") == 1
    assert done(events, "toolUse").usage.input == 3

    changed = failed(assemble([says("Hi"), finish("stop"), finish("length"), "[DONE]"]))
    assert changed.error_message == "finish_reason changed from 'stop' to 'length'"


def test_finish_an_unfinished_call_in_a_failed_message_cannot_run():
    message = failed(assemble(ONE_CALL[:3]))

    assert message.content == (ToolCall("call-1", "read", None, '{"path": '),)


# Lab 5.7: lazy partials, linear memory.


def test_partials_are_snapshots_that_later_events_do_not_change():
    events = assemble(INTERLEAVED)

    assert events[1].partial.content == (text("Checking both."),)
    assert [len(event.partial.content) for event in events[:5]] == [0, 1, 2, 3, 4]
    assert events[5].partial.content[1].raw_arguments == '{"path": '


def test_partials_are_provisional_with_the_usage_so_far_and_one_timestamp():
    events = assemble([*ONE_CALL[:-2], finish_with_usage("tool_calls", prompt_tokens=3), "[DONE]"])

    message = done(events, "toolUse")
    for event in events[:-1]:
        assert event.partial.stop_reason == "stop", event.type
        assert event.partial.error_message is None, event.type
        assert event.partial.timestamp == message.timestamp, event.type
    assert events[1].partial.usage == Usage()  # nothing counted yet
    assert events[-2].type == "toolcall_end"
    assert events[-2].partial.usage == message.usage == Usage(3, 0, 3, 0, 0)
    assert "_partial=AssistantMessage(" in repr(events[1])  # printed as the message, lazy or not


def peak_bytes(action):
    """`action()` and the most memory it held at once, as tracemalloc counts it (no clock)."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    try:
        return action(), tracemalloc.get_traced_memory()[1] - before
    finally:
        if started:
            tracemalloc.stop()


def test_partials_keeping_every_event_costs_memory_linear_in_the_reply():
    # A queue holds every event when the producer runs ahead of the consumer. If each
    # partial copied the text so far, 4x the deltas would cost about 16x the memory.
    def every_event(deltas):
        assembler = ChunkAssembler("openai-compatible", "test-model")
        payload = json.dumps(says("0123456789"))
        events = [assembler.start()]
        for _ in range(deltas):
            events += assembler.feed(payload)
        return events

    _, small = peak_bytes(lambda: every_event(500))
    events, large = peak_bytes(lambda: every_event(2_000))

    assert large < 8 * small, f"4x the deltas held {large / small:.1f}x the memory"
    assert events[2].partial.content == (text("0123456789" * 2),)  # as it stood at that event
    assert events[-1].partial.content == (text("0123456789" * 2_000),)


# Lab 5.8: the real HTTP transport, and errors as events.


def test_http_request_carries_bearer_accept_and_the_body():
    seen = []

    events, message = play(mock_model([sse(TEXT_ONLY)], seen=seen))

    assert done(events, "stop") is message
    [request] = seen
    assert request.method == "POST"
    assert str(request.url) == "http://models.test/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    assert request.headers["accept"] == "text/event-stream"
    assert json.loads(request.content) == build_request_body("test-model", CONTEXT)


def test_http_streams_read_by_read_ignoring_keepalive_comments():
    reads = [KEEPALIVE_BODY[i : i + 7] for i in range(0, len(KEEPALIVE_BODY), 7)]

    events, message = play(mock_model(reads))

    assert done(events, "stop").content == (text("Hello, world"),)


def test_http_crlf_line_ends():
    events, _ = play(mock_model([sse(ONE_CALL, line_end="\r\n")]))

    assert done(events, "toolUse").content[0].arguments == {"path": "README.md"}


def test_http_event_split_across_network_reads():
    body = sse(INTERLEAVED)
    cut = body.index(b"call-a") + 3  # inside a JSON string, inside an event
    reads = [body[:cut], body[cut : cut + 5], body[cut + 5 :]]

    events, _ = play(mock_model(reads))

    assert signature(events) == signature(assemble(INTERLEAVED))


def test_http_raw_u2028_inside_a_json_string():
    body = sse(U2028_STREAM)
    assert U2028.encode() in body  # raw on the wire, not escaped

    events, _ = play(mock_model([body]))

    assert done(events, "stop").content == (text(f"one{U2028}two\u2029three\x85four"),)


@pytest.mark.parametrize("status", sorted(HTTP_ERRORS))
def test_http_error_status_is_an_error_event_with_the_body_message(status):
    body = json.dumps(HTTP_ERRORS[status]).encode()

    events, message = play(mock_model([body], status=status, content_type="application/json"))

    assert types(events) == ["error"]
    assert failed(events) is message
    assert message.error_message.startswith(f"HTTP {status}: ")
    assert HTTP_ERRORS[status]["error"]["message"].split(":")[0] in message.error_message
    assert SECRET not in message.error_message


def test_http_the_api_key_appears_nowhere_but_the_header():
    model = mock_model([])

    assert SECRET not in repr(model)
    assert SECRET not in str(play(model)[1])

KEY_ECHOES = {
    # how a server or a transport can echo the key back: (reads, status, content type, a failure)
    "an HTTP error in plain text": ([f"no such key {SECRET} here".encode()], 500, "text/plain", None),
    "an HTTP error in JSON": ([json.dumps({"error": {"message": f"bad key {SECRET}"}}).encode()], 401,
                              "application/json", None),
    "an error object mid-stream": ([sse([says("Hi"), {"error": {"message": f"key {SECRET} revoked"}}])], 200,
                                   "text/event-stream", None),
    "a whole answer that is not JSON": ([f'{{"key": "{SECRET}'.encode()], 200, "application/json", None),
    "a transport error": ([sse(TEXT_ONLY[:2]), b"boom"], 200, "text/event-stream",
                          httpx.ReadError(f"reset while sending {SECRET}")),
}


@pytest.mark.parametrize("path", sorted(KEY_ECHOES))
def test_http_the_api_key_is_scrubbed_on_every_error_path(path):
    reads, status, content_type, failure = KEY_ECHOES[path]

    async def pause(read):
        if read == b"boom":
            raise failure

    events, message = play(mock_model(reads, status=status, content_type=content_type, pause=pause))

    assert failed(events) is message
    assert SECRET[:8] not in message.error_message, message.error_message


def test_http_an_error_text_is_scrubbed_before_it_is_cut():
    for before in range(150, 200):  # the key straddles the 200-character cut somewhere in here
        body = ("x" * before + SECRET + " is not a valid key").encode()

        events, message = play(mock_model([body], status=500, content_type="text/plain"))

        assert SECRET[:8] not in message.error_message, (before, message.error_message)
        assert len(message.error_message) <= 200


def test_http_error_object_mid_stream():
    events, message = play(mock_model([sse(ERROR_MID_STREAM)]))

    assert failed(events) is message
    assert message.error_message == "the provider reported an error mid-stream: Overloaded"
    assert message.content == (text("Partial"),)


def test_http_invalid_json_is_an_error_event():
    events, message = play(mock_model([sse([says("ok")]) + b"data: {not json\n\n"]))

    assert failed(events) is message
    assert message.error_message.startswith("invalid JSON in a data line")
    assert message.content == (text("ok"),)


def test_http_a_whole_answer_that_is_not_json_is_an_error_event():
    for content_type in ("application/json", "application/json; charset=utf-8"):
        reads = [b'{"choices": [{"message": ']
        events, message = play(mock_model(reads, content_type=content_type))

        assert types(events) == ["error"], content_type
        assert failed(events) is message
        assert message.error_message.startswith("invalid JSON in the response body: ")


def test_http_dropped_connection_is_an_error_event_keeping_the_partial():
    async def pause(read):
        if read == b"boom":
            raise httpx.ReadError("connection reset by peer")

    events, message = play(mock_model([sse(TEXT_ONLY[:2]), b"boom"], pause=pause))

    assert failed(events) is message
    assert message.error_message == "transport error (ReadError): connection reset by peer"
    assert message.content == (text("Hello"),)


def test_http_abort_mid_stream_keeps_the_partial():
    signal = AbortSignal()

    async def pause(read):
        if read == b"never":
            await trio.sleep_forever()  # the server stalls; only the abort ends this

    def abort_after_first_text(event):
        if event.type == "text_delta":
            signal.abort()

    model = mock_model([sse(TEXT_ONLY[:2]), b"never"], pause=pause)
    events, message = play(model, signal=signal, on_event=abort_after_first_text)

    assert types(events) == ["start", "text_delta", "error"]
    assert failed(events, "aborted") is message
    assert message.error_message == "Request was aborted"
    assert message.content == (text("Hello"),)


EVERY_FIXTURE = {
    "text only": (200, sse(TEXT_ONLY)),
    "one call": (200, sse(ONE_CALL)),
    "interleaved calls": (200, sse(INTERLEAVED)),
    "usage": (200, sse(WITH_USAGE)),
    "keep-alive": (200, KEEPALIVE_BODY),
    "crlf": (200, sse(TEXT_ONLY, line_end="\r\n")),
    "u2028": (200, sse(U2028_STREAM)),
    "length": (200, sse(CUT_BY_LENGTH)),
    "tool_calls without calls": (200, sse(TOOL_CALLS_WITHOUT_CALLS)),
    "unknown finish": (200, sse(UNKNOWN_FINISH)),
    "content filter": (200, sse(CONTENT_FILTER)),
    "content after finish": (200, sse(CONTENT_AFTER_FINISH)),
    "no finish": (200, sse(NO_FINISH)),
    "error mid-stream": (200, sse(ERROR_MID_STREAM)),
    "every call at index 0": (200, sse(EVERY_CALL_AT_INDEX_0)),
    "no index": (200, sse(NO_INDEX)),
    "empty finish_reason": (200, sse(EMPTY_FINISH_REASON)),
    "null choices": (200, sse(NULL_CHOICES)),
    **{f"HTTP {status}": (status, json.dumps(body).encode()) for status, body in HTTP_ERRORS.items()},
}


def test_http_every_fixture_ends_in_one_terminal_event_and_a_result():
    for name, (status, body) in EVERY_FIXTURE.items():
        middle = len(body) // 2
        events, message = play(mock_model([body[:middle], body[middle:]], status=status))

        assert final(events) is message, name


def test_http_chat_entry_point_prints_the_reply_as_it_streams():
    from tiny_pi.chat import chat, summary

    out = io.StringIO()

    async def main():
        with trio.fail_after(TIME_LIMIT):
            return await chat(mock_model([sse(WITH_USAGE)]), "Hi", out)

    message = trio.run(main)

    assert out.getvalue() == "Cached.\n"
    assert summary(message) == (
        "[stop] tokens: input 100, output 90, cache read 800, cache write 300"
    )


def real_model(port):
    """A model on 127.0.0.1 through httpx's real HTTP transport (given explicitly, so that
    proxy settings in the environment cannot reroute the request)."""
    transport = httpx.AsyncHTTPTransport()
    return OpenAICompatibleModel(f"http://127.0.0.1:{port}/v1", "m", SECRET, transport)


async def serve_once(nursery, reply):
    """A real HTTP/1.1 server on 127.0.0.1 for one request; `reply(stream, request)` answers."""

    async def handle(stream):
        request = b""
        while b"\r\n\r\n" not in request:
            request += await stream.receive_some(65536)
        head, _, body = request.partition(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        while len(body) < length:
            body += await stream.receive_some(65536)
        await reply(stream, head.decode(), json.loads(body))
        await stream.aclose()

    listeners = await nursery.start(partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
    return listeners[0].socket.getsockname()[1]


async def send_chunk(stream, data):
    """One piece of a `Transfer-Encoding: chunked` body."""
    await stream.send_all(b"%x\r\n%s\r\n" % (len(data), data))


STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
)


def test_http_connection_refused_is_an_error_event():
    with socket.socket() as probe:  # a port that was free a moment ago: nobody listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    events, message = play(real_model(port))

    assert types(events) == ["error"]
    assert message.error_message.startswith("transport error (ConnectError)")


def test_http_real_server_events_arrive_before_the_response_is_complete():
    first_delta_seen = trio.Event()
    log = []

    async def reply(stream, head, body):
        log.append((head, body))
        await stream.send_all(STREAM_HEAD)
        await send_chunk(stream, sse(TEXT_ONLY[:2]))
        await first_delta_seen.wait()  # the client has an event; the body is not over
        for payload in TEXT_ONLY[2:]:
            await trio.sleep(0.005)
            await send_chunk(stream, sse([payload]))
        log.append("body complete")
        await stream.send_all(b"0\r\n\r\n")

    def watch(event):
        if event.type == "text_delta" and not first_delta_seen.is_set():
            log.append("first delta")
            first_delta_seen.set()

    async def main():
        with trio.fail_after(TIME_LIMIT):
            async with trio.open_nursery() as nursery:
                port = await serve_once(nursery, reply)
                events, _ = await collect(real_model(port), on_event=watch)
                nursery.cancel_scope.cancel()
        return events

    events = trio.run(main)

    assert done(events, "stop").content == (text("Hello, world"),)
    (head, body), *order = log
    assert f"authorization: bearer {SECRET}" in head.lower()
    assert body["stream"] is True
    assert order == ["first delta", "body complete"]


def test_http_real_server_dropping_the_connection_mid_body():
    async def reply(stream, head, body):
        await stream.send_all(STREAM_HEAD)
        await send_chunk(stream, sse(TEXT_ONLY[:2]))
        await stream.send_all(b"40\r\ndata: {")  # a chunk cut short, then the socket closes

    async def main():
        with trio.fail_after(TIME_LIMIT):
            async with trio.open_nursery() as nursery:
                port = await serve_once(nursery, reply)
                events, _ = await collect(real_model(port))
                nursery.cancel_scope.cancel()
        return events

    events = trio.run(main)

    message = failed(events)
    assert message.error_message.startswith("transport error (RemoteProtocolError)")
    assert message.content == (text("Hello"),)


def test_http_real_server_cutting_an_emoji_between_two_chunks():
    payloads = [says("I am \ud83d"), says("\ude00 here"), finish("stop"), "[DONE]"]

    async def reply(stream, head, body):
        await stream.send_all(STREAM_HEAD)
        for payload in payloads:  # json.dumps escapes each half: "\ud83d", then "\ude00"
            data = payload if isinstance(payload, str) else json.dumps(payload)
            await send_chunk(stream, sse([data]))
        await stream.send_all(b"0\r\n\r\n")

    async def main():
        with trio.fail_after(TIME_LIMIT):
            async with trio.open_nursery() as nursery:
                port = await serve_once(nursery, reply)
                events, _ = await collect(real_model(port))
                nursery.cancel_scope.cancel()
        return events

    events = trio.run(main)

    assert streamed_pieces(events) == ["I am ", "\U0001f600 here"]
    assert done(events, "stop").content == (text("I am \U0001f600 here"),)


def chat_command(port):
    """`python -m tiny_pi.chat` against 127.0.0.1, run from the project root, with no key and no proxy."""
    command = [sys.executable, "-m", "tiny_pi.chat", "--base-url", f"http://127.0.0.1:{port}/v1"]
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower() and k != "TINY_PI_API_KEY"}
    return command + ["--model", "m", "Hi"], Path(__file__).resolve().parents[1], env


def test_http_chat_ctrl_c_aborts_the_call_and_keeps_the_partial():
    async def reply(stream, head, body):
        await stream.send_all(STREAM_HEAD)
        await send_chunk(stream, sse(TEXT_ONLY[:2]))
        await trio.sleep_forever()  # the server stalls; only Ctrl-C ends the call

    async def main():
        with trio.fail_after(30):  # a fresh interpreter imports httpx: slower than the rest
            async with trio.open_nursery() as nursery:
                port = await serve_once(nursery, reply)
                command, root, env = chat_command(port)
                process = await trio.lowlevel.open_process(
                    command, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
                )
                shown = b""
                while b"Hello" not in shown:  # the first delta is on screen: press Ctrl-C
                    read = await process.stdout.receive_some()
                    assert read, f"chat ended before the first delta: {shown!r}"
                    shown += read
                process.send_signal(signal.SIGINT)
                while read := await process.stdout.receive_some():
                    shown += read
                errors = b""
                while read := await process.stderr.receive_some():
                    errors += read
                status = await process.wait()
                nursery.cancel_scope.cancel()
        return status, shown.decode(), errors.decode()

    status, shown, errors = trio.run(main)

    assert status == 130, errors
    assert shown == "Hello\n"
    assert errors.startswith("[aborted] tokens: input 0"), errors
    assert "error: Request was aborted" in errors
    assert "Traceback" not in errors


VALID_BODY = sse(INTERLEAVED[:-1]) + sse(WITH_USAGE[2:])


@cache
def whole_body_signature():
    """What the stream shows when the body arrives in one read (played once, not per example)."""
    return signature(play(mock_model([VALID_BODY]))[0])


@FEW
@given(st.lists(st.integers(0, len(VALID_BODY)), max_size=10))
def test_http_any_split_of_a_valid_stream_gives_the_same_events(cuts):
    bounds = [0, *sorted(cuts), len(VALID_BODY)]
    reads = [VALID_BODY[a:b] for a, b in zip(bounds, bounds[1:])]

    events, _ = play(mock_model(reads))

    assert signature(events) == whole_body_signature()


WIRE_PIECES = st.sampled_from(
    [b"data: ", b"data:", b"\n", b"\r", b"\r\n", b": c\n", b"[DONE]", b"{", b"}", b'"', b"\xe2\x80",
     b'{"choices":[{"delta":{"content":"x"}}]}', b'{"choices":[]}', b'{"error":{}}',
     b'{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f"}}]}}]}',
     b'{"choices":[{"delta":{},"finish_reason":"stop"}]}', b'{"usage":{"prompt_tokens":-1}}']
)


@FEW
@given(st.one_of(st.binary(max_size=200), st.lists(WIRE_PIECES, max_size=20).map(b"".join)))
def test_http_any_bytes_end_in_exactly_one_terminal_event(body):
    events, message = play(mock_model([body[: len(body) // 2], body[len(body) // 2 :]]))

    assert final(events) is message
    assert "unexpected" not in (message.error_message or "")


# Lab 5.9: the normalization seam.


def test_seam_rebuilds_a_wire_message_from_an_allow_list():
    wire = {
        "role": "assistant",
        "content": "Reading.",
        "reasoning": "The user wants the README.",
        "refusal": None,
        "annotations": [{"type": "url_citation"}],
        "audio": None,
        "index": 0,
        "tool_calls": [
            {
                "index": 0,
                "id": "call-1",
                "type": "function",
                "function": {"name": "read", "arguments": '{"path": "README.md"}', "strict": True},
            }
        ],
    }

    content = normalize_assistant_message(wire)

    assert content == (
        text("Reading."),
        ToolCall("call-1", "read", {"path": "README.md"}, '{"path": "README.md"}'),
    )
    saved = to_json([assistant_message(content, "toolUse")])
    for provider_only in ("reasoning", "refusal", "annotations", "audio", "index", "strict"):
        assert provider_only not in saved


def good_call():
    return {"id": "call-1", "type": "function", "function": {"name": "read", "arguments": "{}"}}


MALFORMED = {
    "not an object": (["assistant"], "message must be an object, got array"),
    "role": ({"role": "user", "content": "x"}, "message.role must be 'assistant'"),
    "content": ({"role": "assistant", "content": [{"type": "text"}]}, "message.content must be a string or null"),
    "tool_calls": ({"role": "assistant", "tool_calls": {}}, "message.tool_calls must be an array"),
    "empty tool_calls": ({"role": "assistant", "tool_calls": []}, "message.tool_calls must not be empty"),
    "id": (
        {"role": "assistant", "tool_calls": [{**good_call(), "id": None}]},
        "message.tool_calls[0].id must be a string, got null",
    ),
    "arguments": (
        {"role": "assistant", "tool_calls": [{**good_call(), "function": {"name": "read", "arguments": {}}}]},
        "message.tool_calls[0].function.arguments must be a string, got object",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_seam_rejects_a_malformed_shape_naming_the_field(case):
    from tiny_pi.providers.wire import WireError

    wire, expected = MALFORMED[case]

    with pytest.raises(WireError) as raised:
        normalize_assistant_message(wire)
    assert expected in str(raised.value)


def test_seam_streamed_provider_only_fields_never_reach_the_message():
    noisy_call = call_begins(4, "call-a", "read")
    noisy_call["choices"][0]["logprobs"] = None
    noisy_call["choices"][0]["delta"]["tool_calls"][0]["function"]["strict"] = True
    noisy = [
        chunk({"role": "assistant", "content": None, "refusal": None, "reasoning_content": "Hmm."}),
        chunk({"reasoning": "Let me think.", "annotations": []}, system_fingerprint="fp_05"),
        INTERLEAVED[0],
        noisy_call,
        *INTERLEAVED[2:],
    ]

    assert signature(assemble(noisy))[1] == signature(assemble(INTERLEAVED))[1]


def test_seam_a_malformed_chunk_is_an_error_event_naming_the_field():
    message = failed(assemble([says("ok"), says(42)]))
    assert message.error_message == "choices[0].delta.content must be a string or null, got number"

    message = failed(assemble([call_continues("0", "{}")]))
    assert message.error_message == "choices[0].delta.tool_calls[0].index must be an integer, got string"


def test_seam_a_malformed_whole_answer_is_an_error_event_naming_the_field():
    answer = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": []}}]}

    events, message = play(mock_model([json.dumps(answer).encode()], content_type="application/json"))

    assert types(events) == ["error"]
    assert failed(events) is message
    assert message.error_message == (
        "response.choices[0].message.tool_calls must not be empty; leave it out or use null"
    )


def test_seam_a_non_streamed_answer_goes_through_the_seam_too():
    answer = {
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": None, "refusal": None, "tool_calls": [good_call()]},
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }

    events, message = play(mock_model([json.dumps(answer).encode()], content_type="application/json"))

    assert done(events, "toolUse") is message
    assert message.content == (ToolCall("call-1", "read", {}, "{}"),)
    assert message.usage == Usage(input=10, output=5, total_tokens=15, cache_read=0, cache_write=0)
