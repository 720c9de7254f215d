"""Hostile input, part 6: DIR spelled so that writing there could destroy something.

`course practice NN DIR` must refuse, with exit 2 and one paragraph, every
DIR whose making would overwrite or confuse what is there: the repository
or its parents, anything under checkpoints/ (however it is spelled: `..`,
a relative path, a path through a symbolic link), your home, the root, a
.git directory, the directory your shell stands in, a symbolic link. It
creates nothing on refusal. (tests/test_chapters.py covers a non-empty DIR,
a file, and `..`/`~`/the root on the real course; this file uses a private
copy, where a failing refusal cannot hurt.)
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from conftest import CHECKPOINTS, REPO, course, tree_hash
from course.errors import UsageError
from course.workspace import check_practice_target

REAL_CHAPTER = CHECKPOINTS / "03-message-ir"


@pytest.fixture
def world(mini_course: Path, tmp_path: Path) -> dict[str, Path]:
    """The fixture course (plus a copy of the real chapter 03, so its literal paths exist), a home, links."""
    if REAL_CHAPTER.is_dir():
        shutil.copytree(REAL_CHAPTER, mini_course / "checkpoints" / REAL_CHAPTER.name)
    (mini_course / "practice").mkdir()
    home = tmp_path / "home"
    home.mkdir()
    empty = tmp_path / "empty"
    empty.mkdir()
    (tmp_path / "link-to-empty").symlink_to(empty, target_is_directory=True)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "link-to-checkpoints").symlink_to(mini_course / "checkpoints", target_is_directory=True)
    (tmp_path / "link-to-course").symlink_to(mini_course, target_is_directory=True)
    (home / "link").symlink_to(empty, target_is_directory=True)
    repo = tmp_path / "some-repo"
    (repo / ".git" / "refs").mkdir(parents=True)
    return {"root": mini_course, "tmp": tmp_path, "home": home, "empty": empty, "repo": repo}


REFUSED = [
    # (DIR as typed, cwd, what the refusal says)
    ("..", "root/practice", "is the course repository or one of its parents"),
    ("{root}", "tmp", "is the course repository or one of its parents"),
    ("{tmp}", "tmp", "is the course repository or one of its parents"),
    ("/", "tmp", "one of its parents"),
    ("~", "tmp", "is your home"),
    ("checkpoints/03-message-ir/parent", "root", "inside checkpoints/"),
    ("checkpoints/01-adder/parent/tiny_pi", "root", "inside checkpoints/"),
    ("checkpoints/99-new", "root", "inside checkpoints/"),
    ("../checkpoints/01-adder/fresh", "root/practice", "inside checkpoints/"),
    ("{tmp}/link-to-checkpoints/fresh", "tmp", "inside checkpoints/"),
    ("{tmp}/link-to-course", "tmp", "is the course repository"),
    ("{tmp}/link-to-empty", "tmp", "is a symbolic link"),
    ("{tmp}/dangling", "tmp", "is a symbolic link"),
    ("~/link", "tmp", "is a symbolic link"),
    ("{repo}/.git/refs/work", "tmp", "inside a .git directory"),
    (".", "empty", "is your current directory"),
    ("", "empty", "is your current directory"),
]


def typed_and_cwd(world: dict[str, Path], typed: str, cwd: str) -> tuple[str, Path]:
    root, tmp = world["root"], world["tmp"]
    directory = typed.format(root=root, tmp=tmp, repo=world["repo"])
    where = tmp if cwd == "tmp" else world["empty"] if cwd == "empty" else root / cwd.removeprefix("root").lstrip("/")
    return directory, where


@pytest.mark.parametrize("typed,cwd,says", REFUSED, ids=[f"{t or 'empty-string'}@{c}" for t, c, _ in REFUSED])
def test_dangerous_dirs_are_refused(
    world: dict[str, Path], typed: str, cwd: str, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check `course practice` makes before it writes anything, asked in-process as the command asks it."""
    directory, where = typed_and_cwd(world, typed, cwd)
    monkeypatch.chdir(where)
    monkeypatch.setenv("HOME", str(world["home"]))
    with pytest.raises(UsageError) as caught:
        check_practice_target(Path(directory), world["root"])
    assert says in str(caught.value)


@pytest.mark.parametrize("typed,cwd,says", [REFUSED[0], REFUSED[9], REFUSED[-1]], ids=["parent", "linked", "empty-string"])
def test_a_refused_dir_is_one_line_and_nothing_is_made(world: dict[str, Path], typed: str, cwd: str, says: str) -> None:
    root, tmp = world["root"], world["tmp"]
    directory, where = typed_and_cwd(world, typed, cwd)
    before = {name: tree_hash(path) for name, path in (("checkpoints", root / "checkpoints"), ("tmp", tmp))}
    result = course("practice", "1", directory, cwd=where, env={"COURSE_ROOT": str(root), "HOME": str(world["home"])})
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert says in result.stderr, result.stderr
    assert result.stdout == ""
    assert tree_hash(root / "checkpoints") == before["checkpoints"]
    assert tree_hash(tmp) == before["tmp"], "a refused practice created something"


def test_the_literal_paths_on_the_real_course_are_refused() -> None:
    """The spelling from the issue, on the real repository: refused before anything is written."""
    if not (REAL_CHAPTER / "parent").is_dir():
        pytest.skip("chapter 03 is not in this checkout")
    before = tree_hash(REAL_CHAPTER)
    result = course("practice", "02", "checkpoints/03-message-ir/parent", cwd=REPO)
    assert result.returncode == 2 and "inside checkpoints/" in result.stderr, result.stderr
    assert tree_hash(REAL_CHAPTER) == before


@pytest.mark.parametrize("typed", ["~/work", "{tmp}/link-to-course/practice/01-adder", "{tmp}/new/deeper/work"])
def test_ordinary_dirs_still_work(world: dict[str, Path], typed: str) -> None:
    """Refusing too much is a failure too: a new dir in home, under a link to the course's practice/, deep."""
    directory = typed.format(tmp=world["tmp"])
    result = course("practice", "1", directory, cwd=world["tmp"],
                    env={"COURSE_ROOT": str(world["root"]), "HOME": str(world["home"])})
    assert result.returncode == 0, result.stdout + result.stderr
    made = Path(os.path.expanduser(directory.replace("~", str(world["home"]), 1)))
    assert (made / "LEARNING.md").is_file() and (made / ".git").is_dir()
