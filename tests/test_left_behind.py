"""A file a chapter owns leaves the lineage when the chapter is done (`left_behind` in chapter.toml).

Chapter 00 leaves behind its filled-in predictions.toml (the answers of its
predictions), its prologue module and that module's tests: chapter 01's parent and
every later snapshot hold none of them, the lineage check says so when one
leaks back, and `course dev carry` carries an edit of them no further.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from course.catalog import load_catalog
from course.lineage import lineage_problems
from course.workspace import check_practice_target, start_practice
from tool_helpers import REPO, real_course, tool

LEFT = ["predictions.toml", "tests/test_00_prologue.py", "tiny_pi/prologue.py"]


def test_chapter_00_leaves_its_predictions_behind_and_no_later_snapshot_holds_them() -> None:
    catalog = load_catalog(REPO)
    zero = catalog.resolve("00")
    assert sorted(zero.left_behind) == LEFT
    assert (zero.target / "predictions.toml").is_file(), "chapter 00's own target keeps the filled-in answers"
    later = [chapter for chapter in catalog.chapters if chapter.number >= 1]
    assert later, "the course has chapters after the prologue"
    for chapter in later:
        assert set(catalog.left_before(chapter)) >= set(LEFT), chapter.name
        for side in (chapter.parent, chapter.target):
            assert not (side / "predictions.toml").exists(), f"{chapter.name}/{side.name}"
        assert "predictions.toml" not in chapter.practice_blanks, chapter.name


@pytest.mark.parametrize("nn", ["01", "16"])
def test_a_practice_dir_after_chapter_00_has_no_predictions_toml(nn: str, tmp_path: Path) -> None:
    catalog = load_catalog(REPO)
    if nn not in {chapter.nn for chapter in catalog.chapters}:
        pytest.skip(f"chapter {nn} is not in this checkout")
    chapter = catalog.resolve(nn)
    directory = tmp_path / f"practice-{nn}"
    start_practice(chapter, check_practice_target(directory, REPO), REPO)
    assert (directory / "LEARNING.md").is_file()
    for name in LEFT:
        assert not (directory / name).exists(), name


@pytest.mark.parametrize("side", ["parent", "target"])
def test_a_left_behind_file_leaking_into_a_later_snapshot_breaks_the_lineage(side: str, tmp_path: Path) -> None:
    root, catalog = real_course(tmp_path, "00", "01", "02")
    zero, two = catalog.resolve("00"), catalog.resolve("02")
    assert lineage_problems(catalog, two) == []
    # The same bytes in 02's parent and target: without the rule, 01 -> 02 would only see a new file in 02.
    shutil.copyfile(zero.target / "predictions.toml", two.root / side / "predictions.toml")
    problems = lineage_problems(load_catalog(root), two)
    assert (
        f"predictions.toml is in {two.name}/{side}, but {zero.name} leaves it behind "
        f"(left_behind in its chapter.toml): only {zero.name}'s snapshots may hold it"
    ) in problems, problems


def test_the_next_parent_may_drop_a_left_behind_file_but_nothing_else(tmp_path: Path) -> None:
    root, catalog = real_course(tmp_path, "00", "01")
    one = catalog.resolve("01")
    assert lineage_problems(catalog, one) == []
    (one.parent / "tiny_pi" / "__init__.py").unlink()  # a file chapter 00 does not leave behind
    (one.target / "tiny_pi" / "__init__.py").unlink()
    problems = lineage_problems(load_catalog(root), one)
    assert problems == [
        f"tiny_pi/__init__.py differs between 00-prologue/target and {one.name}/parent, "
        "but chapter.toml does not declare it (focused_tests or starter_files)"
    ], problems


def test_left_behind_names_only_the_chapters_own_files(tmp_path: Path) -> None:
    root, _ = real_course(tmp_path, "00")
    toml = root / "checkpoints" / "00-prologue" / "chapter.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace(
        'left_behind = ["predictions.toml",', 'left_behind = ["pytest.ini",', 1), encoding="utf-8")
    from course.errors import ChapterError

    with pytest.raises(ChapterError, match="left_behind.*pytest.ini is not the chapter's own"):
        load_catalog(root)


def test_carry_stops_a_left_behind_file_at_its_chapter(tmp_path: Path) -> None:
    root, catalog = real_course(tmp_path, "00", "01")
    predictions = root / "checkpoints" / "00-prologue" / "target" / "predictions.toml"
    predictions.write_text(predictions.read_text(encoding="utf-8") + "# a note\n", encoding="utf-8")
    result = tool("carry", "00", root=root)
    assert result.returncode == 0, result.stdout + result.stderr
    for chapter in load_catalog(root).chapters[1:]:
        assert not (chapter.parent / "predictions.toml").exists(), chapter.name
    assert lineage_problems(load_catalog(root), load_catalog(root).resolve("01")) == []

