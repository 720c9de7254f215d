"""Progress: `course list` and `course status` read practice dirs and their last `course test`."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import made_practice, mini, tree_hash
from loop_helpers import RIGHT, SMALL_ONLY


def test_progress_follows_the_practice_dir_and_its_last_test(mini_course: Path) -> None:
    before = tree_hash(mini_course / "checkpoints")
    listing = mini(mini_course, "list")
    assert "practice: none yet (course practice 01)" in listing.stdout
    status = json.loads(mini(mini_course, "status", "--json").stdout)
    assert status["not_started"] == 1 and status["next"] == "`course practice 01`"

    assert mini(mini_course, "practice", "1").returncode == 0  # default place: practice/01-adder
    learner = mini_course / "practice/01-adder"
    assert f"practice: {learner} - last test: not tested yet" in mini(mini_course, "list").stdout

    (learner / "tiny_pi/adder.py").write_text(SMALL_ONLY)
    assert mini(mini_course, "test", "1", cwd=learner).returncode == 1
    assert "last test: red (1/2 labs green)" in mini(mini_course, "list").stdout
    text = mini(mini_course, "status")
    assert text.returncode == 0
    assert re.search(r"01-adder\s+red \(1/2 labs green\)\s+last test \d{4}-", text.stdout)
    assert "0 green, 1 in progress, 0 not started, of 1 chapters." in text.stdout
    assert "Next: make lab 1.2 green: `course test 01 --lab 1.2` (stuck? `course hint 01 --lab 1.2`)" in text.stdout

    (learner / "tiny_pi/adder.py").write_text(RIGHT)
    assert mini(mini_course, "test", "1", str(learner), "--lab", "1.1").returncode == 0
    chapter = json.loads(mini(mini_course, "status", "--json").stdout)["chapters"][0]
    assert chapter["state"] == "lab run" and chapter["verdict"] == "lab 1.1 green"
    assert chapter["labs"] == {"1.1": True, "1.2": None}

    assert mini(mini_course, "test", "1", str(learner)).returncode == 0
    status = json.loads(mini(mini_course, "status", "--json").stdout)
    assert status["green"] == 1 and status["chapters"][0]["labs"] == {"1.1": True, "1.2": True}
    assert status["next"].startswith("the red-light exercise 1.R1")
    assert (learner / ".course/last-test.json").is_file()
    assert tree_hash(mini_course / "checkpoints") == before, "progress is never kept under checkpoints/"


def test_a_damaged_last_test_file_reads_as_no_result(mini_course: Path) -> None:
    made_practice(mini_course, "1", mini_course / "practice/01-adder")
    state = mini_course / "practice/01-adder/.course"
    state.mkdir(exist_ok=True)
    (state / "last-test.json").write_text('{"chapter": 3, "checks": "nope"')
    result = mini(mini_course, "status")
    assert result.returncode == 0 and "not tested yet" in result.stdout


def test_status_reads_a_practice_dir_outside_the_default_place(mini_course: Path, tmp_path: Path) -> None:
    learner = tmp_path / "elsewhere"
    made_practice(mini_course, "1", learner)
    (learner / "tiny_pi/adder.py").write_text(RIGHT)
    assert mini(mini_course, "test", "1", str(learner)).returncode == 0
    named = mini(mini_course, "status", str(learner))
    assert named.returncode == 0 and "green (2/2 labs green)" in named.stdout and f"in {learner}" in named.stdout
    inside = json.loads(mini(mini_course, "status", "--json", cwd=learner).stdout)
    assert inside["green"] == 1, "run inside a practice dir, status reads that dir"
    wrong = mini(mini_course, "status", str(tmp_path))
    assert wrong.returncode == 2 and "is not a practice dir of this course" in wrong.stderr
