"""`course redlight` on a learner's own code: the break is made by hand, the course recognises it.

Trial learners' code never matched the target's lines the exercise's patch
was written against (0 fits in 19 tries), so the command changes no code: it
prints the exercise's by-hand instruction, then watches the learner's saves
(as `course watch` does) for the documented failure and for the restore;
`--check` does one run for scripts. Every test here starts from a practice
dir made by `course practice`, and breaks the code the way the exercise says.
"""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import mini
from loop_helpers import LiveCourse, save_by_rename, save_in_place

CHAPTER_TOML = Path("checkpoints/01-adder/chapter.toml")
BY_HAND = "In add, subtract the second number instead of adding it."
# The learner's own green code: no docstring, so the target's patch (its context has one) would not fit.
MINE = "def add(a, b):\n    total = a + b\n    return total\n"
BROKEN = "def add(a, b):\n    total = a - b\n    return total\n"  # what BY_HAND asks for, in the learner's lines
OTHER_BREAK = "def add(a, b):\n    total = a * b\n    return total\n"
TEST = "tests/test_01_adder.py::test_add_small"
FRAGMENT = "assert -1 == 3"


@pytest.fixture
def learner(mini_course: Path, tmp_path: Path) -> Path:
    """A practice dir made by `course practice 1 DIR`, the chapter's by_hand set, the learner's code green."""
    toml = mini_course / CHAPTER_TOML
    toml.write_text(toml.read_text().replace('learn = "Signs matter."', f'learn = "Signs matter."\nby_hand = "{BY_HAND}"'))
    directory = tmp_path / "p"
    made = mini(mini_course, "practice", "1", str(directory))
    assert made.returncode == 0, made.stdout + made.stderr
    (directory / "tiny_pi/adder.py").write_text(MINE)
    green = mini(mini_course, "test", cwd=directory)
    assert green.returncode == 0, green.stdout
    return directory


def check(root: Path, directory: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return mini(root, "redlight", "--check", *extra, cwd=directory)


def test_check_sees_the_break_made_by_hand_and_then_the_restore(mini_course: Path, learner: Path) -> None:
    adder = learner / "tiny_pi/adder.py"
    before = check(mini_course, learner)
    assert before.returncode == 1 and before.stderr == ""
    assert before.stdout == f"Not broken yet: your code is green (2 passed). Break it by hand: {BY_HAND}\n"
    assert TEST not in before.stdout and FRAGMENT not in before.stdout, "the prediction's answer is not given away"
    assert adder.read_text() == MINE, "course redlight never changes the learner's code"

    adder.write_text(BROKEN)
    seen = check(mini_course, learner)
    assert seen.returncode == 0, seen.stdout + seen.stderr
    assert seen.stdout == (f"Red light 1.R1 seen, as the lesson predicted: {TEST} failed showing {FRAGMENT!r}. Now put "
                           "your code back; `course redlight 01 --id 1.R1 --check` says when it is green again.\n")
    assert adder.read_text() == BROKEN
    state = json.loads((learner / ".course/redlights.json").read_text())
    assert state["states"] == {"1.R1": "seen"}, "the same record `course test` keeps"
    assert json.loads((learner / ".course/last-test.json").read_text())["ok"] is False, "the verdict is saved"

    adder.write_text(MINE)
    restored = check(mini_course, learner)
    assert restored.returncode == 1, "the predicted failure is not there any more"
    assert restored.stdout == "Red light 1.R1 done: it failed as predicted, and your code is green again (2 passed).\n"
    assert json.loads((learner / ".course/redlights.json").read_text())["states"] == {"1.R1": "done"}
    status = mini(mini_course, "status", cwd=learner).stdout
    assert "red lights 1/1" in status, status


def test_the_exercise_id_alone_names_its_chapter(mini_course: Path, learner: Path, tmp_path: Path) -> None:
    """`course redlight 1.R1`, the way lessons and cards name an exercise, is `course redlight 01 --id 1.R1`.

    Before: the id was taken for a chapter id, "no chapter '1.R1'" (a trial learner's finding).
    """
    (learner / "tiny_pi/adder.py").write_text(BROKEN)
    here = mini(mini_course, "redlight", "1.R1", "--check", cwd=learner)
    elsewhere = mini(mini_course, "redlight", "1.r1", str(learner), "--check", cwd=tmp_path)
    for seen in (here, elsewhere):
        assert seen.returncode == 0, seen.stdout + seen.stderr
        assert seen.stdout.startswith("Red light 1.R1 seen, as the lesson predicted"), seen.stdout
    padded = mini(mini_course, "redlight", "--id", "01.R1", "--check", cwd=learner)
    assert padded.returncode == 0 and padded.stdout.startswith("Red light 1.R1 seen"), padded.stdout + padded.stderr
    other = mini(mini_course, "redlight", "1.R7", "--check", cwd=learner)
    assert other.returncode == 2 and "has no red-light exercise '1.R7'; its exercises are: 1.R1" in other.stderr


def test_a_red_run_of_another_kind_is_not_the_red_light(mini_course: Path, learner: Path) -> None:
    (learner / "tiny_pi/adder.py").write_text(OTHER_BREAK)
    other = check(mini_course, learner)
    assert other.returncode == 1
    assert other.stdout == ("Red, but not the failure red light 1.R1 predicts (0 passed, 2 failed): compare your "
                            f"change with the exercise: {BY_HAND}\n")
    assert FRAGMENT not in other.stdout and TEST not in other.stdout


def test_json_names_the_test_and_fragment_only_once_seen(mini_course: Path, learner: Path) -> None:
    adder = learner / "tiny_pi/adder.py"
    green = json.loads(check(mini_course, learner, "--json").stdout)
    assert green["state"] == "green" and green["seen"] is False and "fragment" not in green and "test" not in green
    adder.write_text(BROKEN)
    result = mini(mini_course, "redlight", "--json", cwd=learner)  # --json implies --check
    assert result.returncode == 0
    seen = json.loads(result.stdout)
    assert (seen["command"], seen["chapter"], seen["exercise"], seen["state"]) == ("redlight", "01-adder", "1.R1", "seen")
    assert seen["test"] == TEST and seen["fragment"] == FRAGMENT
    adder.write_text(MINE)
    done = json.loads(check(mini_course, learner, "--json", "--id", "r1").stdout)
    assert done["state"] == "green" and done["done"] is True and done["finished"] is True


def test_the_watch_prints_the_instruction_and_follows_the_break_and_the_restore(mini_course: Path,
                                                                               learner: Path) -> None:
    adder = learner / "tiny_pi/adder.py"
    watch = LiveCourse(mini_course, "redlight", "1", str(learner), "--debounce", "100")
    try:
        start = watch.wait_for("Watching")
        assert start[0] == "Red light 1.R1 Minus (chapter 01)."
        assert start[1] == f"Break your code by hand: {BY_HAND}"
        assert any("Not broken yet: your code is green" in line for line in start), start
        assert not any(FRAGMENT in line or TEST in line for line in start), "nothing answers the prediction"

        save_in_place(adder, OTHER_BREAK)
        assert "Red, but not the failure red light 1.R1 predicts" in watch.wait_for("Red, but not")[-1]
        save_by_rename(adder, BROKEN)
        seen = watch.wait_for("seen, as the lesson predicted")[-1]
        assert f"{TEST} failed showing {FRAGMENT!r}" in seen and "(saved tiny_pi/adder.py)" in seen
        assert "this watch says when it is green again" in seen
        save_in_place(adder, MINE)
        done = watch.wait_for("done: it failed as predicted")[-1]
        assert "your code is green again (2 passed)" in done
        assert watch.process.wait(timeout=30) == 0, "done: the watch ends by itself"
    finally:
        watch.stop(signal.SIGTERM)
    assert adder.read_text() == MINE


def test_bad_input_is_one_line_and_exit_2(mini_course: Path, learner: Path, tmp_path: Path) -> None:
    cases = {
        ("--id", "9.R9"): "course: chapter 01-adder has no red-light exercise '9.R9'; its exercises are: 1.R1",
        ("--revert",): "course: course redlight no longer changes your code",
        ("--debounce", "5"): "course redlight: Invalid value for '--debounce'",
    }
    for args, start in cases.items():
        result = mini(mini_course, "redlight", *args, cwd=learner)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr, result.stderr
        assert result.stderr.startswith(start), result.stderr
    nowhere = mini(mini_course, "redlight", "1", str(tmp_path / "missing"), "--check")
    assert nowhere.returncode == 2 and len(nowhere.stderr.splitlines()) == 1, nowhere.stderr
    assert (learner / "tiny_pi/adder.py").read_text() == MINE


def test_without_by_hand_the_instruction_names_the_exercise_and_the_lesson(mini_course: Path, tmp_path: Path) -> None:
    directory = tmp_path / "q"
    assert mini(mini_course, "practice", "1", str(directory)).returncode == 0
    (directory / "tiny_pi/adder.py").write_text(MINE)
    result = check(mini_course, directory)
    assert result.stdout.endswith("Break it by hand: Minus, as the lesson's red-light exercise 1.R1 says.\n")
    assert f"- **1.R1 Minus** - the lesson says what to change by hand" in (directory / "LEARNING.md").read_text()


def test_a_real_chapter_whose_patch_does_not_fit_the_learners_lines(tmp_path: Path) -> None:
    """Chapter 02, 2.R1: the learner's push has a comment where the target's has its docstring, so
    the exercise's patch cannot apply; the break made by hand is seen all the same, and the restore."""
    from conftest import REPO, course

    directory = tmp_path / "02"
    made = course("practice", "02", str(directory))
    assert made.returncode == 0, made.stdout + made.stderr
    target = (REPO / "checkpoints/02-event-stream/target/tiny_pi/event_stream.py").read_text()
    docstring = ('        """Deliver one event; after the stream is done, do nothing.\n\n'
                 '        Synchronous on purpose: a producer never waits for its consumer.\n        """\n')
    guard = "        if self._done:\n            return\n"
    mine = target.replace(docstring, "        # mine: push never waits\n")
    assert mine != target and f"# mine: push never waits\n{guard}" in mine
    stream = directory / "tiny_pi/event_stream.py"
    stream.write_text(mine)
    patch = REPO / "checkpoints/02-event-stream/redlight/second-fact.patch"
    fits = subprocess.run(["git", "apply", "--check", str(patch)], cwd=directory, capture_output=True, text=True)
    assert fits.returncode != 0, "the target's patch does not fit the learner's lines"

    green = course("redlight", "--check", cwd=directory)
    assert green.returncode == 1 and green.stdout.startswith("Not broken yet: your code is green"), green.stdout
    assert "Remove the check at the top of your push" in green.stdout, "chapter.toml's by_hand, word for word"
    stream.write_text(mine.replace(f"# mine: push never waits\n{guard}", "# mine: push never waits\n"))
    seen = course("redlight", "--check", "--id", "2.R1", cwd=directory)
    assert seen.returncode == 0, seen.stdout + seen.stderr
    assert seen.stdout.startswith("Red light 2.R1 seen, as the lesson predicted: "
                                  "tests/test_02_event_stream.py::test_no_second_fact_after_terminal_event failed")
    stream.write_text(mine)
    restored = course("redlight", "--check", "--id", "2.R1", cwd=directory)
    assert restored.returncode == 1
    assert restored.stdout.startswith("Red light 2.R1 done: it failed as predicted, and your code is green again")
