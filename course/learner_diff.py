"""The learner's teaching files against the target: first how much, then (if asked) what.

Looking at the answer too early ends the thinking, so the default is only a
count per file: which files differ and by how many lines. That is enough to
predict where the difference is before asking for the code with `--show`.
"""

from __future__ import annotations

import ast
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
    same_code: bool = False  # differs only in docstrings, comments, blank lines or layout

    def summary(self) -> str:
        if self.status == SAME:
            return f"{self.path}: same as the target"
        if self.status == MISSING:
            return f"{self.path}: not written yet (the target's has {self.target_lines} lines)"
        counts = f"{self.only_yours} line(s) only in yours, {self.only_target} only in the target"
        if self.same_code:
            return f"{self.path}: the same code as the target; {counts}, in docstrings, comments or layout only"
        return f"{self.path}: differs in code - {counts}"

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "status": self.status,
            "only_yours": self.only_yours,
            "only_target": self.only_target,
            "same_code": self.same_code,
        }


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) or not body:
            continue
        first = body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
    return tree


def same_code(mine: str, target: str) -> bool:
    """Whether two sources are one program: equal once docstrings, comments and layout are set aside."""
    try:
        ours, theirs = ast.parse(mine), ast.parse(target)
    except (SyntaxError, ValueError):
        return False
    return ast.dump(_without_docstrings(ours)) == ast.dump(_without_docstrings(theirs))


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
        same_code=status == CHANGED and name.endswith(".py")
        and same_code("\n".join(mine), "\n".join(target_lines)),
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
