"""Two tools that change files, `write` and `edit`, confined to the root and never half done.

A path is checked as `read` checks it (chapter 07's `inside_root`), so a
write cannot leave the root through `..`, an absolute path or a symlink.
The new bytes go to a temporary file in the same directory, are flushed to
the disk, and then replace the old file in one step (`os.replace`): a crash
or an error at any moment leaves either the old file or the new one, never
a mixture. An edit is worked out in memory first, all of it, so an edit
that cannot be applied writes nothing.

Starter file of chapter 08: lab 8.2 writes the write tool (the lesson
suggests write_file, replace_atomically and sync_directory), lab 8.3 the
edit tool (requested_edits, replacement, edit_file, replaced_once,
original_index, line_ending and occurrences). The schemas and the Edit
record are given.
"""

from __future__ import annotations

from pathlib import Path

from attrs import frozen

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


def write_tool(root: Path) -> Tool:
    """`write {"path": ..., "content": ...}`: a whole file, created or replaced."""
    raise NotImplementedError("lab 8.2: the write tool")


def edit_tool(root: Path) -> Tool:
    """`edit {"path": ..., "old_text": ..., "new_text": ...}`, or `edits` for several at once."""
    raise NotImplementedError("lab 8.3: the edit tool")
