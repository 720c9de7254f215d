"""The CLI's verdicts on a tiny fixture course: green when the story holds, a named
deviation when it does not, exit 2 for bad input. Fast, and free to break."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from conftest import made_practice, mini, mini_process, tree_hash

CHAPTER = Path("checkpoints/01-adder")


def test_checkpoint_holds_and_prints_a_checklist(mini_course: Path) -> None:
    result = mini_process(mini_course, "checkpoint", "01")
    assert result.returncode == 0, result.stdout + result.stderr
    for line in ("parent shows the first red light", "lab 1.1 Small - 1/1 passed",
                 "lab 1.2 Both - 2/2 passed", "red-light 1.R1 Minus",
                 "practice shows it lab by lab, up to the first failing lab", "the story holds: 6/6 checks passed"):
        assert line in result.stdout


def test_checkpoint_json_is_one_document(mini_course: Path) -> None:
    result = mini(mini_course, "checkpoint", "adder", "--json")
    document = json.loads(result.stdout)
    assert document["ok"] is True and document["chapter"] == "01-adder"
    kinds = [check["kind"] for check in document["checks"]]
    assert kinds == ["first-red-light", "first-red-light-labs", "lab", "lab", "focused", "redlight"]


def test_a_parent_that_is_already_green_is_a_deviation(mini_course: Path) -> None:
    adder = mini_course / CHAPTER / "target/tiny_pi/adder.py"
    (mini_course / CHAPTER / "parent/tiny_pi/adder.py").write_text(adder.read_text())
    result = mini(mini_course, "checkpoint", "1")
    assert result.returncode == 1
    assert "[FAIL] parent shows the first red light" in result.stdout
    assert "expected: collection-error showing \"No module named 'tiny_pi.adder'\"" in result.stdout
    assert "actual:   passed" in result.stdout


def test_a_red_light_that_fails_for_another_reason_is_a_deviation(mini_course: Path) -> None:
    toml = mini_course / CHAPTER / "chapter.toml"
    toml.write_text(toml.read_text().replace('fragment = "assert -1 == 3"', 'fragment = "assert 0 == 3"'))
    result = mini(mini_course, "checkpoint", "1")
    assert result.returncode == 1
    assert "failed, but not as documented: output lacks 'assert 0 == 3'" in result.stdout


def test_a_patch_that_no_longer_applies_is_named(mini_course: Path) -> None:
    adder = mini_course / CHAPTER / "target/tiny_pi/adder.py"
    adder.write_text(adder.read_text().replace("return a + b", "return b + a"))
    result = mini(mini_course, "checkpoint", "1")
    assert result.returncode == 1
    assert "minus.patch: the red-light patch does not apply to target" in result.stdout


def test_wrong_lab_count_is_a_deviation(mini_course: Path) -> None:
    toml = mini_course / CHAPTER / "chapter.toml"
    toml.write_text(toml.read_text().replace('select = "small"\nexpected_passed = 1', 'select = "small"\nexpected_passed = 2'))
    result = mini(mini_course, "checkpoint", "1")
    assert result.returncode == 1
    assert "expected: 2 passed" in result.stdout and "actual:   1/1 passed" in result.stdout


def test_unknown_chapter_and_lab_exit_2_with_the_choices(mini_course: Path, tmp_path: Path) -> None:
    for args in (("checkpoint", "abc"), ("practice", "99", str(tmp_path / "x")), ("show", "7")):
        result = mini(mini_course, *args)
        assert result.returncode == 2, args
        assert "Valid chapters: 01-adder" in result.stderr
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "x").exists()
    made = mini_process(mini_course, "practice", "1", str(tmp_path / "p"))
    assert made.returncode == 0
    result = mini(mini_course, "test", "1", str(tmp_path / "p"), "--lab", "9.9")
    assert result.returncode == 2
    assert "its labs are: 1.1, 1.2" in result.stderr


def test_test_command_on_a_dir_that_is_not_a_practice_dir(mini_course: Path, tmp_path: Path) -> None:
    result = mini(mini_course, "test", "1", str(tmp_path / "missing"))
    assert result.returncode == 2 and "does not exist" in result.stderr
    (tmp_path / "plain").mkdir()
    result = mini(mini_course, "test", "1", str(tmp_path / "plain"))
    assert result.returncode == 2 and "does not look like a practice dir" in result.stderr


def test_a_test_that_never_finishes_is_stopped_and_reported(mini_course: Path, tmp_path: Path) -> None:
    toml = mini_course / CHAPTER / "chapter.toml"
    toml.write_text(toml.read_text().replace('first_step = "Write add."', 'first_step = "Write add."\ntime_limit = 2'))
    directory = tmp_path / "p"
    made_practice(mini_course, "1", directory)
    (directory / "tiny_pi/adder.py").write_text(
        "import trio\n\ndef add(a, b):\n    trio.run(trio.sleep_forever)\n"
    )
    started = time.monotonic()
    result = mini(mini_course, "test", "1", str(directory))
    assert time.monotonic() - started < 20
    assert result.returncode == 1
    assert "the tests did not finish in 2 s - a stream that never ends?" in result.stdout


def test_learner_sees_a_short_readable_failure(mini_course: Path, tmp_path: Path) -> None:
    directory = made_practice(mini_course, "1", tmp_path / "p")
    result = mini_process(mini_course, "test", "1", str(directory))
    assert result.returncode == 1
    assert "could not import the tests in tests/test_01_adder.py" in result.stdout
    assert "hint: create tiny_pi/adder.py, a teaching file of this chapter" in result.stdout
    assert "importlib/__init__.py" not in result.stdout, "no pytest internals for learners"
    (directory / "tiny_pi/adder.py").write_text("def add(a, b):\n    return a * b\n")
    result = mini(mini_course, "test", "1", str(directory))
    assert "first failure: tests/test_01_adder.py::test_add_small" in result.stdout
    assert "assert 2 == 3" in result.stdout


def test_verify_json_reports_every_check_per_chapter(mini_course: Path) -> None:
    before = tree_hash(mini_course / "checkpoints")
    result = mini_process(mini_course, "verify", "--json")
    document = json.loads(result.stdout)
    assert result.returncode == 0 and document["ok"] is True
    kinds = {check["kind"] for check in document["checks"]}
    assert kinds == {"first-red-light", "first-red-light-labs", "focused", "lab", "redlight", "lineage", "card", "copy-share", "messages", "hint-rungs", "lesson-length", "test-labels", "predictions"}
    assert tree_hash(mini_course / "checkpoints") == before


def test_one_run_sorts_tests_into_labs_like_k_does(mini_course: Path, tmp_path: Path) -> None:
    """`course test` runs the focused file once; each lab is judged on its own tests only."""
    directory = made_practice(mini_course, "1", tmp_path / "p")
    (directory / "tiny_pi/adder.py").write_text("def add(a, b):\n    return 3\n")
    result = mini(mini_course, "test", "1", str(directory), "--json")
    document = json.loads(result.stdout)
    labs = {check["name"]: (check["ok"], check["actual"]) for check in document["checks"] if check["kind"] == "lab"}
    assert labs == {"lab 1.1 Small": (True, "1/1 passed"), "lab 1.2 Both": (False, "1/2 passed")}
    assert result.returncode == 1
    assert len({check["duration"] for check in document["checks"]}) == 1, "one run answers for every lab"


@pytest.mark.parametrize("value", ["0", "two", "1.5", "-1"])
def test_a_course_jobs_that_is_not_a_whole_number_of_at_least_one_is_refused(mini_course: Path, value: str) -> None:
    result = mini(mini_course, "checkpoint", "1", env={"COURSE_JOBS": value})
    assert result.returncode == 2
    assert result.stderr == f"course: COURSE_JOBS must be a whole number of at least 1, not {value!r}\n"


def test_checkpoint_in_a_practice_dir_says_it_proves_the_course_and_points_to_course_test(
        mini_course: Path, tmp_path: Path) -> None:
    learner = made_practice(mini_course, "1", tmp_path / "p")
    result = mini(mini_course, "checkpoint", "1", cwd=learner)
    assert result.returncode == 0, result.stdout + result.stderr
    note = ("This proves the course's own chapter 01 (its parent, target and red-light patches), "
            "not the code of your practice dir; your code: `course test`")
    assert f"  {note}" in result.stdout.splitlines() and result.stdout.rstrip().endswith(f"{note}.")
    assert "--target" not in result.stdout, "a learner in a practice dir is not pointed at the answer"
    elsewhere = mini(mini_course, "checkpoint", "1", cwd=tmp_path)
    assert "course diff 01 --target --show" in elsewhere.stdout and "not the code of your practice dir" not in elsewhere.stdout
