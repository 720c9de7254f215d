"""One capstone run: freeze the code, examine every family on it, check the freeze held.

The families run side by side (each its cases in turn), and at most
`parallel` learner commands run at once, whatever the families; servers and
checks run in this process, on trio. Everything a run makes lives in one
temporary directory, removed at the end, and so does the bytecode the
frozen copy compiled into the course's cache.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Sequence

import trio

from course.capstone.bench import Bench
from course.capstone.families import FAMILIES
from course.capstone.frozen import freeze
from course.capstone.processes import can_sweep
from course.capstone.records import FROZEN_CHANGED, CapstoneReport, Family, FamilyResult, outcome
from course.capstone.seeds import Draw
from course.catalog import chapter_nn
from course.run_env import bytecode_cache

NOT_WRITTEN = "not examined: needs chapter {nn} (its cases are not written yet)"
NEEDS = "not examined: needs chapter {nn}"
NO_PROC = "not examined: needs /proc (Linux) to see what the agent left running"
SWEEPING = ("leftovers",)  # families that mean nothing where no process can be seen


def parallel_commands() -> int:
    """Learner commands at once: one per core and one more, between 2 and 4 (each is mostly an import)."""
    return max(2, min(4, (os.cpu_count() or 1) + 1))


async def run_capstone(
    directory: Path, chapter: int, chapter_label: str, seed: int, families: Sequence[Family] = FAMILIES,
) -> CapstoneReport:
    """Every family on a frozen copy of `directory`'s code, as a chapter-`chapter` agent."""
    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="course-capstone-"))
    try:
        frozen = freeze(directory, work / "code")
        limiter = trio.CapacityLimiter(parallel_commands())
        bytecode = Path(bytecode_cache(os.environ))
        results: dict[str, FamilyResult] = {}
        async with trio.open_nursery() as nursery:
            for family in families:
                reason = not_examined(family, chapter)
                if reason is not None:
                    results[family.name] = FamilyResult(family.name, family.chapter, not_examined=reason)
                    continue
                bench = Bench(frozen.root, work / "families" / family.name, limiter, bytecode)
                nursery.start_soon(examine_family, family, Draw(seed, family.name), bench, results)
        run_codes = () if frozen.unchanged() else (FROZEN_CHANGED,)
        ordered = tuple(results[family.name] for family in families)
        return CapstoneReport(directory, chapter_label, frozen.digest, ordered, run_codes, time.monotonic() - started)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(Path(bytecode_cache(os.environ)) / work.relative_to(work.anchor), ignore_errors=True)


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
    bench.scratch.mkdir(parents=True)
    cases = family.cases(draw)
    results[family.name] = outcome(await family.examine(cases, bench), family)

