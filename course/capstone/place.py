"""Which directory the capstone examines, and as which chapter's agent.

DIR, when given, is any directory with a `tiny_pi/` package: a practice
dir (its LEARNING.md names its chapter) or any other copy of the agent
(examined as the course's last chapter). Without DIR: the practice dir the
current directory is in, as `course test` finds it; else the learner's
latest practice dir, the one of the highest chapter from 07 on, looked for
where `course status` looks (practice/NN-slug, else the last one used,
from the index of practice dirs).
"""

from __future__ import annotations

from pathlib import Path

from attrs import frozen

from course.capstone.frozen import ENTRY
from course.catalog import Catalog, Chapter
from course.errors import UsageError
from course.locate import DefaultDir, chapter_of, enclosing_practice_dir, is_practice_dir, shown, suggest

FIRST_CHAPTER = 7  # the first chapter with `python -m tiny_pi.agent`


@frozen
class Examined:
    """The directory examined, how to show it, and the chapter its agent is judged as."""

    directory: Path
    label: str
    chapter: Chapter


def examined(catalog: Catalog, typed: str | None, default_dir: DefaultDir, required: Chapter | None = None) -> Examined:
    """The capstone's DIR and chapter, or a one-line refusal (exit 2). `required`: the chapter a grade asks
    for; an earlier practice dir would be examined on fewer families, and pass on them alone."""
    if typed is not None:
        directory = Path(typed).expanduser()
        if not directory.exists():
            raise UsageError(f"{typed} does not exist; name a practice dir, or leave DIR out for your latest")
        if not directory.is_dir():
            raise UsageError(f"{typed} is not a directory; name a practice dir, or leave DIR out for your latest")
        label = typed
    else:
        directory = enclosing_practice_dir(Path.cwd()) or latest(catalog, default_dir)
        label = shown(directory)
    chapter = chapter_of(directory, catalog) if is_practice_dir(directory) else catalog.chapters[-1]
    if chapter is None:
        raise UsageError(f"{label}'s LEARNING.md names a chapter this course does not have. {catalog.choices()}")
    if chapter.number < FIRST_CHAPTER:
        raise UsageError(f"{label} is a chapter {chapter.nn} practice dir; the capstone examines an agent of "
                         f"chapter 07 or later (`{suggest('practice', '07')}`)")
    if required is not None and chapter.number < required.number:
        raise UsageError(f"{label} is a chapter {chapter.nn} practice dir; --chapter {required.nn} grades an agent of "
                         f"chapter {required.nn} or later")
    if not (directory / ENTRY).is_file():
        raise UsageError(f"{label} has no {ENTRY.as_posix()}: the capstone runs `python -m tiny_pi.agent` "
                         "from a practice dir's tiny_pi/ package")
    return Examined(directory, label, chapter)


def latest(catalog: Catalog, default_dir: DefaultDir) -> Path:
    """The practice dir of the highest chapter that has one (from chapter 07 on)."""
    for chapter in reversed(catalog.chapters):
        if chapter.number < FIRST_CHAPTER:
            break
        candidate = default_dir(chapter)
        if is_practice_dir(candidate):
            return candidate
    raise UsageError("no practice dir of chapter 07 or later to examine: name DIR, "
                     f"or make one (`{suggest('practice', '07')}`)")
