"""A small OpenAI-compatible server on 127.0.0.1 that plays the README round trip.

The tests of chapter 07 start it inside their own trio run; you can start it
by hand too, and point `python -m tiny_pi.agent` at it:

    python tests/loopback_server.py [PORT]   # prints the base URL, serves until Ctrl-C

Each way it ends is one line on stderr: Ctrl-C (exit status 0), a port another
program holds (3), a PORT that is no port number (2).

It is a real HTTP/1.1 server with a tiny deterministic "model" behind it
(`readme_model`): asked by a user, it says what it will do and calls
`read {"path": "README.md"}`; given the tool's result, it names the project
from the README's first heading. Every request is kept in `requests`, so a
test can check what the client sent.
"""

from __future__ import annotations

import errno
import json
import sys
from functools import partial
from typing import Any, Awaitable, Callable

import trio

Reply = Callable[[trio.abc.Stream, dict[str, Any]], Awaitable[None]]

STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
)


def chunk(delta: dict[str, Any] | None = None, finish_reason: str | None = None) -> dict[str, Any]:
    """One `chat.completion.chunk` with a single choice."""
    choice = {"index": 0, "delta": delta or {}, "finish_reason": finish_reason}
    return {"id": "chatcmpl-07", "object": "chat.completion.chunk", "choices": [choice]}


def usage_chunk(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    """The trailing chunk a client asked for with `stream_options.include_usage`."""
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    return {"id": "chatcmpl-07", "object": "chat.completion.chunk", "choices": [], "usage": usage}


def tool_call_chunks(call_id: str, name: str, arguments: str) -> list[dict[str, Any]]:
    """A call as a server streams it: id and name first, then the arguments in two pieces."""
    half = len(arguments) // 2
    first = {"index": 0, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
    return [
        chunk({"tool_calls": [first]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": arguments[:half]}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": arguments[half:]}}]}),
    ]


def readme_answer(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The chunks of the next turn of the README round trip, decided by the last message."""
    last = body["messages"][-1]
    if last["role"] != "tool":
        return [
            chunk({"role": "assistant", "content": "I will read "}),
            chunk({"content": "the README first."}),
            *tool_call_chunks("call_1", "read", json.dumps({"path": "README.md"})),
            chunk(finish_reason="tool_calls"),
            usage_chunk(60, 18),
        ]
    first_line = (last["content"] or "").split("\n", 1)[0]
    if first_line.startswith("# "):
        answer = f"The project is called {first_line[2:].strip()}."
    else:
        answer = f"I could not read the README: {first_line}"
    return [
        chunk({"role": "assistant", "content": answer}),
        chunk(finish_reason="stop"),
        usage_chunk(95, 9),
    ]


async def send_chunk(stream: trio.abc.Stream, data: bytes) -> None:
    """One piece of a `Transfer-Encoding: chunked` body."""
    await stream.send_all(b"%x\r\n%s\r\n" % (len(data), data))


def sse(payload: Any) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


async def readme_model(stream: trio.abc.Stream, body: dict[str, Any]) -> None:
    """Stream the next README turn, one chunk per network write, then `[DONE]`."""
    await stream.send_all(STREAM_HEAD)
    for payload in readme_answer(body):
        await send_chunk(stream, sse(payload))
        await trio.sleep(0.01)  # let the client see the reply arrive in pieces
    await send_chunk(stream, b"data: [DONE]\n\n")
    await stream.send_all(b"0\r\n\r\n")


class LoopbackServer:
    """Answers every request with `reply`, and keeps each request's head and JSON body."""

    def __init__(self, reply: Reply = readme_model) -> None:
        self.reply = reply
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self, nursery: trio.Nursery, port: int = 0) -> LoopbackServer:
        """Listen on 127.0.0.1 (on a free port by default) until `nursery` is cancelled."""
        listeners = await nursery.start(partial(trio.serve_tcp, self.handle, port, host="127.0.0.1"))
        self.port = listeners[0].socket.getsockname()[1]
        return self

    async def handle(self, stream: trio.abc.Stream) -> None:
        request = b""
        while b"\r\n\r\n" not in request:
            received = await stream.receive_some(65536)
            if not received:
                return
            request += received
        head, _, body = request.partition(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        while len(body) < length:
            body += await stream.receive_some(65536)
        document = json.loads(body)
        self.requests.append((head.decode(), document))
        try:
            await self.reply(stream, document)
        except trio.BrokenResourceError:
            pass  # the client went away (an abort, say): nothing left to answer
        await stream.aclose()


async def serve_forever(port: int) -> None:
    async with trio.open_nursery() as nursery:
        server = await LoopbackServer().start(nursery, port)
        print(f"serving the README round trip at {server.base_url} (Ctrl-C stops)", flush=True)


def leaves(error: BaseException) -> list[BaseException]:
    """The exceptions inside an exception group (trio's nursery wraps what ends it), or the one."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def main(arguments: list[str]) -> int:
    """Serve until Ctrl-C; every ending is one line and an exit status, never a traceback."""
    text = arguments[0] if arguments else "0"
    port = int(text) if text.isdigit() else -1
    if len(arguments) > 1 or not 0 <= port <= 65535:
        print(f"loopback server: PORT is a whole number from 0 to 65535 (0: a free one), not {text!r}",
              file=sys.stderr)
        return 2
    try:
        trio.run(serve_forever, port)
    except BaseException as error:  # noqa: BLE001 - one line for the endings a person causes
        found = leaves(error)
        if all(isinstance(leaf, KeyboardInterrupt) for leaf in found):
            print("loopback server: stopped (Ctrl-C)", file=sys.stderr)
            return 0
        if any(isinstance(leaf, OSError) and leaf.errno == errno.EADDRINUSE for leaf in found):
            print(f"loopback server: port {port} on 127.0.0.1 is in use by another program: "
                  "stop it, or pick another port (0 picks a free one)", file=sys.stderr)
            return 3
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
