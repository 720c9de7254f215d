"""Whether a failure is a red-light exercise: only the last whole-chapter run's green says so.

The rule (course/redlights.py): a failure that looks like a red-light
exercise is taken for one (the learner is told it was broken on purpose and
to restore it) only when the last whole-chapter `course test` was green,
whatever `--lab` runs came after it (or when `course redlight` applied the
patch, or the exercise was already seen). A `--lab` run neither sets nor
clears that: a green lab says nothing of the other labs, a red lab does not
undo the whole chapter's green. A `course reset` of code clears it.

The table is every order of two runs, each whole-chapter or `--lab`, green or
red (red, but not the way the red light fails), followed by code that fails
exactly as red light 1.R1 documents, judged by a whole-chapter run or a
`--lab` one. Each first run is made once, and each pair once, in copies of
one practice dir; every run says what the learner is told. `course watch`
(whole chapter or one lab) follows the same rule, and so does `course reset`.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import trio

from conftest import mini
from course.catalog import load_catalog
from course.watch import WatchMode, WatchSession
from loop_helpers import RIGHT, SMALL_ONLY, practice

MINUS = "def add(a, b):\n    return a - b\n"  # fails exactly as red light 1.R1 documents: assert -1 == 3
# A run: (the code of tiny_pi/adder.py, the command's extra arguments, green?).
RUNS = {
    "full green": (RIGHT, (), True),
    "full red": (SMALL_ONLY, (), False),  # test_add_big fails: red, not the red light
    "lab green": (SMALL_ONLY, ("--lab", "1.1"), True),  # half-written: lab 1.1 passes, 1.2 would not
    "lab red": (SMALL_ONLY, ("--lab", "1.2"), False),
}
PROBES = {"full like the red light": (), "lab like the red light": ("--lab", "1.1")}
TOLD = "That is red light 1.R1, as the lesson predicted: now restore your code."

# (first run, second run, the run that fails like the red light, is the learner told it broke it on purpose?)
TABLE = [
    ("full green", "full green", "lab like the red light", True),
    ("full green", "full red", "full like the red light", False),
    ("full green", "lab green", "lab like the red light", True),
    ("full green", "lab red", "full like the red light", True),  # a red lab run does not forget the green
    ("full red", "full green", "full like the red light", True),
    ("full red", "full red", "lab like the red light", False),
    ("full red", "lab green", "full like the red light", False),
    ("full red", "lab red", "lab like the red light", False),
    ("lab green", "full green", "lab like the red light", True),
    ("lab green", "full red", "full like the red light", False),
    ("lab green", "lab green", "full like the red light", False),  # green labs are not a green chapter
    ("lab green", "lab red", "lab like the red light", False),
    ("lab red", "full green", "full like the red light", True),
    ("lab red", "full red", "lab like the red light", False),
    ("lab red", "lab green", "lab like the red light", False),
    ("lab red", "lab red", "full like the red light", False),
]


def test_the_table_is_every_order_of_two_runs_with_both_probes() -> None:
    assert sorted((first, second) for first, second, _, _ in TABLE) == sorted(
        (first, second) for first in RUNS for second in RUNS)
    for first in RUNS:
        assert {probe for row_first, _, probe, _ in TABLE if row_first == first} == set(PROBES)


def course_run(root: Path, directory: Path, code: str, extra: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    (directory / "tiny_pi/adder.py").write_text(code)
    return mini(root, "test", "1", str(directory), *extra)


def assert_told(result: subprocess.CompletedProcess[str], told: bool, what: str) -> None:
    out = result.stdout
    assert result.returncode == 1, (what, out + result.stderr)
    verdict = next(line for line in out.splitlines() if "checks passed in" in line)
    next_step = next(line for line in out.splitlines() if line.startswith("Next: "))
    if told:
        assert TOLD in out, (what, out)
        assert verdict.startswith("Red on purpose (1.R1): "), (what, out)
        assert next_step.startswith("Next: restore your code, then run `course test"), (what, out)
        assert next_step.endswith(": green again completes 1.R1"), (what, out)
    else:
        assert "That is red light" not in out and "Red on purpose" not in out, (what, out)
        assert verdict.startswith("Not yet: "), (what, out)
        assert next_step.startswith("Next: make lab 1.1 green"), (what, out)


def assert_plain(result: subprocess.CompletedProcess[str], green: bool, what: str) -> None:
    """A run of the history: green or not yet, never a red light (its code does not fail like one)."""
    assert result.returncode == (0 if green else 1), (what, result.stdout + result.stderr)
    assert ("Green: " if green else "Not yet: ") in result.stdout, (what, result.stdout)
    assert "That is red light" not in result.stdout, (what, result.stdout)


def copy_of(directory: Path, name: str) -> Path:
    copy = directory.parent / name
    shutil.copytree(directory, copy, symlinks=True)
    return copy


@pytest.mark.parametrize("first", list(RUNS))
def test_only_whole_chapter_runs_decide_whether_a_failure_is_a_red_light(mini_course: Path, tmp_path: Path,
                                                                        first: str) -> None:
    learner = practice(mini_course, tmp_path / "p")
    code, extra, green = RUNS[first]
    assert_plain(course_run(mini_course, learner, code, extra), green, first)
    wrong = []
    for index, (_, second, probe, told) in enumerate(row for row in TABLE if row[0] == first):
        after = copy_of(learner, f"after-{index}")
        code, extra, green = RUNS[second]
        assert_plain(course_run(mini_course, after, code, extra), green, f"{first}, then {second}")
        result = course_run(mini_course, after, MINUS, PROBES[probe])
        try:
            assert_told(result, told, f"{first}, then {second}, then {probe}")
        except AssertionError as error:
            wrong.append(f"{first}, then {second}, then {probe}: {'not ' if told else ''}told it broke the code"
                         f" on purpose\n{error}")
    assert not wrong, "\n\n".join(wrong)


def test_a_reset_of_the_code_forgets_the_green_and_a_reset_of_a_test_does_not(mini_course: Path,
                                                                             tmp_path: Path) -> None:
    learner = practice(mini_course, tmp_path / "p")
    assert_plain(course_run(mini_course, learner, RIGHT, ()), True, "full green")
    test_file = learner / "tests/test_01_adder.py"
    test_file.write_text(test_file.read_text() + "\n# my note\n")
    assert mini(mini_course, "reset", "1", str(learner), "--file", "tests/test_01_adder.py", "--yes").returncode == 0
    assert_told(course_run(mini_course, copy_of(learner, "tests-reset"), MINUS, ()), True, "a test reset")
    assert mini(mini_course, "reset", "1", str(learner), "--file", "tiny_pi/adder.py", "--yes").returncode == 0
    # The starting code fails to import; code written again that fails like 1.R1 is no red light.
    assert_told(course_run(mini_course, learner, MINUS, ()), False, "a code reset, then code like the red light")


def watch_screens(root: Path, directory: Path, lab: str | None, codes: list[str]) -> list[str]:
    """One `course watch` session (of LAB, or the whole chapter): a run per code, saved in turn; each run's screen."""
    chapter = load_catalog(root).resolve("1")
    adder = directory / "tiny_pi/adder.py"

    def source(watched: Path, **options: Any) -> AsyncIterator[set[tuple[int, str]]]:
        async def generate() -> AsyncIterator[set[tuple[int, str]]]:
            for index, code in enumerate(codes):
                adder.write_text(code)
                yield {(2, str(adder))} if index else set()  # the first: the watcher is live, a run

        return generate()

    lines: list[str] = []
    session = WatchSession(chapter, chapter.lab(lab) if lab else None, directory, once=False, echo=lines.append,
                           source=source, debounce_ms=0)
    trio.run(session.run, WatchMode(False, "native"))
    starts = [index for index, line in enumerate(lines) if line.startswith("== run")]
    assert len(starts) == len(codes), lines
    return ["\n".join(lines[start:end]) for start, end in zip(starts, [*starts[1:], len(lines)])]


def test_course_watch_follows_the_same_rule(mini_course: Path, tmp_path: Path) -> None:
    """A lab watched green is not a green chapter; a lab watched red does not undo one."""
    learner = practice(mini_course, tmp_path / "p")
    [lab_green] = watch_screens(mini_course, learner, "1.1", [SMALL_ONLY])
    assert lab_green.splitlines()[1].startswith("Green: "), lab_green
    [probe] = watch_screens(mini_course, learner, None, [MINUS])
    assert "Not yet: " in probe and "That is red light" not in probe, probe

    assert_plain(course_run(mini_course, learner, RIGHT, ()), True, "full green")
    lab_red, lab_probe = watch_screens(mini_course, learner, "1.2", [SMALL_ONLY, MINUS])
    assert "Not yet: " in lab_red and "That is red light" not in lab_red, lab_red
    assert TOLD in lab_probe and "Red on purpose (1.R1): " in lab_probe, lab_probe
