"""`course dev target-diff`: the parent -> target diff a learner reads after predicting, without
cache noise, coloured only on a terminal."""

from __future__ import annotations

import shutil
from pathlib import Path

from tool_helpers import CHAIN_COURSE, real_course, tool


def copy_of_chain(tmp_path: Path) -> Path:
    root = tmp_path / "course"
    shutil.copytree(CHAIN_COURSE, root)
    return root


def test_help(tmp_path: Path) -> None:
    result = tool("target-diff", "--help", root=tmp_path)
    assert result.returncode == 0
    assert "--stat" in result.stdout and "--color" in result.stdout and "Predict first" in result.stdout


def test_the_diff_shows_the_chapters_work_and_nothing_else(tmp_path: Path) -> None:
    root = copy_of_chain(tmp_path)
    cache = root / "checkpoints/02-multiplier/target/tiny_pi/__pycache__"
    cache.mkdir()
    (cache / "adder.cpython-311.pyc").write_bytes(b"\x00noise")

    result = tool("target-diff", "02", root=root)

    assert result.returncode == 0, result.stderr
    assert "--- a/parent/tiny_pi/adder.py" in result.stdout
    assert "+++ b/target/tiny_pi/multiplier.py" in result.stdout
    assert "+def add_all(numbers):" in result.stdout
    assert "__pycache__" not in result.stdout and "tests/" not in result.stdout
    assert "\x1b[" not in result.stdout, "no colour codes when stdout is not a terminal"


def test_stat_color_and_one_file(tmp_path: Path) -> None:
    root = copy_of_chain(tmp_path)
    stat = tool("target-diff", "multiplier", "--stat", root=root)
    assert stat.returncode == 0
    assert "tiny_pi/adder.py" in stat.stdout and "tiny_pi/multiplier.py" in stat.stdout
    assert "2 files changed" in stat.stdout

    one = tool("target-diff", "2", "tiny_pi/multiplier.py", "--color", root=root)
    assert one.returncode == 0
    assert "\x1b[" in one.stdout and "multiplier.py" in one.stdout and "adder.py" not in one.stdout


def test_unknown_chapter_or_path_exits_2_with_the_choices(tmp_path: Path) -> None:
    root = copy_of_chain(tmp_path)
    result = tool("target-diff", "7", root=root)
    assert result.returncode == 2 and "Valid chapters: 01-adder, 02-multiplier, 03-calculator" in result.stderr
    result = tool("target-diff", "2", "tiny_pi/nope.py", root=root)
    assert result.returncode == 2 and "tiny_pi/nope.py is in neither snapshot" in result.stderr
    assert "tiny_pi/multiplier.py" in result.stderr


def test_real_course_the_diff_names_the_teaching_files(tmp_path: Path) -> None:
    root, catalog = real_course(tmp_path, "03")
    result = tool("target-diff", "03", "--stat", root=root)
    assert result.returncode == 0, result.stderr
    for name in catalog.resolve("03").teaching_files:
        assert Path(name).name in result.stdout


def test_checkpoint_points_the_learner_at_the_tool(tmp_path: Path) -> None:
    from conftest import mini

    result = mini(copy_of_chain(tmp_path), "checkpoint", "02")
    assert "course diff 02 --target" in result.stdout
    assert "+def add_all" not in result.stdout, "the answer is not dumped: predict first"
