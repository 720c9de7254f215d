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


# Nothing is lost: ignored files, the printed recipe, resets at once ------------------------


def bring_back_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith("Bring a file back: ")]
    assert len(lines) == 1, output
    return lines[0].removeprefix("Bring a file back: ")


IGNORE_KINDS = ["info-exclude", "gitignore", "global-excludes-file"]


@pytest.mark.parametrize("kind", IGNORE_KINDS)
def test_reset_saves_a_teaching_file_that_git_ignores(mini_course: Path, tmp_path: Path, kind: str) -> None:
    """Before: an ignored teaching file was removed, the save commit lacked it, and it was gone."""
    learner = practice(mini_course, tmp_path / "p")
    env = {"COURSE_ROOT": str(mini_course)}
    if kind == "info-exclude":
        with open(learner / ".git/info/exclude", "a") as handle:
            handle.write("\ntiny_pi/adder.py\n")
    elif kind == "gitignore":
        (learner / ".gitignore").write_text("adder.py\n")
    else:
        (tmp_path / "global-ignore").write_text("*.py\n")
        (tmp_path / "gitconfig").write_text(f"[core]\n\texcludesFile = {tmp_path / 'global-ignore'}\n")
        env["GIT_CONFIG_GLOBAL"] = str(tmp_path / "gitconfig")
    (learner / "tiny_pi/adder.py").write_text(WRONG)
    assert "adder.py" in subprocess.run(
        ["git", "-C", str(learner), "status", "--ignored", "--porcelain"], capture_output=True, text=True, env={**os.environ, **env}
    ).stdout.split("!! ")[-1], "the setup must really make git ignore the file"

    result = course("reset", "1", str(learner), "--yes", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not (learner / "tiny_pi/adder.py").exists()
    assert git(learner, "show", "course-saves:tiny_pi/adder.py") == WRONG
    pasted = subprocess.run(bring_back_line(result.stdout), shell=True, cwd=REPO, capture_output=True, text=True, env={**os.environ, **env})
    assert pasted.returncode == 0, pasted.stderr
    assert (learner / "tiny_pi/adder.py").read_text() == WRONG


def test_the_printed_recovery_command_works_when_pasted(mini_course: Path, tmp_path: Path) -> None:
    """Before: the command named the first planned file even when reset was only creating it
    (nothing to bring back), and a DIR with a space or a quote broke it in the shell."""
    learner = practice(mini_course, tmp_path / "learner's work")
    (learner / "tests/test_01_adder.py").unlink()  # planned first, as "missing in yours": not in the save
    (learner / "tiny_pi/adder.py").write_text(WRONG)
    result = mini(mini_course, "reset", "1", str(learner), "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "restore tests/test_01_adder.py (missing in yours)" in result.stdout
    command = bring_back_line(result.stdout)
    assert "adder.py" in command
    index_before = (learner / ".git/index").read_bytes()
    pasted = subprocess.run(command, shell=True, cwd=REPO, capture_output=True, text=True)
    assert pasted.returncode == 0, (command, pasted.stderr)
    assert (learner / "tiny_pi/adder.py").read_text() == WRONG
    assert (learner / ".git/index").read_bytes() == index_before, "bringing a file back does not stage it"


def test_a_reset_that_only_creates_missing_files_offers_nothing_to_bring_back(mini_course: Path, learner: Path) -> None:
    (learner / "tests/test_01_adder.py").unlink()
    result = mini(mini_course, "reset", "1", str(learner), "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Bring a file back" not in result.stdout
    assert "none of your files was replaced or removed" in result.stdout


def test_reset_saves_the_exact_bytes_whatever_the_git_filters(mini_course: Path, learner: Path) -> None:
    """Line-ending conversion must not change what is kept: the save holds the bytes on disk."""
    subprocess.run(["git", "-C", str(learner), "config", "core.autocrlf", "input"], check=True)
    (learner / ".gitattributes").write_text("*.py text eol=lf\n")
    crlf = WRONG.replace("\n", "\r\n").encode()
    (learner / "tiny_pi/adder.py").write_bytes(crlf)
    result = mini(mini_course, "reset", "1", str(learner), "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    saved = subprocess.run(
        ["git", "-C", str(learner), "cat-file", "blob", "course-saves:tiny_pi/adder.py"], capture_output=True, check=True
    ).stdout
    assert saved == crlf


def test_three_resets_at_once_keep_every_save_on_the_branch(mini_course: Path, learner: Path) -> None:
    """Before: each reset read the branch, committed on it and moved it blindly, so one
    could overwrite another's move and leave its save commit on no branch."""
    import threading

    from course.catalog import load_catalog
    from course.reset import plan_reset, reset

    (learner / "tiny_pi/adder.py").write_text(WRONG)
    (learner / "tests/test_01_adder.py").write_text("# mine\n")
    chapter = load_catalog(mini_course).chapters[0]
    plans = [plan_reset(chapter, learner) for _ in range(3)]
    assert all(plan.changes for plan in plans)
    start = threading.Barrier(3)
    shas: list[str] = []
    errors: list[BaseException] = []

    def one(plan) -> None:  # type: ignore[no-untyped-def]
        start.wait()
        try:
            shas.append(reset(chapter, plan))
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=one, args=(plan,)) for plan in plans]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert len(set(shas)) == 3
    for sha in shas:
        reachable = subprocess.run(["git", "-C", str(learner), "merge-base", "--is-ancestor", sha, "course-saves"])
        assert reachable.returncode == 0, f"save {sha[:10]} is not on course-saves"
    kept = {git(learner, "show", f"{sha}:tiny_pi/adder.py") for sha in shas if "tiny_pi/adder.py" in git(learner, "ls-tree", "-r", "--name-only", sha)}
    assert WRONG in kept, "the learner's version is in at least one save"
    assert not (learner / "tiny_pi/adder.py").exists()
    assert (learner / "tests/test_01_adder.py").read_bytes() == (mini_course / PARENT / "tests/test_01_adder.py").read_bytes()


def test_a_file_changed_after_the_save_is_left_alone(mini_course: Path, learner: Path) -> None:
    from course.catalog import load_catalog
    from course.reset import CHANGED_SINCE_SAVE, apply_plan, open_practice_repo, plan_reset, save_versions

    (learner / "tiny_pi/adder.py").write_text(WRONG)
    (learner / "tests/test_01_adder.py").write_text("# mine\n")
    plan = plan_reset(load_catalog(mini_course).chapters[0], learner)
    repo = open_practice_repo(learner)
    saved = save_versions(repo, "a save", [change.path for change in plan.changes])
    repo.close()
    (learner / "tiny_pi/adder.py").write_text("# typed after the save\n")
    refused = apply_plan(plan, saved.states)
    assert refused == [("tiny_pi/adder.py", CHANGED_SINCE_SAVE)]
    assert (learner / "tiny_pi/adder.py").read_text() == "# typed after the save\n"
    assert (learner / "tests/test_01_adder.py").read_bytes() == (mini_course / PARENT / "tests/test_01_adder.py").read_bytes()


def test_a_teaching_file_that_is_a_symlink_is_saved_as_one(mini_course: Path, learner: Path) -> None:
    (learner / "tiny_pi/mine.py").write_text(WRONG)
    (learner / "tiny_pi/adder.py").symlink_to("mine.py")
    result = mini(mini_course, "reset", "1", str(learner), "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    entry = git(learner, "ls-tree", "course-saves", "tiny_pi/adder.py")
    assert entry.startswith("120000 ") and git(learner, "show", "course-saves:tiny_pi/adder.py") == "mine.py"
    assert (learner / "tiny_pi/mine.py").read_text() == WRONG, "the link is removed, not what it points to"
    assert not (learner / "tiny_pi/adder.py").is_symlink()


def test_a_save_that_would_lack_a_planned_file_changes_nothing(
    mini_course: Path, learner: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The saved tree is read back before anything is touched: a file missing there stops the reset."""
    import course.reset as reset_module
    from course.catalog import load_catalog
    from course.errors import CourseError

    (learner / "tiny_pi/adder.py").write_text(WRONG)
    with open(learner / ".git/info/exclude", "a") as handle:
        handle.write("tiny_pi/adder.py\n")
    chapter = load_catalog(mini_course).chapters[0]
    plan = reset_module.plan_reset(chapter, learner)
    forced = reset_module._force_into_index

    def loses_the_file(directory, env, states):  # type: ignore[no-untyped-def]
        wanted = forced(directory, env, {})  # puts nothing in by force, as the old save did
        return {**wanted, "tiny_pi/adder.py": ("100644", "0" * 40)}

    monkeypatch.setattr(reset_module, "_force_into_index", loses_the_file)
    with pytest.raises(CourseError, match="would not hold your version of tiny_pi/adder.py, so nothing was changed"):
        reset_module.reset(chapter, plan)
    assert (learner / "tiny_pi/adder.py").read_text() == WRONG
    assert "course-saves" not in branches(learner)
