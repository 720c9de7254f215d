"""The practice dirs a learner has made, wherever they are: one small index.

`course practice` can make a dir anywhere, so looking only in practice/NN-slug
loses every other one. The index lives in the user's state directory
(`$XDG_STATE_HOME/tiny-pi-course`, else `~/.local/state/tiny-pi-course`),
never under checkpoints/. It holds paths only; each dir keeps its own
verdicts in `.course/`. An entry whose dir is gone, or no longer a practice
dir of its chapter, is dropped the next time the index is read; one that
cannot name a dir (a NUL in it, say) is skipped.
`course list` and `course status` both read it through `practice_dirs`.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from course.atomic import replace_text
from course.catalog import Catalog, Chapter
from course.locate import chapter_of
from course.run_env import state_home

INDEX_NAME = "practice-dirs.json"


def index_path() -> Path:
    """In the user's state directory, as course/run_env.py decides it (an unusable XDG_STATE_HOME is ignored)."""
    return Path(state_home()) / INDEX_NAME


def _read() -> list[dict[str, object]]:
    try:
        data = json.loads(index_path().read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return []
    entries = data.get("dirs") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return []
    return [e for e in entries if isinstance(e, dict) and _usable(e.get("dir"))
            and isinstance(e.get("chapter"), str) and isinstance(e.get("course"), str)]


def _usable(directory: object) -> bool:
    """Whether an entry's dir can name a dir at all (an index edited by hand may hold anything)."""
    if not isinstance(directory, str) or "\0" in directory or not os.path.isabs(directory):
        return False
    try:
        os.fsencode(directory)  # a lone surrogate, which JSON allows and no file system does
    except UnicodeError:
        return False
    return True


def _write(entries: list[dict[str, object]]) -> None:
    """Atomically, and never fatal: a read-only home only means the index forgets."""
    replace_text(index_path(), json.dumps({"dirs": entries}, indent=2))


def remember(directory: Path, chapter: Chapter, course_root: Path) -> None:
    """Note that `directory` is a practice dir of `chapter`, used just now."""
    try:
        where = str(directory.resolve())
    except (OSError, RuntimeError):
        return
    course = str(course_root.resolve())
    entries = [e for e in _read() if e["dir"] != where]
    entries.append({"dir": where, "chapter": chapter.name, "course": course, "used": time.time()})
    _write(entries)


def practice_dirs(catalog: Catalog) -> dict[str, list[Path]]:
    """Per chapter name, its known practice dirs of this course, most recently used first.

    Stale entries (the dir is gone, or its LEARNING.md names another chapter)
    are dropped from the index on the way.
    """
    course = str(catalog.root.resolve())
    entries = _read()
    kept: list[dict[str, object]] = []
    found: dict[str, list[tuple[float, Path]]] = {}
    for entry in entries:
        if entry["course"] != course:
            kept.append(entry)
            continue
        directory = Path(str(entry["dir"]))
        chapter = chapter_of(directory, catalog)
        if chapter is None or chapter.name != entry["chapter"]:
            continue  # stale: removed, or no longer this chapter's practice dir
        kept.append(entry)
        used = entry.get("used")
        found.setdefault(chapter.name, []).append((float(used) if isinstance(used, (int, float)) else 0.0, directory))
    if len(kept) != len(entries):
        _write(kept)
    return {name: [d for _, d in sorted(dirs, key=lambda pair: -pair[0])] for name, dirs in found.items()}
