"""chapter.toml parsed once per content, not once per command.

Every command reads the catalog, and parsing fifteen chapter.toml files (over
300 KB, most of it hints) with the standard library's pure-Python TOML parser
was the largest part of a command's own start-up: about 45 ms of every
`course test`, `course hint` and tab completion. So the parsed data is kept
as JSON, which Python reads about twenty times faster, in the user's cache.

An entry is used only when the hash of the file's bytes matches the one it
was made from, so an edit is never missed, however soon it follows the last
read (a file's modification time cannot promise that), and only when its data
matches the hash kept with it, so a damaged entry is parsed again, not blamed
on the chapter.toml it came from. There is one entry per
file, so the store never grows beyond the course. It lives outside
`checkpoints/`; a cache that cannot be read or written costs time, nothing else.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path
from typing import Any

from course.atomic import replace_text
from course.run_env import cache_home


def store_dir() -> Path:
    """The course's cache (course.run_env.cache_home), parsed-toml."""
    return Path(cache_home()) / "parsed-toml"


def parse_toml(text: str, path: Path) -> dict[str, Any]:
    """`tomllib.loads(text)`, read from the store when `path` last had exactly this text."""
    content = _digest(text)
    entry = store_dir() / (_digest(str(path.resolve())) + ".json")
    kept = _kept(entry, content)
    if kept is not None:
        return kept
    data = tomllib.loads(text)  # a TOMLDecodeError is the caller's to report
    _keep(entry, content, data)
    return data


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def _kept(entry: Path, content: str) -> dict[str, Any] | None:
    """The data kept for `content`, or None: an entry that is missing, stale or damaged is never used.

    An entry is a header line (the hash of the file's text, the hash of the data
    below it) and the data as JSON. Data that does not match its own hash was
    damaged after it was written (a disk, an editor, a half-copied cache): it
    would be read as the checkout's chapter.toml and blamed on it, so it is
    parsed again and the entry rewritten instead.
    """
    try:
        header, _, body = entry.read_text(encoding="utf-8").partition("\n")
        seal = json.loads(header)
        if seal.get("content") != content or seal.get("data") != _digest(body):
            return None
        data = json.loads(body)
    except (OSError, ValueError, AttributeError):
        return None
    return data if isinstance(data, dict) else None


def _keep(entry: Path, content: str, data: dict[str, Any]) -> None:
    try:
        body = json.dumps(data)
    except (TypeError, ValueError):  # a TOML date has no JSON form: such a file is parsed every time
        return
    replace_text(entry, json.dumps({"content": content, "data": _digest(body)}) + "\n" + body)
