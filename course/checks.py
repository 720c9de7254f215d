"""The proofs: a chapter's story (red parent, green labs, failing red-light patches),
a learner's progress, and the course's integrity.

Each check compares what chapter.toml promises with what an isolated run
shows, and keeps both, so a deviation can be printed as expected vs. actual.
Independent runs go in parallel, bounded by the number of cores.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

import trio
from attrs import field, frozen

from course.cards import CHAPTERS_BEGIN, CHAPTERS_END, between, lesson_card, render_card, render_chapter_list
from course.catalog import Catalog, Chapter, Lab
from course.errors import ChapterError
from course.lessons import (
    COPY_SHARE_GOAL,
    LESSON_LINE_LIMIT,
    copy_share,
    lesson_length,
    rung_problems,
    unstated_messages,
)
from course.lineage import lineage_problems
from course.runner import COLLECTION_ERROR, CRASHED, FAILED, PASSED, TIMEOUT, RunPool, RunResult
from course.workspace import apply_patch, scratch_copy


@frozen
class Check:
    """One line of a checklist: what was promised, what happened."""

    chapter: str
    kind: str
    name: str
    ok: bool
    expected: str
    actual: str
    detail: str = ""
    duration: float = 0.0
    run: RunResult | None = field(default=None, eq=False, repr=False)

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {
            "chapter": self.chapter,
            "kind": self.kind,
            "name": self.name,
            "ok": self.ok,
            "expected": self.expected,
            "actual": self.actual,
            "duration": round(self.duration, 3),
        }
        if self.detail:
            data["detail"] = self.detail
        if self.run is not None:
            data["run"] = self.run.to_json()
        return data


def excerpt(output: str, lines: int = 25) -> str:
    """The end of a run's output, where pytest puts what went wrong."""
    return "\n".join(output.rstrip().splitlines()[-lines:])


# A chapter's story ---------------------------------------------------------------


async def prove_chapter(catalog: Catalog, chapter: Chapter, pool: RunPool | None = None) -> list[Check]:
    """Run every check of `course checkpoint`, each in its own copy, in parallel."""
    if pool is None:
        async with RunPool(chapter.warm_imports) as own_pool:
            return await prove_chapter(catalog, chapter, own_pool)
    jobs: list[Callable[[], Awaitable[Check | list[Check]]]] = [
        lambda: _check_parent(chapter, pool),
        lambda: _check_target(catalog, chapter, pool),
    ]
    jobs += [partial(_check_redlight, chapter, i, pool) for i in range(len(chapter.redlights))]
    results: list[list[Check]] = [[] for _ in jobs]

    async def run_job(index: int) -> None:
        outcome = await jobs[index]()
        results[index] = outcome if isinstance(outcome, list) else [outcome]

    async with trio.open_nursery() as nursery:
        for index in range(len(jobs)):
            nursery.start_soon(run_job, index)
    return [check for group in results for check in group]


async def _run_copy(
    chapter: Chapter,
    source: Path,
    label: str,
    selection: tuple[str, ...],
    pool: RunPool,
    patch: Path | None = None,
    labs: Sequence[Lab] = (),
) -> RunResult:
    with scratch_copy(source, label) as copy:
        if patch is not None:
            await apply_patch(copy, patch)
        return await pool.run(
            copy, selection, plugins=chapter.pytest_plugins, time_limit=chapter.time_limit,
            labs=labs, lab_files=chapter.focused_tests,
        )


async def _check_parent(chapter: Chapter, pool: RunPool) -> Check:
    run = await _run_copy(chapter, chapter.parent, "parent", chapter.focused_tests, pool)
    return red_light_check(chapter, run)


def red_light_check(chapter: Chapter, run: RunResult) -> Check:
    """The first red light is the documented one: the same kind of ending, every fragment shown."""
    red = chapter.first_red_light
    missing = [fragment for fragment in red.fragments if fragment not in run.output]
    ok = run.outcome == red.kind and not missing
    actual = f"{run.outcome}: {run.summary()}"
    if missing:
        actual += "; output lacks " + "; ".join(repr(f) for f in missing)
    return Check(
        chapter=chapter.name,
        kind="first-red-light",
        name="parent shows the first red light",
        ok=ok,
        expected=f"{red.kind} showing " + "; ".join(repr(f) for f in red.fragments),
        actual=actual,
        detail="" if ok else excerpt(run.output),
        duration=run.duration,
        run=run,
    )


async def _check_target(catalog: Catalog, chapter: Chapter, pool: RunPool) -> list[Check]:
    """One run of every test file on target: this chapter's, every earlier one's, every lab's."""
    earlier = catalog.earlier(chapter)
    files = tuple(dict.fromkeys(f for c in (*earlier, chapter) for f in c.focused_tests))
    run = await _run_copy(chapter, chapter.target, "target", files, pool, labs=chapter.labs)
    checks = [lab_check(chapter, lab, run) for lab in chapter.labs]
    checks.append(_count_check(chapter, "focused", "focused tests pass on target", chapter, run))
    for previous in earlier:
        checks.append(
            _count_check(
                chapter, "earlier", f"chapter {previous.nn} tests still pass on target", previous, run
            )
        )
    return checks


def _count_check(chapter: Chapter, kind: str, name: str, owner: Chapter, run: RunResult) -> Check:
    passed = sum(run.passed_in(f) for f in owner.focused_tests)
    failed = sum(run.failed_in(f) for f in owner.focused_tests)
    # One run holds every chapter's files: judge this chapter's by its own counts, so another
    # file's failure does not print "expected 2/2, actual 2/2" as a failure here.
    ok = run.outcome in (PASSED, FAILED) and passed == owner.expected_passed and failed == 0
    return Check(
        chapter=chapter.name,
        kind=kind,
        name=name,
        ok=ok,
        expected=f"{owner.expected_passed}/{owner.expected_passed} passed",
        actual=_counts(run, passed, failed),
        detail="" if ok else excerpt(run.output),
        duration=run.duration,
        run=run,
    )


def _counts(run: RunResult, passed: int, failed: int) -> str:
    if run.outcome in (TIMEOUT, CRASHED):
        return run.summary()  # counts would read as "0/0 passed": say why there are none
    if run.outcome == COLLECTION_ERROR:
        return "the tests could not be collected (an import or syntax error), 0 ran"
    return f"{passed}/{passed + failed} passed"


def lab_check(chapter: Chapter, lab: Lab, run: RunResult) -> Check:
    """A lab is green when its selection passes with exactly the expected count.

    `run` is either a run of the lab's own selection, or a run of the whole
    focused file that sorted its tests into labs (RunResult.lab_counts).
    """
    if lab.id in run.lab_counts:
        passed, failed = run.lab_counts[lab.id]
        finished = run.outcome in (PASSED, FAILED)
    else:
        passed, failed = run.passed, run.failed
        finished = run.outcome == PASSED
    ok = finished and passed == lab.expected_passed and failed == 0
    return Check(
        chapter=chapter.name,
        kind="lab",
        name=f"lab {lab.id} {lab.title}",
        ok=ok,
        expected=f"{lab.expected_passed} passed",
        actual=_counts(run, passed, failed),
        detail="" if ok else excerpt(run.output),
        duration=run.duration,
        run=run,
    )


def lab_selection(chapter: Chapter, lab: Lab) -> tuple[str, ...]:
    """The pytest arguments of a lab run: a -k narrows the focused files; node ids stand alone."""
    if lab.select is not None:
        return (*chapter.focused_tests, *lab.pytest_args())
    return lab.pytest_args()


async def _check_redlight(chapter: Chapter, index: int, pool: RunPool) -> Check:
    redlight = chapter.redlights[index]
    expected = f"{redlight.test} fails showing {redlight.fragment!r}"
    base: dict[str, Any] = dict(
        chapter=chapter.name, kind="redlight", name=f"red-light {redlight.id} {redlight.title}"
    )
    try:
        run = await _run_copy(
            chapter,
            chapter.target,
            f"redlight-{redlight.id}",
            (redlight.test,),
            pool,
            patch=chapter.root / redlight.patch,
        )
    except ChapterError as error:
        return Check(**base, ok=False, expected=expected, actual=str(error))
    case = run.case(redlight.test)
    test_failed = case is not None and case.outcome in (FAILED, "error")
    shows = redlight.fragment in run.output
    ok = run.outcome == FAILED and test_failed and shows
    if case is None:
        actual = f"{redlight.test} did not run ({run.outcome}: {run.summary()})"
    elif not test_failed:
        actual = f"{redlight.test} {case.outcome}: the patch did not break it"
    elif not shows:
        actual = f"{redlight.test} failed, but not as documented: output lacks {redlight.fragment!r}"
    else:
        actual = f"{redlight.test} failed showing {redlight.fragment!r}"
    return Check(
        **base,
        ok=ok,
        expected=expected,
        actual=actual,
        detail="" if ok else excerpt(run.output),
        duration=run.duration,
        run=run,
    )


# Course integrity ------------------------------------------------------------------


def integrity_checks(catalog: Catalog, chapter: Chapter) -> list[Check]:
    """Checks that read files only: lineage and the lesson's generated card."""
    problems = lineage_problems(catalog, chapter)
    checks = [
        Check(
            chapter=chapter.name,
            kind="lineage",
            name="lineage: snapshots differ only in declared files",
            ok=not problems,
            expected="no undeclared differences",
            actual="; ".join(problems) if problems else "no undeclared differences",
        )
    ]
    card = lesson_card(chapter.lesson.read_text(encoding="utf-8"))
    fresh = render_card(chapter)
    if card is None:
        actual = "the lesson has no card markers"
    elif card != fresh:
        actual = "the lesson's card is stale: run `python -m tools.cards` to regenerate it"
    else:
        actual = "the lesson's card matches chapter.toml"
    checks.append(
        Check(
            chapter=chapter.name,
            kind="card",
            name="lesson card generated from chapter.toml",
            ok=card == fresh,
            expected="the lesson's card matches chapter.toml",
            actual=actual,
        )
    )
    return checks + depth_checks(chapter)


def depth_checks(chapter: Chapter) -> list[Check]:
    """Does the lesson leave the core to the learner and state everything the tests check?"""
    checks = []
    if chapter.mode == "rebuild":
        share = copy_share(chapter)
        checks.append(
            Check(
                chapter=chapter.name,
                kind="copy-share",
                name="the lesson leaves the core to the learner",
                ok=share.share <= COPY_SHARE_GOAL,
                expected=f"at most {round(COPY_SHARE_GOAL * 100)} % of the new teaching-file lines in the lesson's code blocks",
                actual=f"copy share {share.percent} % ({share.copied} of {share.total} new lines)",
                detail="lines the lesson prints verbatim: python -m tools.depth " + chapter.nn + " --copied",
            )
        )
    unstated = unstated_messages(chapter)
    checks.append(
        Check(
            chapter=chapter.name,
            kind="messages",
            name="every message text a test checks is stated in the lesson or hints",
            ok=not unstated,
            expected="each tested message text appears in the lesson or a hint",
            actual=f"{len(unstated)} not stated" if unstated else "all stated",
            detail="\n".join(f"{m.test_file}:{m.line} {m.how} {m.text!r}" for m in unstated),
        )
    )
    problems = rung_problems(chapter)
    checks.append(
        Check(
            chapter=chapter.name,
            kind="hint-rungs",
            name="each lab's last hint rung holds its code, word for word",
            ok=not problems,
            expected="every last rung's `# file:` excerpts match the target and show whole functions",
            actual="; ".join(problems) if problems else "they do",
        )
    )
    length = lesson_length(chapter)
    checks.append(
        Check(
            chapter=chapter.name,
            kind="lesson-length",
            name="the lesson is one sitting long",
            ok=length < LESSON_LINE_LIMIT,
            expected=f"under {LESSON_LINE_LIMIT} lines",
            actual=f"{length} lines",
        )
    )
    return checks


async def verify(catalog: Catalog, chapters: list[Chapter]) -> list[Check]:
    """The whole course's proof: every chapter's story plus integrity, in chapter order."""
    results: dict[str, list[Check]] = {}

    async def prove(chapter: Chapter, pool: RunPool) -> None:
        results[chapter.name] = await prove_chapter(catalog, chapter, pool)

    imports = [name for chapter in chapters for name in chapter.warm_imports]
    async with RunPool(imports) as pool, trio.open_nursery() as nursery:
        for chapter in chapters:
            nursery.start_soon(prove, chapter, pool)
    checks = []
    for chapter in chapters:
        checks += results[chapter.name]
        checks += integrity_checks(catalog, chapter)
    return checks + readme_checks(catalog)


def readme_checks(catalog: Catalog) -> list[Check]:
    """The README's chapter list is generated too; a stale one misleads every newcomer."""
    readme = catalog.root / "README.md"
    if not readme.is_file():
        return []
    current = between(readme.read_text(encoding="utf-8"), CHAPTERS_BEGIN, CHAPTERS_END)
    if current is None:
        return []
    ok = current == render_chapter_list(catalog.chapters)
    return [
        Check(
            chapter="course",
            kind="readme",
            name="README chapter list generated from chapter.toml",
            ok=ok,
            expected="the README lists every chapter as chapter.toml says",
            actual="it does" if ok else "the list is stale: run `python -m tools.cards`",
        )
    ]


# A learner's practice dir ------------------------------------------------------------


async def check_practice(
    chapter: Chapter, directory: Path, lab: Lab | None = None, pool: RunPool | None = None
) -> list[Check]:
    """Run a learner's tests in place (their dir is a snapshot of its own) and compare counts."""
    if pool is None:
        async with RunPool(chapter.warm_imports) as own_pool:
            return await check_practice(chapter, directory, lab, own_pool)
    if lab is not None:
        run = await pool.run(
            directory, lab_selection(chapter, lab), plugins=chapter.pytest_plugins,
            time_limit=chapter.time_limit,
        )
        return [lab_check(chapter, lab, run)]
    run = await pool.run(
        directory, chapter.focused_tests, plugins=chapter.pytest_plugins,
        time_limit=chapter.time_limit, labs=chapter.labs, lab_files=chapter.focused_tests,
    )
    checks = [lab_check(chapter, one, run) for one in chapter.labs]
    return checks + [_count_check(chapter, "focused", "all focused tests", chapter, run)]
