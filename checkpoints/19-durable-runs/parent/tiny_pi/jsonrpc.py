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
    if isinstance(value, bool):
        return False
    if isinstance(value, str):
        return True
    return isinstance(value, (int, float)) and math.isfinite(value)


def parse_message(value: Any) -> Message:
    """The message `value` (a decoded JSON value) is; a ProtocolError for anything else."""
    if not isinstance(value, dict):
        raise ProtocolError(f"a message is a JSON object, got {type(value).__name__}")
    if value.get("jsonrpc") != JSONRPC:
        raise ProtocolError(f"a message has \"jsonrpc\": \"2.0\", got {value.get('jsonrpc')!r}")
    params = value.get("params")
    if params is not None and not isinstance(params, dict):
        raise ProtocolError("params, when present, are an object")
    if "method" in value:
        if not isinstance(value["method"], str):
            raise ProtocolError(f"a method is a string, got {value['method']!r}")
        if "id" not in value:
            return Notification(value["method"], params)
        return Request(value["id"], value["method"], params)
    return parse_response(value)


def parse_response(value: dict[str, Any]) -> Response:
    """A message without a method: a response, with exactly one of result and error."""
    if "id" not in value:
        raise ProtocolError("a message has a method, an id, or both")
    has_result, has_error = "result" in value, "error" in value
    if has_result == has_error:
        raise ProtocolError("a response has exactly one of result and error")
    if has_result:
        if not is_message_id(value["id"]):
            raise ProtocolError(f"a response's id is a string or a finite number, got {value['id']!r}")
        return Response(value["id"], result=value["result"])
    error = value["error"]
    if not (isinstance(error, dict) and isinstance(error.get("code"), int) and isinstance(error.get("message"), str)):
        raise ProtocolError("an error is an object with an integer code and a string message")
    if value["id"] is not None and not is_message_id(value["id"]):
        raise ProtocolError(f"a response's id is a string, a finite number or null, got {value['id']!r}")
    return Response(value["id"], error=RpcError(error["code"], error["message"], error.get("data")))


def encode(message: Message) -> bytes:
    """One message as one line of UTF-8 JSON, newline included."""
    body: dict[str, Any] = {"jsonrpc": JSONRPC}
    if isinstance(message, Response):
        body["id"] = message.id
        if message.error is None:
            body["result"] = message.result
        else:
            body["error"] = {"code": message.error.code, "message": message.error.message}
    else:
        if isinstance(message, Request):
            body["id"] = message.id
        body["method"] = message.method
        if message.params is not None:
            body["params"] = message.params
    return (json.dumps(body, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def decode_line(line: bytes) -> Message:
    """One line from the peer as a message; a ProtocolError when it is not JSON or not a message."""
    try:
        value = json.loads(line)
    except ValueError:
        shown = line[:80].decode("utf-8", errors="replace")
        raise ProtocolError(f"a line from the server is not JSON: {shown!r}") from None
    return parse_message(value)


class LineFramer:
    """Bytes in, whole lines out: a line counts once its newline has arrived."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        """The complete, non-blank lines `chunk` finishes, without their line ends; the rest waits."""
        self.buffer += chunk
        *lines, rest = bytes(self.buffer).split(b"\n")
        self.buffer = bytearray(rest)
        return [line.rstrip(b"\r") for line in lines if line.strip()]

    @property
    def pending(self) -> bytes:
        """What has arrived after the last newline: half a line, or nothing."""
        return bytes(self.buffer)
