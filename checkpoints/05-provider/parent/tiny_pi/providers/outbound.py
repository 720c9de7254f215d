"""Outbound: an AgentContext as a Chat Completions request body.

The transcript stays in tiny_pi's own shape; this module is the one place
that knows how the `openai-completions` api spells it. The body is built
when `stream()` is called, so a context the agent changes later cannot
change a request already made.

Lab 5.1 starter: ToolSpec is given; write the functions.
"""

from __future__ import annotations

from typing import Any, Sequence

from attrs import field, frozen

from tiny_pi.messages import AgentContext, AgentMessage, AssistantMessage, ToolCall


@frozen
class ToolSpec:
    """What a model is told about a tool: its name, what it is for, its JSON Schema.

    Any object with these three attributes will do; chapter 06 brings tools
    that also run.
    """

    name: str
    description: str
    parameters: dict[str, Any] = field(factory=lambda: {"type": "object", "properties": {}})


def build_request_body(
    model: str, context: AgentContext, tools: Sequence[ToolSpec] | None = None
) -> dict[str, Any]:
    """The whole JSON body of one streaming Chat Completions request."""
    raise NotImplementedError("lab 5.1: build the request body")


def to_wire_messages(context: AgentContext) -> list[dict[str, Any]]:
    """The system prompt first, then every message the provider should see."""
    raise NotImplementedError("lab 5.1: map the transcript to wire messages")


def to_wire_message(message: AgentMessage) -> dict[str, Any]:
    """One message in Chat Completions roles: user, assistant or tool."""
    raise NotImplementedError("lab 5.1: map one message")


def to_wire_assistant(message: AssistantMessage) -> dict[str, Any]:
    """Assistant text (or null) plus its tool calls, each with arguments as a JSON string."""
    raise NotImplementedError("lab 5.1: map an assistant message")


def to_wire_call(call: ToolCall) -> dict[str, Any]:
    """A tool call as the api spells it; the model's own argument text when we kept it."""
    raise NotImplementedError("lab 5.1: map a tool call")


def to_wire_tool(tool: ToolSpec) -> dict[str, Any]:
    """A tool definition in the `function` wrapper the api expects."""
    raise NotImplementedError("lab 5.1: map a tool definition")
