"""Two read-only tools, `read` and `ls`, confined to one directory tree.

The model chooses the paths, so every path is a request to check, not a
place to go: an absolute path, `..` that climbs out, or a symlink that
points out of the root is refused with a message, and nothing outside the
root is ever opened. What they return is bounded, so one large file cannot
fill the model's context.

Starter file of chapter 07: lab 7.4 writes the tools (the lesson suggests
inside_root, read_text, bounded, list_entries, read_tool and ls_tool).
"""

from __future__ import annotations

from pathlib import Path

from tiny_pi.tools import Tool

MAX_FILE_BYTES = 1_000_000
MAX_READ_CHARS = 20_000
MAX_ENTRIES = 200

PATH_ONLY = {
    "type": "object",
    "properties": {"path": {"type": "string", "description": "a path relative to the project root"}},
    "required": ["path"],
    "additionalProperties": False,
}
OPTIONAL_PATH = {**PATH_ONLY, "required": []}


def builtin_tools(root: Path) -> list[Tool]:
    """The read-only tools of `python -m tiny_pi.agent`, all confined to `root`."""
    raise NotImplementedError("lab 7.4: the read and ls tools")
