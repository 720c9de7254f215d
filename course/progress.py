"""A learner's progress, kept in their practice dir (never in checkpoints/).

`course test` records its last verdict in `.course/last-test.json` inside the
practice dir, each check with its kind and lab id as fields of their own;
`course list` and `course status` read it back (course.status.read_last_test).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from attrs import field, frozen

from course.catalog import Chapter, Lab
from course.checklist import Check

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


@frozen
class CheckVerdict:
    """One check of a recorded run: its kind and lab id as fields, its words for people."""

    kind: str
    lab: str | None
    name: str
    ok: bool
    actual: str = ""


@frozen
class LastTest:
    """The last recorded `course test` (or `course watch`) verdict of a practice dir."""

    chapter: str
    lab: str | None
    ok: bool
    when: str
    checks: tuple[CheckVerdict, ...] = field(default=())

    @classmethod
    def from_checks(cls, chapter: Chapter, lab: Lab | None, checks: Sequence[Check], when: str = "") -> LastTest:
        return cls(
            chapter=chapter.name,
            lab=lab.id if lab is not None else None,
            ok=all(check.ok for check in checks),
            when=when or time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            checks=tuple(CheckVerdict(c.kind, c.lab, c.name, c.ok, c.actual) for c in checks),
        )

    def lab_ok(self, lab: Lab) -> bool | None:
        """True/False when this run checked `lab`, None when it did not."""
        for check in self.checks:
            if check.kind == "lab" and check.lab == lab.id:
                return check.ok
        return None

    def to_json(self) -> dict[str, object]:
        return {
            "chapter": self.chapter,
            "lab": self.lab,
            "ok": self.ok,
            "when": self.when,
            "checks": [
                {"kind": c.kind, "lab": c.lab, "name": c.name, "ok": c.ok, "actual": c.actual} for c in self.checks
            ],
        }


def save_result(directory: Path, chapter: Chapter, lab: Lab | None, checks: Sequence[Check]) -> LastTest:
    """Remember the verdict of a `course test` run; never fatal if the dir is read-only."""
    last = LastTest.from_checks(chapter, lab, checks)
    write_state(directory, LAST_TEST, json.dumps(last.to_json(), indent=2))
    return last


def read_last_test(directory: Path) -> LastTest | None:
    """The last verdict, or None when there is none or it cannot be trusted.

    The file is the learner's to delete or damage: anything unexpected in it
    reads as "no result", never as a traceback.
    """
    text = read_state(directory, LAST_TEST)
    try:
        data: Any = json.loads(text) if text is not None else None
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    try:
        checks = []
        for c in data.get("checks", []):
            lab = c.get("lab")
            checks.append(CheckVerdict(kind=str(c.get("kind", "")), lab=str(lab) if lab is not None else None,
                                       name=str(c["name"]), ok=bool(c["ok"]), actual=str(c.get("actual", ""))))
        lab = data.get("lab")
        return LastTest(
            chapter=str(data["chapter"]),
            lab=str(lab) if lab is not None else None,
            ok=bool(data["ok"]),
            when=str(data.get("when", "")),
            checks=tuple(checks),
        )
    except (KeyError, TypeError, AttributeError):
        return None
