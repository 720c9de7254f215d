"""python -m tiny_pi.eval TASKS --base-url URL --model M --out DIR [--json]

Runs every task of TASKS (one directory each, see tiny_pi.eval.tasks) with
the agent as a subprocess, prints a line per task and a summary, and writes
the evidence to DIR/NAME/ and the shareable report to DIR/report.json; with
--json, stdout holds only that report. Exit status: 0 when every task
passed, 1 when any did not, 2 for bad usage or a malformed task (nothing runs),
130 or 143 when Ctrl-C or SIGTERM stopped it (one line on stderr, no report;
whatever the running task started is ended first, and its copy removed).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from types import FrameType

from tiny_pi.eval.phases import PASS, Settings, TaskResult, run_task
from tiny_pi.eval.process import adopt_orphans
from tiny_pi.eval.report import safe_report, summary_line, task_line, write_report
from tiny_pi.eval.tasks import Task, TaskError, load_tasks


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # Ctrl-C, and what a scheduler or `kill` sends


class Stopped(BaseException):
    """A stop signal arrived: like KeyboardInterrupt, no `except Exception` of a phase may take it."""

    def __init__(self, number: int) -> None:
        super().__init__(signal.Signals(number).name)
        self.number = number


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
    raise NotImplementedError("lab 14.6: check --out")


def run_all(tasks: list[Task], settings: Settings, show: bool) -> list[TaskResult]:
    """Each task in turn, its line printed as soon as it is judged."""
    raise NotImplementedError("lab 14.6: run every task")


def stop(number: int, frame: FrameType | None) -> None:
    """The handler of STOP_SIGNALS: a second signal must not cut short the ending of the first."""
    for each in STOP_SIGNALS:
        signal.signal(each, signal.SIG_IGN)
    raise Stopped(number)


def main(argv: list[str] | None = None) -> int:
    """Evaluate, as the parent of every orphan of its tasks; a stop signal is one line and 128 + its number."""
    raise NotImplementedError("lab 14.6: the command")


def evaluate(args: argparse.Namespace) -> int:
    """Check every task first, then run them all; the exit status says whether all passed."""
    raise NotImplementedError("lab 14.6: evaluate the tasks")


if __name__ == "__main__":
    sys.exit(main())
