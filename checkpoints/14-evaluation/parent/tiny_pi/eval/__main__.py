"""python -m tiny_pi.eval TASKS --base-url URL --model M --out DIR [--json]

Runs every task of TASKS (one directory each, see tiny_pi.eval.tasks) with
the agent as a subprocess, prints a line per task and a summary, and writes
the evidence to DIR/NAME/ and the shareable report to DIR/report.json; with
--json, stdout holds only that report. Exit status: 0 when every task
passed, 1 when any did not, 2 for bad usage or a malformed task (nothing runs).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tiny_pi.eval.phases import PASS, Settings, TaskResult, run_task
from tiny_pi.eval.report import safe_report, summary_line, task_line, write_report
from tiny_pi.eval.tasks import Task, TaskError, load_tasks


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line; argparse exits with status 2 and a usage line when it is wrong."""
    parser = argparse.ArgumentParser(prog="python -m tiny_pi.eval", description="Evaluate the agent on tasks.")
    parser.add_argument("tasks", type=Path, metavar="TASKS", help="a directory with one directory per task")
    parser.add_argument("--base-url", required=True, help="e.g. http://localhost:11434/v1")
    parser.add_argument("--model", required=True, help="the model name the server knows")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="where the evidence goes")
    parser.add_argument("--json", action="store_true", help="print only the shareable report, as JSON")
    return parser.parse_args(argv)


def usage_problem(tasks: Path, out: Path) -> str | None:
    """Why DIR cannot take this run's evidence: earlier evidence is never overwritten or mixed in."""
    raise NotImplementedError("lab 14.4: check --out")


def run_all(tasks: list[Task], settings: Settings, show: bool) -> list[TaskResult]:
    """Each task in turn, its line printed as soon as it is judged."""
    raise NotImplementedError("lab 14.4: run every task")


def main(argv: list[str] | None = None) -> int:
    """Check every task first, then run them all; the exit status says whether all passed."""
    raise NotImplementedError("lab 14.4: the command")


if __name__ == "__main__":
    sys.exit(main())
