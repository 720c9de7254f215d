"""Tools: what a model is told about a tool, and the code that runs it.

A tool is a record. Its name, description and parameters (a JSON Schema
object) are what the model sees; `execute` is what the agent runs once a
call's arguments have been checked. A registry finds tools by name and
hands the provider the specs it sends; it is also asked right before a
checked call runs, and told each result (chapter 12's extensions hook in there).

From chapter 15 on every tool has an exposure (tiny_pi.tool_exposure): who
may see it and who may call it. The registry gives two sets from it, in
registration order: `declared()`, what the next request's `tools` holds,
and `callable()`, what a script may call. A registry whose tools are all
`direct` declares and lets call everything, exactly as before.
"""

from __future__ import annotations

import re
from typing import Any, Awaitable, Iterable, Protocol, Sequence

from attrs import field, frozen
from attrs.validators import instance_of

from tiny_pi.abort import AbortSignal
from tiny_pi.messages import TextContent, ToolCall, ToolResultMessage
from tiny_pi.tool_exposure import DIRECT, EXPOSURES, activatable, is_declared, script_may_call

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class Execute(Protocol):
    """`await execute(arguments, signal=signal)`: run the tool, return its content blocks.

    `arguments` already fit the tool's parameters. A tool that can take long
    watches `signal`; one that fails simply raises.
    """

    def __call__(
        self, arguments: dict[str, Any], *, signal: AbortSignal
    ) -> Awaitable[Sequence[TextContent]]: ...


def _tool_name(instance: Any, attribute: Any, value: str) -> None:
    """Providers accept 1 to 64 letters, digits, `_` and `-`; refuse anything else now."""
    if not isinstance(value, str) or TOOL_NAME.match(value) is None:
        raise ValueError(f"a tool name is 1-64 letters, digits, '_' or '-', got {value!r}")


def _object_schema(instance: Any, attribute: Any, value: dict[str, Any]) -> None:
    """Function parameters are always a JSON object: a schema of `type: object`."""
    if not isinstance(value, dict) or value.get("type") != "object":
        raise ValueError(f"parameters must be a JSON Schema with type 'object', got {value!r}")


def _exposure(instance: Any, attribute: Any, value: str) -> None:
    """One of the five exposures; a typo would otherwise hide a tool, or show one."""
    if value not in EXPOSURES:
        raise ValueError(f"an exposure is one of {', '.join(EXPOSURES)}, got {value!r}")


@frozen
class Tool:
    """A tool the model may call: the spec it is shown, and the code that runs it."""

    name: str = field(validator=_tool_name)
    description: str = field(validator=instance_of(str))
    parameters: dict[str, Any] = field(validator=_object_schema)
    execute: Execute = field(repr=False)
    exposure: str = field(default=DIRECT, validator=_exposure)


class ToolRegistry:
    """The tools of one agent, found by name; two tools may not share a name."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._active: set[str] = set()  # the codemode and deferred tools declared to the model
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        """Add `tool` after the others; a second tool of the same name is refused."""
        if tool.name in self._tools:
            raise ValueError(f"two tools are named {tool.name!r}; a call could not say which")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        """The tool called `name`, or None when there is none."""
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        """The tools' names, in registration order."""
        return list(self._tools)

    def specs(self) -> list[Tool]:
        """What the provider sends as `tools`: the declared tools' names, descriptions and parameters."""
        return self.declared()

    def exposure_of(self, name: str) -> str | None:
        """The exposure of the tool called `name`, or None when there is none."""
        tool = self._tools.get(name)
        return tool.exposure if tool is not None else None

    @property
    def uses_exposure(self) -> bool:
        """Whether any tool is other than direct: only then does the transcript carry tool patches."""
        return any(tool.exposure != DIRECT for tool in self._tools.values())

    def declared(self) -> list[Tool]:
        """What the model is shown, in registration order: direct, model-only and the activated tools."""
        return [tool for tool in self._tools.values() if is_declared(tool.exposure, tool.name in self._active)]

    def callable(self) -> list[Tool]:
        """What a script may call, in registration order: direct, codemode and deferred tools."""
        return [tool for tool in self._tools.values() if script_may_call(tool.exposure)]

    def is_active(self, name: str) -> bool:
        """Whether the codemode or deferred tool `name` has been activated."""
        return name in self._active

    def activate(self, names: Iterable[str]) -> list[str]:
        """Declare the codemode and deferred tools among `names`; returns the newly active, in registration order.

        Any other name (unknown, direct, model-only, hidden, already active) is ignored.
        """
        wanted = set(names)
        new = [tool.name for tool in self._tools.values()
               if tool.name in wanted and activatable(tool.exposure) and tool.name not in self._active]
        self._active.update(new)
        return new

    async def before_tool_call(self, call: ToolCall) -> str | None:
        """Asked once `call` is checked, before its tool runs: why it must not run, or None to run it."""
        return None

    def after_tool_call(self, call: ToolCall, result: ToolResultMessage) -> None:
        """Told each call's one result, once it exists; the result cannot be changed here."""
