"""Hostile input, part 2: the learner's dir is odd, and `practice`, `test`, `reset` and `diff`
either work or refuse in one clear paragraph. None of them follows a link out of DIR to write.

Odd means: symbolic links (inside DIR, and out of it: the state dir, a
teaching file, a package dir, `.git`), file names that are not UTF-8, files
that cannot be changed (immutable, since we run as root and mode bits do not
stop root), and a `.git` that is not a repository.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import git
import pytest

from conftest import FIXTURES, REPO, made_practice, mini, tree_hash

RIGHT = (FIXTURES / "mini-course/checkpoints/01-adder/target/tiny_pi/adder.py").read_text()
WRONG = "def add(a, b):\n    return a - b\n"


@pytest.fixture
def work(mini_course: Path, tmp_path: Path) -> Path:
    directory = tmp_path / "work"
    return made_practice(mini_course, "1", directory)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A place outside DIR that no command may change."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "keep.txt").write_text("not yours to write\n")
    return folder


def no_traceback(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert "Traceback" not in result.stderr, result.stderr
    return result


def run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`course ARGS` in this process, which must end without a traceback."""
    return no_traceback(mini(root, *args))


# Links out of DIR ------------------------------------------------------------------------


def test_a_state_dir_linked_outside_is_never_written_through(
    mini_course: Path, work: Path, outside: Path
) -> None:
    """`.course` -> outside: test, hint and reset still work, and simply do not remember."""
    (work / ".course").symlink_to(outside, target_is_directory=True)
    before = tree_hash(outside)
    assert run(mini_course, "test", "1", str(work), "--lab", "1.1").returncode == 1
    hint = run(mini_course, "hint", "1", str(work), "--lab", "1.1", "--next")
    assert hint.returncode == 0 and "could not write .course/hints.json here" in hint.stdout
    (work / "tiny_pi/adder.py").write_text(WRONG)
    (outside / "last-test.json").write_text("{}")  # reset removes the verdict: never this one
    before = tree_hash(outside)
    assert run(mini_course, "reset", "1", str(work), "--yes").returncode == 0
    assert tree_hash(outside) == before
    assert (work / ".course").is_symlink()


def test_a_state_file_linked_outside_is_replaced_not_written_through(
    mini_course: Path, work: Path, outside: Path
) -> None:
    (work / ".course").mkdir()
    victim = outside / "victim.json"
    victim.write_text("precious\n")
    (work / ".course/last-test.json").symlink_to(victim)
    (work / ".course/hints.json").symlink_to(victim)
    (work / "tiny_pi/adder.py").write_text(RIGHT)
    assert run(mini_course, "test", "1", str(work)).returncode == 0
    assert run(mini_course, "hint", "1", str(work), "--lab", "1.1", "--next").returncode == 0
    assert victim.read_text() == "precious\n"
    for name in ("last-test.json", "hints.json"):
        state = work / ".course" / name
        assert not state.is_symlink() and json.loads(state.read_text())["chapter"] == "01-adder"


def test_a_teaching_file_linked_outside_is_read_but_never_reset(
    mini_course: Path, work: Path, outside: Path
) -> None:
    """Reading through the link is the learner's business; writing through it is refused."""
    (outside / "adder.py").write_text(RIGHT)
    (work / "tiny_pi/adder.py").symlink_to(outside / "adder.py")
    before = tree_hash(outside)
    assert run(mini_course, "test", "1", str(work)).returncode == 0
    diff = run(mini_course, "diff", "1", str(work))
    assert diff.returncode == 0 and "tiny_pi/adder.py: same as the target" in diff.stdout
    reset = run(mini_course, "reset", "1", str(work), "--yes")
    assert reset.returncode == 2
    assert "goes through the symbolic link tiny_pi/adder.py, which points outside" in reset.stderr
    assert "nothing was changed" in reset.stderr
    assert tree_hash(outside) == before
    assert (work / "tiny_pi/adder.py").is_symlink()


def test_a_package_dir_linked_outside_is_never_reset_into(mini_course: Path, work: Path, outside: Path) -> None:
    shutil.move(str(work / "tiny_pi"), str(outside / "tiny_pi"))
    (outside / "tiny_pi/__init__.py").write_text("# the learner changed this\n")
    (work / "tiny_pi").symlink_to(outside / "tiny_pi", target_is_directory=True)
    before = tree_hash(outside)
    assert run(mini_course, "test", "1", str(work)).returncode == 1
    reset = run(mini_course, "reset", "1", str(work), "--yes")
    assert reset.returncode == 2 and "points outside" in reset.stderr
    assert tree_hash(outside) == before


def test_links_that_stay_inside_dir_just_work(mini_course: Path, work: Path) -> None:
    """A teaching file linked to the learner's own notes: test, diff and reset all work; reset removes the link only."""
    (work / "notes").mkdir()
    (work / "notes/adder.py").write_text(RIGHT)
    (work / "tiny_pi/adder.py").symlink_to(Path("../notes/adder.py"))
    assert run(mini_course, "test", "1", str(work)).returncode == 0
    assert run(mini_course, "diff", "1", str(work)).returncode == 0
    assert run(mini_course, "reset", "1", str(work), "--yes").returncode == 0
    assert not (work / "tiny_pi/adder.py").exists() and not (work / "tiny_pi/adder.py").is_symlink()
    assert (work / "notes/adder.py").read_text() == RIGHT


# A .git that is not the practice dir's own repository ---------------------------------------


@pytest.fixture
def other_repo(tmp_path: Path) -> Path:
    """Somebody else's repository, outside DIR."""
    repo = git.Repo.init(tmp_path / "other", initial_branch="main")
    repo.git.commit("--allow-empty", "-m", "theirs", env={
        "GIT_AUTHOR_NAME": "x", "GIT_AUTHOR_EMAIL": "x@x", "GIT_COMMITTER_NAME": "x", "GIT_COMMITTER_EMAIL": "x@x"})
    repo.close()
    return tmp_path / "other"


@pytest.mark.parametrize("kind", ["garbage-file", "empty-dir", "link-to-another-repo", "gitfile-to-another-repo"])
def test_a_dot_git_that_is_not_the_dirs_repository(
    mini_course: Path, work: Path, other_repo: Path, kind: str
) -> None:
    """test and diff do not need git; reset refuses, and never saves into another repository.

    Before: a `.git` link or `gitdir:` file to another repository made reset
    write its save commit and a `course-saves` branch there.
    """
    shutil.rmtree(work / ".git")
    dot_git = work / ".git"
    if kind == "garbage-file":
        dot_git.write_bytes(b"\xff\x00 not a repository")
    elif kind == "empty-dir":
        dot_git.mkdir()
    elif kind == "link-to-another-repo":
        dot_git.symlink_to(other_repo / ".git", target_is_directory=True)
    else:
        dot_git.write_text(f"gitdir: {other_repo / '.git'}\n")
    before = tree_hash(other_repo)
    (work / "tiny_pi/adder.py").write_text(WRONG)
    assert run(mini_course, "test", "1", str(work)).returncode == 1
    diff = run(mini_course, "diff", "1", str(work))
    assert diff.returncode == 0 and "tiny_pi/adder.py: differs in code" in diff.stdout
    reset = run(mini_course, "reset", "1", str(work), "--yes")
    assert reset.returncode == 2
    assert "nothing was changed" in reset.stderr
    assert (work / "tiny_pi/adder.py").read_text() == WRONG
    assert tree_hash(other_repo) == before
    assert "course-saves" not in [head.name for head in git.Repo(REPO).heads]


# Names that are not UTF-8 -----------------------------------------------------------------


def course_bytes(root: Path, *args: bytes) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ, COURSE_ROOT=str(root))
    result = subprocess.run([sys.executable, b"-m", b"course", *args], cwd=REPO, env=env, capture_output=True, timeout=120)
    assert b"Traceback" not in result.stderr, result.stderr.decode(errors="replace")
    return result


def test_names_that_are_not_utf8(mini_course: Path, tmp_path: Path) -> None:
    """A DIR whose own name is not UTF-8, holding files whose names are not either: everything works."""
    directory = os.fsencode(tmp_path) + b"/work-\xff"
    assert course_bytes(mini_course, b"practice", b"1", directory).returncode == 0
    (Path(os.fsdecode(directory)) / os.fsdecode(b"notes-\xfe.txt")).write_text("mine")
    os.mkdir(directory + b"/tiny_pi/\xfdsub")
    with open(directory + b"/tiny_pi/\xfdsub/x\xfc.py", "w") as handle:
        handle.write("X = 1\n")
    with open(directory + b"/tiny_pi/adder.py", "w") as handle:
        handle.write(RIGHT)
    document = json.loads(course_bytes(mini_course, b"test", b"1", directory, b"--json").stdout)
    assert document["ok"] is True
    assert os.fsencode(document["directory"]) == directory, "the path survives the JSON round trip"
    assert course_bytes(mini_course, b"diff", b"1", directory).returncode == 0
    assert json.loads(course_bytes(mini_course, b"diff", b"1", directory, b"--json").stdout)["same"] is True
    assert course_bytes(mini_course, b"status", directory).returncode == 0
    reset = course_bytes(mini_course, b"reset", b"1", directory, b"--yes")
    assert reset.returncode == 0, reset.stdout + reset.stderr
    repo = git.Repo(os.fsdecode(directory))
    saved = repo.git.ls_tree("-r", "--name-only", "-z", "course-saves", stdout_as_string=False).split(b"\0")
    assert b"notes-\xfe.txt" in saved and b"tiny_pi/\xfdsub/x\xfc.py" in saved
    refused = course_bytes(mini_course, b"reset", b"1", directory, b"--yes", b"--file", b"notes-\xfe.txt")
    assert refused.returncode == 2 and b"is not a file of chapter 01-adder's starting point" in refused.stderr


# Files that cannot be changed ---------------------------------------------------------------


@pytest.fixture
def immutable():
    """chattr +i (even root cannot change such a file); undone after the test so tmp can be removed."""
    marked: list[Path] = []

    def mark(path: Path) -> None:
        done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"chattr +i is not available here: {done.stderr.strip()}")
        marked.append(path)

    yield mark
    for path in marked:
        subprocess.run(["chattr", "-i", str(path)], check=False)


def test_a_file_that_cannot_be_changed(mini_course: Path, work: Path, immutable) -> None:
    """test and diff read it; reset does all it can, names what was refused, and keeps the save."""
    (work / "tiny_pi/adder.py").write_text(WRONG)
    with open(work / "tests/test_01_adder.py", "a") as handle:
        handle.write("# the learner's note\n")
    immutable(work / "tiny_pi/adder.py")
    assert run(mini_course, "test", "1", str(work)).returncode == 1
    diff = run(mini_course, "diff", "1", str(work))
    assert diff.returncode == 0 and "tiny_pi/adder.py: differs in code" in diff.stdout
    reset = run(mini_course, "reset", "1", str(work), "--yes")
    assert reset.returncode == 2
    assert "reset changed 1 of 2 file(s)" in reset.stderr
    assert "tiny_pi/adder.py: Operation not permitted" in reset.stderr
    assert "saved in commit" in reset.stderr
    assert (work / "tests/test_01_adder.py").read_bytes() == (
        mini_course / "checkpoints/01-adder/parent/tests/test_01_adder.py").read_bytes()
    assert (work / "tiny_pi/adder.py").read_text() == WRONG


def test_a_repository_that_cannot_be_written(mini_course: Path, work: Path, immutable) -> None:
    """The save commit fails: reset stops before changing a single file."""
    (work / "tiny_pi/adder.py").write_text(WRONG)
    immutable(work / ".git/objects")
    reset = run(mini_course, "reset", "1", str(work), "--yes")
    assert reset.returncode == 2
    assert "could not save your versions" in reset.stderr and "nothing was changed" in reset.stderr
    assert (work / "tiny_pi/adder.py").read_text() == WRONG


def test_an_empty_dir_that_cannot_be_replaced(mini_course: Path, tmp_path: Path, immutable) -> None:
    directory = tmp_path / "frozen"
    directory.mkdir()
    immutable(directory)
    result = run(mini_course, "practice", "1", str(directory))
    assert result.returncode == 2
    assert f"could not make the practice dir {directory}: Operation not permitted" in result.stderr
    assert list(directory.iterdir()) == []
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
