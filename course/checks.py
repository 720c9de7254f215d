"""The proofs: a chapter's story (red parent, green labs, failing red-light patches),
a learner's progress, and the course's integrity.

Each check compares what chapter.toml promises with what an isolated run
shows, and keeps both, so a deviation can be printed as expected vs. actual.
Independent runs go in parallel, bounded by the number of cores.
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

import attrs
import trio

from course.cards import (
    CHAPTERS_BEGIN,
    CHAPTERS_END,
    REDLIGHTS_BEGIN,
    REDLIGHTS_END,
    between,
    lesson_card,
    lesson_redlight_note,
    render_card,
    render_chapter_list,
    render_redlight_note,
)
from course import verify_cache
from course.checklist import ChapterTime, Check
from course.catalog import Catalog, Chapter, Lab
from course.errors import ChapterError
from course.lineage import lineage_problems
from course.runner import (
    COLLECTION_ERROR, CONFIG_ERROR, CRASHED, FAILED, FAILING, MEMORY, NO_TESTS, PASSED, TIMEOUT, RunPool,
    RunResult, RunSpec, Shown, pytest_counts,
)
from course.output import replaced_note
from course.verdict_copy import verdict_copy
from course.workspace import apply_patch, scratch_copy


async def first_run(chapter: Chapter, directory: Path) -> RunResult:
    """`course practice`'s run of every focused test in a fresh dir (of an observe chapter: see lab_by_lab)."""
    async with RunPool(chapter.warm_imports) as pool:
        with verdict_copy(chapter, directory) as copy:
            return await pool.run(run_spec(chapter, copy.directory, chapter.focused_tests))


@attrs.frozen
class FirstLabs:
    """A first red light seen lab by lab: the labs run in order, the labs that wait.

    `course practice` of a rebuild chapter stops at the first lab that fails
    (once every documented fragment has shown), so the learner's first contact
    with a chapter costs one lab's tests, not the chapter's; `course test`
    runs them all.
    """

    checks: tuple[Check, ...]  # one lab check per lab run, in chapter order
    runs: tuple[RunResult, ...]  # the runs, one per lab, in the same order
    lab: Lab  # the lab it stopped at (the last, when every lab ran)
    waiting: tuple[Lab, ...]  # the labs after it, not run

    @property
    def run(self) -> RunResult:
        """The run it stopped at."""
        return self.runs[-1]

    @property
    def output(self) -> str:
        return "\n".join(run.output for run in self.runs)

    @property
    def waiting_tests(self) -> int:
        return sum(lab.expected_passed for lab in self.waiting)


def lab_by_lab(chapter: Chapter) -> bool:
    """Whether `course practice` shows the chapter's first red light lab by lab: a rebuild
    chapter's does; an observe chapter's dir starts from target, whose every test it runs."""
    return chapter.mode == "rebuild" and bool(chapter.labs)


async def first_labs(chapter: Chapter, directory: Path, pool: RunPool, shown_as: Path | None = None) -> FirstLabs:
    """Run the labs of `directory` in order, each alone, up to the first that fails and shows
    every documented fragment of the first red light (a run that could not even judge its
    lab, such as one whose tests could not be collected, stops it at once).

    Each run keeps pytest's full report for the lab's first failure only (Shown).
    `shown_as`: the learner's dir, whose path the texts show instead of `directory`'s.
    """
    fragments = chapter.first_red_light.fragments
    checks: list[Check] = []
    runs: list[RunResult] = []
    labs = chapter.labs
    for index, lab in enumerate(labs):
        shown = Shown(lab_words=lab.select_words, lab_nodes=lab.nodes)
        run = await pool.run(run_spec(chapter, directory, chapter.focused_tests, shown=shown))
        if shown_as is not None:
            run = _as_if_in(run, directory, shown_as)
        runs.append(run)
        checks.append(lab_check(chapter, lab, run))
        output = "\n".join(one.output for one in runs)
        judged = run.outcome in (PASSED, FAILED)
        if not judged or (not checks[-1].ok and all(fragment in output for fragment in fragments)):
            return FirstLabs(tuple(checks), tuple(runs), lab, tuple(labs[index + 1:]))
    return FirstLabs(tuple(checks), tuple(runs), labs[-1], ())


async def first_practice_labs(chapter: Chapter, directory: Path) -> FirstLabs:
    """`course practice`'s first red light of a rebuild chapter, in the learner's fresh dir."""
    async with RunPool(chapter.warm_imports) as pool:
        with verdict_copy(chapter, directory) as copy:
            return await first_labs(chapter, copy.directory, pool, shown_as=directory)


def first_labs_check(chapter: Chapter, first: FirstLabs) -> Check:
    """`course practice`'s first red light is the documented one: the same ending, every fragment shown."""
    output = first.output
    actual = f"{first.run.outcome}, stopped at {first.lab.id}: {first.run.summary()}"
    if first.waiting:
        actual += "; not run: " + ", ".join(lab.id for lab in first.waiting)
    ok, expected, lacking = red_light_verdict(chapter, first.run.outcome, output)
    return Check(
        chapter=chapter.name,
        kind="first-red-light-labs",
        name="practice shows it lab by lab, up to the first failing lab",
        ok=ok,
        expected=expected,
        actual=actual + lacking,
        detail="" if ok else excerpt(output),
        duration=sum(run.duration for run in first.runs),
        run=first.run,
    )


def excerpt(output: str, lines: int = 25) -> str:
    """The end of a run's output, where pytest puts what went wrong."""
    return "\n".join(output.rstrip().splitlines()[-lines:])


# A chapter's story ---------------------------------------------------------------


async def prove_chapter(catalog: Catalog, chapter: Chapter, pool: RunPool | None = None) -> list[Check]:
    """Run every check of `course checkpoint`, each in its own copy, in parallel."""
    if pool is None:
        async with RunPool(chapter.warm_imports) as own_pool:
            return await prove_chapter(catalog, chapter, own_pool)
    jobs: list[Callable[[], Awaitable[Check | list[Check]]]] = [lambda: _check_parent(chapter, pool)]
    if lab_by_lab(chapter):
        jobs.append(lambda: _check_first_labs(chapter, pool))
    jobs.append(lambda: _check_target(catalog, chapter, pool))
    jobs += [partial(_check_redlight, chapter, i, pool) for i in range(len(chapter.redlights))]
    results: list[list[Check]] = [[] for _ in jobs]

    async def run_job(index: int) -> None:
        outcome = await jobs[index]()
        results[index] = outcome if isinstance(outcome, list) else [outcome]

    async with trio.open_nursery() as nursery:
        for index in range(len(jobs)):
            nursery.start_soon(run_job, index)
    return [check for group in results for check in group]


def run_spec(chapter: Chapter, directory: Path, selection: Sequence[str], time_limit: float | None = None,
             shown: Shown | None = None) -> RunSpec:
    """How every run of a chapter's tests is made: its plugins, its time and memory limits."""
    return RunSpec.for_pytest(
        directory, selection, plugins=chapter.pytest_plugins,
        time_limit=chapter.time_limit if time_limit is None else time_limit, memory_limit=chapter.memory_limit,
        shown=shown,
    )


def shown_failures(chapter: Chapter, lab: Lab | None, full: bool = False) -> Shown:
    """What a learner's run shows of its failures (the first, the lab's first, or all) and reads (red lights)."""
    return Shown(lab_words=lab.select_words if lab else (), lab_nodes=lab.nodes if lab else (),
                 tests=[redlight.test for redlight in chapter.redlights], full=full)


async def _run_copy(
    chapter: Chapter,
    source: Path,
    label: str,
    selection: tuple[str, ...],
    pool: RunPool,
    patch: Path | None = None,
    time_limit: float | None = None,
) -> RunResult:
    with scratch_copy(source, label) as copy:
        if patch is not None:
            await apply_patch(copy, patch)
        return await pool.run(run_spec(chapter, copy, selection, time_limit))


async def _check_parent(chapter: Chapter, pool: RunPool) -> Check:
    run = await _run_copy(chapter, chapter.parent, "parent", chapter.focused_tests, pool)
    return red_light_check(chapter, run)


async def _check_first_labs(chapter: Chapter, pool: RunPool) -> Check:
    with scratch_copy(chapter.parent, "parent-labs") as copy:
        return first_labs_check(chapter, await first_labs(chapter, copy, pool))


def red_light_verdict(chapter: Chapter, outcome: str, output: str) -> tuple[bool, str, str]:
    """Whether a run ended as the first red light documents: (ok, expected, what its output lacks)."""
    red = chapter.first_red_light
    missing = [fragment for fragment in red.fragments if fragment not in output]
    lacking = "; output lacks " + "; ".join(repr(f) for f in missing) if missing else ""
    expected = f"{red.kind} showing " + "; ".join(repr(f) for f in red.fragments)
    return outcome == red.kind and not missing, expected, lacking


def red_light_check(chapter: Chapter, run: RunResult) -> Check:
    """The first red light is the documented one: the same kind of ending, every fragment shown."""
    ok, expected, lacking = red_light_verdict(chapter, run.outcome, run.output)
    return Check(
        chapter=chapter.name,
        kind="first-red-light",
        name="parent shows the first red light",
        ok=ok,
        expected=expected,
        actual=f"{run.outcome}: {run.summary()}{lacking}",
        detail="" if ok else excerpt(run.output),
        duration=run.duration,
        run=run,
    )


async def _check_target(catalog: Catalog, chapter: Chapter, pool: RunPool) -> list[Check]:
    """One run of every test file on target: this chapter's, every earlier one's, every lab's."""
    gone = catalog.left_before(chapter)
    # A chapter whose tests it left behind is not re-run: its files are gone from this target.
    earlier = tuple(c for c in catalog.earlier(chapter) if not any(f in gone for f in c.focused_tests))
    files = tuple(dict.fromkeys(f for c in (*earlier, chapter) for f in c.focused_tests))
    # Each chapter's limit is for its own files: a run of every chapter's files may take their sum,
    # or a late chapter's limit would have to grow with every chapter before it.
    limit = sum(c.time_limit for c in (*earlier, chapter))
    run = await _run_copy(chapter, chapter.target, "target", files, pool, time_limit=limit)
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
    # One run holds every chapter's files: judge this chapter's by its own tests, so another
    # file's failure does not print "expected 2/2, actual 2/2" as a failure here.
    cases = [case for case in run.tests if case.file in owner.focused_tests]
    ok = run.outcome in (PASSED, FAILED) and _green(cases, owner.expected_passed)
    return Check(
        chapter=chapter.name,
        kind=kind,
        name=name,
        ok=ok,
        expected=f"{owner.expected_passed}/{owner.expected_passed} passed",
        actual=_counts(run, cases),
        detail="" if ok else excerpt(run.output),
        duration=run.duration,
        run=run,
    )


def _green(cases: Sequence[Any], expected: int) -> bool:
    """Exactly `expected` tests, every one passed in every phase.

    A skipped, xfailed or never-reported test is not a pass, and neither is
    one that passed and then failed in teardown (pytest counts it passed and
    an error: green needs no error at all).
    """
    return len(cases) == expected and all(case.outcome == PASSED for case in cases)


def _counts(run: RunResult, cases: Sequence[Any]) -> str:
    """"P/T passed" with P as pytest counts it; when a setup or teardown failed, the rest of pytest's line too.

    Without such an error each test is counted once, so "1/2 passed" says the
    other did not pass. With one, a test is counted twice (a pass or a failure,
    and an error), so the line spells out what pytest's summary would:
    "2/2 passed, 2 errors in teardown" for two tests that passed and then
    failed in teardown.
    """
    if run.outcome in (TIMEOUT, CRASHED, MEMORY, CONFIG_ERROR, NO_TESTS):
        return run.summary()  # counts would read as "0/0 passed": say why there are none
    if run.outcome == COLLECTION_ERROR:
        return "the tests could not be collected (an import or syntax error), 0 ran"
    if not cases:
        return "no tests: the selection matched none"
    passed = sum(1 for case in cases if case.call == PASSED)
    text = f"{passed}/{len(cases)} passed"
    phases = [phase for case in cases for phase in case.errors]
    if phases:
        text = ", ".join([text, *pytest_counts(cases)])
        setup, teardown = phases.count("setup"), phases.count("teardown")
        text += " in setup" if not teardown else " in teardown" if not setup else f" ({setup} in setup, {teardown} in teardown)"
    return text


def lab_cases(chapter: Chapter, lab: Lab, run: RunResult) -> list[Any]:
    """The lab's tests in a run of the focused files, chosen by name in this process."""
    return [
        case for case in run.tests
        if case.name and case.file in chapter.focused_tests and lab.selects(case.node_id)
    ]


def lab_check(chapter: Chapter, lab: Lab, run: RunResult) -> Check:
    """A lab is green when exactly its expected count of tests passed and none did not.

    More passes than expected is a deviation too: the count is stale, or the
    selection took in another lab's tests.
    """
    cases = lab_cases(chapter, lab, run)
    finished = run.outcome in (PASSED, FAILED)
    ok = finished and bool(cases) and _green(cases, lab.expected_passed)
    return Check(
        chapter=chapter.name,
        kind="lab",
        name=f"lab {lab.id} {lab.title}",
        lab=lab.id,
        ok=ok,
        expected=f"{lab.expected_passed} passed",
        actual=_counts(run, cases),
        detail="" if ok else excerpt(run.output),
        duration=run.duration,
        run=run,
    )


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
    test_failed = case is not None and case.outcome in FAILING
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
    text = chapter.lesson.read_text(encoding="utf-8")
    card = lesson_card(text)
    problems = []
    if card is None:
        problems.append("the lesson has no card markers")
    elif card != render_card(chapter):
        problems.append("the lesson's card is stale: run `course dev cards` to regenerate it")
    if chapter.redlights:
        note = lesson_redlight_note(text)
        if note is None:
            problems.append(f"the lesson has no red-light note markers ({REDLIGHTS_BEGIN} {REDLIGHTS_END})")
        elif note != render_redlight_note(chapter):
            problems.append("the lesson's red-light note is stale: run `course dev cards` to regenerate it")
    checks.append(
        Check(
            chapter=chapter.name,
            kind="card",
            name="lesson card and red-light note generated from chapter.toml",
            ok=not problems,
            expected="the lesson's card and red-light note match chapter.toml",
            actual="; ".join(problems) if problems else "the lesson's card and red-light note match chapter.toml",
        )
    )
    checks.append(_test_labels_check(chapter))
    return checks + depth_checks(chapter)


def _test_labels_check(chapter: Chapter) -> Check:
    """`# Lab N.M` section labels of the focused test files name the lab whose tests follow (parent and target)."""
    from course.dev.section_labels import label_problems  # author-only, like depth_checks

    problems = [f"{snapshot.name}/{problem}" for snapshot in (chapter.parent, chapter.target)
                for problem in label_problems(chapter, snapshot)]
    return _problems_check(
        chapter, "test-labels", "section labels of the focused tests name the lab whose tests follow",
        "each `# Lab N.M` label is followed by tests of lab N.M only", problems, "they do",
    )


def _problems_check(chapter: Chapter, kind: str, name: str, expected: str, problems: list[str], fine: str) -> Check:
    """A file-only check that holds when it found no problem; its problems, joined, are what happened."""
    return Check(chapter=chapter.name, kind=kind, name=name, ok=not problems, expected=expected,
                 actual="; ".join(problems) if problems else fine)


def depth_checks(chapter: Chapter) -> list[Check]:
    """Does the lesson leave the core to the learner and state everything the tests check?"""
    # Author-only code, imported here so a learner's `course test` never loads it.
    from course.dev.lessons import (
        COPY_SHARE_GOAL,
        LESSON_LINE_LIMIT,
        copy_share,
        lesson_length,
        rung_problems,
        unstated_messages,
    )
    from course.dev.predictions import prediction_problems

    checks = []
    if chapter.mode == "rebuild":
        from course.dev.dictation import GIVEAWAY_GOAL, chapter_depths

        share = copy_share(chapter)
        labs = chapter_depths(chapter)
        over = [lab for lab in labs if lab.over]
        problems = [f"lab {lab.lab} gives away {lab.percent} % (worst {lab.worst})" for lab in over]
        if share.share > COPY_SHARE_GOAL:
            problems.insert(0, f"copy share {share.percent} % ({share.copied} of {share.total} new lines)")
        highest = max(labs, key=lambda lab: lab.share, default=None)
        fine = f"copy share {share.percent} % ({share.copied} of {share.total} new lines)" + (
            f"; each lab gives away at most {highest.percent} % (lab {highest.lab})" if highest else ""
        )
        checks.append(
            Check(
                chapter=chapter.name,
                kind="copy-share",
                name="the lesson leaves the core to the learner",
                ok=not problems,
                expected=(
                    f"at most {round(COPY_SHARE_GOAL * 100)} % of the new teaching-file lines in the lesson's code blocks, "
                    f"and at most {round(GIVEAWAY_GOAL * 100)} % of each lab's statements printed or narrated"
                ),
                actual="; ".join(problems) if problems else fine,
                detail="what the lesson prints or narrates: course dev depth " + chapter.nn + " --dictated",
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
    checks.append(_problems_check(
        chapter, "predictions", "every prediction's answer is folded, never on the prompt's screen",
        "after each **Predict prompt, a <details> block before any # output block, in its section or the next",
        prediction_problems(chapter.lesson.read_text(encoding="utf-8")), "they are",
    ))
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


def _check_from_json(data: dict[str, Any]) -> Check:
    names = ("chapter", "kind", "lab", "name", "ok", "expected", "actual", "detail", "duration")
    return Check(**{name: data[name] for name in names if name in data})


async def verify(
    catalog: Catalog, chapters: list[Chapter], fresh: bool = False, times: list[ChapterTime] | None = None
) -> list[Check]:
    """The whole course's proof: every chapter's story plus integrity, in chapter order.

    A story whose inputs have not changed since it last held is not run again
    (course/verify_cache.py), unless `fresh`.
    """
    results: dict[str, list[Check]] = {}
    timing: dict[str, ChapterTime] = {}
    todo = []
    verify_cache.cache_dir()  # a COURSE_CACHE it cannot use is said before anything runs, not after
    for chapter in dict.fromkeys(chapters):
        key = verify_cache.story_key(catalog, chapter)
        stored = None if fresh else verify_cache.load(key)
        if stored is not None:
            results[chapter.name] = [_check_from_json(item) for item in stored]
            timing[chapter.name] = ChapterTime(chapter.name, 0.0, True)
        else:
            todo.append((chapter, key))

    async def prove(chapter: Chapter, key: str, pool: RunPool) -> None:
        started = time.monotonic()
        checks = await prove_chapter(catalog, chapter, pool)
        results[chapter.name] = checks
        timing[chapter.name] = ChapterTime(chapter.name, time.monotonic() - started, False)
        if all(check.ok for check in checks):
            verify_cache.store(key, [check.to_json() for check in checks])

    if todo:
        imports = [name for chapter, _ in todo for name in chapter.warm_imports]
        async with RunPool(imports) as pool, trio.open_nursery() as nursery:
            for chapter, key in todo:
                nursery.start_soon(prove, chapter, key, pool)
    checks = []
    for chapter in dict.fromkeys(chapters):
        checks += results[chapter.name]
        checks += integrity_checks(catalog, chapter)
        if times is not None:
            times.append(timing[chapter.name])
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
            actual="it does" if ok else "the list is stale: run `course dev cards`",
        )
    ]


# A learner's practice dir ------------------------------------------------------------


def _as_if_in(run: RunResult, copy: Path, directory: Path) -> RunResult:
    """The run's texts with the throw-away copy's path replaced by the learner's own dir."""

    def mapped(text: str) -> str:
        return text.replace(str(copy), str(directory))

    tests = tuple(attrs.evolve(case, message=mapped(case.message), details=mapped(case.details)) for case in run.tests)
    return attrs.evolve(run, output=mapped(run.output), tests=tests)


async def check_practice(
    chapter: Chapter, directory: Path, lab: Lab | None = None, pool: RunPool | None = None,
    time_limit: float | None = None, full_reports: bool = True,
) -> list[Check]:
    """Judge a learner's tiny_pi/ as written with the chapter's own tests and config (see course/verdict_copy.py).

    One run of the focused files answers for every lab; `lab` narrows what is reported.
    Without `full_reports` (`course test` without -v or --json, `course watch`),
    the run makes only what is shown or read (see Shown): pytest's full report
    for the failures shown (formatting every failure was most of a red run).
    With `lab`, only that lab's tests and the red-light tests run, with full
    reports or without.
    """
    if pool is None:
        async with RunPool(chapter.warm_imports) as own_pool:
            return await check_practice(chapter, directory, lab, own_pool, time_limit, full_reports)
    # A lab runs only its tests (and the red-light tests) also with full reports (-v, --json).
    shown = None if full_reports and lab is None else shown_failures(chapter, lab, full=full_reports)
    with verdict_copy(chapter, directory) as copy:
        run = await pool.run(run_spec(chapter, copy.directory, chapter.focused_tests, time_limit, shown))
    run = _as_if_in(run, copy.directory, directory)
    labs = [lab] if lab is not None else list(chapter.labs)
    checks = [lab_check(chapter, one, run) for one in labs]
    if lab is None:
        checks.append(_count_check(chapter, "focused", "all focused tests", chapter, run))
    if copy.replaced:
        checks.append(
            Check(
                chapter=chapter.name,
                kind="note",
                name="files of yours the verdict did not use",
                ok=True,
                expected="your tiny_pi/ as written, the chapter's tests and config",
                actual=replaced_note(copy.replaced, chapter.nn, directory),
                replaced=copy.replaced,
            )
        )
    return checks
