"""A learner's progress, kept in their practice dir (never in checkpoints/).

`course test` records its last verdict in `.course/last-test.json` inside the
practice dir; `course list` and `course status` read it back.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from course.catalog import Chapter, Lab
from course.checks import Check

STATE_DIR = ".course"
LAST_TEST = "last-test.json"


def save_result(directory: Path, chapter: Chapter, lab: Lab | None, checks: list[Check]) -> None:
    """Remember the verdict of a `course test` run; never fatal if the dir is read-only."""
    state = {
        "chapter": chapter.name,
        "lab": lab.id if lab is not None else None,
        "ok": all(check.ok for check in checks),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "checks": [{"name": c.name, "ok": c.ok, "actual": c.actual} for c in checks],
    }
    try:
        folder = directory / STATE_DIR
        folder.mkdir(exist_ok=True)
        (folder / LAST_TEST).write_text(json.dumps(state, indent=2), encoding="utf-8")
    except OSError:
        pass


def last_result(directory: Path) -> dict[str, object] | None:
    """The last recorded verdict, or None when there is none (or it is unreadable)."""
    try:
        return json.loads((directory / STATE_DIR / LAST_TEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
