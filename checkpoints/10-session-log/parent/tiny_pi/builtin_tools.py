"""Two read-only tools, `read` and `ls`, confined to one directory tree.

The model chooses the paths, so every path is a request to check, not a
place to go: an absolute path, `..` that climbs out, or a symlink that
points out of the root is refused with a message, and nothing outside the
root is ever opened. What they return is bounded, so one large file cannot
fill the model's context.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from tiny_pi.abort import AbortSignal
from tiny_pi.messages import TextContent, text
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


def inside_root(root: Path, path: str) -> Path:
    """The real location of `path` under `root`; refuse anything that ends up elsewhere.

    `resolve()` follows `..` and symlinks first, so the check sees where a
    path really leads. Comparing path parts, not string prefixes, keeps a
    sibling such as `project-secrets` out of the root `project`.
    """
    if Path(path).is_absolute():
        raise ValueError(f"{path!r} is absolute; give a path relative to the project root")
    base = root.resolve()
    candidate = (base / path).resolve()
    if not candidate.is_relative_to(base):
        raise ValueError(f"{path!r} leads outside the project root")
    return candidate


def read_text(root: Path, path: str) -> str:
    """A UTF-8 text file under `root`, cut to MAX_READ_CHARS characters."""
    file = inside_root(root, path)
    if not file.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    size = file.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ValueError(f"{path} has {size} bytes; read takes files up to {MAX_FILE_BYTES}")
    try:
        content = file.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text") from None
    return bounded(content)


def bounded(content: str, limit: int = MAX_READ_CHARS) -> str:
    """The text as it is, or its first `limit` characters and a note that says so."""
    if len(content) <= limit:
        return content
    return content[:limit] + f"\n[truncated: showed {limit} of {len(content)} characters]"


def list_entries(root: Path, path: str) -> str:
    """The entries of a directory under `root`, sorted, one a line; directories end in `/`."""
    directory = inside_root(root, path)
    if not directory.is_dir():
        raise NotADirectoryError(f"no such directory: {path}")
    names = sorted(entry.name + ("/" if entry.is_dir() else "") for entry in directory.iterdir())
    if not names:
        return "(empty directory)"
    shown = names[:MAX_ENTRIES]
    if len(names) > MAX_ENTRIES:
        shown.append(f"[... {len(names) - MAX_ENTRIES} more entries]")
    return "\n".join(shown)


def read_tool(root: Path) -> Tool:
    """`read {"path": ...}`: one text file of the project."""

    async def execute(arguments: dict[str, Any], *, signal: AbortSignal) -> list[TextContent]:
        content = await trio.to_thread.run_sync(read_text, root, arguments["path"])
        return [text(content)]

    description = f"Read a UTF-8 text file of the project; long files are cut at {MAX_READ_CHARS} characters."
    return Tool("read", description, PATH_ONLY, execute)


def ls_tool(root: Path) -> Tool:
    """`ls {"path": ...}`: the entries of a directory, the project root by default."""

    async def execute(arguments: dict[str, Any], *, signal: AbortSignal) -> list[TextContent]:
        listing = await trio.to_thread.run_sync(list_entries, root, arguments.get("path", "."))
        return [text(listing)]

    return Tool("ls", "List a directory of the project, one entry a line.", OPTIONAL_PATH, execute)


def builtin_tools(root: Path) -> list[Tool]:
    """The read-only tools of `python -m tiny_pi.agent`, all confined to `root`."""
    return [read_tool(root), ls_tool(root)]
