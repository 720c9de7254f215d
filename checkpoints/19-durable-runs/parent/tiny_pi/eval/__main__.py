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
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        return f"--out {out}: exists and is not an empty directory"
    if out.resolve().is_relative_to(tasks.resolve()):
        return f"--out {out}: inside TASKS, whose files are never changed"
    return None


def run_all(tasks: list[Task], settings: Settings, show: bool) -> list[TaskResult]:
    """Each task in turn, its line printed as soon as it is judged."""
    results = []
    for task in tasks:
        results.append(run_task(task, settings))
        if show:
            print(task_line(results[-1]), flush=True)
    return results


def stop(number: int, frame: FrameType | None) -> None:
    """The handler of STOP_SIGNALS: a second signal must not cut short the ending of the first."""
    for each in STOP_SIGNALS:
        signal.signal(each, signal.SIG_IGN)
    raise Stopped(number)


def main(argv: list[str] | None = None) -> int:
    """Evaluate, as the parent of every orphan of its tasks; a stop signal is one line and 128 + its number."""
    args = parse_args(argv)
    adopt_orphans()
    previous = {number: signal.signal(number, stop) for number in STOP_SIGNALS}
    try:
        return evaluate(args)
    except Stopped as stopped:
        print(f"stopped by {stopped}: no report written", file=sys.stderr)
        return 128 + stopped.number
    finally:
        for number, handler in previous.items():
            if handler is not None:  # None: not set from Python, cannot be put back
                signal.signal(number, handler)


def evaluate(args: argparse.Namespace) -> int:
    """Check every task first, then run them all; the exit status says whether all passed."""
    try:
        tasks = load_tasks(args.tasks)
    except TaskError as error:
        print(error, file=sys.stderr)
        return 2
    problem = usage_problem(args.tasks, args.out)
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    results = run_all(tasks, Settings(args.base_url, args.model, args.out.resolve()), not args.json)
    report = safe_report(results)
    write_report(report, args.out)
    print(json.dumps(report, indent=2) if args.json else summary_line(results))
    return 0 if all(result.status == PASS for result in results) else 1


if __name__ == "__main__":
    sys.exit(main())
