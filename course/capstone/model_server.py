"""Scripted OpenAI-compatible model servers on 127.0.0.1: the capstone plays the model.

Each case starts its own server with a `Reply`, a function of the request
(its JSON body, and how many requests came before it) that says what the
"model" answers: text, tool calls, or both, streamed as Chat Completions
chunks over server-sent events, as chapter 05's provider reads them; or a
`Failure`, as a real server fails: an HTTP status with an error message, or
a reply cut off in the middle of its body (the router family). The
server keeps every request's body, parsed and as bytes, so a case can check
what the agent sent: which tools it declared, whether a result reached the
model, whether something from outside the root did.
"""

from __future__ import annotations

import inspect
import json
import secrets
from functools import partial
from typing import Any, Awaitable, Callable, Sequence

import trio
from attrs import field, frozen

HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
)
MAX_BODY = 64 * 1024 * 1024


@frozen
class Call:
    """One tool call the model makes: its id, the tool's name, the arguments as the JSON text sent."""

    id: str
    name: str
    arguments: str

    @classmethod
    def of(cls, id: str, name: str, arguments: dict[str, Any]) -> Call:
        return cls(id, name, json.dumps(arguments))


@frozen
class Answer:
    """What the model says to one request: text, tool calls, and the usage it reports."""

    text: str = ""
    calls: tuple[Call, ...] = field(default=(), converter=tuple)
    interleave: bool = False  # the calls' argument pieces arrive mixed, each under its own index
    prompt_tokens: int = 10
    completion_tokens: int = 5


@frozen
class Failure:
    """A request the server fails: `status` with `message` in an OpenAI-style error body, or, with
    no status, a reply that starts streaming `message` and is cut off (the connection drops)."""

    status: int | None
    message: str


# A reply is a function of the request and the number of requests before it; it may be async
# (a model that takes its time: the mcp family answers once its MCP server is up).
Reply = Callable[[dict[str, Any], int], "Answer | Failure | Awaitable[Answer | Failure]"]


def reply_id() -> str:
    """A reply's id, as a real server's look: random, naming nothing."""
    return "chatcmpl-" + secrets.token_urlsafe(18)


def chunk(delta: dict[str, Any] | None = None, finish_reason: str | None = None, id: str = "") -> dict[str, Any]:
    choice = {"index": 0, "delta": delta or {}, "finish_reason": finish_reason}
    return {"id": id, "object": "chat.completion.chunk", "choices": [choice]}


def chunks(answer: Answer) -> list[dict[str, Any]]:
    """The answer as a server streams it: text, then each call (id and name first), finish, usage."""
    piece = partial(chunk, id=reply_id())
    out = [piece({"role": "assistant", "content": answer.text})] if answer.text else [piece({"role": "assistant"})]
    heads, tails = [], []
    for index, call in enumerate(answer.calls):
        half = len(call.arguments) // 2
        first = {"index": index, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}}
        heads.append([piece({"tool_calls": [first]}),
                      piece({"tool_calls": [{"index": index, "function": {"arguments": call.arguments[:half]}}]})])
        tails.append(piece({"tool_calls": [{"index": index, "function": {"arguments": call.arguments[half:]}}]}))
    if answer.interleave:
        out += [part for parts in heads for part in parts] + tails
    else:
        for pieces, tail in zip(heads, tails):
            out += [*pieces, tail]
    out.append(piece(finish_reason="tool_calls" if answer.calls else "stop"))
    usage = {"prompt_tokens": answer.prompt_tokens, "completion_tokens": answer.completion_tokens,
             "total_tokens": answer.prompt_tokens + answer.completion_tokens}
    out.append({"id": out[0]["id"], "object": "chat.completion.chunk", "choices": [], "usage": usage})
    return out


class ScriptedServer:
    """Answers every request with `reply`; keeps each body (parsed in `requests`, raw in `bodies`)."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.requests: list[dict[str, Any]] = []
        self.bodies: list[bytes] = []
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self, nursery: trio.Nursery) -> ScriptedServer:
        """Listen on a free port of 127.0.0.1 until `nursery` is cancelled."""
        listeners = await nursery.start(partial(trio.serve_tcp, self.handle, 0, host="127.0.0.1"))
        self.port = listeners[0].socket.getsockname()[1]
        return self

    def seen(self, text: str) -> bool:
        """Whether `text` reached the model in any request's body."""
        needle = text.encode()
        return any(needle in body for body in self.bodies)

    async def handle(self, stream: trio.SocketStream) -> None:
        try:
            body = await read_body(stream)
            if body is None:
                return
            try:
                document = json.loads(body)
            except ValueError:
                document = {}
            number = len(self.requests)
            self.requests.append(document)
            self.bodies.append(body)
            answer = self.reply(document, number)
            if inspect.isawaitable(answer):
                answer = await answer
            if isinstance(answer, Failure):
                await fail(stream, answer)
                return
            await stream.send_all(HEAD)
            for payload in chunks(answer):
                await send_chunk(stream, b"data: " + json.dumps(payload).encode() + b"\n\n")
            await send_chunk(stream, b"data: [DONE]\n\n")
            await stream.send_all(b"0\r\n\r\n")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the agent went away (an abort, a kill): nothing left to answer
        finally:
            await stream.aclose()


async def fail(stream: trio.SocketStream, failure: Failure) -> None:
    """Answer with an error status and body, or start a stream and stop mid-body (the caller closes it)."""
    if failure.status is None:
        started = chunk({"role": "assistant", "content": failure.message}, id=reply_id())
        await stream.send_all(HEAD)
        await send_chunk(stream, b"data: " + json.dumps(started).encode() + b"\n\n")
        return  # no end of the body: the connection closes in the middle of the reply
    body = json.dumps({"error": {"message": failure.message}}).encode()
    head = (f"HTTP/1.1 {failure.status} Failed\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    await stream.send_all(head.encode() + body)


async def read_body(stream: trio.SocketStream) -> bytes | None:
    """The body of one HTTP/1.1 request with a Content-Length; None when the peer left first."""
    request = b""
    while b"\r\n\r\n" not in request:
        received = await stream.receive_some(65536)
        if not received:
            return None
        request += received
    head, _, body = request.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            length = min(int(value.strip()), MAX_BODY)
    while len(body) < length:
        received = await stream.receive_some(65536)
        if not received:
            return None
        body += received
    return body


async def send_chunk(stream: trio.SocketStream, data: bytes) -> None:
    await stream.send_all(b"%x\r\n%s\r\n" % (len(data), data))


# Reading requests ----------------------------------------------------------------------


def declared(request: dict[str, Any]) -> list[str]:
    """The names of the tools a request declares."""
    tools = request.get("tools") or []
    return [tool.get("function", {}).get("name", "") for tool in tools if isinstance(tool, dict)]


def messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    found = request.get("messages")
    return [message for message in found if isinstance(message, dict)] if isinstance(found, list) else []


def results(request: dict[str, Any]) -> dict[str, list[str]]:
    """Every tool result of a request by its call id: the content of each (a list, to see duplicates)."""
    found: dict[str, list[str]] = {}
    for message in messages(request):
        if message.get("role") == "tool":
            found.setdefault(str(message.get("tool_call_id")), []).append(content_text(message.get("content")))
    return found


def content_text(content: Any) -> str:
    """A message's content as text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def last_user_text(request: dict[str, Any]) -> str:
    users = [message for message in messages(request) if message.get("role") == "user"]
    return content_text(users[-1].get("content")) if users else ""


def calls_made(request: dict[str, Any]) -> list[str]:
    """The ids of every tool call of the assistant messages a request replays, in order."""
    ids = []
    for message in messages(request):
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict):
                ids.append(str(call.get("id")))
    return ids


def answered(requests: Sequence[dict[str, Any]], call_id: str) -> str | None:
    """The text of the result of `call_id` in the first request that carries one; None if none does."""
    for request in requests:
        found = results(request).get(call_id)
        if found:
            return found[0]
    return None
