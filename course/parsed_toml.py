"""chapter.toml parsed once per content, not once per command.

Every command reads the catalog, and parsing fifteen chapter.toml files (over
300 KB, most of it hints) with the standard library's pure-Python TOML parser
was the largest part of a command's own start-up: about 45 ms of every
`course test`, `course hint` and tab completion. So the parsed data is kept
as JSON, which Python reads about twenty times faster, in the user's cache.

An entry is used only when the hash of the file's bytes matches the one it
was made from, so an edit is never missed, however soon it follows the last
read (a file's modification time cannot promise that). There is one entry per
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
    content = hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()
    entry = store_dir() / (hashlib.blake2b(str(path.resolve()).encode("utf-8"), digest_size=16).hexdigest() + ".json")
    try:
        kept = json.loads(entry.read_text(encoding="utf-8"))
        if kept["content"] == content:
            return kept["data"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    data = tomllib.loads(text)  # a TOMLDecodeError is the caller's to report
    _keep(entry, {"content": content, "data": data})
    return data


def _keep(entry: Path, value: dict[str, Any]) -> None:
    try:
        encoded = json.dumps(value)
    except (TypeError, ValueError):  # a TOML date has no JSON form: such a file is parsed every time
        return
    replace_text(entry, encoded)
