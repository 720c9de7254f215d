"""A teaching file that is not there (deleted, a folder in its place, a dangling link) is judged missing.

The verdict is made of the learner's files as written (README, "What a
verdict means"): the chapter's own copy of a teaching file must never stand in
for one the learner no longer has, inside `tiny_pi/` or outside it (chapter
00's `predictions.toml`, whose chapter copy holds the right answers). Each
case starts from a dir that is green, so a verdict that took the chapter's
copy would be green too; each must be red and name the file.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from conftest import REPO, course, made_practice, mini
from course.catalog import load_catalog
from loop_helpers import RIGHT

KINDS = ("deleted", "a folder", "a dangling link")


def take_away(path: Path, kind: str) -> None:
    path.unlink()
    if kind == "a folder":
        path.mkdir()
        (path / "inside.txt").write_text("not the file\n")
    elif kind == "a dangling link":
        path.symlink_to(path.with_name("nowhere-" + path.name))


def put_back(path: Path, content: bytes) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.is_symlink():
        path.unlink()
    path.write_bytes(content)


def assert_each_missing_file_is_named(run, directory: Path, names: list[str]) -> None:
    green = run()
    assert green.returncode == 0 and "Green" in green.stdout, green.stdout + green.stderr
    for name in names:
        path = directory / name
        content = path.read_bytes()
        for kind in KINDS:
            take_away(path, kind)
            try:
                result = run()
            finally:
                put_back(path, content)
            out = result.stdout
            assert result.returncode == 1 and "Green" not in out, f"{name} {kind}:\n{out}{result.stderr}"
            said = [f"{name} is missing", f"left out: {name}", f"create {name}"]
            assert any(words in out for words in said), f"{name} {kind} is not named:\n{out}"
            assert "Traceback" not in result.stderr


@pytest.mark.skipif(not (REPO / "checkpoints/00-prologue").is_dir(), reason="chapter 00 is not in this checkout")
def test_observe_chapter_teaching_files_inside_and_outside_the_package(tmp_path: Path) -> None:
    """Chapter 00: tiny_pi/prologue.py and predictions.toml, the right answers written in first."""
    chapter = load_catalog(REPO).resolve("00")
    directory = made_practice(REPO, "00", tmp_path / "p00")
    for name in chapter.starter_files:
        shutil.copyfile(chapter.target / name, directory / name)
    assert set(chapter.teaching_files) == {"tiny_pi/prologue.py", "predictions.toml"}, "a new kind to test"
    assert_each_missing_file_is_named(lambda: course("test", "00", str(directory)), directory,
                                      list(chapter.teaching_files))


def test_rebuild_chapter_teaching_file(mini_course: Path, tmp_path: Path) -> None:
    directory = made_practice(mini_course, "1", tmp_path / "p")
    (directory / "tiny_pi/adder.py").write_text(RIGHT)
    assert_each_missing_file_is_named(lambda: mini(mini_course, "test", "1", str(directory)), directory,
                                      ["tiny_pi/adder.py"])
    assert not os.path.lexists(directory / "tiny_pi/nowhere-adder.py")
