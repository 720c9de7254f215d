"""Tools: what a model is told about a tool, and the code that runs it.

A tool is a record. Its name, description and parameters (a JSON Schema
object) are what the model sees; `execute` is what the agent runs once a
call's arguments have been checked. A registry finds tools by name and
hands the provider the specs it sends.

Starter file of chapter 06: lab 6.2 adds the record's two validators and
writes the registry.
"""

from __future__ import annotations

from typing import Any, Awaitable, Iterable, Protocol, Sequence

from attrs import field, frozen

from tiny_pi.abort import AbortSignal
from tiny_pi.messages import TextContent


class Execute(Protocol):
    """`await execute(arguments, signal=signal)`: run the tool, return its content blocks.

    `arguments` already fit the tool's parameters. A tool that can take long
    watches `signal`; one that fails simply raises.
    """

    def __call__(
        self, arguments: dict[str, Any], *, signal: AbortSignal
    ) -> Awaitable[Sequence[TextContent]]: ...


@frozen
class Tool:
    """A tool the model may call: the spec it is shown, and the code that runs it."""

    name: str  # lab 6.2: refuse what providers refuse
    description: str
    parameters: dict[str, Any]  # lab 6.2: a JSON Schema of type "object"
    execute: Execute = field(repr=False)


class ToolRegistry:
    """The tools of one agent, found by name; two tools may not share a name."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        raise NotImplementedError("lab 6.2: keep the tools by name")

    def get(self, name: str) -> Tool | None:
        """The tool called `name`, or None when there is none."""
        raise NotImplementedError("lab 6.2")

    @property
    def names(self) -> list[str]:
        """The tools' names, in registration order."""
        raise NotImplementedError("lab 6.2")

    def specs(self) -> list[Tool]:
        """What the provider sends as `tools`: each tool's name, description and parameters."""
        raise NotImplementedError("lab 6.2")
