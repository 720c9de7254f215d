"""Lesson code blocks, checked against the target so text and code cannot drift apart.

A fenced `python` block is one of three things (see checkpoints/README.md):
an excerpt (`# file: path` on its first line) that must appear verbatim in
the target; a sketch (`# not-run: reason`) that must at least compile; or a
runnable example that runs inside a copy of the target, whose standard
output must equal a following ```text block that starts with `# output`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from attrs import frozen

from course.catalog import Chapter
from course.runspec import run_environment
from course.workspace import scratch_copy

EXCERPT = "# file:"
NOT_RUN = "# not-run:"
OUTPUT = "# output"


@frozen
class Block:
    """One fenced code block of a lesson."""

    language: str
    line: int
    code: str
    expected_output: str | None = None

    @property
    def first_line(self) -> str:
        return self.code.split("\n", 1)[0].strip()

    @property
    def kind(self) -> str:
        if self.first_line.startswith(EXCERPT):
            return "excerpt"
        if self.first_line.startswith(NOT_RUN):
            return "not-run"
        return "runnable"


def blocks(text: str) -> list[Block]:
    """The fenced blocks of a markdown text, with each python block's expected output."""
    raw: list[tuple[str, int, str]] = []
    lines = text.split("\n")
    index = 0
    while index < len(lines):
        stripped = lines[index].strip()
        if stripped.startswith("```") and len(stripped) > 3:
            fence_indent = len(lines[index]) - len(lines[index].lstrip())
            language = stripped[3:].split()[0] if stripped[3:].split() else ""
            start = index + 1
            index += 1
            body = []
            while index < len(lines) and lines[index].strip() != "```":
                body.append(lines[index][fence_indent:])
                index += 1
            raw.append((language, start, "\n".join(body) + "\n"))
        index += 1
    result = []
    for position, (language, start, code) in enumerate(raw):
        if language != "python":
            continue
        expected = None
        if position + 1 < len(raw):
            next_language, _, next_code = raw[position + 1]
            if next_language == "text" and next_code.startswith(OUTPUT):
                expected = next_code.split("\n", 1)[1] if "\n" in next_code else ""
        result.append(Block(language, start, code, expected))
    return result


def check_excerpt(block: Block, target: Path) -> str | None:
    """None when the excerpt appears verbatim in its file, else what is wrong."""
    name = block.first_line[len(EXCERPT) :].strip()
    path = target / name
    if not path.is_file():
        return f"line {block.line}: excerpt of {name}, which is not in the target"
    body = block.code.split("\n", 1)[1].rstrip("\n")
    if body and body not in path.read_text(encoding="utf-8"):
        return f"line {block.line}: this excerpt no longer matches {name} in the target"
    return None


def check_compiles(block: Block) -> str | None:
    try:
        compile(block.code, f"<lesson line {block.line}>", "exec")
    except SyntaxError as error:
        return f"line {block.line}: does not compile: {error}"
    return None


# Runnable examples all run in one fresh interpreter, each in a fresh namespace,
# so thirty examples cost one start-up instead of thirty.
_RUN_EXAMPLES = r"""
import contextlib, io, json, sys, traceback
sys.path.insert(0, ".")
results = []
for code in json.load(sys.stdin):
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "<example>", "exec"), {"__name__": "__main__"})
        results.append({"ok": True, "stdout": out.getvalue()})
    except BaseException:
        results.append({"ok": False, "stdout": out.getvalue(), "error": traceback.format_exc(limit=4)})
sys.__stdout__.write(json.dumps(results))
"""


def check_runnable(examples: list[Block], target: Path, time_limit: float = 120) -> list[str]:
    """Run every example against a copy of `target`; describe each that fails."""
    if not examples:
        return []
    with scratch_copy(target, "lesson") as copy:
        process = subprocess.run(
            [sys.executable, "-c", _RUN_EXAMPLES],
            input=json.dumps([block.code for block in examples]),
            cwd=copy,
            env=run_environment(),
            capture_output=True,
            text=True,
            timeout=time_limit,
        )
    try:
        results = json.loads(process.stdout)
    except ValueError:
        return [f"the examples did not run: {process.stderr[-2000:]}"]
    problems = []
    for block, result in zip(examples, results):
        if not result["ok"]:
            problems.append(f"line {block.line}: the example raised:\n{result['error']}")
        elif block.expected_output is not None and result["stdout"] != block.expected_output:
            problems.append(
                f"line {block.line}: the example printed {result['stdout']!r}, "
                f"the lesson shows {block.expected_output!r}"
            )
    return problems


def lesson_problems(chapter: Chapter) -> list[str]:
    """Every way the lesson's code disagrees with the chapter's target."""
    found = blocks(chapter.lesson.read_text(encoding="utf-8"))
    problems = []
    for block in found:
        if block.kind == "excerpt":
            problem = check_excerpt(block, chapter.target)
        else:
            problem = check_compiles(block)
        if problem:
            problems.append(problem)
    runnable = [block for block in found if block.kind == "runnable"]
    problems += check_runnable(runnable, chapter.target)
    return [f"{chapter.lesson}: {problem}" for problem in problems]
