"""The directory a learner's code is judged in: the chapter's tests and config, the learner's code.

A verdict must not change when a learner edits a test, adds a conftest.py
whose hook marks every test passed, or adds `-p myplugin` to pytest.ini. So
`course test` never runs in the learner's dir: it runs in a throw-away copy
of the chapter's starting snapshot into which it copies, from the learner's
dir, only the chapter's teaching and starter files and the files the learner
added under `tiny_pi/`. What the learner changed elsewhere is reported, not
used. (Code inside the learner's own module can still patch pytest while it
runs; no check in the same process can stop that, and the README says so.)
"""

from __future__ import annotations

import filecmp
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from course.catalog import Chapter
from course.workspace import copy_snapshot

PACKAGE = "tiny_pi"
CONFIG_NAMES = ("pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg", "conftest.py")


def learner_files(chapter: Chapter, learner: Path, start: Path) -> list[str]:
    """Relative paths the verdict takes from the learner: teaching, starter, and new package files."""
    chosen = dict.fromkeys((*chapter.teaching_files, *chapter.starter_files))
    package = learner / PACKAGE
    if package.is_dir() and not package.is_symlink():
        for path in sorted(package.rglob("*.py")):
            relative = path.relative_to(learner).as_posix()
            if "__pycache__" not in relative and not (start / relative).exists():
                chosen.setdefault(relative)
    return list(chosen)


def differing_files(chapter: Chapter, learner: Path) -> list[str]:
    """The learner's tests and config that differ from the chapter's own (missing ones included)."""
    start = chapter.practice_start
    names: set[str] = set()
    for base in (start, learner):
        tests = base / "tests"
        if tests.is_dir():
            names.update(p.relative_to(base).as_posix() for p in tests.rglob("*.py") if "__pycache__" not in p.parts)
        names.update(name for name in CONFIG_NAMES if (base / name).is_file())
    differing = []
    for name in sorted(names):
        ours, theirs = start / name, learner / name
        if not (ours.is_file() and theirs.is_file() and filecmp.cmp(ours, theirs, shallow=False)):
            differing.append(name)
    return differing


@contextmanager
def verdict_copy(chapter: Chapter, learner: Path) -> Iterator[Path]:
    """A temporary snapshot: the chapter's start, with the learner's code laid over it."""
    start = chapter.practice_start
    with tempfile.TemporaryDirectory(prefix="course-verdict-") as scratch:
        copy = Path(scratch) / "snapshot"
        copy_snapshot(start, copy)
        for relative in learner_files(chapter, learner, start):
            source, destination = learner / relative, copy / relative
            if source.is_file():
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, destination)
            elif destination.exists():
                destination.unlink()  # the learner removed it: so does the verdict
        yield copy
