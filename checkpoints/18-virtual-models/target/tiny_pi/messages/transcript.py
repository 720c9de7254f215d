"""Saving and replaying a conversation: the transcript JSON.

A transcript is a JSON array of messages with the original course's
camelCase keys (`toolCallId`, `stopReason`). Loading is strict: a key the
record does not have, or a required key that is missing, is an error that
names the message and the key, because a transcript that loads "mostly"
replays a different conversation.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import attrs

from tiny_pi.messages.records import (
    AgentMessage,
    AssistantContent,
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)


class TranscriptError(ValueError):
    """Saved data does not have the exact shape of the IR; the message names the key."""


_MESSAGE_CLASSES: dict[str, type] = {
    "user": UserMessage,
    "assistant": AssistantMessage,
    "toolResult": ToolResultMessage,
}
_BLOCK_CLASSES: dict[str, type] = {"text": TextContent, "toolCall": ToolCall}


def to_json(messages: Sequence[AgentMessage]) -> str:
    """Save a transcript as a JSON array that `from_json` turns back into equal messages."""
    return json.dumps([to_data(message) for message in messages], ensure_ascii=False, indent=2)


def from_json(document: str) -> list[AgentMessage]:
    """Rebuild a transcript saved by `to_json`, refusing any unknown or missing key."""
    try:
        data = json.loads(document)
    except json.JSONDecodeError as error:
        raise TranscriptError(f"invalid JSON: {error.msg} at character {error.pos}") from error
    if not isinstance(data, list):
        raise TranscriptError(f"a transcript is a JSON array, got {type(data).__name__}")
    return [message_from_data(item, f"messages[{index}]") for index, item in enumerate(data)]


def to_data(record: Any) -> dict[str, Any]:
    """One record as plain JSON data: camelCase keys, unset optional keys left out."""
    data: dict[str, Any] = {}
    for attribute in attrs.fields(type(record)):
        value = getattr(record, attribute.name)
        if value is None and attribute.default is None:
            continue
        data[json_key(attribute.name)] = _value_to_data(value)
    return data


def message_from_data(data: Any, where: str = "message") -> AgentMessage:
    """Rebuild one message from `to_data` output; `where` says which one in errors."""
    cls = _pick_class(_MESSAGE_CLASSES, "role", data, where)
    message: AgentMessage = _record_from_data(cls, data, where)
    return message


def json_key(name: str) -> str:
    """tool_call_id -> toolCallId: Python names in the code, the course's names in the file."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _value_to_data(value: Any) -> Any:
    if attrs.has(type(value)):
        return to_data(value)
    if isinstance(value, tuple):
        return [_value_to_data(item) for item in value]
    return value


def _pick_class(classes: dict[str, type], key: str, data: Any, where: str) -> type:
    """Read the discriminator (`role` or `type`) and choose the record class."""
    if not isinstance(data, dict):
        raise TranscriptError(f"{where}: expected a JSON object, got {type(data).__name__}")
    if key not in data:
        raise TranscriptError(f"{where}: missing key {key!r}")
    if data[key] not in classes:
        raise TranscriptError(f"{where}: unknown {key} {data[key]!r}")
    return classes[data[key]]


def _record_from_data(cls: type, data: Any, where: str) -> Any:
    """Build `cls` from a JSON object whose keys are exactly its JSON keys."""
    if not isinstance(data, dict):
        raise TranscriptError(f"{where}: expected a JSON object, got {type(data).__name__}")
    by_key = {json_key(attribute.name): attribute for attribute in attrs.fields(cls)}
    _check_keys(data, by_key, where)
    values = {
        attribute.name: _field_from_data(attribute.name, data[key], f"{where}.{key}")
        for key, attribute in by_key.items()
        if attribute.init and key in data
    }
    try:
        return cls(**values)
    except (TypeError, ValueError) as error:
        reason = error.args[0] if error.args else error  # attrs adds details after the text
        raise TranscriptError(f"{where}: {reason}") from error


def _check_keys(data: dict[str, Any], by_key: dict[str, attrs.Attribute[Any]], where: str) -> None:
    """Exact keys: nothing unknown, and only fields that default to None may be missing."""
    for key in data:
        if key not in by_key:
            raise TranscriptError(f"{where}: unknown key {key!r}")
    for key, attribute in by_key.items():
        if key not in data and attribute.default is not None:
            raise TranscriptError(f"{where}: missing key {key!r}")


def _field_from_data(name: str, value: Any, where: str) -> Any:
    """Nested records need rebuilding; every other value is taken as it is."""
    if name == "usage":
        return _record_from_data(Usage, value, where)
    if name != "content":
        return value
    if not isinstance(value, list):
        raise TranscriptError(f"{where}: expected a JSON array, got {type(value).__name__}")
    return tuple(_block_from_data(block, f"{where}[{index}]") for index, block in enumerate(value))


def _block_from_data(data: Any, where: str) -> AssistantContent:
    block: AssistantContent = _record_from_data(
        _pick_class(_BLOCK_CLASSES, "type", data, where), data, where
    )
    return block
