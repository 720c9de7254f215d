"""One capstone run: freeze the code, examine every family on it, check the freeze held.

The families run side by side (each its cases in turn), and at most
`parallel` learner commands run at once, whatever the families; servers and
checks run in this process, on trio. Everything a run makes lives in one
temporary directory with nothing of the course in its name (the agent
must not tell an exam from a real run by its paths), removed at the end,
and so is every process that carries the run's marker.

SIGTERM and SIGHUP end a run as Ctrl-C does, whatever Ctrl-C's own
disposition (a job started in the background of a script ignores SIGINT,
and then trio cannot hand a signal on safely): a task of the run waits for
them, and turns one into the interrupt that unwinds the run, its commands
killed and its directory removed, before the command dies by that signal.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

import trio

from course.capstone.bench import Bench, drawn_word, fresh_name
from course.capstone.families import FAMILIES
from course.capstone.frozen import freeze
from course.capstone.processes import Marker, can_sweep, kill_marked
from course.capstone.records import (
    ENDINGS, FROZEN_CHANGED, CapstoneReport, Ending, Family, FamilyResult, outcome,
)
from course.capstone.seeds import Draw
from course.catalog import chapter_nn
from course.errors import end_by_signal

NOT_WRITTEN = "not examined: needs chapter {nn} (its cases are not written yet)"
NEEDS = "not examined: needs chapter {nn}"
NO_PROC = "not examined: needs /proc (Linux) to see what the agent left running"
SWEEPING = ("leftovers",)  # families that mean nothing where no process can be seen
SCRIPTS = ("mcp_fixture.py", "router_driver.py")  # course scripts a case starts: copied, under drawn names
HERE = Path(__file__).resolve().parent


def parallel_commands() -> int:
    """Learner commands at once: one per core and one more, between 2 and 4 (each is mostly an import)."""
    return max(2, min(4, (os.cpu_count() or 1) + 1))


async def run_capstone(
    directory: Path, chapter: int, chapter_label: str, seed: int, families: Sequence[Family] = FAMILIES,
) -> CapstoneReport:
    """Every family on a frozen copy of `directory`'s code, as a chapter-`chapter` agent."""
    started, at = time.monotonic(), datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    async with trio.open_nursery() as watching:
        await watching.start(end_on_signals)  # before anything is made, until all is removed
        report = await examine_in(directory, chapter, chapter_label, seed, families)
        watching.cancel_scope.cancel()
    return report.timed(at, time.monotonic() - started)


async def examine_in(directory: Path, chapter: int, chapter_label: str, seed: int,
                     families: Sequence[Family]) -> CapstoneReport:
    """The run in a temporary directory of its own, removed with every process of the run, however it ends."""
    work = Path(tempfile.mkdtemp())
    marker = Marker.drawn()
    try:
        return await examine_all(directory, chapter, chapter_label, seed, families, work, marker)
    finally:
        kill_marked([marker.any_value])
        shutil.rmtree(work, ignore_errors=True)


async def examine_all(directory: Path, chapter: int, chapter_label: str, seed: int, families: Sequence[Family],
                      work: Path, marker: Marker) -> CapstoneReport:
    frozen = freeze(directory, fresh_name(work))
    scripts = {name: copied(HERE / name, fresh_name(work)) for name in SCRIPTS}
    limiter = trio.CapacityLimiter(parallel_commands())
    model = Draw(seed, "model").model_name()
    results: dict[str, FamilyResult] = {}
    async with trio.open_nursery() as nursery:
        for family in families:
            reason = not_examined(family, chapter)
            if reason is not None:
                results[family.name] = FamilyResult(family.name, family.chapter, not_examined=reason)
                continue
            bench = Bench(frozen.root, fresh_name(work), limiter, model, marker, scripts)
            nursery.start_soon(examine_family, family, Draw(seed, family.name), bench, results)
    run_codes = () if frozen.unchanged() else (FROZEN_CHANGED,)
    ordered = tuple(results[family.name] for family in families)
    return CapstoneReport(directory, chapter_label, frozen.digest, ordered, run_codes)


def copied(script: Path, folder: Path) -> Path:
    """`script` in `folder`, under a drawn name: a command line that shows it names nothing of the course."""
    target = folder / f"{drawn_word()}.py"
    shutil.copyfile(script, target)
    return target


async def end_on_signals(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """SIGTERM or SIGHUP: the run unwinds as on Ctrl-C, and the command then dies by that signal."""
    main = threading.current_thread() is threading.main_thread()  # only the main thread hears signals
    wanted = [number for number in (getattr(signal, name, None) for name in ("SIGTERM", "SIGHUP"))
              if main and number is not None and signal.getsignal(number) != signal.SIG_IGN]  # nohup's stays ignored
    if not wanted:
        task_status.started()
        await trio.sleep_forever()
    with trio.open_signal_receiver(*wanted) as received:
        task_status.started()
        async for number in received:
            end_by_signal(number)


def not_examined(family: Family, chapter: int) -> str | None:
    """Why a family is left out of this run, or None."""
    if family.chapter > chapter:
        return NEEDS.format(nn=chapter_nn(family.chapter))
    if not family.written:
        return NOT_WRITTEN.format(nn=chapter_nn(family.chapter))
    if family.name in SWEEPING and not can_sweep():
        return NO_PROC
    return None


async def examine_family(family: Family, draw: Draw, bench: Bench, results: dict[str, FamilyResult]) -> None:
    assert family.cases is not None and family.examine is not None
    endings: list[Ending] = []
    ENDINGS.set(endings)  # this task's cases note here how their commands ended
    cases = family.cases(draw)
    results[family.name] = outcome(await family.examine(cases, bench), family, endings)
