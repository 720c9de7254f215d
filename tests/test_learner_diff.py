"""`course diff`: first which files differ and by how much (no code), then the code with --show."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import mini
from loop_helpers import WRONG, practice, run_in_pty

TARGET_ADDER = Path("checkpoints/01-adder/target/tiny_pi/adder.py")


def test_diff_without_the_flag_names_files_and_counts_but_shows_no_code(mini_course: Path, tmp_path: Path) -> None:
    learner = practice(mini_course, tmp_path / "p")
    (learner / "tiny_pi/adder.py").write_text(WRONG)
    result = mini(mini_course, "diff", "1", str(learner))
    assert result.returncode == 0, result.stderr
    assert "tiny_pi/adder.py: differs in code - 1 line(s) only in yours, 2 only in the target" in result.stdout
    assert f"Predict what differs, then look: `course diff 01 {learner} --show`" in result.stdout
    target_code = (mini_course / TARGET_ADDER).read_text().splitlines()
    for line in target_code + WRONG.splitlines():
        assert line.strip() not in result.stdout, f"code leaked: {line!r}"
    assert "@@" not in result.stdout and "+++" not in result.stdout


def test_diff_show_prints_a_unified_diff_yours_to_target(mini_course: Path, tmp_path: Path) -> None:
    learner = practice(mini_course, tmp_path / "p")
    (learner / "tiny_pi/adder.py").write_text(WRONG)
    result = mini(mini_course, "diff", "1", str(learner), "--show")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert "--- yours/tiny_pi/adder.py" in lines and "+++ target/tiny_pi/adder.py" in lines
    assert "-    return a * b" in lines and "+    return a + b" in lines
    assert "\x1b[" not in result.stdout, "no colour codes when piped"


def test_diff_colours_in_a_terminal_unless_no_color(mini_course: Path, tmp_path: Path) -> None:
    learner = practice(mini_course, tmp_path / "p")
    (learner / "tiny_pi/adder.py").write_text(WRONG)
    coloured = run_in_pty(mini_course, "diff", "1", str(learner), "--show")
    assert "\x1b[32m+    return a + b" in coloured and "\x1b[31m-    return a * b" in coloured
    plain = run_in_pty(mini_course, "diff", "1", str(learner), "--show", NO_COLOR="1")
    assert "+    return a + b" in plain and "\x1b[" not in plain


def test_missing_and_identical_files(mini_course: Path, tmp_path: Path) -> None:
    learner = practice(mini_course, tmp_path / "p")
    missing = mini(mini_course, "diff", "1", str(learner), "--json")
    document = json.loads(missing.stdout)
    assert missing.returncode == 0 and document["same"] is False
    assert document["files"] == [{"path": "tiny_pi/adder.py", "status": "missing", "only_yours": 0, "only_target": 3, "same_code": False}]
    assert "not written yet (the target's has 3 lines)" in mini(mini_course, "diff", "1", str(learner)).stdout
    shutil.copy(mini_course / TARGET_ADDER, learner / "tiny_pi/adder.py")
    same = mini(mini_course, "diff", "1", str(learner), "--show")
    assert same.returncode == 0
    assert "tiny_pi/adder.py: same as the target" in same.stdout
    assert "Predict" not in same.stdout and "@@" not in same.stdout


def test_diff_lists_the_learners_tests_and_config_that_a_verdict_does_not_use(mini_course: Path, tmp_path: Path) -> None:
    learner = practice(mini_course, tmp_path / "p")
    (learner / "tests/test_01_adder.py").write_text("def test_add_small(): pass\n")
    (learner / "tests/conftest.py").write_text("")
    result = mini(mini_course, "diff", "1", str(learner))
    assert ("Your tests and config that differ from the chapter's (course test uses the chapter's): "
            "tests/conftest.py, tests/test_01_adder.py") in result.stdout
    document = json.loads(mini(mini_course, "diff", "1", str(learner), "--json").stdout)
    assert document["tests_and_config_not_used"] == ["tests/conftest.py", "tests/test_01_adder.py"]
