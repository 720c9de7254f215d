"""`course hint`: one rung at a time, remembered in the practice dir, aimed at the first red lab."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import mini, tree_hash
from course.catalog import load_catalog
from course.status import LastTest, CheckVerdict, first_open_lab
from loop_helpers import RIGHT, SMALL_ONLY, practice

TOML = Path("checkpoints/01-adder/chapter.toml")


@pytest.fixture
def learner(mini_course: Path, tmp_path: Path) -> Path:
    return practice(mini_course, tmp_path / "p")


def test_the_ladder_is_climbed_one_rung_at_a_time(mini_course: Path, learner: Path) -> None:
    before = tree_hash(mini_course / "checkpoints")
    first = mini(mini_course, "hint", "1", str(learner), "--lab", "1.1")
    assert first.returncode == 0, first.stderr
    assert "Lab 1.1 Small - hint 1 of 5" in first.stdout
    assert "1. where to look:" in first.stdout and "imports add from tiny_pi.adder" in first.stdout
    assert "def add(a, b) -> int" not in first.stdout, "the second rung stays hidden"
    assert "--next` shows 2 of 5: the signature" in first.stdout

    again = mini(mini_course, "hint", "1", str(learner), "--lab", "1.1")
    assert "hint 1 of 5" in again.stdout, "asking again re-reads, it does not climb"

    second = mini(mini_course, "hint", "1", str(learner), "--lab", "1.1", "--next")
    assert "hint 2 of 5" in second.stdout
    assert "2. the signature (new):" in second.stdout and "def add(a, b) -> int" in second.stdout
    assert "Return the sum" not in second.stdout

    state = json.loads((learner / ".course/hints.json").read_text())
    assert state == {"chapter": "01-adder", "seen": {"1.1": 2}}
    assert tree_hash(mini_course / "checkpoints") == before, "hint state never goes under checkpoints/"


def test_the_sketch_comes_before_the_full_code_which_is_the_top(mini_course: Path, learner: Path) -> None:
    for _ in range(4):
        sketch = mini(mini_course, "hint", "1", str(learner), "--lab", "1.1", "--next")
    assert "hint 4 of 5" in sketch.stdout
    assert "4. a partial sketch (new):" in sketch.stdout
    assert "        return ..." in sketch.stdout, "a multi-line sketch keeps its indentation"
    assert "return a + b" not in sketch.stdout, "the code waits on the last rung"
    assert "shows 5 of 5: the full code (the answer: read it, then close it and write your own)" in sketch.stdout
    everything = mini(mini_course, "hint", "1", str(learner), "--lab", "1.1", "--all")
    assert "5. the full code (new):" in everything.stdout
    assert "     # file: tiny_pi/adder.py" in everything.stdout and "         return a + b" in everything.stdout
    assert ("Close it and write the code from what you understood, then run "
            f"`course test 01 {learner} --lab 1.1`; `course diff 01 {learner}` compares") in everything.stdout, \
        "the commands carry the DIR the learner typed"
    beyond = mini(mini_course, "hint", "1", str(learner), "--lab", "1.1", "--next")
    assert beyond.returncode == 0
    assert "That was the last rung: there is nothing above the full code." in beyond.stdout


def test_reset_forgets_the_rungs_seen(mini_course: Path, learner: Path) -> None:
    mini(mini_course, "hint", "1", str(learner), "--lab", "1.1", "--all")
    forgot = mini(mini_course, "hint", "1", str(learner), "--lab", "1.1", "--reset")
    assert forgot.returncode == 0 and "Forgot the hints" in forgot.stdout
    assert "hint 1 of 5" in mini(mini_course, "hint", "1", str(learner), "--lab", "1.1").stdout
    mini(mini_course, "hint", "1", str(learner), "--lab", "1.2")
    every = mini(mini_course, "hint", "1", str(learner), "--reset")
    assert "for every lab of chapter 01" in every.stdout
    assert not (learner / ".course/hints.json").exists()


def test_without_lab_the_first_lab_not_green_is_chosen(mini_course: Path, learner: Path) -> None:
    fresh = mini(mini_course, "hint", "1", str(learner))
    assert "(no `course test` result yet: lab 1.1)" in fresh.stdout
    (learner / "tiny_pi/adder.py").write_text(SMALL_ONLY)
    assert mini(mini_course, "test", "1", str(learner)).returncode == 1
    half = mini(mini_course, "hint", "1", str(learner))
    assert "first lab not green in your last `course test`: lab 1.2" in half.stdout
    assert "Lab 1.2 Both - hint 1 of 3" in half.stdout
    (learner / "tiny_pi/adder.py").write_text(RIGHT)
    assert mini(mini_course, "test", "1", str(learner)).returncode == 0
    done = mini(mini_course, "hint", "1", str(learner))
    assert done.returncode == 0 and "no hint needed" in done.stdout


def test_a_lab_without_hints_says_so(mini_course: Path, tmp_path: Path) -> None:
    toml = mini_course / TOML
    text = toml.read_text()
    start = text.index('hints = ["Both tests call the same add."')
    toml.write_text(text[:start] + text[text.index("\n", start) + 1 :])
    learner = practice(mini_course, tmp_path / "p")
    result = mini(mini_course, "hint", "1", str(learner), "--lab", "1.2", "--next")
    assert result.returncode == 0
    assert "This lab has no hints in chapter.toml." in result.stdout


def test_bad_hint_input_exits_2(mini_course: Path, learner: Path, tmp_path: Path) -> None:
    for args, message in [
        (("hint", "1", str(learner), "--next", "--all"), "choose one of --next, --all and --reset"),
        (("hint", "1", str(learner), "--lab", "3.1"), "its labs are: 1.1, 1.2"),
        (("hint", "1", str(tmp_path / "nowhere")), "does not exist"),
        (("hint", "9", str(learner)), "Valid chapters: 01-adder"),
    ]:
        result = mini(mini_course, *args)
        assert result.returncode == 2, args
        assert message in result.stderr and "Traceback" not in result.stderr


def _last(lab: str | None, ok: bool, checks: dict[str, bool]) -> LastTest:
    verdicts = tuple(CheckVerdict(kind="lab", lab=i, name=f"lab {i} X", ok=v) for i, v in checks.items())
    return LastTest(chapter="01-adder", lab=lab, ok=ok, when="", checks=verdicts)


def test_which_lab_is_open_after_a_run(mini_course: Path) -> None:
    chapter = load_catalog(mini_course).resolve("1")
    open_lab = lambda last: (lab.id if (lab := first_open_lab(chapter, last)) else None)  # noqa: E731
    assert open_lab(None) == "1.1"
    assert open_lab(_last(None, False, {"1.1": True, "1.2": False})) == "1.2"
    assert open_lab(_last(None, True, {"1.1": True, "1.2": True})) is None
    assert open_lab(_last("1.1", False, {"1.1": False})) == "1.1"
    assert open_lab(_last("1.1", True, {"1.1": True})) == "1.2", "a green lab run moves on"
    assert open_lab(_last("1.2", True, {"1.2": True})) is None
    other = LastTest(chapter="02-other", lab=None, ok=True, when="", checks=())
    assert open_lab(other) == "1.1", "a result of another chapter says nothing about this one"
