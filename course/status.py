"""Where a learner stands: practice dirs and the verdicts `course test` left in them.

The truth about progress lives in each practice dir (`.course/last-test.json`,
written by `course test` and `course watch`), never in checkpoints/, so the
course repository stays read-only and a learner can delete a practice dir to
start over. This module only reads; `course list`, `course status` and
`course hint` share its idea of "the first lab that is not green yet".
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from attrs import field, frozen

from course.catalog import Catalog, Chapter, Lab
from course.errors import UsageError
from course.progress import last_result

PRACTICE = "practice"

NOT_STARTED = "not started"
NOT_TESTED = "not tested yet"
GREEN = "green"
RED = "red"
LAB_RUN = "lab run"


@frozen
class CheckVerdict:
    """One line of a recorded `course test` run."""

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

    def lab_ok(self, lab: Lab) -> bool | None:
        """True/False when this run checked `lab`, None when it did not."""
        prefix = f"lab {lab.id} "
        for check in self.checks:
            if check.name.startswith(prefix) or check.name == f"lab {lab.id}":
                return check.ok
        return None


def read_last_test(directory: Path) -> LastTest | None:
    """The last verdict, or None when there is none or it cannot be trusted.

    The file is the learner's to delete or damage: anything unexpected in it
    reads as "no result", never as a traceback.
    """
    data: Any = last_result(directory)
    if not isinstance(data, dict):
        return None
    try:
        checks = tuple(
            CheckVerdict(name=str(c["name"]), ok=bool(c["ok"]), actual=str(c.get("actual", "")))
            for c in data.get("checks", [])
        )
        lab = data.get("lab")
        return LastTest(
            chapter=str(data["chapter"]),
            lab=str(lab) if lab is not None else None,
            ok=bool(data["ok"]),
            when=str(data.get("when", "")),
            checks=checks,
        )
    except (KeyError, TypeError, AttributeError):
        return None


def first_open_lab(chapter: Chapter, last: LastTest | None) -> Lab | None:
    """The lab to work on next according to the last run; None when every lab is green.

    A full run names every lab's verdict: the first red one. A `--lab` run
    names one: that lab while it is red, the following lab once it is green
    (labs build on each other, so the learner is moving forward). No run yet:
    the first lab.
    """
    if not chapter.labs:
        return None
    if last is None or last.chapter != chapter.name:
        return chapter.labs[0]
    if last.lab is not None:
        ids = [lab.id for lab in chapter.labs]
        if last.lab not in ids:
            return chapter.labs[0]
        position = ids.index(last.lab)
        if not last.ok:
            return chapter.labs[position]
        return chapter.labs[position + 1] if position + 1 < len(ids) else None
    for lab in chapter.labs:
        if last.lab_ok(lab) is not True:
            return lab
    return None


@frozen
class ChapterProgress:
    """One chapter as seen from its default practice dir."""

    chapter: Chapter
    directory: Path
    exists: bool
    last: LastTest | None

    @property
    def state(self) -> str:
        if not self.exists:
            return NOT_STARTED
        if self.last is None or self.last.chapter != self.chapter.name:
            return NOT_TESTED
        if self.last.lab is not None:
            return LAB_RUN
        return GREEN if self.last.ok else RED

    def lab_states(self) -> dict[str, bool | None]:
        last = self.last if self.state not in (NOT_STARTED, NOT_TESTED) else None
        return {lab.id: (last.lab_ok(lab) if last else None) for lab in self.chapter.labs}

    def verdict(self) -> str:
        """A few words: 'green (2/2 labs)', 'lab 2.1 red', 'not started'."""
        state = self.state
        if state in (NOT_STARTED, NOT_TESTED):
            return state
        assert self.last is not None
        if state == LAB_RUN:
            return f"lab {self.last.lab} {'green' if self.last.ok else 'red'}"
        labs = self.lab_states()
        green = sum(1 for ok in labs.values() if ok)
        return f"{state} ({green}/{len(labs)} labs green)" if labs else state

    def next_step(self) -> str:
        nn = self.chapter.nn
        if self.state == NOT_STARTED:
            return f"course practice {nn}"
        if self.state == NOT_TESTED:
            return f"course test {nn}"
        if self.state == GREEN:
            if self.chapter.redlights:
                redlight = self.chapter.redlights[0]
                return f"the red-light exercise {redlight.id} {redlight.title} (course show {nn})"
            return "on to the next chapter"
        lab = first_open_lab(self.chapter, self.last)
        if lab is None:
            return f"course test {nn}"
        return f"course test {nn} --lab {lab.id} (stuck? course hint {nn} --lab {lab.id})"

    def to_json(self) -> dict[str, object]:
        return {
            "chapter": self.chapter.name,
            "directory": str(self.directory),
            "exists": self.exists,
            "state": self.state,
            "verdict": self.verdict(),
            "last_test": None
            if self.last is None
            else {"lab": self.last.lab, "ok": self.last.ok, "when": self.last.when},
            "labs": self.lab_states(),
            "next": self.next_step(),
        }


def default_practice_dir(root: Path, chapter: Chapter) -> Path:
    return root / PRACTICE / chapter.name


def chapter_progress(root: Path, chapter: Chapter) -> ChapterProgress:
    directory = default_practice_dir(root, chapter)
    exists = directory.is_dir()
    return ChapterProgress(
        chapter=chapter,
        directory=directory,
        exists=exists,
        last=read_last_test(directory) if exists else None,
    )


@frozen
class StatusReport:
    """The whole course from the learner's side."""

    chapters: tuple[ChapterProgress, ...]

    def count(self, *states: str) -> int:
        return sum(1 for progress in self.chapters if progress.state in states)

    def next_step(self) -> str:
        """The first chapter that is not green decides what to do next."""
        started = [p for p in self.chapters if p.state != NOT_STARTED]
        for progress in started:
            if progress.state != GREEN:
                return progress.next_step()
        later = [p for p in self.chapters if p.state == NOT_STARTED]
        if started:
            after = [p for p in later if p.chapter.number > started[-1].chapter.number]
            if after:
                return after[0].next_step()
            return started[-1].next_step()
        return later[0].next_step() if later else "add a chapter"

    def summary(self) -> str:
        return (
            f"{self.count(GREEN)} green, {self.count(RED, LAB_RUN, NOT_TESTED)} in progress, "
            f"{self.count(NOT_STARTED)} not started, of {len(self.chapters)} chapters"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "command": "status",
            "green": self.count(GREEN),
            "in_progress": self.count(RED, LAB_RUN, NOT_TESTED),
            "not_started": self.count(NOT_STARTED),
            "next": self.next_step(),
            "chapters": [progress.to_json() for progress in self.chapters],
        }


def practice_chapter(directory: Path, catalog: Catalog) -> Chapter | None:
    """The chapter a practice dir was made for, from the title line of its LEARNING.md."""
    try:
        with (directory / "LEARNING.md").open(encoding="utf-8") as stream:
            first = stream.readline()
    except OSError:
        return None
    match = re.match(r"# Chapter (\d+):", first)
    if match is None:
        return None
    try:
        return catalog.resolve(match.group(1))
    except UsageError:
        return None


def course_status(root: Path, catalog: Catalog, directories: Sequence[Path] = ()) -> StatusReport:
    """Every chapter from its default practice dir, or from one of `directories` made for it."""
    chosen: dict[str, Path] = {}
    for directory in directories:
        chapter = practice_chapter(directory, catalog)
        if chapter is None:
            raise UsageError(
                f"{directory} is not a practice dir of this course (no LEARNING.md naming a chapter); "
                "make one with `course practice`."
            )
        chosen[chapter.name] = directory
    chapters = []
    for chapter in catalog.chapters:
        if chapter.name in chosen:
            directory = chosen[chapter.name]
            chapters.append(ChapterProgress(chapter, directory, True, read_last_test(directory)))
        else:
            chapters.append(chapter_progress(root, chapter))
    return StatusReport(chapters=tuple(chapters))
