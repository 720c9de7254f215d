"""The directory a learner's code is judged in: the chapter's tests and config, the learner's code.

Two owners, one rule. Everything under the learner's `tiny_pi/` is their code
and is judged exactly as written: a helper added to `__init__.py`, a changed
or broken module of an earlier chapter, a new module, a deleted file (missing
in the verdict too: the chapter's copy never comes back behind their back).
So is a teaching file the chapter puts elsewhere (chapter 00's
`predictions.toml`). The tests (everything under `tests/`, starter files there included) and the
config (`pytest.ini`, a `conftest.py`, ...) come from the chapter, so editing
a test, adding a conftest.py or adding `-p myplugin` to pytest.ini never
changes a verdict; every such file of the learner's that the verdict did not
use is named in `Replaced` records. Anything else in the learner's dir
(LEARNING.md, notes, scripts, a virtual environment) is not part of the
verdict, and Python's caches (`__pycache__`) are never copied: they are
rebuilt from the sources. A folder the learner linked into `tiny_pi/` is
linked, not copied, so it is read where it is. (Code inside the learner's
own modules can still forge a result while it runs; no check in the same
process can stop that, and the README says so.)
"""

from __future__ import annotations

import filecmp
import fnmatch
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import attrs
from attrs import frozen

from course.catalog import Chapter
from course.workspace import IGNORED_NAMES, copy_snapshot

PACKAGE = "tiny_pi"
TESTS = "tests"
CONFIG_NAMES = ("pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg", "conftest.py")

# How a file of the learner's dir was replaced for the verdict.
CHANGED = "changed"  # theirs differs from the chapter's: the verdict used the chapter's
DELETED = "deleted"  # missing from their dir: the verdict used the chapter's
ADDED = "added"  # the chapter has no such file: the verdict left it out
UNREADABLE = "unreadable"  # under tiny_pi/, but no regular file (a pipe, a socket) or unreadable: left out
HOWS = (CHANGED, DELETED, ADDED, UNREADABLE)


@frozen
class Replaced:
    """One file of the learner's dir that the verdict did not use as it is there."""

    path: str  # relative to the practice dir, with /
    how: str = attrs.field(validator=attrs.validators.in_(HOWS))

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "how": self.how}


@frozen
class JudgedCopy:
    """The throw-away directory a verdict runs in, and what of the learner's was replaced there."""

    directory: Path
    replaced: tuple[Replaced, ...]


def _ignored(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in IGNORED_NAMES)


def _files_below(base: Path, folder: str) -> set[str]:
    """Every file and link under `base/folder`, caches left out; links to folders are not followed."""
    found: set[str] = set()
    for top, folders, names in os.walk(base / folder):
        folders[:] = [name for name in folders if not _ignored(name)]
        relative = Path(top).relative_to(base)
        found.update((relative / name).as_posix() for name in names if not _ignored(name))
        found.update((relative / name).as_posix() for name in folders if Path(top, name).is_symlink())
    return found


def chapter_side_files(base: Path) -> set[str]:
    """The files of `base` that the verdict takes from the chapter: its tests and its test config."""
    config = {name for name in CONFIG_NAMES if (base / name).is_file() or (base / name).is_symlink()}
    return _files_below(base, TESTS) | config


def _same(ours: Path, theirs: Path) -> bool:
    try:
        return theirs.is_file() and filecmp.cmp(ours, theirs, shallow=False)
    except OSError:
        return False


def replaced_tests_and_config(chapter: Chapter, learner: Path) -> list[Replaced]:
    """The learner's tests and config that differ from the chapter's own, missing and added ones included."""
    start = chapter.practice_start
    ours_all, theirs_all = chapter_side_files(start), chapter_side_files(learner)
    replaced = []
    for name in sorted(ours_all | theirs_all):
        ours, theirs = start / name, learner / name
        if name not in ours_all:
            replaced.append(Replaced(name, ADDED))
        elif name not in theirs_all:
            replaced.append(Replaced(name, DELETED))
        elif not _same(ours, theirs):
            replaced.append(Replaced(name, CHANGED))
    return replaced


def differing_files(chapter: Chapter, learner: Path) -> list[str]:
    """The names of the learner's tests and config that the verdict does not use as they are."""
    return [item.path for item in replaced_tests_and_config(chapter, learner)]


def _copy_package(source: Path, destination: Path, relative: str) -> list[Replaced]:
    """Copy the learner's `source` folder as Python reads it; return the files that could not be read.

    Files are copied (a link to a file: its content). A link to a folder
    becomes a link to the same folder, read in place: copying it could mean
    copying a whole disk, or a loop. A dangling link is missing, as it is for
    Python; `__pycache__` is left out.
    """
    try:
        entries = sorted(os.scandir(source), key=lambda entry: entry.name)
    except OSError:
        return [Replaced(relative, UNREADABLE)]
    destination.mkdir(parents=True, exist_ok=True)
    unreadable: list[Replaced] = []
    for entry in entries:
        name, path = entry.name, f"{relative}/{entry.name}"
        if name == "__pycache__":
            continue
        try:
            if entry.is_symlink() and entry.is_dir():
                os.symlink(Path(entry.path).resolve(strict=True), destination / name, target_is_directory=True)
            elif entry.is_dir():
                unreadable += _copy_package(Path(entry.path), destination / name, path)
            elif entry.is_file():
                shutil.copyfile(entry.path, destination / name)
            elif not entry.is_symlink():
                unreadable.append(Replaced(path, UNREADABLE))
        except (OSError, RuntimeError):  # RuntimeError: a loop of links
            unreadable.append(Replaced(path, UNREADABLE))
    return unreadable


def _copy_learner_package(learner: Path, copy: Path) -> list[Replaced]:
    source, destination = learner / PACKAGE, copy / PACKAGE
    try:
        if source.is_symlink() and source.is_dir():
            os.symlink(source.resolve(strict=True), destination, target_is_directory=True)
        elif source.is_dir():
            return _copy_package(source, destination, PACKAGE)
        elif source.is_file():
            shutil.copyfile(source, destination)
        elif source.exists():  # a pipe or a socket; a dangling link is simply missing
            return [Replaced(PACKAGE, UNREADABLE)]
    except (OSError, RuntimeError):
        return [Replaced(PACKAGE, UNREADABLE)]
    return []


def _copy_chapter_side(start: Path, copy: Path) -> None:
    """Everything of the chapter's snapshot but its `tiny_pi/`: the tests and the test config."""
    copy.mkdir()
    for entry in sorted(start.iterdir()):
        if entry.name == PACKAGE or _ignored(entry.name):
            continue
        if entry.is_dir() and not entry.is_symlink():
            copy_snapshot(entry, copy / entry.name)
        else:
            shutil.copy2(entry, copy / entry.name, follow_symlinks=False)


def _learner_files_outside_package(chapter: Chapter) -> list[str]:
    """Teaching files the learner writes outside `tiny_pi/` and `tests/`, like chapter 00's predictions.toml."""
    inside = (f"{PACKAGE}/", f"{TESTS}/")
    return [name for name in chapter.teaching_files if not name.startswith(inside)]


def _copy_learner_teaching_files(chapter: Chapter, learner: Path, copy: Path) -> list[Replaced]:
    """The learner's own versions of those files, as written: a missing one is missing in the verdict too."""
    unreadable: list[Replaced] = []
    for name in _learner_files_outside_package(chapter):
        source, destination = learner / name, copy / name
        destination.unlink(missing_ok=True)
        try:
            if source.is_file():
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, destination)
            elif source.exists():
                unreadable.append(Replaced(name, UNREADABLE))
        except OSError:
            unreadable.append(Replaced(name, UNREADABLE))
    return unreadable


@contextmanager
def verdict_copy(chapter: Chapter, learner: Path) -> Iterator[JudgedCopy]:
    """A temporary directory: the chapter's tests and config, the learner's `tiny_pi/` as written."""
    with tempfile.TemporaryDirectory(prefix="course-verdict-") as scratch:
        copy = Path(scratch) / "snapshot"
        _copy_chapter_side(chapter.practice_start, copy)
        unreadable = _copy_learner_package(learner, copy) + _copy_learner_teaching_files(chapter, learner, copy)
        yield JudgedCopy(copy, (*replaced_tests_and_config(chapter, learner), *unreadable))
