"""The declared set in the transcript: tool patches, written only when it changed.

A patch is a system message of the transcript that says how the declared
tools change from here on:

    {"role": "system", "toolsRemoved": [{"name": "edit"}],
     "toolsAdded": [{"name": "edit", "description": "...", "parameters": {...}}]}

Replaying the patches in order, each one's removals before its additions,
gives the `tools` of every request exactly: the agent loop appends a patch
before a request whose declared set differs from the replay so far, and
sends the replayed set. A registry that uses no exposure writes no patch at
all, so the transcripts of chapters 07 to 14 stay as they were. A patch is
never sent to the model as a message: the provider skips it.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from attrs import field, frozen

from tiny_pi.tools import TOOL_NAME, Tool, ToolRegistry

SPEC_KEYS = ("name", "description", "parameters")
REMOVED_KEYS = ("name",)
PATCH_KEYS = ("role", "toolsAdded", "toolsRemoved")


@frozen
class ToolsPatch:
    """A system message of the transcript: the tools no longer declared, then the tools declared from now on.

    `tools_added` holds specs (name, description, parameters); `tools_removed`
    holds `{"name": ...}` objects. A field that would be empty is None, and
    left out of the saved form.
    """

    role: str = field(default="system", init=False)
    tools_added: tuple[dict[str, Any], ...] | None = None
    tools_removed: tuple[dict[str, str], ...] | None = None

    @property
    def content(self) -> tuple[()]:
        """No text and no calls: whoever reads a message's blocks finds none here."""
        return ()


class PatchError(ValueError):
    """A saved system message that is not a patch of the exact shape; says which field."""


def spec_of(tool: Tool) -> dict[str, Any]:
    """What a request declares about `tool`: its name, description and parameters."""
    return {"name": tool.name, "description": tool.description, "parameters": tool.parameters}


def replay(messages: Iterable[Any]) -> list[dict[str, Any]]:
    """The declared specs after every patch in `messages`, in order; removals before additions.

    An added name that is still declared takes its old place (a patch written
    again after a compaction dropped the earlier ones changes nothing).
    """
    raise NotImplementedError("lab 15.3: replay the patches")


def patch_between(old: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]]) -> ToolsPatch | None:
    """The patch that turns the declared specs `old` into `new`, or None when they are the same set.

    A tool whose spec changed is removed and added again.
    """
    raise NotImplementedError("lab 15.3: the patch between two declared sets")


def next_request_tools(messages: list[Any], registry: ToolRegistry) -> list[Tool]:
    """The tools of the next request; appends a patch to `messages` first when the declared set changed.

    With no exposure in use, the registry's specs go as they always did.
    """
    raise NotImplementedError("lab 15.3: the next request's tools, and its patch")


def patch_from_data(data: dict[str, Any]) -> ToolsPatch:
    """A saved patch, checked: exact keys, non-empty lists, specs of the exact shape; a PatchError otherwise."""
    raise NotImplementedError("lab 15.4: read a saved patch strictly")


def non_empty_list(value: Any, key: str) -> list[Any]:
    """A list with at least one item: an empty patch field is never written, so it is never read."""
    raise NotImplementedError("lab 15.4: a non-empty list")


def checked_entry(item: Any, where: str, keys: tuple[str, ...]) -> dict[str, Any]:
    """One spec (or one removal): an object with exactly `keys`, a valid name, text and an object schema."""
    raise NotImplementedError("lab 15.4: one spec or removal, checked")
