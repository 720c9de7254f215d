"""`course reset`: back to the starting point, with the learner's versions kept in git first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, course, mini
from course.errors import UsageError
from course.reset import safe_relative
from loop_helpers import WRONG, practice

PARENT = Path("checkpoints/01-adder/parent")


def git(directory: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(directory), *args], capture_output=True, text=True, check=True
    ).stdout


def branches(directory: Path) -> str:
    return git(directory, "branch", "--list")


@pytest.fixture
def learner(mini_course: Path, tmp_path: Path) -> Path:
    return practice(mini_course, tmp_path / "p")


def test_reset_keeps_the_learners_old_version_recoverable_from_git(mini_course: Path, learner: Path) -> None:
    start = git(learner, "rev-parse", "HEAD").strip()
    (learner / "tiny_pi/adder.py").write_text(WRONG)
    test_file = learner / "tests/test_01_adder.py"
    original_test = test_file.read_text()
    test_file.write_text(original_test + "def test_mine(): assert True\n")

    result = mini(mini_course, "reset", "1", str(learner), "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "remove  tiny_pi/adder.py (not in the starting point)" in result.stdout
    assert "restore tests/test_01_adder.py (yours differs from the starting point)" in result.stdout
    assert not (learner / "tiny_pi/adder.py").exists()
    assert test_file.read_text() == original_test

    # Nothing is lost: both versions are in the commit on course-saves ...
    assert git(learner, "show", "course-saves:tiny_pi/adder.py") == WRONG
    assert "def test_mine()" in git(learner, "show", "course-saves:tests/test_01_adder.py")
    saved = git(learner, "rev-parse", "course-saves").strip()
    assert f"Saved your versions as commit {saved[:10]}" in result.stdout
    # ... and the printed recipe brings one back.
    git(learner, "checkout", saved, "--", "tiny_pi/adder.py")
    assert (learner / "tiny_pi/adder.py").read_text() == WRONG
    # HEAD did not move, so `git diff` still means "my work since the start".
    assert git(learner, "rev-parse", "HEAD").strip() == start
    assert git(learner, "rev-parse", "course-saves~1").strip() == start


def test_reset_one_file_and_saves_chain(mini_course: Path, learner: Path) -> None:
    (learner / "tiny_pi/adder.py").write_text(WRONG)
    (learner / "tiny_pi/__init__.py").write_text("# mine\n")
    (learner / "notes.md").write_text("my notes\n")
    first = mini(mini_course, "reset", "1", str(learner), "--file", "tiny_pi/__init__.py", "--yes")
    assert first.returncode == 0, first.stderr
    assert (learner / "tiny_pi/__init__.py").read_bytes() == (mini_course / PARENT / "tiny_pi/__init__.py").read_bytes()
    assert (learner / "tiny_pi/adder.py").read_text() == WRONG, "--file touches only that file"
    second = mini(mini_course, "reset", "1", str(learner), "--yes")
    assert second.returncode == 0
    assert (learner / "notes.md").read_text() == "my notes\n", "files that are not the chapter's are left alone"
    log = git(learner, "log", "--format=%s", "course-saves")
    assert log.count("course reset 01") == 2, "each reset adds a save on top of the last"
    nothing = mini(mini_course, "reset", "1", str(learner), "--yes")
    assert nothing.returncode == 0 and "Nothing to reset" in nothing.stdout
    assert git(learner, "log", "--format=%s", "course-saves").count("course reset 01") == 2


def test_reset_asks_first(mini_course: Path, learner: Path) -> None:
    (learner / "tiny_pi/adder.py").write_text(WRONG)
    env = {"COURSE_ROOT": str(mini_course)}
    declined = subprocess.run(
        [sys.executable, "-m", "course", "reset", "1", str(learner)], input="n\n", capture_output=True, text=True, env={**os.environ, **env}, cwd=REPO
    )
    assert declined.returncode == 1 and "Nothing was changed." in declined.stdout
    no_answer = mini(mini_course, "reset", "1", str(learner))
    assert no_answer.returncode == 2 and "Pass --yes" in no_answer.stderr
    assert (learner / "tiny_pi/adder.py").read_text() == WRONG
    assert "course-saves" not in branches(learner)
    agreed = subprocess.run(
        [sys.executable, "-m", "course", "reset", "1", str(learner)], input="y\n", capture_output=True, text=True, env={**os.environ, **env}, cwd=REPO
    )
    assert agreed.returncode == 0 and not (learner / "tiny_pi/adder.py").exists()


def test_reset_refuses_paths_outside_the_practice_dir(mini_course: Path, learner: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "adder.py").write_text("keep me\n")
    (learner / "escape").symlink_to(outside)
    (learner / "tiny_pi/adder.py").write_text(WRONG)
    for name, message in [
        ("../outside/adder.py", "is outside"),
        (str(outside / "adder.py"), "is outside"),
        ("escape/adder.py", "goes through the symbolic link escape, which points outside"),
        ("notes.md", "is not a file of chapter 01-adder's starting point"),
        (".", "is the practice dir itself"),
    ]:
        result = mini(mini_course, "reset", "1", str(learner), "--file", name, "--yes")
        assert result.returncode == 2, name
        assert message in result.stderr, (name, result.stderr)
        assert "Traceback" not in result.stderr
    assert (outside / "adder.py").read_text() == "keep me\n"
    assert (learner / "tiny_pi/adder.py").read_text() == WRONG
    assert "course-saves" not in branches(learner)


def test_reset_refuses_a_teaching_path_redirected_outside(mini_course: Path, learner: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "adder.py").write_text("not yours\n")
    package = learner / "tiny_pi"
    package.rename(learner / "tiny_pi_real")
    package.symlink_to(outside)
    result = mini(mini_course, "reset", "1", str(learner), "--yes")
    assert result.returncode == 2 and "points outside" in result.stderr
    assert (outside / "adder.py").read_text() == "not yours\n"


def test_reset_needs_the_practice_repo(mini_course: Path, learner: Path) -> None:
    import shutil

    shutil.rmtree(learner / ".git")
    (learner / "tiny_pi/adder.py").write_text(WRONG)
    result = mini(mini_course, "reset", "1", str(learner), "--yes")
    assert result.returncode == 2 and "not a git repository" in result.stderr
    assert (learner / "tiny_pi/adder.py").exists()
    missing_dir = course("reset", "1", env={"COURSE_ROOT": str(mini_course)})
    assert missing_dir.returncode == 2 and "name the practice dir to reset" in missing_dir.stderr


def test_safe_relative_accepts_inside_paths_and_refuses_the_rest(tmp_path: Path) -> None:
    root = tmp_path / "p"
    (root / "tiny_pi").mkdir(parents=True)
    (root / "inner").symlink_to(root / "tiny_pi")
    assert safe_relative(root, "tiny_pi/x.py") == "tiny_pi/x.py"
    assert safe_relative(root, str(root / "tiny_pi/x.py")) == "tiny_pi/x.py"
    assert safe_relative(root, "tiny_pi/../tiny_pi/x.py") == "tiny_pi/x.py"
    assert safe_relative(root, "inner/x.py") == "inner/x.py", "a symlink that stays inside is fine"
    (root / "out").symlink_to(tmp_path)
    for bad in ("../x.py", "/etc/passwd", "out/x.py", "tiny_pi/../../x.py"):
        with pytest.raises(UsageError):
            safe_relative(root, bad)
