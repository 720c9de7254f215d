"""Fuzz the chapter 05 provider: hostile SSE bytes and chunk JSON, one model call per example.

This is the worker of `course dev fuzz`, which copies the
snapshot under test to a temporary directory, copies this file in, and runs
it there (cwd = the copy, `python -P`), so the only `tiny_pi` it can import
is that snapshot's: two `tiny_pi` packages never share a process.

    python -P fuzz_provider_worker.py --examples 5000 --seed 0   # inside the copy

Each example is one HTTP exchange played by httpx.MockTransport: a status,
a content type, and a body cut into network reads at arbitrary points. The
body is built from Chat Completions chunks (coherent streams as a server
sends them, then spoiled a little; and hostile mixes: wrong-typed fields,
unknown finish reasons, tool-call fragments without their id, usage
ledgers with nonsense, mid-stream errors), framed as SSE with every line
ending, comments, multi-line data and missing blank lines, then spoiled at
the byte level (invalid UTF-8, cut anywhere). A read may fail (connection
reset, a surprise exception) and the consumer may abort mid-stream. The
API key (FUZZ_API_KEY, else a random one) is planted where errors quote the
provider (error bodies, error chunks, finish reasons, broken JSON,
exceptions raised by the transport) and never in content, where the model
may legitimately repeat it.

What must hold for every example (the design's contract for a provider):
- iteration and `await stream.result()` raise nothing;
- exactly one terminal event (done or error), and it is the last one;
- the result is the terminal event's message;
- no hang: the call ends within TIME_LIMIT seconds;
- the API key, or any 12-character piece of it, appears in no event, no
  message and nothing the provider printed or logged.

The last line of stdout is a JSON summary (examples run, terminal kinds);
the exit status is 0 only if every example held.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import secrets
import string
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

sys.path.insert(0, os.getcwd())  # the snapshot under test, as `python -m pytest` would see it

import httpx  # noqa: E402
import trio  # noqa: E402
from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tiny_pi.abort import AbortSignal  # noqa: E402
from tiny_pi.messages import AgentContext, user_message  # noqa: E402
from tiny_pi.providers.openai_compatible import OpenAICompatibleModel  # noqa: E402

KEY_BODY = os.environ.get("FUZZ_API_KEY", "").removeprefix("sk-fuzz-") or "".join(
    secrets.choice(string.ascii_letters + string.digits) for _ in range(32))
API_KEY = f"sk-fuzz-{KEY_BODY}"
PIECE = 12
TIME_LIMIT = 10.0
TERMINAL = ("done", "error")


def leaks(text: str) -> bool:
    """The key, or any 12-character window of its random part, is in `text`."""
    return any(KEY_BODY[i : i + PIECE] in text for i in range(len(KEY_BODY) - PIECE + 1))


def where_it_leaks(text: str) -> str:
    """The text around the first leaked piece, with the piece masked (the report must not leak it either)."""
    for i in range(len(KEY_BODY) - PIECE + 1):
        at = text.find(KEY_BODY[i : i + PIECE])
        if at >= 0:
            start = max(0, at - 120)
            window = text[start : at + 80]
            for j in range(len(KEY_BODY) - PIECE + 1):
                window = window.replace(KEY_BODY[j : j + PIECE], "<KEY PIECE>")
            return f"...{window}... (key characters {i}..{i + PIECE} found)"
    return ""


# Strategies ----------------------------------------------------------------------------------
# Every strategy is built once, here: building them inside a draw costs more than the call itself.

SMALL_TEXT = st.text(max_size=6)
# Text that the provider may quote in an error: sometimes it carries the key, at any offset
# (an error body cut at 200 characters must not keep half a key).
QUOTED = st.one_of(
    SMALL_TEXT,
    st.builds(lambda a, n, b: "x" * n + a + API_KEY + b, SMALL_TEXT, st.integers(0, 260), SMALL_TEXT),
)
JSON_SCALAR = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(allow_nan=False), SMALL_TEXT
)
JSON_VALUE = st.recursive(
    JSON_SCALAR,
    lambda inner: st.one_of(st.lists(inner, max_size=2), st.dictionaries(SMALL_TEXT, inner, max_size=2)),
    max_leaves=3,
)


def usually(right: st.SearchStrategy[Any], wrong: st.SearchStrategy[Any] = JSON_VALUE) -> st.SearchStrategy[Any]:
    """Right nine times in ten, any JSON value (or `wrong`) otherwise."""
    return st.one_of(*([right] * 9), wrong)


FINISH = st.one_of(
    st.sampled_from(["stop", "stop", "stop", "length", "tool_calls", "function_call", "content_filter"]),
    st.none(),
    QUOTED,
)
COUNT = usually(st.integers(0, 5000), st.one_of(st.integers(-5, -1), JSON_SCALAR))
GOOD_USAGE = st.fixed_dictionaries(
    {"prompt_tokens": st.integers(0, 5000), "completion_tokens": st.integers(0, 5000)},
    optional={"prompt_tokens_details": st.fixed_dictionaries(
        {}, optional={"cached_tokens": st.integers(0, 50), "cache_write_tokens": st.integers(0, 50)})},
)
USAGE = usually(st.fixed_dictionaries(
    {"prompt_tokens": COUNT, "completion_tokens": COUNT},
    optional={"prompt_tokens_details": usually(st.fixed_dictionaries(
        {}, optional={"cached_tokens": COUNT, "cache_write_tokens": COUNT}))},
))
ARGUMENT_PIECE = usually(st.sampled_from(['{"path": ', '"a.txt"', "}", "{}", "", '{"x": [1,', ', "y": 2}']))
FUNCTION_FIRST = st.fixed_dictionaries(
    {"name": usually(st.sampled_from(["read", "bash", "edit"]), st.one_of(st.just(""), JSON_VALUE))},
    optional={"arguments": ARGUMENT_PIECE},
)
FUNCTION_LATER = st.fixed_dictionaries({}, optional={"arguments": ARGUMENT_PIECE, "name": st.just("read")})
INDEX = usually(st.sampled_from([0, 1, 2, 4]), st.one_of(st.integers(-3, 10**6), JSON_SCALAR))
FRAGMENT = st.one_of(
    st.fixed_dictionaries(  # a first fragment: id, name
        {"index": INDEX, "id": usually(st.sampled_from(["call_a", "call_b", "call_c"]), st.one_of(st.just(""), JSON_VALUE)),
         "type": st.just("function"), "function": usually(FUNCTION_FIRST)}),
    st.fixed_dictionaries({"index": INDEX, "function": usually(FUNCTION_LATER)}),  # a later one
    st.fixed_dictionaries({"index": INDEX}, optional={"id": JSON_VALUE, "function": JSON_VALUE}),
)
DELTA = st.one_of(
    st.fixed_dictionaries({"content": usually(st.text(max_size=8))}),
    st.fixed_dictionaries({"content": usually(st.text(max_size=8))}),
    st.fixed_dictionaries({"tool_calls": usually(st.lists(FRAGMENT, min_size=1, max_size=3))}),
    st.fixed_dictionaries({"role": st.just("assistant"), "content": st.sampled_from(["", None])}),
    st.fixed_dictionaries({"reasoning": SMALL_TEXT, "refusal": st.none(), "annotations": st.just([])}),
    st.just({}),
)
CHOICE = st.fixed_dictionaries(
    {"index": st.just(0), "delta": usually(DELTA)},
    optional={"finish_reason": st.one_of(st.none(), st.none(), st.none(), FINISH)},
)
USAGE_CHUNK = st.fixed_dictionaries({"choices": usually(st.just([])), "usage": USAGE})  # the trailing usage chunk
CHUNK = st.one_of(
    *[st.fixed_dictionaries({"id": st.just("chatcmpl-1"), "choices": usually(st.lists(CHOICE, min_size=1, max_size=1))})] * 6,
    USAGE_CHUNK,
    st.fixed_dictionaries({"error": st.one_of(st.fixed_dictionaries({"message": QUOTED}), QUOTED, JSON_VALUE)}),
    JSON_VALUE,
)


@st.composite
def payload(draw: st.DrawFn) -> str:
    """One SSE data payload: a chunk as JSON, [DONE], or something broken."""
    kind = draw(st.integers(0, 11))
    if kind == 0:
        return "[DONE]"
    if kind == 1:
        return draw(st.one_of(QUOTED, st.builds(lambda t: '{"x": "' + t, QUOTED)))
    text = json.dumps(draw(CHUNK), ensure_ascii=kind % 2 == 0)
    if kind == 2:
        return text[: draw(st.integers(0, max(0, len(text) - 1)))]  # a payload cut short
    if kind == 3:  # raw line separators JSON may carry: U+2028, U+2029, U+0085
        return text.replace("\\n", draw(st.sampled_from(["\u2028", "\u2029", "\u0085"])))
    return text


FINISH_CHUNK = st.builds(
    lambda reason: {"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}, FINISH)
PAYLOADS = st.lists(payload(), max_size=5)
LINE_END = st.sampled_from(["\n", "\r\n", "\r"])


# A coherent stream, as a real server sends it, then spoiled a little: the family that reaches
# `done` (text, tool calls interleaved by index, usage) and the errors one fault away from it.
WORDS = st.sampled_from(["Hel", "lo", " ", "", "\u00e9t\u00e9", "\U0001f642", "a\nb", "\r", "\u2028", "\u0085",
                         "data: x", "[DONE]", '"q"', "\\", ": not a comment"])
NAMES = st.sampled_from(["read", "bash", "edit"])
ARG_PIECES = st.sampled_from(['{"path": "a', '.txt"}', '{"n": 1', "}", "", "{}", '{"s": "\u2028"}', "[1]"])
STEP = st.one_of(
    st.tuples(st.just("text"), WORDS),
    st.tuples(st.just("text"), WORDS),
    st.tuples(st.just("call"), st.sampled_from([0, 1, 2, 4]), NAMES, ARG_PIECES),
    st.tuples(st.just("more"), st.sampled_from([0, 1, 2, 4]), ARG_PIECES),
)
SPOIL = st.tuples(
    st.integers(0, 12),
    st.sampled_from(["value", "value", "drop-id", "error-chunk", "cut", "not-json", "finish-key", "content-after"]),
)


SPOILS = st.lists(SPOIL, max_size=2)


@st.composite
def coherent_payloads(draw: st.DrawFn) -> list[str]:
    chunks: list[Any] = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}]
    opened: set[int] = set()
    for step in draw(st.lists(STEP, max_size=6)):
        if step[0] == "text":
            chunks.append({"choices": [{"index": 0, "delta": {"content": step[1]}}]})
        elif step[0] == "call" and step[1] not in opened:
            opened.add(step[1])
            fragment = {"index": step[1], "id": f"call_{step[1]}", "type": "function",
                        "function": {"name": step[2], "arguments": step[3]}}
            chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}}]})
        elif step[0] in ("call", "more") and opened:
            index = step[1] if step[1] in opened else min(opened)
            piece = step[2] if step[0] == "more" else step[3]
            chunks.append({"choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": index, "function": {"arguments": piece}}]}}]})
    reason = ("tool_calls" if opened else "stop") if draw(st.integers(0, 9)) < 8 else draw(FINISH)
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
    if draw(st.booleans()):
        chunks.append({"choices": [], "usage": draw(GOOD_USAGE if draw(st.integers(0, 9)) < 8 else USAGE)})
    payloads = [json.dumps(chunk, ensure_ascii=False) for chunk in chunks]
    for at, how in draw(SPOILS) if draw(st.integers(0, 2)) == 0 else ():
        at = min(at, len(payloads) - 1)
        if how == "value" and at < len(chunks):  # one field replaced by any JSON value
            payloads[at] = json.dumps(_replace_somewhere(chunks[at], draw(JSON_VALUE), draw(st.integers(0, 99))))
        elif how == "drop-id":
            payloads[at] = payloads[at].replace('"id": "call_', '"name_was": "call_')
        elif how == "error-chunk":
            payloads.insert(at, json.dumps({"error": {"message": draw(QUOTED)}}))
        elif how == "cut":
            payloads[at] = payloads[at][: len(payloads[at]) // 2]
        elif how == "not-json":
            payloads[at] = draw(QUOTED)
        elif how == "finish-key":
            payloads[at] = json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": API_KEY}]})
        else:
            payloads.append(json.dumps({"choices": [{"index": 0, "delta": {"content": "late"}}]}))
    if draw(st.integers(0, 4)):
        payloads.append("[DONE]")
    return payloads


def _replace_somewhere(value: Any, new: Any, where: int) -> Any:
    """`value` with one nested value (chosen by `where`) replaced by `new`."""
    if isinstance(value, dict) and value:
        key = sorted(value)[where % len(value)]
        return {**value, key: _replace_somewhere(value[key], new, where // 3) if where % 2 else new}
    if isinstance(value, list) and value:
        index = where % len(value)
        return [*value[:index], _replace_somewhere(value[index], new, where // 3), *value[index + 1 :]]
    return new


@st.composite
def sse_body(draw: st.DrawFn) -> bytes:
    """Payloads (coherent ones, or a hostile mix) framed as SSE: any line ending, comments,
    other fields, data split over lines, missing blank lines; then cut as bytes."""
    if draw(st.integers(0, 4)):
        items = draw(coherent_payloads())
    else:
        items = draw(PAYLOADS)
        if draw(st.booleans()):
            items.append(json.dumps(draw(FINISH_CHUNK)))
        if draw(st.booleans()):
            items.append("[DONE]")
    end = draw(LINE_END)
    style = draw(st.integers(0, 2**16 - 1))  # the framing quirks, bit by bit
    parts: list[str] = []
    for position, item in enumerate(items):
        bits = (style >> (position % 8)) & 0xFF
        if bits & 0b111 == 0:
            parts.append(": keep-alive" + end)
        if bits & 0b11000 == 0:
            parts.append(("event: message", "id: 7", "retry: 10", "bogus")[bits % 4] + end)
        anywhere = bits & 0b10000000 and len(item) > 1  # once in a while, even inside a token
        if bits & 0b1100000 == 0 and (", " in item or anywhere):  # one payload over two data lines
            # at a token boundary the joining "\n" is only whitespace
            cut = 1 + bits % (len(item) - 1) if anywhere else item.find(", ") + 1
            parts.append(f"data: {item[:cut]}{end}data:{item[cut:]}{end}")
        else:
            parts.append(f"data:{' ' if bits & 1 else ''}{item}{end}")
        if bits != 0b10000000:
            parts.append(end)  # the blank line that ends an event (sometimes missing)
        if bits == 0b11111111:
            end = draw(LINE_END)  # a server may even mix line endings
    body = "".join(parts).encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 9)) == 0:  # invalid UTF-8 somewhere (but not inside the key:
        at = draw(st.integers(0, len(body)))  # a key the server mangled is not ours to scrub)
        key = API_KEY.encode()
        key_at = body.rfind(key, 0, at + len(key) - 1)  # the last key that starts before `at`
        if key_at >= 0 and key_at < at < key_at + len(key):
            at = key_at
        body = body[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xe2\x80", b"\x00"])) + body[at:]
    return body


HTTP_ERROR_BODY = st.one_of(
    st.builds(lambda m: json.dumps({"error": {"message": m}}), QUOTED),
    st.builds(lambda m: json.dumps({"error": m}), st.one_of(QUOTED, JSON_VALUE)),
    QUOTED,
)
WHOLE_ANSWER = st.one_of(
    JSON_VALUE,
    st.builds(lambda m, r: {"choices": [{"index": 0, "message": m, "finish_reason": r}]},
              usually(st.fixed_dictionaries({"role": st.just("assistant"), "content": usually(st.text(max_size=20))})),
              FINISH),
)
FAILURE = st.one_of(*[st.none()] * 7, st.tuples(st.integers(0, 9), st.sampled_from(["read-error", "surprise"])))
ABORT = st.one_of(*[st.none()] * 7, st.integers(0, 6))


@st.composite
def exchange(draw: st.DrawFn) -> dict[str, Any]:
    """One HTTP exchange: status, content type, the body's network reads, and what goes wrong."""
    kind = draw(st.integers(0, 15))
    status, content_type = 200, "text/event-stream"
    if kind == 0:
        status = draw(st.sampled_from([400, 401, 403, 404, 429, 500, 502, 503]))
        body = draw(HTTP_ERROR_BODY).encode("utf-8", "surrogatepass")
        content_type = draw(st.sampled_from(["application/json", "text/plain"]))
    elif kind == 1:
        content_type = "application/json"
        body = json.dumps(draw(WHOLE_ANSWER)).encode()
    else:
        body = draw(sse_body())
        if kind == 2:
            content_type = ""
    cuts = sorted(set(draw(st.lists(st.integers(0, len(body)), max_size=8))))
    reads = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)]) if b > a]
    return {"status": status, "content_type": content_type, "reads": reads,
            "failure": draw(FAILURE), "abort_after": draw(ABORT)}


# One model call ------------------------------------------------------------------------------


def model_for(case: dict[str, Any]) -> OpenAICompatibleModel:
    async def body():
        for index, read in enumerate(case["reads"]):
            if case["failure"] is not None and case["failure"][0] == index:
                if case["failure"][1] == "read-error":
                    raise httpx.ReadError("connection reset by peer")
                raise RuntimeError(f"transport surprise while holding {API_KEY}")
            await trio.lowlevel.checkpoint()
            yield read
        if case["failure"] is not None and case["failure"][0] >= len(case["reads"]):
            raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": case["content_type"]} if case["content_type"] else {}
        return httpx.Response(case["status"], headers=headers, content=body())

    return OpenAICompatibleModel("http://models.test/v1", "fuzz-model", api_key=API_KEY,
                                 transport=httpx.MockTransport(handler))


CONTEXT = AgentContext(messages=[user_message("hello")], system_prompt="be brief")
STATS: dict[str, int] = {"examples": 0, "events": 0}


def play(case: dict[str, Any]) -> None:
    """One call under the contract; raises AssertionError naming what broke."""
    captured = io.StringIO()
    events: list[Any] = []

    async def main() -> Any:
        signal = AbortSignal()
        stream = model_for(case).stream(CONTEXT, signal=signal)
        with trio.fail_after(TIME_LIMIT):
            async with stream:
                async for event in stream:
                    events.append(event)
                    if case["abort_after"] is not None and len(events) > case["abort_after"]:
                        signal.abort()
            return await stream.result()

    with redirect_stdout(captured), redirect_stderr(captured):
        try:
            result = trio.run(main)
        except trio.TooSlowError:
            raise AssertionError(f"hang: no terminal event within {TIME_LIMIT} s") from None
        except BaseException as error:  # anything out of iteration breaks the contract
            raise AssertionError(f"exception out of the stream: {type(error).__name__}: {error}") from error
    kinds = [event.type for event in events]
    terminals = [event for event in events if event.type in TERMINAL]
    assert len(terminals) == 1, f"{len(terminals)} terminal events: {kinds}"
    assert events[-1] is terminals[0], f"events after the terminal one: {kinds}"
    final = terminals[0].message if terminals[0].type == "done" else terminals[0].error
    assert result == final, "result() is not the terminal event's message"
    # Every partial is a prefix of the final message (blocks only grow), so the final
    # message, the terminal event and what each event added cover everything shown.
    added = [getattr(event, "delta", "") + repr(getattr(event, "tool_call", "")) for event in events]
    shown = "".join(added) + repr(terminals[0]) + repr(result) + captured.getvalue() + LOG.getvalue()
    assert not leaks(shown), f"the API key leaked: {where_it_leaks(shown)}"
    name = terminals[0].type if terminals[0].type == "done" else f"error:{terminals[0].reason}"
    STATS[name] = STATS.get(name, 0) + 1
    STATS["examples"] += 1
    STATS["events"] += len(events)


LOG = io.StringIO()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-shrink", action="store_true", help="report the first failing example as found")
    args = parser.parse_args()
    logging.basicConfig(stream=LOG, level=logging.DEBUG)  # whatever httpx or the provider logs

    phases = [Phase.explicit, Phase.reuse, Phase.generate] + ([] if args.no_shrink else [Phase.shrink])

    @seed(args.seed)
    @settings(max_examples=args.examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck), print_blob=False, phases=phases)
    @given(exchange())
    def every_exchange_holds(case: dict[str, Any]) -> None:
        play(case)

    started = time.monotonic()
    held = True
    try:
        every_exchange_holds()
    except AssertionError as error:
        held = False
        print(f"FALSIFIED: {error}", file=sys.stderr)
    summary = {"held": held, "seed": args.seed, "seconds": round(time.monotonic() - started, 1), **STATS}
    print(json.dumps(summary))
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
