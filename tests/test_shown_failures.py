"""A learner's red run formats in full only the failures the course shows, and shows what a full run shows.

pytest formats every failure's traceback, parsing the test file again for
each entry: on a fresh chapter 05 dir, where every focused test fails (`course
test` runs them all; `course practice` stops at lab 5.1), that is most of the
run. `course test` shows one failure, so the others get pytest's one-line form
(course/runhost.py, ShownOnly), and a run for one lab runs that lab's tests
and the red-light tests only. These tests hold what a learner sees to a full
run of the same dir: counts, outcomes, messages, the failure shown (of the run
and of a lab), the text red lights are recognised by, and `-v`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import trio

from conftest import REPO, course, made_practice
from course.catalog import load_catalog
from course.checks import check_practice
from course.failures import digest, first_failure
from course.redlights import recognised
from course.results import FAILING, RunResult
from course.runner import RunPool

CHAPTER = load_catalog(REPO).resolve("05")
ALL = CHAPTER.expected_passed  # a fresh dir fails every one of them
LAB = CHAPTER.lab("5.7")  # its first failure is not the run's first, nor is the red-light test its
ADDRESS = re.compile(r" at 0x[0-9a-f]+")  # an object's repr differs from run to run
SECONDS = re.compile(r"in \d+(\.\d+)? s\b")


def _same(text: str) -> str:
    return ADDRESS.sub(" at 0x...", text)


@pytest.fixture(scope="module")
def red(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A fresh chapter 05 dir, judged with every report in full, and as `course test` judges it."""
    directory = made_practice(REPO, "05", tmp_path_factory.mktemp("red") / "p05")

    async def main() -> dict[str, object]:
        async with RunPool(CHAPTER.warm_imports) as pool:
            return {
                "full": await check_practice(CHAPTER, directory, None, pool),
                "shown": await check_practice(CHAPTER, directory, None, pool, full_reports=False),
                "lab": await check_practice(CHAPTER, directory, LAB, pool, full_reports=False),
                "directory": directory,
            }

    return trio.run(main)


def _run(checks: object) -> RunResult:
    return next(check.run for check in checks if check.run is not None)  # type: ignore[attr-defined]


def test_the_counts_outcomes_and_messages_are_those_of_a_full_run(red: dict[str, object]) -> None:
    full, shown = red["full"], red["shown"]
    assert [(c.name, c.ok, c.expected, c.actual) for c in shown] == [(c.name, c.ok, c.expected, c.actual) for c in full]  # type: ignore[attr-defined]
    cases = [(case.node_id, case.outcome, case.message) for case in _run(shown).tests]
    assert cases == [(case.node_id, case.outcome, case.message) for case in _run(full).tests]
    assert _run(shown).summary() == _run(full).summary() == f"0 passed, {ALL} failed"


def test_the_failure_shown_and_the_red_light_tests_keep_pytests_full_report(red: dict[str, object]) -> None:
    full, shown = _run(red["full"]), _run(red["shown"])
    assert [_same(line) for line in digest(shown, CHAPTER)] == [_same(line) for line in digest(full, CHAPTER)]
    for node in [first_failure(full).node_id, *(redlight.test for redlight in CHAPTER.redlights)]:  # type: ignore[union-attr]
        assert _same(shown.case(node).details) == _same(full.case(node).details)  # type: ignore[union-attr]
        assert "\n>   " in shown.case(node).details  # type: ignore[union-attr]
    assert recognised(CHAPTER, shown) == recognised(CHAPTER, full)


def test_a_lab_run_runs_the_labs_tests_and_the_red_light_tests_with_the_same_verdict(red: dict[str, object]) -> None:
    full, lab_run = _run(red["full"]), _run(red["lab"])
    lab_tests = {case.node_id for case in full.tests if LAB.selects(case.node_id)}
    redlight_tests = {redlight.test for redlight in CHAPTER.redlights}
    assert {case.node_id for case in lab_run.tests} == lab_tests | redlight_tests
    assert len(lab_tests) == LAB.expected_passed and not redlight_tests <= lab_tests
    check = next(check for check in red["full"] if check.lab == LAB.id)  # type: ignore[attr-defined]
    assert [(c.name, c.ok, c.expected, c.actual) for c in red["lab"]] == [(check.name, check.ok, check.expected, check.actual)]  # type: ignore[attr-defined]
    assert recognised(CHAPTER, lab_run) == recognised(CHAPTER, full)


def test_a_lab_run_keeps_the_labs_first_failure_in_full(red: dict[str, object]) -> None:
    full, lab_run = _run(red["full"]), _run(red["lab"])
    first = next(case for case in full.tests if case.outcome in FAILING and LAB.selects(case.node_id))
    assert first.node_id != first_failure(full).node_id  # type: ignore[union-attr]
    assert first_failure(lab_run).node_id == first.node_id  # type: ignore[union-attr]
    assert _same(lab_run.case(first.node_id).details) == _same(first.details)  # type: ignore[union-attr]
    assert "\n>   " in first.details


def test_the_failures_not_shown_come_in_one_line_each(red: dict[str, object]) -> None:
    """The speed-up itself: the other 70-odd failures skip pytest's traceback formatting."""
    full, shown = _run(red["full"]), _run(red["shown"])
    kept = {first_failure(full).node_id, *(redlight.test for redlight in CHAPTER.redlights)}  # type: ignore[union-attr]
    others = [case for case in shown.tests if case.node_id not in kept]
    assert len(others) > 70
    for case in others:
        assert not case.details.startswith(">") and "\n>   " not in case.details, case.node_id
        assert case.message.splitlines()[-1] in case.details
    formatted = [case for case in others if "\n>   " in full.case(case.node_id).details]  # type: ignore[union-attr]
    assert len(formatted) > 60  # (an exception group comes in Python's own layout either way)


def test_course_test_prints_what_the_verbose_run_prints_besides_pytests_whole_report(red: dict[str, object]) -> None:
    directory = red["directory"]
    assert isinstance(directory, Path)
    verbose = course("test", "05", str(directory), "-v")
    plain = course("test", "05", str(directory))
    assert verbose.returncode == plain.returncode == 1
    report, _, after = verbose.stdout.partition("\n\n")
    assert report.startswith("Testing ") and "pytest's output:" in report
    # pytest's whole report: every failure with its traceback, the `>` line included
    headers = re.findall(r"^  _+ (test_.+?) _+$", report, re.M)
    assert len(headers) == ALL and report.count("\n  >   ") >= ALL
    assert re.search(rf"= {ALL} failed\b", report)
    lines = [SECONDS.sub("in X s", line) for line in plain.stdout.splitlines()]
    expected = [SECONDS.sub("in X s", line) for line in [report.splitlines()[0], *after.splitlines()]]
    hint = "  the whole pytest report: course test 05 " + str(directory) + " -v"
    assert [_same(line) for line in lines if line != hint] == [_same(line) for line in expected]
    assert hint in lines
