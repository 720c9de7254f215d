"""`course redlight` when its patch does not fit: the refusal says what to break by hand."""

from __future__ import annotations

from pathlib import Path

from conftest import mini
from loop_helpers import RIGHT, practice

CHAPTER_TOML = Path("checkpoints/01-adder/chapter.toml")
BY_HAND = "In add, subtract the second number instead of adding it."


def test_a_refusal_repeats_the_chapters_by_hand_instruction(mini_course: Path, tmp_path: Path) -> None:
    toml = mini_course / CHAPTER_TOML
    toml.write_text(toml.read_text().replace('learn = "Signs matter."', f'learn = "Signs matter."\nby_hand = "{BY_HAND}"'))
    learner = practice(mini_course, tmp_path / "p")
    (learner / "tiny_pi/adder.py").write_text(RIGHT)  # green, but not the target's lines: the patch cannot fit
    refused = mini(mini_course, "redlight", str(learner.name), cwd=learner.parent)
    assert refused.returncode != 0 and (learner / "tiny_pi/adder.py").read_text() == RIGHT
    line = refused.stderr.strip()
    assert len(line.splitlines()) == 1, refused.stderr
    assert line.endswith(f"Nothing was changed; break your code by hand: {BY_HAND}"), line
    assert f"- **1.R1 Minus** - by hand: {BY_HAND}" in (learner / "LEARNING.md").read_text()


def test_without_by_hand_the_refusal_names_the_exercise_and_the_lesson(mini_course: Path, tmp_path: Path) -> None:
    learner = practice(mini_course, tmp_path / "p")
    (learner / "tiny_pi/adder.py").write_text(RIGHT)
    refused = mini(mini_course, "redlight", cwd=learner)
    assert refused.stderr.strip().endswith(
        "Nothing was changed; break your code by hand: Minus, as the lesson's red-light exercise 1.R1 says."
    ), refused.stderr
