"""A learner's progress, kept in their practice dir (never in checkpoints/).

`course test` records its last verdict in `.course/last-test.json` inside the
practice dir; `course list` and `course status` read it back.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import time
from pathlib import Path

from course.catalog import Chapter, Lab
from course.checks import Check

STATE_DIR = ".course"
LAST_TEST = "last-test.json"


def state_dir(directory: Path, create: bool = True) -> Path | None:
    """DIR/.course as a real directory of DIR, or None when it is not one.

    The practice dir belongs to the learner, and anything in it may be a
    symbolic link: a `.course` that is a link (perhaps to somewhere outside
    DIR) or a plain file is never followed, neither to write nor to read.
    Every caller treats the state as optional, so "not here" is always a
    safe answer.
    """
    folder = directory / STATE_DIR
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        if not create:
            return None
        try:
            folder.mkdir()
            info = os.lstat(folder)
        except OSError:
            return None
    except OSError:
        return None
    return folder if stat.S_ISDIR(info.st_mode) else None


def write_state(directory: Path, name: str, text: str) -> bool:
    """Write .course/NAME atomically; False when it cannot be (read-only, or .course is not ours).

    The new file replaces NAME by a rename, so a NAME that is a symbolic link
    is replaced, never written through, and an interrupted write leaves the
    old state whole.
    """
    folder = state_dir(directory)
    if folder is None:
        return False
    temporary: str | None = None
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".course-{name}-", dir=folder)
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.chmod(temporary, 0o644)
        os.replace(temporary, folder / name)
        return True
    except OSError:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        return False


def read_state(directory: Path, name: str) -> str | None:
    """The text of .course/NAME, or None (missing, unreadable, or .course not ours)."""
    folder = state_dir(directory, create=False)
    if folder is None:
        return None
    try:
        return (folder / name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def remove_state(directory: Path, name: str) -> bool:
    """Remove .course/NAME (a link there is removed, its target never); True when one was removed."""
    folder = state_dir(directory, create=False)
    if folder is None:
        return False
    try:
        (folder / name).unlink()
    except OSError:
        return False
    return True


def save_result(directory: Path, chapter: Chapter, lab: Lab | None, checks: list[Check]) -> None:
    """Remember the verdict of a `course test` run; never fatal if the dir is read-only."""
    state = {
        "chapter": chapter.name,
        "lab": lab.id if lab is not None else None,
        "ok": all(check.ok for check in checks),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "checks": [{"name": c.name, "ok": c.ok, "actual": c.actual} for c in checks],
    }
    write_state(directory, LAST_TEST, json.dumps(state, indent=2))


def last_result(directory: Path) -> dict[str, object] | None:
    """The last recorded verdict, or None when there is none (or it is unreadable)."""
    text = read_state(directory, LAST_TEST)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None
