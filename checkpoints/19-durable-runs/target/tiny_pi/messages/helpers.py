"""Small builders and one view that keep examples and tests short."""

from __future__ import annotations

from typing import Any, Sequence

from tiny_pi.messages.records import (
    AgentMessage,
    AssistantContent,
    AssistantMessage,
    StopReason,
    TextContent,
    Usage,
    UserMessage,
)


def text(value: str) -> TextContent:
    """A text block."""
    return TextContent(value)


def user_message(value: str, timestamp: int = 0) -> UserMessage:
    """A user message holding one text block (timestamp 0 keeps examples reproducible)."""
    return UserMessage((text(value),), timestamp=timestamp)


def assistant_message(
    content: Sequence[AssistantContent],
    stop_reason: StopReason = "stop",
    **overrides: Any,
) -> AssistantMessage:
    """An assistant message from the scripted model, unless `overrides` say otherwise."""
    fields: dict[str, Any] = {
        "provider": "scripted",
        "model": "scripted-v1",
        "usage": Usage(),
        "timestamp": 0,
    }
    fields.update(overrides)
    return AssistantMessage(content=tuple(content), stop_reason=stop_reason, **fields)


def text_of(message: AgentMessage) -> str:
    """The text blocks of a message, one per line; tool calls are left out.

    A lossy view for display and search: it reads the message and never
    changes it. Save and replay the message itself, never this view.
    """
    return "\n".join(block.text for block in message.content if block.type == "text")
