"""Where a learner stands: practice dirs and the verdicts `course test` left in them.

The truth about progress lives in each practice dir (`.course/last-test.json`,
written by `course test` and `course watch`), never in checkpoints/, so the
course repository stays read-only and a learner can delete a practice dir to
start over. Which dirs exist is kept in one small index (course.index).
`course list` and `course status` read both through `course_status`, and
`course hint` shares its idea of "the first lab that is not green yet".
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from attrs import frozen

from course.catalog import Catalog, Chapter, Lab
from course.errors import UsageError
from course.index import practice_dirs
from course.locate import beside, chapter_of, is_practice_dir, shown, suggest
from course.progress import CheckVerdict, LastTest, read_last_test
from course.redlights import RedLightState
from course.redlights import read as redlight_state

__all__ = ["CheckVerdict", "LastTest", "read_last_test", "first_open_lab", "course_status"]

PRACTICE = "practice"

NOT_STARTED = "not started"
NOT_TESTED = "not tested yet"
GREEN = "green"
RED = "red"
LAB_RUN = "lab run"


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
    """One chapter as seen from its practice dir (the one used last), if there is one."""

    chapter: Chapter
    directory: Path
    exists: bool
    last: LastTest | None
    redlights: RedLightState | None = None
    # What a suggested command must carry to reach `directory`; for a chapter not
    # started, the DIR beside the previous chapter's practice dir (course.locate.beside).
    dir_words: tuple[str, ...] = ()
    following: Chapter | None = None
    others: tuple[Path, ...] = ()  # further practice dirs of this chapter

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
        text = f"{state} ({green}/{len(labs)} labs green)" if labs else state
        if state == GREEN and self.chapter.redlights and self.redlights is not None:
            done = sum(1 for r in self.chapter.redlights if self.redlights.states.get(r.id) == "done")
            text += f", red lights {done}/{len(self.chapter.redlights)}"
        return text

    def next_step(self) -> str:
        from course.nextstep import next_step  # the one rule, shared with test and watch

        if self.state == NOT_STARTED:
            return f"`{suggest('practice', self.chapter.nn, *self.dir_words)}`"
        return next_step(self.chapter, self.last, self.redlights, self.dir_words, self.following)

    def to_json(self) -> dict[str, object]:
        return {
            "chapter": self.chapter.name,
            "directory": str(self.directory),
            "other_directories": [str(d) for d in self.others],
            "exists": self.exists,
            "state": self.state,
            "verdict": self.verdict(),
            "last_test": None if self.last is None else self.last.to_json(),
            "labs": self.lab_states(),
            "redlights": {} if self.redlights is None else dict(self.redlights.states),
            "next": self.next_step(),
        }


def default_practice_dir(root: Path, chapter: Chapter) -> Path:
    return root / PRACTICE / chapter.name


@frozen
class StatusReport:
    """The whole course from the learner's side."""

    chapters: tuple[ChapterProgress, ...]

    def count(self, *states: str) -> int:
        return sum(1 for progress in self.chapters if progress.state in states)

    def next_step(self) -> str:
        """The first chapter that is not done decides what to do next.

        A started chapter not green, or with a red-light exercise left, comes
        first; then the chapter after the last one started; then the first one
        not started (a learner who began in the middle has earlier ones left).
        When every chapter is done, the course is complete, and a course
        whose agent has a command line (chapter 07 on) offers its capstone.
        """
        started = [p for p in self.chapters if p.state != NOT_STARTED]
        for progress in started:
            if progress.state != GREEN:
                return progress.next_step()
        later = [p for p in self.chapters if p.state == NOT_STARTED]
        for progress in started:
            if progress.redlights is not None and progress.redlights.pending(progress.chapter) is not None:
                return progress.next_step()
        after = [p for p in later if not started or p.chapter.number > started[-1].chapter.number]
        if after or later:
            return (after or later)[0].next_step()
        if started:
            done = f"the course is complete: all {len(started)} chapters are green, their red lights done"
            exam = "; the final exam of your agent: `course capstone`" if started[-1].chapter.number >= 7 else ""
            return done + exam
        return "add a chapter"

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
    return chapter_of(directory, catalog)


def course_status(
    home: Path, catalog: Catalog, directories: Sequence[Path] = (), here: Path | None = None
) -> StatusReport:
    """Every chapter from the practice dir used last: named here, remembered in the index, or in `home`.

    `home` is where practice dirs go by default (practice/ of the course); `here`
    is the practice dir holding the current directory, if any. `course list` and
    `course status` both call this, so they always agree.
    """
    chosen: dict[str, list[Path]] = {name: list(dirs) for name, dirs in practice_dirs(catalog).items()}
    for chapter in catalog.chapters:
        default = home / chapter.name
        if is_practice_dir(default) and not any(_same(default, d) for d in chosen.get(chapter.name, [])):
            chosen.setdefault(chapter.name, []).append(default)
    for directory in reversed([*( [here] if here is not None else []), *directories]):
        chapter = practice_chapter(directory, catalog)
        if chapter is None:
            raise UsageError(
                f"{directory} is not a practice dir of this course (no LEARNING.md naming a chapter); "
                "make one with `course practice`."
            )
        rest = [d for d in chosen.get(chapter.name, []) if not _same(d, directory)]
        chosen[chapter.name] = [directory, *rest]
    chapters: list[ChapterProgress] = []
    for index, chapter in enumerate(catalog.chapters):
        following = catalog.chapters[index + 1] if index + 1 < len(catalog.chapters) else None
        dirs = chosen.get(chapter.name, [])
        if not dirs:
            previous = chapters[-1] if chapters and chapters[-1].exists else None
            words = tuple(beside(previous.directory, chapter, home)) if previous is not None else ()
            where = previous.directory.parent / chapter.name if words and previous is not None else home / chapter.name
            chapters.append(ChapterProgress(chapter, where, False, None, dir_words=words, following=following))
            continue
        directory = dirs[0]
        words: tuple[str, ...] = ()
        if not ((here is not None and _same(directory, here)) or (here is None and _same(directory, home / chapter.name))):
            words = (shown(directory),)
        chapters.append(ChapterProgress(
            chapter, directory, True, read_last_test(directory), redlight_state(directory, chapter),
            words, following, tuple(dirs[1:]),
        ))
    return StatusReport(chapters=tuple(chapters))


def _same(one: Path, other: Path) -> bool:
    try:
        return one.resolve() == other.resolve()
    except (OSError, RuntimeError):
        return False
