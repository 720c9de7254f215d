"""Judging a task: each check against the workspace the agent left, one result per check.

A path check reads a file of the workspace copy; it fails, saying why,
for a path that leads out of the copy through a link the agent made, a
link loop, or a file the agent made unreadable: whatever the agent did to
its workspace fails the check, never the harness. A command check runs in
the copy under a time limit and passes when it exits 0; whatever it left
running is ended with it. The verdict is only as good as the judge, so
`contradiction` checks the judge's answer before it counts.
"""

from __future__ import annotations

import os
from pathlib import Path

from attrs import frozen

from tiny_pi.eval.process import run_limited
from tiny_pi.eval.tasks import Check, Task

COMMAND_TIME_LIMIT = 30.0


@frozen
class CheckResult:
    """What one check found: passed with no detail, or failed saying why."""

    check: Check
    passed: bool
    detail: str = ""


def judge_checks(task: Task, root: Path) -> list[CheckResult]:
    """Every check of `task`, in order, against the workspace at `root`."""
    return [judge_check(check, root) for check in task.checks]


def judge_check(check: Check, root: Path, time_limit: float = COMMAND_TIME_LIMIT) -> CheckResult:
    """One check: a command's exit status, or a file's text."""
    if check.command is not None:
        finished = run_limited(["sh", "-c", check.command], root, time_limit)
        if finished.status is None:
            return CheckResult(check, False, f"timed out after {time_limit:g} s")
        if finished.status != 0:
            return CheckResult(check, False, f"exit status {finished.status}")
        return CheckResult(check, True)
    return look_for(check, root)


def look_for(check: Check, root: Path) -> CheckResult:
    """Whether the file at `check.path` holds `check.contains`; a link out of the workspace fails."""
    target = Path(os.path.realpath(root / str(check.path)))  # a link loop resolves, to a path that is no file
    if not target.is_relative_to(os.path.realpath(root)):
        return CheckResult(check, False, f"{check.path} leads outside the workspace")
    if not target.is_file():
        return CheckResult(check, False, f"{check.path} is not a file")
    try:
        found = str(check.contains) in target.read_text(encoding="utf-8", errors="replace")
    except OSError as error:  # the agent may take the permission to read it away
        return CheckResult(check, False, f"{check.path} cannot be read: {error.strerror}")
    if not found:
        return CheckResult(check, False, f"{check.path} does not contain {check.contains!r}")
    return CheckResult(check, True)


def contradiction(task: Task, results: list[CheckResult]) -> str | None:
    """Why the judge's answer cannot be trusted, or None: one result per check, each consistent."""
    if [result.check for result in results] != list(task.checks):
        return f"{len(results)} results for {len(task.checks)} checks, or not in their order"
    for number, result in enumerate(results, 1):
        if result.passed == bool(result.detail):
            return f"check {number} says passed={result.passed} with detail {result.detail!r}"
    return None
