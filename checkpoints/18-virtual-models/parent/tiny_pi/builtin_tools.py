"""Two read-only tools, `read` and `ls`, confined to one directory tree.

The model chooses the paths, so every path is a request to check, not a
place to go: an absolute path, `..` that climbs out, or a symlink that
points out of the root is refused with a message, and nothing outside the
root is ever opened. What they return is bounded, so one large file cannot
fill the model's context; a long file is read a window of whole, numbered
lines at a time.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import trio

from tiny_pi.abort import AbortSignal
from tiny_pi.messages import TextContent, text
from tiny_pi.tools import Tool

MAX_FILE_BYTES = 1_000_000
MAX_READ_CHARS = 20_000
MAX_ENTRIES = 200
MAX_LINES = 2000  # lines in one window of `read`
MAX_WINDOW_BYTES = 20_000  # UTF-8 bytes in one window, its notice included
NOTICE_BYTES = 100  # room kept in a window for its notice, which is always shorter

PATH_ONLY = {
    "type": "object",
    "properties": {"path": {"type": "string", "description": "a path relative to the project root"}},
    "required": ["path"],
    "additionalProperties": False,
}
OPTIONAL_PATH = {**PATH_ONLY, "required": []}
READ_PARAMETERS = {
    **PATH_ONLY,
    "properties": {
        **PATH_ONLY["properties"],
        "offset": {"type": "integer", "description": "the first line to show, 1-based"},
        "limit": {"type": "integer", "description": f"how many lines to show, at most {MAX_LINES}"},
    },
}


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
    return bounded(whole_text(root, path))


def whole_text(root: Path, path: str) -> str:
    """All of a UTF-8 text file under `root`, up to MAX_FILE_BYTES bytes."""
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
    return content


def bounded(content: str, limit: int = MAX_READ_CHARS) -> str:
    """The text as it is, or its first `limit` characters and a note that says so."""
    if len(content) <= limit:
        return content
    return content[:limit] + f"\n[truncated: showed {limit} of {len(content)} characters]"


def read_lines(root: Path, path: str, offset: int, limit: int) -> str:
    """Lines `offset`, `offset + 1`, ... of a text file: whole, numbered, one window's worth."""
    if offset < 1 or limit < 1:
        raise ValueError(f"offset and limit start at 1, got offset {offset} and limit {limit}")
    lines = split_lines(whole_text(root, path))
    if offset > len(lines):
        raise ValueError(f"offset {offset} is past the end: {path} has {len(lines)} lines")
    shown = window(lines, offset, min(limit, MAX_LINES))
    if not shown:
        raise ValueError(f"line {offset} of {path} alone is over {MAX_WINDOW_BYTES} bytes")
    last = offset + len(shown) - 1
    return "".join(shown) + notice(offset, last, len(lines))


def split_lines(content: str) -> list[str]:
    """The lines of a text without their endings; a final newline does not start an empty line."""
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def window(lines: list[str], offset: int, count: int) -> list[str]:
    """Up to `count` numbered lines from `offset`, whole, that fit in one window with its notice."""
    shown: list[str] = []
    size = 0
    for number in range(offset, min(offset + count, len(lines) + 1)):
        line = f"{number}: {lines[number - 1]}\n"
        size += len(line.encode("utf-8"))
        if size > MAX_WINDOW_BYTES - NOTICE_BYTES:
            break  # never half a line: this one waits for the next window
        shown.append(line)
    return shown


def notice(first: int, last: int, total: int) -> str:
    """Which lines a window shows, of how many, and where the next window starts."""
    if last < total:
        return f"[lines {first}-{last} of {total}; read on with offset {last + 1}]"
    return f"[lines {first}-{last} of {total}; end of file]"


def list_entries(root: Path, path: str) -> str:
    """The entries of a directory under `root`, sorted, one a line; directories end in `/`."""
    directory = inside_root(root, path)
    if not directory.is_dir():
        raise NotADirectoryError(f"no such directory: {path}")
    names = sorted(shown_name(entry) for entry in directory.iterdir())
    if not names:
        return "(empty directory)"
    shown = names[:MAX_ENTRIES]
    if len(names) > MAX_ENTRIES:
        shown.append(f"[... {len(names) - MAX_ENTRIES} more entries]")
    return "\n".join(shown)


def shown_name(entry: Path) -> str:
    """An entry's name as valid text, a directory's ending in `/`.

    A name is bytes. Python hands over a byte that is not UTF-8 as a lone
    surrogate (`\\udce9`), which no request body or log can hold; it is shown
    as `\\xe9` instead, so that two such names still look different.
    """
    name = os.fsencode(entry.name).decode("utf-8", "backslashreplace")
    return name + ("/" if entry.is_dir() else "")


def read_tool(root: Path) -> Tool:
    """`read {"path": ..., "offset": ..., "limit": ...}`: one text file, or a window of its lines."""

    async def execute(arguments: dict[str, Any], *, signal: AbortSignal) -> list[TextContent]:
        path = arguments["path"]
        if "offset" in arguments or "limit" in arguments:
            offset, limit = int(arguments.get("offset", 1)), int(arguments.get("limit", MAX_LINES))
            content = await trio.to_thread.run_sync(read_lines, root, path, offset, limit)
        else:
            content = await trio.to_thread.run_sync(read_text, root, path)
        return [text(content)]

    description = (
        f"Read a UTF-8 text file of the project; long files are cut at {MAX_READ_CHARS} characters. "
        "With offset (the first line, 1-based) and limit, read numbered lines, a window at a time."
    )
    return Tool("read", description, READ_PARAMETERS, execute)


def ls_tool(root: Path) -> Tool:
    """`ls {"path": ...}`: the entries of a directory, the project root by default."""

    async def execute(arguments: dict[str, Any], *, signal: AbortSignal) -> list[TextContent]:
        listing = await trio.to_thread.run_sync(list_entries, root, arguments.get("path", "."))
        return [text(listing)]

    return Tool("ls", "List a directory of the project, one entry a line.", OPTIONAL_PATH, execute)


def builtin_tools(root: Path) -> list[Tool]:
    """The read-only tools of `python -m tiny_pi.agent`, all confined to `root`."""
    return [read_tool(root), ls_tool(root)]
