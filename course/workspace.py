"""Copies of snapshots: throw-away ones for checks, and the learner's practice dir.

Two promises live here. `checkpoints/` is only ever read: every check runs
in its own temporary copy. A learner's practice dir is sacred: it is never
overwritten, and a failure or Ctrl-C while making one leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import git
import trio

from course.errors import ChapterError, UsageError

# Files a test run or an editor may leave in a snapshot; never part of one.
IGNORED_NAMES = ("__pycache__", ".pytest_cache", ".hypothesis", "*.pyc", ".course", ".git")

PRACTICE_GITIGNORE = """\
__pycache__/
*.pyc
.pytest_cache/
.hypothesis/
.course/
"""


def copy_snapshot(source: Path, destination: Path) -> None:
    """Copy a snapshot's files, leaving caches and repositories out."""
    shutil.copytree(
        source,
        destination,
        ignore=shutil.ignore_patterns(*IGNORED_NAMES),
        symlinks=True,
    )


@contextlib.contextmanager
def scratch_copy(source: Path, label: str) -> Iterator[Path]:
    """A temporary copy of `source`, removed afterwards whatever happens."""
    with tempfile.TemporaryDirectory(prefix=f"course-{label}-") as scratch:
        copy = Path(scratch) / "snapshot"
        copy_snapshot(source, copy)
        yield copy


async def apply_patch(copy: Path, patch: Path) -> None:
    """Apply a red-light patch to a copy of target, or say why it does not apply."""
    result = await trio.run_process(
        ["git", "apply", "--whitespace=nowarn", str(patch.resolve())],
        cwd=str(copy),
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env=_git_env(),
    )
    if result.returncode != 0:
        problem = result.stderr.decode("utf-8", "replace").strip()
        raise ChapterError(f"{patch}: the red-light patch does not apply to target: {problem}")


def _git_env() -> dict[str, str]:
    """git must not find an enclosing repository (a temp dir under a checkout)."""
    env = dict(os.environ)
    env["GIT_CEILING_DIRECTORIES"] = tempfile.gettempdir()
    return env


# Practice dirs ---------------------------------------------------------------


def check_practice_target(directory: Path, course_root: Path) -> Path:
    """Refuse any DIR where making a practice dir could destroy or confuse something."""
    resolved = directory.expanduser().resolve()
    root = course_root.resolve()
    checkpoints = root / "checkpoints"
    if resolved == checkpoints or checkpoints in resolved.parents:
        raise UsageError(
            f"{directory} is inside checkpoints/, which holds the course's snapshots and is never "
            "written. Choose a directory elsewhere, e.g. practice/NN-slug."
        )
    if resolved == root or resolved in root.parents:
        raise UsageError(f"{directory} is the course repository or one of its parents; choose a new directory.")
    if resolved == Path.home().resolve() or resolved == Path(resolved.anchor):
        raise UsageError(f"{directory} is your home or the file system root; choose a new directory.")
    if directory.is_symlink() or resolved.is_symlink():
        raise UsageError(f"{directory} is a symbolic link; give a real directory path.")
    if resolved.exists() and not resolved.is_dir():
        raise UsageError(f"{directory} exists and is not a directory; nothing was changed.")
    if resolved.is_dir() and any(resolved.iterdir()):
        raise UsageError(
            f"{directory} already exists and is not empty; it was left exactly as it was. "
            "Pick a new directory, or keep working in this one with `course test`."
        )
    return resolved


def make_practice_dir(source: Path, directory: Path, learning_md: str, message: str) -> None:
    """Create `directory` as a git repo holding `source` plus LEARNING.md, all or nothing.

    Everything is built in a hidden sibling and renamed into place as the last
    step, so an error or Ctrl-C never leaves a half-made practice dir.
    """
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.course-", dir=directory.parent))
    try:
        build = staging / "dir"
        copy_snapshot(source, build)
        (build / "LEARNING.md").write_text(learning_md, encoding="utf-8")
        (build / ".gitignore").write_text(PRACTICE_GITIGNORE, encoding="utf-8")
        _commit_start(build, message)
        if directory.is_dir():
            directory.rmdir()  # it was checked to be empty
        os.rename(build, directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _commit_start(build: Path, message: str) -> None:
    repo = git.Repo.init(build, initial_branch="main")
    with repo.config_writer() as config:
        config.set_value("user", "name", "course")
        config.set_value("user", "email", "course@localhost")
    repo.git.add(A=True)
    repo.index.commit(message)
    repo.close()


def practice_is_usable(directory: Path) -> None:
    """A practice dir `course test` can run in: it exists and has a snapshot's config."""
    if not directory.exists():
        raise UsageError(
            f"{directory} does not exist. Create it first with `course practice`."
        )
    if not directory.is_dir():
        raise UsageError(f"{directory} is not a directory.")
    if not (directory / "pytest.ini").is_file():
        raise UsageError(
            f"{directory} has no pytest.ini: it does not look like a practice dir made by `course practice`."
        )
