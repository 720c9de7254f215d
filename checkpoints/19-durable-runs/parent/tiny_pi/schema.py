"""A small JSON Schema checker: are a tool call's arguments what the tool declared?

A model produces arguments as text; nothing proves they fit the tool. This
module checks them against the subset of JSON Schema that tool parameters
use in practice: `type` (the seven JSON types), `properties`, `required`,
`enum` and `additionalProperties: false`. Other keywords are ignored, as a
JSON Schema validator ignores keywords it does not know.

Every problem names its JSON path (`arguments.path`), because the reader of
the message is a model that has to fix exactly that value and try again.
"""

from __future__ import annotations

import json
from typing import Any

def json_type(value: Any) -> str:
    """The JSON type name of a value decoded by `json.loads`."""
    if value is None:
        return "null"
    if isinstance(value, bool):  # before int: in Python, True is an int
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return f"{type(value).__name__} (not a JSON value)"  # a script may hold anything


def has_type(value: Any, expected: str) -> bool:
    """Whether `value` is of the JSON type `expected`; an integer is also a number."""
    actual = json_type(value)
    if expected == "number":
        return actual in ("integer", "number")
    if expected == "integer" and actual == "number":
        return float(value).is_integer()  # JSON Schema: 2.0 is an integer
    return actual == expected


def schema_problems(schema: dict[str, Any], value: Any, path: str = "arguments") -> list[str]:
    """Every way `value` breaks `schema`, one line each, each starting with its JSON path.

    An empty list means the value fits. A wrong type stops the check of
    that value there: its properties cannot be judged.
    """
    expected = schema.get("type")
    if expected is not None and not has_type(value, expected):
        return [f"{path}: expected {expected}, got {json_type(value)}"]
    if "enum" in schema and not any(same_json(value, option) for option in schema["enum"]):
        allowed = ", ".join(json.dumps(option) for option in schema["enum"])
        return [f"{path}: expected one of {allowed}, got {json.dumps(value, default=repr)}"]
    if isinstance(value, dict):
        return object_problems(schema, value, path)
    return []


def object_problems(schema: dict[str, Any], value: dict[str, Any], path: str) -> list[str]:
    """Missing required properties, unknown ones, and the problems of each known one."""
    properties: dict[str, Any] = schema.get("properties", {})
    problems = [
        f"{path}.{name}: required property is missing"
        for name in schema.get("required", [])
        if name not in value
    ]
    for name, item in value.items():
        if name in properties:
            problems += schema_problems(properties[name], item, f"{path}.{name}")
        elif schema.get("additionalProperties") is False:
            allowed = ", ".join(properties) or "none"
            problems.append(f"{path}.{name}: unknown property (allowed: {allowed})")
    return problems


def same_json(left: Any, right: Any) -> bool:
    """Equal as JSON values: true never matches 1 (Python's `True == 1`), 1.0 does."""
    if has_type(left, "number") and has_type(right, "number"):
        return left == right  # JSON has one kind of number: 1 and 1.0 are the same value
    return json_type(left) == json_type(right) and left == right
