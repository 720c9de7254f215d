"""Helpers for the author tools' tests: run `course dev NAME`, and make courses to break.

Every course a test touches is a private copy in a temporary directory,
made a git repository with one commit (`course dev carry` reads the old version
of a snapshot from HEAD). The real checkpoints/ is only ever read.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import git
import pytest

from conftest import CHECKPOINTS, FIXTURES, REPO, course
from course.catalog import Catalog, load_catalog
from course.errors import CourseError
from course.workspace import IGNORED_NAMES

CHAIN_COURSE = FIXTURES / "chain-course"


def tool(name: str, *args: str, root: Path) -> subprocess.CompletedProcess[str]:
    """`course dev NAME ARGS` pointed at the course copy `root`, in this process.

    test_dev_group.py runs the tools as commands, from outside the checkout too.
    """
    return course("dev", name, *args, env={"COURSE_ROOT": str(root)})


def git_course(checkpoints: Path, destination: Path) -> Path:
    """A course at `destination` holding a copy of `checkpoints`, committed once."""
    shutil.copytree(checkpoints, destination / "checkpoints", ignore=shutil.ignore_patterns(*IGNORED_NAMES))
    repo = git.Repo.init(destination, initial_branch="main")
    with repo.config_writer() as config:
        config.set_value("user", "name", "author")
        config.set_value("user", "email", "author@localhost")
    repo.git.add(A=True)
    repo.index.commit("the course as it stands")
    repo.close()
    return destination


def chain_course(tmp_path: Path) -> Path:
    """A committed copy of the three-chapter fixture course (01-adder, 02-multiplier, 03-calculator)."""
    return git_course(CHAIN_COURSE / "checkpoints", tmp_path / "chain-course")


def real_course(tmp_path: Path, *needed: str) -> tuple[Path, Catalog]:
    """A committed copy of the real course's checkpoints; skips while `needed` chapters are missing."""
    try:
        catalog = load_catalog(REPO)
        for chapter_id in needed:
            catalog.resolve(chapter_id)
    except CourseError as error:
        pytest.skip(f"needs real chapters {', '.join(needed)} under checkpoints/, which do not load yet: {error}")
    root = git_course(CHECKPOINTS, tmp_path / "course")
    return root, load_catalog(root)


def replace_once(path: Path, old: str, new: str) -> None:
    """Edit one exact piece of a file, failing loudly if the fixture changed under the test."""
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{path} should contain {old!r} exactly once"
    path.write_text(text.replace(old, new), encoding="utf-8")
