"""Lineage: each snapshot is the previous one plus exactly what a chapter declares.

Snapshots repeat each other on purpose (a learner copies a whole project),
so a fix made in one and forgotten in the next is the classic way a
checkpoint course rots. Comparing the trees file by file catches it.
"""

from __future__ import annotations

import filecmp
import fnmatch
from pathlib import Path, PurePosixPath

from course.catalog import Catalog, Chapter
from course.workspace import IGNORED_NAMES


def is_ignored(relative: str | PurePosixPath) -> bool:
    """True for a path a test run or an editor leaves behind (caches), never part of a snapshot."""
    parts = PurePosixPath(relative).parts
    return any(fnmatch.fnmatch(part, pattern) for part in parts for pattern in IGNORED_NAMES)


def snapshot_files(root: Path) -> set[str]:
    """Relative paths of a snapshot's files, caches left out."""
    files = set()
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        if is_ignored(relative.as_posix()):
            continue
        if path.is_file() or path.is_symlink():
            files.add(relative.as_posix())
    return files


def differing_files(left: Path, right: Path) -> list[str]:
    """Files present in only one tree, or present in both with other bytes."""
    left_files = snapshot_files(left)
    right_files = snapshot_files(right)
    different = left_files ^ right_files
    for name in left_files & right_files:
        if not filecmp.cmp(left / name, right / name, shallow=False):
            different.add(name)
    return sorted(different)


def lineage_problems(catalog: Catalog, chapter: Chapter) -> list[str]:
    """What breaks the chain previous target -> parent -> target, one line per file.

    A file an earlier chapter leaves behind (its `left_behind`) is gone from
    every later snapshot: the parent that follows drops it, and no later
    snapshot may hold it again.
    """
    problems = []
    gone = catalog.left_before(chapter)
    for side in (chapter.parent, chapter.target):
        for name in sorted(gone):
            if (side / name).exists() or (side / name).is_symlink():
                owner = gone[name]
                problems.append(
                    f"{name} is in {chapter.name}/{side.name}, but {owner.name} leaves it behind "
                    f"(left_behind in its chapter.toml): only {owner.name}'s snapshots may hold it"
                )
    previous = catalog.previous(chapter)
    if previous is not None:
        allowed = set(chapter.focused_tests) | set(chapter.starter_files) | set(previous.left_behind)
        for name in differing_files(previous.target, chapter.parent):
            if name not in allowed:
                problems.append(
                    f"{name} differs between {previous.name}/target and {chapter.name}/parent, "
                    "but chapter.toml does not declare it (focused_tests or starter_files)"
                )
    allowed = set(chapter.teaching_files) | set(chapter.starter_files) | set(chapter.lesson_files)
    for name in differing_files(chapter.parent, chapter.target):
        if name not in allowed:
            problems.append(
                f"{name} differs between {chapter.name}/parent and {chapter.name}/target, "
                "but chapter.toml does not declare it (teaching_files, starter_files or lesson_files)"
            )
    return problems
