"""The message IR: the shape in which an agent saves, replays and sends a conversation.

This module is the public face; each job lives in a small module of its own:

- records:    messages, content blocks, usage, stop reasons, the model's input
- events:     model events, how an assistant message comes into being,
              with lazy snapshots (chapter 05)
- protocols:  what a model and its stream must offer
- helpers:    small builders and the `text_of` view
- transcript: saving and loading the transcript JSON

The imports below follow that order, each module using only the ones
above it. Import from here (`from tiny_pi.messages import ToolCall`): the
layout behind it may change, these names will not.
"""

from tiny_pi.messages.records import (
    DONE_REASONS,
    ERROR_REASONS,
    STOP_REASONS,
    AgentContext,
    AgentMessage,
    AssistantContent,
    AssistantMessage,
    DoneReason,
    ErrorReason,
    StopReason,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    now_ms,
)
from tiny_pi.messages.events import (
    DoneEvent,
    ErrorEvent,
    LazyPartial,
    ModelEvent,
    StartEvent,
    TextDeltaEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
)
from tiny_pi.messages.protocols import Model, ModelStream
from tiny_pi.messages.helpers import assistant_message, text, text_of, user_message
from tiny_pi.messages.transcript import TranscriptError, from_json, to_json

__all__ = [
    "DONE_REASONS",
    "ERROR_REASONS",
    "STOP_REASONS",
    "AgentContext",
    "AgentMessage",
    "AssistantContent",
    "AssistantMessage",
    "DoneEvent",
    "DoneReason",
    "ErrorEvent",
    "ErrorReason",
    "LazyPartial",
    "Model",
    "ModelEvent",
    "ModelStream",
    "StartEvent",
    "StopReason",
    "TextContent",
    "TextDeltaEvent",
    "ToolCall",
    "ToolCallDeltaEvent",
    "ToolCallEndEvent",
    "ToolResultMessage",
    "TranscriptError",
    "Usage",
    "UserMessage",
    "assistant_message",
    "from_json",
    "now_ms",
    "text",
    "text_of",
    "to_json",
    "user_message",
]
