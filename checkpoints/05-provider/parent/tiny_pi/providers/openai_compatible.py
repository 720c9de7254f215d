"""A real model behind any OpenAI-compatible Chat Completions endpoint.

The api is `openai-completions`; the provider is whoever runs the server
(OpenAI, a local Ollama, llama.cpp or vLLM, ...). `OpenAICompatibleModel`
implements the same `Model` protocol as ScriptedModel, so an agent cannot
tell the two apart: the same events, the same terminal facts, and no
exception out of iteration, whatever the network does.

Lab 5.8 starter: the descriptor is given; write the methods.
"""

from __future__ import annotations

from typing import Sequence

import httpx
from attrs import field, frozen

from tiny_pi.abort import AbortSignal
from tiny_pi.messages import AgentContext
from tiny_pi.model_stream import ModelCallStream
from tiny_pi.providers.outbound import ToolSpec


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
        raise NotImplementedError("lab 5.8: stream one call over HTTP")

    def url(self) -> str:
        """Where the request goes: `{base_url}/chat/completions`."""
        raise NotImplementedError("lab 5.8: the endpoint URL")

    def headers(self) -> dict[str, str]:
        """Ask for an event stream; authenticate only when there is a key."""
        raise NotImplementedError("lab 5.8: the request headers")
