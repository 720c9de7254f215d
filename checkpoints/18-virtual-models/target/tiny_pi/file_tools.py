"""Two tools that change files, `write` and `edit`, confined to the root and never half done.

A path is checked as `read` checks it (chapter 07's `inside_root`), so a
write cannot leave the root through `..`, an absolute path or a symlink.
The new bytes go to a temporary file in the same directory, are flushed to
the disk, and then replace the old file in one step (`os.replace`): a crash
or an error at any moment leaves either the old file or the new one, never
a mixture. An edit is worked out in memory first, all of it, so an edit
that cannot be applied writes nothing.
"""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path
from typing import Any

import trio
from attrs import frozen

from tiny_pi.abort import AbortSignal
from tiny_pi.builtin_tools import inside_root, whole_text
from tiny_pi.messages import TextContent, text
from tiny_pi.tools import Tool

PATH = {"type": "string", "description": "a path relative to the project root"}
WRITE_PARAMETERS = {
    "type": "object",
    "properties": {"path": PATH, "content": {"type": "string", "description": "the whole new text"}},
    "required": ["path", "content"],
    "additionalProperties": False,
}
REPLACEMENT = {
    "old_text": {"type": "string", "description": "text that occurs exactly once in the file"},
    "new_text": {"type": "string", "description": "the text to put in its place"},
}
EDIT_PARAMETERS = {
    "type": "object",
    "properties": {
        "path": PATH,
        **REPLACEMENT,
        "edits": {
            "type": "array",
            "description": "several replacements, applied in order, all or none",
            "items": {"type": "object", "properties": REPLACEMENT, "required": ["old_text", "new_text"]},
        },
    },
    "required": ["path"],
    "additionalProperties": False,
}


@frozen
class Edit:
    """One replacement, and how a message names it: `edits[1]: ` in a batch, nothing alone."""

    old_text: str
    new_text: str
    label: str = ""


def write_file(root: Path, path: str, content: str) -> str:
    """Create or replace a text file under `root`, making its parent directories."""
    file = inside_root(root, path)
    if file.is_dir():
        raise IsADirectoryError(f"{path} is a directory")
    file.parent.mkdir(parents=True, exist_ok=True)
    data = content.encode("utf-8")
    replace_atomically(file, data)
    return f"wrote {len(data)} bytes to {path}"


def replace_atomically(file: Path, data: bytes) -> None:
    """Put `data` in `file` in one step: whoever looks sees the old bytes or the new ones.

    The temporary file sits in the same directory because `os.replace` is
    atomic only within one file system. It is removed again on any failure.
    """
    temporary = file.with_name(f".{file.name}.{secrets.token_hex(4)}.tmp")
    try:
        with open(temporary, "xb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())  # the bytes are on the disk before the name points at them
        if file.exists():
            shutil.copymode(file, temporary)  # a replaced file keeps its permissions
        os.replace(temporary, file)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    sync_directory(file.parent)


def sync_directory(directory: Path) -> None:
    """Flush a directory's entries to the disk, so the replace itself survives a power cut."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def requested_edits(arguments: dict[str, Any]) -> list[Edit]:
    """The edits of a call, in order: `old_text`/`new_text`, or a list under `edits`."""
    if "edits" not in arguments:
        return [replacement(arguments, "")]
    if "old_text" in arguments or "new_text" in arguments:
        raise ValueError("give old_text and new_text, or edits, not both")
    if not arguments["edits"]:
        raise ValueError("edits is empty; give at least one {old_text, new_text}")
    return [replacement(item, f"edits[{index}]: ") for index, item in enumerate(arguments["edits"])]


def replacement(item: Any, label: str) -> Edit:
    """One edit, once its two texts prove to be strings and the old one is not empty."""
    if not isinstance(item, dict) or not all(isinstance(item.get(key), str) for key in REPLACEMENT):
        raise ValueError(f"{label}give old_text and new_text, both strings")
    if item["old_text"] == "":
        raise ValueError(f"{label}old_text is empty; give the text to replace")
    return Edit(item["old_text"], item["new_text"], label)


def edit_file(root: Path, path: str, edits: list[Edit]) -> str:
    """Apply `edits` to a file under `root`, in order, all or none; the bytes they do not replace stay."""
    file = inside_root(root, path)
    original = whole_text(root, path)
    content = original
    for edit in edits:
        content = replaced_once(content, edit, path)
    data = content.encode("utf-8")
    replace_atomically(file, data)
    count = f"{len(edits)} edit" + ("" if len(edits) == 1 else "s")
    return f"edited {path} ({count}): {len(original.encode('utf-8'))} bytes before, {len(data)} after"


def replaced_once(content: str, edit: Edit, path: str) -> str:
    """`content` with the one occurrence of `edit.old_text` replaced; refuse none or several.

    The texts are compared with every CRLF read as LF (a model writes LF, the file
    may mix both), but the replacement is spliced into `content` as it is: only the
    matched characters change, and the new text's lines end as the line where the
    match starts ends, so an edit never turns lines it did not touch into others.
    """
    normal, old = content.replace("\r\n", "\n"), edit.old_text.replace("\r\n", "\n")
    count = occurrences(normal, old)
    if count == 0:
        raise ValueError(f"{edit.label}old_text not found in {path}; copy it exactly from the file")
    if count > 1:
        raise ValueError(
            f"{edit.label}old_text occurs {count} times in {path}; "
            "include more context so that it occurs exactly once"
        )
    found = normal.find(old)
    start, end = original_index(content, found), original_index(content, found + len(old))
    new = edit.new_text.replace("\r\n", "\n").replace("\n", line_ending(content, start))
    return content[:start] + new + content[end:]


def original_index(content: str, index: int) -> int:
    """Where character `index` of `content` with each CRLF read as LF lies in `content` itself."""
    pairs = 0  # the CRLF pairs before it: each is one character longer in `content`
    pair = content.find("\r\n")
    while pair != -1 and pair - pairs < index:
        pairs += 1
        pair = content.find("\r\n", pair + 2)
    return index + pairs


def line_ending(content: str, index: int) -> str:
    """How the line holding `index` ends, CRLF or LF; a last line without an ending, as the one before."""
    newline = content.find("\n", index)
    if newline == -1:
        newline = content.rfind("\n", 0, index)
    return "\r\n" if newline > 0 and content[newline - 1] == "\r" else "\n"


def occurrences(content: str, old: str) -> int:
    """How many places `old` starts at, overlaps included: `aa` occurs twice in `aaa`."""
    count = 0
    start = content.find(old)
    while start != -1:
        count += 1
        start = content.find(old, start + 1)
    return count


def write_tool(root: Path) -> Tool:
    """`write {"path": ..., "content": ...}`: a whole file, created or replaced."""

    async def execute(arguments: dict[str, Any], *, signal: AbortSignal) -> list[TextContent]:
        report = await trio.to_thread.run_sync(write_file, root, arguments["path"], arguments["content"])
        return [text(report)]

    description = "Create or replace a UTF-8 text file of the project; parent directories are made."
    return Tool("write", description, WRITE_PARAMETERS, execute)


def edit_tool(root: Path) -> Tool:
    """`edit {"path": ..., "old_text": ..., "new_text": ...}`, or `edits` for several at once."""

    async def execute(arguments: dict[str, Any], *, signal: AbortSignal) -> list[TextContent]:
        edits = requested_edits(arguments)
        report = await trio.to_thread.run_sync(edit_file, root, arguments["path"], edits)
        return [text(report)]

    description = (
        "Replace old_text, which must occur exactly once, with new_text in a file of the project; "
        "edits: [{old_text, new_text}, ...] applies several in order, all or none."
    )
    return Tool("edit", description, EDIT_PARAMETERS, execute)
