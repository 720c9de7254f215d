"""Saving and replaying a conversation: the transcript JSON.

A transcript is a JSON array of messages with the original course's
camelCase keys (`toolCallId`, `stopReason`). Loading is strict: a key the
record does not have, or a required key that is missing, is an error that
names the message and the key, because a transcript that loads "mostly"
replays a different conversation.

Lab 3.3 starter: TranscriptError is given, so the package imports from lab
3.1 on; write to_json and from_json, and whatever helpers they need.
"""

from __future__ import annotations

from typing import Sequence

from tiny_pi.messages.records import AgentMessage


class TranscriptError(ValueError):
    """Saved data does not have the exact shape of the IR; the message names the key."""


def to_json(messages: Sequence[AgentMessage]) -> str:
    """Save a transcript as a JSON array that `from_json` turns back into equal messages."""
    raise NotImplementedError("lab 3.3: save a transcript as JSON")


def from_json(document: str) -> list[AgentMessage]:
    """Rebuild a transcript saved by `to_json`, refusing any unknown or missing key."""
    raise NotImplementedError("lab 3.3: load a transcript from JSON")
