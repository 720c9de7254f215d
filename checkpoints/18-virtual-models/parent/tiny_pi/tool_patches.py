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
    declared: dict[str, dict[str, Any]] = {}
    for message in messages:
        if not isinstance(message, ToolsPatch):
            continue
        for removed in message.tools_removed or ():
            declared.pop(removed["name"], None)
        for spec in message.tools_added or ():
            declared[spec["name"]] = spec
    return list(declared.values())


def patch_between(old: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]]) -> ToolsPatch | None:
    """The patch that turns the declared specs `old` into `new`, or None when they are the same set.

    A tool whose spec changed is removed and added again.
    """
    before = {spec["name"]: spec for spec in old}
    after = {spec["name"]: spec for spec in new}
    removed = tuple({"name": name} for name, spec in before.items() if after.get(name) != spec)
    added = tuple(spec for name, spec in after.items() if before.get(name) != spec)
    if not removed and not added:
        return None
    return ToolsPatch(tools_added=added or None, tools_removed=removed or None)


def next_request_tools(messages: list[Any], registry: ToolRegistry) -> list[Tool]:
    """The tools of the next request; appends a patch to `messages` first when the declared set changed.

    With no exposure in use, the registry's specs go as they always did.
    """
    if not registry.uses_exposure:
        return registry.specs()
    patch = patch_between(replay(messages), [spec_of(tool) for tool in registry.declared()])
    if patch is not None:
        messages.append(patch)
    by_name = {tool.name: tool for tool in registry.declared()}
    return [by_name[spec["name"]] for spec in replay(messages)]


def patch_from_data(data: dict[str, Any]) -> ToolsPatch:
    """A saved patch, checked: exact keys, non-empty lists, specs of the exact shape; a PatchError otherwise."""
    for key in data:
        if key not in PATCH_KEYS:
            raise PatchError(f"a system message has only toolsAdded and toolsRemoved, got the key {key!r}")
    if "toolsAdded" not in data and "toolsRemoved" not in data:
        raise PatchError("a system message carries toolsAdded or toolsRemoved")
    added = removed = None
    if "toolsAdded" in data:
        added = tuple(checked_entry(item, f"toolsAdded[{index}]", SPEC_KEYS)
                      for index, item in enumerate(non_empty_list(data["toolsAdded"], "toolsAdded")))
    if "toolsRemoved" in data:
        removed = tuple(checked_entry(item, f"toolsRemoved[{index}]", REMOVED_KEYS)
                        for index, item in enumerate(non_empty_list(data["toolsRemoved"], "toolsRemoved")))
    return ToolsPatch(tools_added=added, tools_removed=removed)


def non_empty_list(value: Any, key: str) -> list[Any]:
    """A list with at least one item: an empty patch field is never written, so it is never read."""
    if not isinstance(value, list) or not value:
        raise PatchError(f"{key} is a non-empty list, got {value!r}")
    return value


def checked_entry(item: Any, where: str, keys: tuple[str, ...]) -> dict[str, Any]:
    """One spec (or one removal): an object with exactly `keys`, a valid name, text and an object schema."""
    if not isinstance(item, dict) or set(item) != set(keys):
        raise PatchError(f"{where} is an object with exactly the keys {', '.join(keys)}, got {item!r}")
    if not isinstance(item["name"], str) or TOOL_NAME.match(item["name"]) is None:
        raise PatchError(f"{where}.name is a tool name, got {item['name']!r}")
    if "description" in item and not isinstance(item["description"], str):
        raise PatchError(f"{where}.description is a string, got {item['description']!r}")
    if "parameters" in item and (not isinstance(item["parameters"], dict) or item["parameters"].get("type") != "object"):
        raise PatchError(f"{where}.parameters is a JSON Schema with type 'object', got {item['parameters']!r}")
    return item
