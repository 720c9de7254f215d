"""The learner's teaching files against the target: first how much, then (if asked) what.

Looking at the answer too early ends the thinking, so the default is only a
count per file: which files differ and by how many lines. That is enough to
predict where the difference is before asking for the code with `--show`.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from attrs import frozen

from course.catalog import Chapter

SAME = "same"
CHANGED = "changed"
MISSING = "missing"


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines()


@frozen
class FileDiff:
    """One teaching file: yours (a/) against the target's (b/)."""

    path: str
    status: str
    only_yours: int
    only_target: int
    target_lines: int
    diff: tuple[str, ...]

    def summary(self) -> str:
        if self.status == SAME:
            return f"{self.path}: same as the target"
        if self.status == MISSING:
            return f"{self.path}: not written yet (the target's has {self.target_lines} lines)"
        return (
            f"{self.path}: differs - {self.only_yours} line(s) only in yours, "
            f"{self.only_target} only in the target"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "status": self.status,
            "only_yours": self.only_yours,
            "only_target": self.only_target,
        }


def compare_file(directory: Path, chapter: Chapter, name: str, context: int = 3) -> FileDiff:
    target_lines = _lines(chapter.target / name)
    mine_path = directory / name
    exists = mine_path.is_file()
    mine = _lines(mine_path) if exists else []
    diff = tuple(
        difflib.unified_diff(
            mine,
            target_lines,
            fromfile=f"yours/{name}" if exists else "/dev/null",
            tofile=f"target/{name}",
            lineterm="",
            n=context,
        )
    )
    body = [line for line in diff if not line.startswith(("---", "+++", "@@"))]
    only_yours = sum(1 for line in body if line.startswith("-"))
    only_target = sum(1 for line in body if line.startswith("+"))
    if not exists:
        status = MISSING
    elif (mine_path.read_bytes() == (chapter.target / name).read_bytes()) or not diff:
        status = SAME
    else:
        status = CHANGED
    return FileDiff(
        path=name,
        status=status,
        only_yours=only_yours,
        only_target=only_target,
        target_lines=len(target_lines),
        diff=diff if status != SAME else (),
    )


def compare(directory: Path, chapter: Chapter) -> tuple[FileDiff, ...]:
    """Every teaching file of `chapter`, in chapter.toml's order."""
    return tuple(compare_file(directory, chapter, name) for name in chapter.teaching_files)


def line_colour(line: str) -> str | None:
    """The colour of a unified-diff line, git's conventions."""
    if line.startswith(("---", "+++")):
        return "bright_white"
    if line.startswith("@@"):
        return "cyan"
    if line.startswith("+"):
        return "green"
    if line.startswith("-"):
        return "red"
    return None
