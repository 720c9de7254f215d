"""A failure a learner can read: the test, the assertion, their own line, a pointer.

pytest's full report is written for people who know pytest's internals; a
learner needs four lines. The digest is built from the JUnit report's
traceback text, so it does not depend on pytest's console layout.
"""

from __future__ import annotations

import re

from course.catalog import Chapter
from course.runner import CRASHED, FAILED, TIMEOUT, RunResult, TestCase

_LOCATION = re.compile(r"^(?P<file>[^\s:][^:]*\.py):(?P<line>\d+):")
_MISSING_MODULE = re.compile(r"No module named '(?P<module>[\w.]+)'")
_MISSING_NAME = re.compile(r"cannot import name '(?P<name>\w+)' from '(?P<module>[\w.]+)'")


def first_failure(run: RunResult) -> TestCase | None:
    for case in run.tests:
        if case.outcome in (FAILED, "error"):
            return case
    return None


def digest(run: RunResult, chapter: Chapter, max_lines: int = 12) -> list[str]:
    """A few lines that say what failed first, where in the learner's code, and what to do."""
    if run.outcome == TIMEOUT:
        return [run.summary()]
    case = first_failure(run)
    if case is None and run.outcome == CRASHED:
        return [run.summary()]
    if case is None:
        return [line for line in run.output.strip().splitlines()[-5:]]
    if case.name:
        lines = [f"first failure: {case.file}::{case.name.replace('.', '::')}"]
    else:
        lines = [f"could not import the tests in {case.file}"]
    lines += _learner_frames(case.details)
    lines += _error_lines(case.details, case.message)[: max_lines - len(lines)]
    hint = import_hint(case.details or case.message, chapter)
    if hint:
        lines.append(hint)
    return [_clip(line) for line in lines]


LINE_LIMIT = 240


def _clip(line: str) -> str:
    """A digest is read, not scrolled: a 100 kB assertion message shows its start and its size."""
    if len(line) <= LINE_LIMIT:
        return line
    return f"{line[:LINE_LIMIT]}... [{len(line) - LINE_LIMIT} more characters]"


def _learner_frames(details: str) -> list[str]:
    """The last traceback line inside the learner's own package."""
    frames = [line for line in details.splitlines() if _LOCATION.match(line) and "tiny_pi/" in line]
    return [f"in your code: {frames[-1].strip()}"] if frames else []


def _error_lines(details: str, message: str) -> list[str]:
    errors = [line.rstrip() for line in details.splitlines() if line.startswith("E ")]
    if errors:
        return errors
    return [message] if message else []


def import_hint(text: str, chapter: Chapter) -> str | None:
    """When an import fails, name the teaching file where the missing piece belongs."""
    match = _MISSING_NAME.search(text) or _MISSING_MODULE.search(text)
    if match is None:
        return None
    module = match.group("module")
    path = module.replace(".", "/") + ".py"
    package = module.replace(".", "/") + "/__init__.py"
    owner = next((f for f in chapter.teaching_files if f in (path, package)), None)
    if owner is None:
        return None
    if "name" in match.groupdict() and match.groupdict().get("name"):
        return f"hint: `{match.group('name')}` belongs in {owner}, a teaching file of this chapter"
    return f"hint: create {owner}, a teaching file of this chapter"
