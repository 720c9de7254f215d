"""A real model behind any OpenAI-compatible Chat Completions endpoint.

The api is `openai-completions`; the provider is whoever runs the server
(OpenAI, a local Ollama, llama.cpp or vLLM, ...). `OpenAICompatibleModel`
implements the same `Model` protocol as ScriptedModel, so an agent cannot
tell the two apart: the same events, the same terminal facts, and no
exception out of iteration, whatever the network does.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import httpx
import trio
from attrs import field, frozen

from tiny_pi.abort import AbortSignal, cancel_on_abort
from tiny_pi.messages import AgentContext
from tiny_pi.model_stream import ModelCallStream
from tiny_pi.providers.chunks import ChunkAssembler
from tiny_pi.providers.normalize import completion_to_message
from tiny_pi.providers.outbound import ToolSpec, build_request_body
from tiny_pi.providers.wire import WireError, error_text, parse_json
from tiny_pi.projection import project
from tiny_pi.sse import ServerSentEvent, SSEDecoder


@frozen
class OpenAICompatibleModel:
    """The model descriptor plus the code that talks to it.

    `api_key` is sent as `Authorization: Bearer ...` and nowhere else: it is
    left out of `repr` and scrubbed from every error message.
    `transport` lets tests replace the network (httpx.MockTransport).
    """

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    transport: httpx.AsyncBaseTransport | None = field(default=None, repr=False)
    provider: str = "openai-compatible"
    timeout: float = 60.0

    def stream(
        self,
        context: AgentContext,
        *,
        signal: AbortSignal | None = None,
        tools: Sequence[ToolSpec] | None = None,
    ) -> ModelCallStream:
        """Build the request now; send it once the caller enters the stream."""
        body = build_request_body(self.model, context, tools)

        async def produce(stream: ModelCallStream) -> None:
            await self._produce(stream, body, signal)

        return ModelCallStream(produce)

    def url(self) -> str:
        """Where the request goes: `{base_url}/chat/completions`."""
        return self.base_url.rstrip("/") + "/chat/completions"

    def headers(self) -> dict[str, str]:
        """Ask for an event stream; authenticate only when there is a key."""
        headers = {"Accept": "text/event-stream"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    async def _produce(
        self, stream: ModelCallStream, body: dict[str, Any], signal: AbortSignal | None
    ) -> None:
        """Push the events of one HTTP exchange; an abort cancels it, keeping the partial."""
        assembler = ChunkAssembler(self.provider, self.model, secret=self.api_key)
        if signal is not None and signal.aborted:
            stream.push(assembler.fail("Request was aborted", reason="aborted"))
            return
        with trio.CancelScope() as exchange:
            async with trio.open_nursery() as nursery:
                if signal is not None:
                    nursery.start_soon(cancel_on_abort, signal, exchange)
                await self._exchange(stream, body, assembler)
                nursery.cancel_scope.cancel()  # the exchange is over: stop watching
        if exchange.cancelled_caught:
            stream.push(assembler.fail("Request was aborted", reason="aborted"))

    async def _exchange(
        self, stream: ModelCallStream, body: dict[str, Any], assembler: ChunkAssembler
    ) -> None:
        """The adapter's boundary: whatever goes wrong becomes an error event."""
        try:
            await self._request(stream, body, assembler)
        except WireError as error:  # a whole answer the seam refused
            stream.push(assembler.fail(str(error)))
        except httpx.HTTPError as error:
            stream.push(assembler.fail(f"transport error ({type(error).__name__}): {error}"))
        except Exception as error:  # a bug or a surprise: still an event, never a crash
            stream.push(assembler.fail(f"unexpected {type(error).__name__}: {error}"))

    async def _request(
        self, stream: ModelCallStream, body: dict[str, Any], assembler: ChunkAssembler
    ) -> None:
        async with httpx.AsyncClient(transport=self.transport, timeout=self.timeout) as client:
            request = client.stream("POST", self.url(), json=body, headers=self.headers())
            async with request as response:
                if response.status_code >= 400:
                    stream.push(assembler.fail(await http_error_message(response)))
                elif response.headers.get("content-type", "").startswith("application/json"):
                    await self._read_whole_answer(stream, response, assembler)
                else:
                    stream.push(assembler.start())
                    await self._read_events(stream, response, assembler)

    async def _read_whole_answer(
        self, stream: ModelCallStream, response: httpx.Response, assembler: ChunkAssembler
    ) -> None:
        """A server that ignored `stream: true`: the seam checks the answer, `project` plays it.

        A body that is not JSON, or not a completion, raises WireError; `_exchange`
        turns it into the error event.
        """
        text = (await response.aread()).decode("utf-8", errors="replace")
        answer = parse_json(text, "the response body")
        message = completion_to_message(answer, provider=self.provider, model=self.model)
        for event in project(message):
            stream.push(event)

    async def _read_events(
        self, stream: ModelCallStream, response: httpx.Response, assembler: ChunkAssembler
    ) -> None:
        """Bytes -> SSE events -> model events, one network read at a time."""
        decoder = SSEDecoder()
        async for chunk in response.aiter_bytes():
            push_events(stream, assembler, decoder.feed(chunk))
            if assembler.closed:
                return
        push_events(stream, assembler, decoder.close())
        if not assembler.closed:
            stream.push(assembler.end())  # the body ended without [DONE]


def push_events(
    stream: ModelCallStream, assembler: ChunkAssembler, events: list[ServerSentEvent]
) -> None:
    """Hand each SSE data payload to the assembler; push what it answers."""
    for event in events:
        for model_event in assembler.feed(event.data):
            stream.push(model_event)


async def http_error_message(response: httpx.Response) -> str:
    """`HTTP 429: <the body's own message>`, or the status text when the body has none."""
    body = (await response.aread()).decode("utf-8", errors="replace")
    try:
        detail = json.loads(body)
    except ValueError:
        return f"HTTP {response.status_code}: {body or response.reason_phrase}"
    if isinstance(detail, dict) and "error" in detail:
        detail = detail["error"]
    return f"HTTP {response.status_code}: {error_text(detail)}"

