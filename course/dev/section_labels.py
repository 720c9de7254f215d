"""Section labels in a chapter's focused test files, checked against chapter.toml.

A focused test file is read next to the lesson: its sections open with a
comment line at the start of a line, `# Lab 7.4: what the section tests`. A
learner looking for lab 7.4's tests goes to that label, so a label must name
the lab whose tests follow it. The rule, per file: every test function
after a label (up to the next label) belongs to the labelled lab by
chapter.toml's `select` or `nodes`; a label names a lab of this chapter.
Tests before the first label, and files without labels, are not judged. A lab
whose tests come in two places carries its label twice.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from course.catalog import Chapter

LABEL = re.compile(r"^# Lab (?P<id>\d+\.\d+)\b")


def labels(text: str) -> list[tuple[int, str]]:
    """(line number, lab id) of each section label, in file order."""
    return [(number, match.group("id")) for number, line in enumerate(text.splitlines(), start=1)
            if (match := LABEL.match(line))]


def tests_in(text: str) -> list[tuple[int, str]]:
    """(line number, pytest name) of each test function: module level, or in a `Test` class."""
    found: list[tuple[int, str]] = []
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            found.append((node.lineno, node.name))
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            found += [(item.lineno, f"{node.name}::{item.name}") for item in node.body
                      if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test")]
    return found


def label_problems(chapter: Chapter, snapshot: Path | None = None) -> list[str]:
    """One line per label that names no lab of the chapter, or a lab its tests do not belong to."""
    root = chapter.target if snapshot is None else snapshot
    labs = {lab.id: lab for lab in chapter.labs}
    problems = []
    for name in chapter.focused_tests:
        path = root / name
        try:
            text = path.read_text(encoding="utf-8")
            tests = tests_in(text)
        except (OSError, UnicodeDecodeError, SyntaxError) as error:
            problems.append(f"{name}: cannot be read for its labels ({error})")
            continue
        found = labels(text)
        for index, (line, lab_id) in enumerate(found):
            lab = labs.get(lab_id)
            if lab is None:
                problems.append(f"{name}:{line}: label 'Lab {lab_id}' names no lab of chapter {chapter.nn}")
                continue
            end = found[index + 1][0] if index + 1 < len(found) else float("inf")
            strangers = [test for at, test in tests if line < at < end and not lab.selects(f"{name}::{test}")]
            if strangers:
                owners = sorted({_owner(chapter, f"{name}::{test}") for test in strangers})
                problems.append(f"{name}:{line}: label 'Lab {lab_id}' is followed by tests of {' and '.join(owners)}: "
                                + ", ".join(strangers))
    return problems


def _owner(chapter: Chapter, node_id: str) -> str:
    return next((f"lab {lab.id}" for lab in chapter.labs if lab.selects(node_id)), "no lab")
