"""JSON-RPC 2.0: the three kinds of message an MCP peer sends, told apart before anything acts on them.

MCP speaks JSON-RPC 2.0. Every message is one JSON object with
`"jsonrpc": "2.0"`, and its keys say what it is:

    request       id and method     the peer waits for a response with the same id
    notification  method, no id     nobody answers it
    response      id, no method     exactly one of result or error ({code, message})

An id is a string or a finite number (never a boolean, never NaN or
infinite: Python's json module reads the bare words NaN and Infinity, and
an id like that could never be matched). A response's id may be null only
when it carries an error: the peer could not read the request's id.
Anything else, a batch (a JSON array) included, is refused here with a
ProtocolError: the client never guesses.

`LineFramer` cuts the stdio byte stream into messages. Only a line that
ends in a newline counts, the same rule as chapter 10's log: a half line
waits for the rest, and one chunk of several lines gives them all.
"""

from __future__ import annotations

import json
import math
from typing import Any

from attrs import field, frozen

JSONRPC = "2.0"
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601


class ProtocolError(ValueError):
    """A line or an object that is not a JSON-RPC 2.0 message."""


def _message_id(instance: Any, attribute: Any, value: Any) -> None:
    if not is_message_id(value):
        raise ProtocolError(f"an id is a string or a finite number, got {value!r}")


@frozen
class Request:
    """A call the peer must answer: a response with the same id."""

    id: str | int | float = field(validator=_message_id)
    method: str
    params: dict[str, Any] | None = None


@frozen
class Notification:
    """A one-way message: nobody answers it."""

    method: str
    params: dict[str, Any] | None = None


@frozen
class RpcError:
    """A response's error object: a number the protocol defines, and a sentence."""

    code: int
    message: str
    data: Any = None


@frozen
class Response:
    """The answer to the request with the same id: a result, or an error."""

    id: str | int | float | None
    result: Any = None
    error: RpcError | None = None


Message = Request | Notification | Response


def is_message_id(value: Any) -> bool:
    """Whether `value` can be an id: a string, or a number that is not a boolean, NaN or infinite."""
    raise NotImplementedError("lab 17.1: write is_message_id")


def parse_message(value: Any) -> Message:
    """The message `value` (a decoded JSON value) is; a ProtocolError for anything else."""
    raise NotImplementedError("lab 17.1: write parse_message")


def parse_response(value: dict[str, Any]) -> Response:
    """A message without a method: a response, with exactly one of result and error."""
    raise NotImplementedError("lab 17.1: write parse_response")


def encode(message: Message) -> bytes:
    """One message as one line of UTF-8 JSON, newline included."""
    raise NotImplementedError("lab 17.1: write encode")


def decode_line(line: bytes) -> Message:
    """One line from the peer as a message; a ProtocolError when it is not JSON or not a message."""
    raise NotImplementedError("lab 17.1: write decode_line")


class LineFramer:
    """Bytes in, whole lines out: a line counts once its newline has arrived."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        """The complete, non-blank lines `chunk` finishes, without their line ends; the rest waits."""
        raise NotImplementedError("lab 17.1: write LineFramer.feed")

    @property
    def pending(self) -> bytes:
        """What has arrived after the last newline: half a line, or nothing."""
        return bytes(self.buffer)
