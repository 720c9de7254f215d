"""Rendering results: a line per task and a summary for people, report.json for sharing.

The shareable report is built only from statuses, failure classes, phase
names and counts, all from fixed vocabularies or integers: no transcript
text, file contents, paths, task names or call ids can reach it. Its schema
(version 1):

    {"schema": "tiny_pi.eval/1",
     "summary": {"tasks": 2, "passed": 1, "failed": 1, "infrastructure": 0, "turns": 4, "tokens": 312},
     "tasks": [{"status": "pass", "failure": null, "phase": null,
                "checks_passed": 2, "checks_failed": 0, "turns": 2, "tokens": 156}, ...]}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from tiny_pi.eval.phases import FAIL, INFRASTRUCTURE, PASS, TaskResult
from tiny_pi.eval.tasks import REPORT_FILE

SCHEMA = "tiny_pi.eval/1"


def task_line(result: TaskResult) -> str:
    """`PASS name`, `FAIL name: the failed check`, or `INFRA name: phase: class: what broke`."""
    if result.status == PASS:
        return f"PASS {result.name}"
    if result.status == FAIL:
        return f"FAIL {result.name}: {result.detail}"
    return f"INFRA {result.name}: {result.phase}: {result.failure}: {result.detail}"


def summary_line(results: Sequence[TaskResult]) -> str:
    """The run in one line: how many passed, failed, or failed for the harness; turns and tokens."""
    counts = summary(results)
    return (
        f"passed {counts['passed']}, failed {counts['failed']}, infrastructure {counts['infrastructure']}; "
        f"turns {counts['turns']}, tokens {counts['tokens']}"
    )


def summary(results: Sequence[TaskResult]) -> dict[str, int]:
    """The counts of the whole run."""
    return {
        "tasks": len(results),
        "passed": sum(result.status == PASS for result in results),
        "failed": sum(result.status == FAIL for result in results),
        "infrastructure": sum(result.status == INFRASTRUCTURE for result in results),
        "turns": sum(result.turns for result in results),
        "tokens": sum(result.tokens for result in results),
    }


def safe_report(results: Sequence[TaskResult]) -> dict[str, Any]:
    """The shareable report: counts, statuses and failure classes, in the order the tasks ran."""
    return {"schema": SCHEMA, "summary": summary(results), "tasks": [safe_task(result) for result in results]}


def safe_task(result: TaskResult) -> dict[str, Any]:
    """One task without its name or detail: a class and a phase say what kind of thing went wrong."""
    return {
        "status": result.status,
        "failure": result.failure,
        "phase": result.phase,
        "checks_passed": sum(check.passed for check in result.checks),
        "checks_failed": sum(not check.passed for check in result.checks),
        "turns": result.turns,
        "tokens": result.tokens,
    }


def write_report(report: dict[str, Any], out: Path) -> Path:
    """Write `report` to OUT/report.json; return its path."""
    path = out / REPORT_FILE
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return path
