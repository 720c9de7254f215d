"""A small JSON Schema checker: are a tool call's arguments what the tool declared?

A model produces arguments as text; nothing proves they fit the tool. This
module checks them against the subset of JSON Schema that tool parameters
use in practice: `type` (the seven JSON types), `properties`, `required`,
`enum` and `additionalProperties: false`. Other keywords are ignored, as a
JSON Schema validator ignores keywords it does not know.

Every problem names its JSON path (`arguments.path`), because the reader of
the message is a model that has to fix exactly that value and try again.

Starter file of chapter 06: lab 6.1 replaces the body below (and adds the
helpers you choose; the lesson suggests json_type, has_type and
object_problems).
"""

from __future__ import annotations

from typing import Any


def schema_problems(schema: dict[str, Any], value: Any, path: str = "arguments") -> list[str]:
    """Every way `value` breaks `schema`, one line each, each starting with its JSON path.

    An empty list means the value fits. A wrong type stops the check of
    that value there: its properties cannot be judged.
    """
    raise NotImplementedError("lab 6.1: check value against schema")
