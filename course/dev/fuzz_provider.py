"""Fuzz a chapter's provider with hypothesis: 10,000 hostile HTTP exchanges by default.

    course dev fuzz                      # chapter 05's target, 10,000 examples
    course dev fuzz 05 --examples 2000 --workers 2 --seed 7
    course dev fuzz --snapshot DIR       # any snapshot with tiny_pi/providers

The snapshot is copied to a temporary directory (checkpoints/ is only read)
and `course/dev/fuzz_provider_worker.py` runs there, in fresh interpreters with
cwd = the copy, so the `tiny_pi` under test is the only one any of them can
import. The examples are split over worker processes (one per core by
default), each with its own seed; every worker checks every example against
the provider contract (see the worker's docstring) and reports a JSON
summary. The run holds when every worker held and together they ran the
examples asked for.

Exit status: 0 held, 1 a property broke (the worker's report says which,
with the key masked), 2 usage error.

Why a tool and not only a test: 10,000 examples take one to three minutes
on two cores, too long for the default test suite, which runs a smaller
count of the same program (tests/test_hostile_provider.py).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click
from attrs import frozen

from course.catalog import find_root, load_catalog
from course.errors import CourseError, UsageError
from course.run_env import run_environment
from course.workspace import copy_snapshot

WORKER = Path(__file__).with_name("fuzz_provider_worker.py")
DEFAULT_EXAMPLES = 10_000


@frozen
class WorkerReport:
    """One worker's verdict: its JSON summary, and what it printed when a property broke."""

    seed: int
    asked: int
    summary: dict[str, object]
    exit_code: int
    problem: str

    @property
    def held(self) -> bool:
        return self.exit_code == 0 and bool(self.summary.get("held"))


@frozen
class FuzzReport:
    """A whole run: the workers' verdicts added up."""

    snapshot: str
    asked: int
    seconds: float
    workers: tuple[WorkerReport, ...]

    @property
    def examples(self) -> int:
        return sum(int(w.summary.get("examples", 0)) for w in self.workers)  # type: ignore[call-overload]

    @property
    def held(self) -> bool:
        return all(w.held for w in self.workers) and self.examples >= self.asked

    def totals(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for worker in self.workers:
            for key, value in worker.summary.items():
                if isinstance(value, int) and not isinstance(value, bool) and key not in ("seed",):
                    totals[key] = totals.get(key, 0) + value
        return totals

    def to_json(self) -> dict[str, object]:
        return {
            "snapshot": self.snapshot,
            "held": self.held,
            "asked": self.asked,
            "examples": self.examples,
            "seconds": round(self.seconds, 1),
            "totals": self.totals(),
            "workers": [
                {"seed": w.seed, "asked": w.asked, "held": w.held, "summary": w.summary, "problem": w.problem}
                for w in self.workers
            ],
        }


def fuzz(
    snapshot: Path,
    examples: int = DEFAULT_EXAMPLES,
    workers: int | None = None,
    seed: int = 0,
    timeout: float = 3600,
    shrink: bool = True,
) -> FuzzReport:
    """Run `examples` fuzz examples against a copy of `snapshot`, split over `workers` processes."""
    if not (snapshot / "tiny_pi" / "providers" / "openai_compatible.py").is_file():
        raise UsageError(f"{snapshot} has no tiny_pi/providers/openai_compatible.py: nothing to fuzz")
    count = max(1, min(workers or os.cpu_count() or 1, examples))
    shares = [examples // count + (1 if i < examples % count else 0) for i in range(count)]
    key = "sk-fuzz-" + "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(32))
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="course-fuzz-") as scratch:
        copy = Path(scratch) / "snapshot"
        copy_snapshot(snapshot, copy)
        shutil.copyfile(WORKER, copy / WORKER.name)
        env = {**run_environment(), "FUZZ_API_KEY": key}
        processes = []
        for index, share in enumerate(shares):
            command = [sys.executable, "-P", "-W", "ignore", WORKER.name,
                       "--examples", str(share), "--seed", str(seed + index)]
            if not shrink:
                command.append("--no-shrink")
            processes.append(subprocess.Popen(
                command, cwd=copy, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                start_new_session=True,
            ))
        reports = []
        for index, (process, share) in enumerate(zip(processes, shares)):
            try:
                stdout, stderr = process.communicate(timeout=max(1.0, timeout - (time.monotonic() - started)))
            except subprocess.TimeoutExpired:
                for other in processes:
                    other.kill()
                raise CourseError(f"the fuzz workers did not finish in {timeout:g} s: the provider hangs?") from None
            reports.append(_report(seed + index, share, process.returncode, stdout, stderr, key))
    return FuzzReport(str(snapshot), examples, time.monotonic() - started, tuple(reports))


def _report(seed: int, asked: int, code: int, stdout: str, stderr: str, key: str) -> WorkerReport:
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    try:
        summary = json.loads(lines[-1]) if lines else {}
    except ValueError:
        summary = {}
    problem = "\n".join(line for line in stderr.splitlines() if line.startswith("FALSIFIED"))
    if not problem and code != 0:
        problem = stderr.strip()[-2000:]
    if summary.get("held") and key[8:20] in stdout + stderr:
        code, problem = 1, "the API key appeared in a worker's output although every example held"
    return WorkerReport(seed=seed, asked=asked, summary=summary, exit_code=code,
                        problem=problem.replace(key, "<API KEY>"))


@click.command()
@click.argument("chapter_id", default="05")
@click.option("--snapshot", type=click.Path(file_okay=False, path_type=Path), help="Fuzz this snapshot instead of the chapter's target.")
@click.option("--examples", default=DEFAULT_EXAMPLES, show_default=True, help="Examples in all, over every worker.")
@click.option("--workers", type=int, help="Worker processes (default: one per core).")
@click.option("--seed", default=0, show_default=True, help="Seed of the first worker; worker i uses seed + i.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
def main(chapter_id: str, snapshot: Path | None, examples: int, workers: int | None, seed: int,
         as_json: bool) -> None:
    """Fuzz a provider: every example must end in exactly one terminal event, raise nothing,
    never hang, and never show the API key."""
    try:
        if snapshot is None:
            snapshot = load_catalog(find_root()).resolve(chapter_id).target
        report = fuzz(snapshot, examples, workers, seed)
    except CourseError as error:
        click.echo(f"fuzz_provider: {error}", err=True)
        sys.exit(error.exit_code)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        totals = report.totals()
        kinds = ", ".join(f"{value} {key}" for key, value in sorted(totals.items())
                          if key not in ("examples", "events"))
        verdict = "held" if report.held else "did NOT hold"
        click.echo(f"{report.examples} examples ({totals.get('events', 0)} events) against {report.snapshot}, "
                   f"{len(report.workers)} workers, {report.seconds:.0f} s: {verdict}")
        click.echo(f"  terminal events: {kinds}")
        for worker in report.workers:
            if worker.problem:
                click.echo(f"  seed {worker.seed}: {worker.problem}")
    sys.exit(0 if report.held else 1)


if __name__ == "__main__":
    main()
