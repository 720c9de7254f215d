"""Outbound: an AgentContext as a Chat Completions request body.

The transcript stays in tiny_pi's own shape; this module is the one place
that knows how the `openai-completions` api spells it. The body is built
when `stream()` is called, so a context the agent changes later cannot
change a request already made.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from attrs import field, frozen

from tiny_pi.messages import (
    ERROR_REASONS,
    AgentContext,
    AgentMessage,
    AssistantMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    text_of,
)


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
    body: dict[str, Any] = {
        "model": model,
        "messages": to_wire_messages(context),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if tools:
        body["tools"] = [to_wire_tool(tool) for tool in tools]
    return body


def to_wire_messages(context: AgentContext) -> list[dict[str, Any]]:
    """The system prompt first, then every message the provider should see."""
    wire: list[dict[str, Any]] = []
    if context.system_prompt:
        wire.append({"role": "system", "content": context.system_prompt})
    for message in context.messages:
        if isinstance(message, AssistantMessage) and message.stop_reason in ERROR_REASONS:
            continue  # a failed call is kept for the user, never replayed to the model
        if getattr(message, "role", None) == "system":
            continue  # a tool patch (chapter 15): its tools go as the request's `tools`
        wire.append(to_wire_message(message))
    return wire


def to_wire_message(message: AgentMessage) -> dict[str, Any]:
    """One message in Chat Completions roles: user, assistant or tool."""
    match message:
        case UserMessage():
            return {"role": "user", "content": text_of(message)}
        case AssistantMessage():
            return to_wire_assistant(message)
        case ToolResultMessage():
            return {
                "role": "tool",
                "tool_call_id": message.tool_call_id,
                "content": text_of(message),
            }
    raise TypeError(f"not a message: {message!r}")


def to_wire_assistant(message: AssistantMessage) -> dict[str, Any]:
    """Assistant text (or null) plus its tool calls, each with arguments as a JSON string."""
    calls = [block for block in message.content if isinstance(block, ToolCall)]
    wire: dict[str, Any] = {"role": "assistant", "content": text_of(message) or None}
    if calls:
        wire["tool_calls"] = [to_wire_call(call) for call in calls]
    return wire


def to_wire_call(call: ToolCall) -> dict[str, Any]:
    """A tool call as the api spells it; the model's own argument text when we kept it."""
    arguments = call.raw_arguments if call.raw_arguments is not None else json.dumps(call.arguments)
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    }


def to_wire_tool(tool: ToolSpec) -> dict[str, Any]:
    """A tool definition in the `function` wrapper the api expects."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }
