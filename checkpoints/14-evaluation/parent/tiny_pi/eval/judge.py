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
    raise NotImplementedError("lab 14.2: judge every check")


def judge_check(check: Check, root: Path, time_limit: float = COMMAND_TIME_LIMIT) -> CheckResult:
    """One check: a command's exit status, or a file's text."""
    raise NotImplementedError("lab 14.2: judge one check")


def look_for(check: Check, root: Path) -> CheckResult:
    """Whether the file at `check.path` holds `check.contains`; a link out of the workspace fails."""
    raise NotImplementedError("lab 14.2: a path check")


def contradiction(task: Task, results: list[CheckResult]) -> str | None:
    """Why the judge's answer cannot be trusted, or None: one result per check, each consistent."""
    raise NotImplementedError("lab 14.2: check the judge's answer")
