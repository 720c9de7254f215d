"""Reading a provider's JSON one named field at a time.

Whatever a provider sends is a claim until it has been checked. Each helper
here checks one value; when the value has the wrong shape it raises
`WireError` with the path of the field (`choices[0].delta.content`), so the
error event a user finally sees says what was wrong and where.
"""

from __future__ import annotations

import json
from typing import Any


class WireError(ValueError):
    """The provider sent something this runtime will not turn into a message."""


def kind_of(value: object) -> str:
    """The JSON name of a value's kind, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def parse_json(data: str, what: str = "a data line") -> Any:
    """`data` as JSON; the error says where it broke, never what it held."""
    try:
        return json.loads(data)
    except json.JSONDecodeError as error:
        raise WireError(f"invalid JSON in {what}: {error.msg} at character {error.pos}") from None


def expect_object(value: object, path: str) -> dict[str, Any]:
    """`value` if it is a JSON object."""
    if not isinstance(value, dict):
        raise WireError(f"{path} must be an object, got {kind_of(value)}")
    return value


def expect_list(value: object, path: str) -> list[Any]:
    """`value` if it is a JSON array."""
    if not isinstance(value, list):
        raise WireError(f"{path} must be an array, got {kind_of(value)}")
    return value


def expect_str(value: object, path: str) -> str:
    """`value` if it is a string."""
    if not isinstance(value, str):
        raise WireError(f"{path} must be a string, got {kind_of(value)}")
    return value


def optional_str(value: object, path: str) -> str | None:
    """`value` if it is a string or null."""
    if value is not None and not isinstance(value, str):
        raise WireError(f"{path} must be a string or null, got {kind_of(value)}")
    return value


def expect_int(value: object, path: str) -> int:
    """`value` if it is an integer (JSON true is not 1 here)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise WireError(f"{path} must be an integer, got {kind_of(value)}")
    return value


def error_text(value: object) -> str:
    """The readable part of a provider's error: `{"message": ...}`, a string, or the JSON."""
    if isinstance(value, dict) and isinstance(value.get("message"), str):
        return value["message"]
    if isinstance(value, str):
        return value
    return json.dumps(value)


def shorten(text: str, limit: int = 200) -> str:
    """At most `limit` characters of an error text. Cut only after secrets are scrubbed:
    a cut through the middle of a key would leave its first characters behind."""
    return text if len(text) <= limit else text[: limit - 3] + "..."
