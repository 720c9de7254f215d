"""`course show`: the lesson rendered in a terminal (rich), Markdown when piped, answer keys folded in both, NO_COLOR honoured."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import mini
from loop_helpers import run_in_pty

LESSON = Path("checkpoints/01-adder/README.md")
COLOUR = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:3[0-7]|9[0-7]|4[0-7]|10[0-7]|38;|48;)[0-9;]*m")


def test_show_is_plain_markdown_when_piped(mini_course: Path) -> None:
    result = mini(mini_course, "show", "1", "--answers")
    assert result.returncode == 0
    assert result.stdout == (mini_course / LESSON).read_text()


def test_show_renders_the_lesson_in_a_terminal(mini_course: Path) -> None:
    screen = run_in_pty(mini_course, "show", "1", "--no-pager")
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)
    assert COLOUR.search(screen), "a terminal gets colour"
    assert "## Adding" not in plain and "Adding" in plain, "headings are rendered, not shown as markup"
    assert "```" not in plain and "print(add(2, 3))" in plain, "code blocks are rendered"
    assert "| Call | Result |" not in plain and re.search(r"Call\s+.*Result", plain), "tables are rendered"
    assert "add(10, 20)" in plain
    assert "card:begin" not in plain


def test_show_respects_no_color(mini_course: Path) -> None:
    screen = run_in_pty(mini_course, "show", "1", "--no-pager", NO_COLOR="1")
    assert "Adding" in screen and "## Adding" not in screen, "still rendered"
    assert not COLOUR.search(screen), "NO_COLOR: no colour codes"


def test_the_answer_key_is_folded_in_a_terminal_until_asked_for(mini_course: Path) -> None:
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", run_in_pty(mini_course, "show", "1", "--no-pager"))
    assert "What does add(2, 3) return?" in plain
    assert "Five, the sum." not in plain and "<details>" not in plain
    assert "Answer key: folded. course show 01 --answers shows it." in plain
    opened = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", run_in_pty(mini_course, "show", "1", "--answers", "--no-pager"))
    assert "Answer key" in opened and "Five, the sum." in opened and "<summary>" not in opened
    piped = mini(mini_course, "show", "1")
    assert "What does `add(2, 3)` return?" in piped.stdout and "## Adding" in piped.stdout, "piped, it is Markdown"
    assert "Five, the sum." not in piped.stdout, "`course show | less` must not open the answer key"
    assert "> **Answer key**: folded. `course show 01 --answers` shows it." in piped.stdout
    opened = mini(mini_course, "show", "1", "--answers")
    assert "<details>" in opened.stdout and "Five, the sum." in opened.stdout, "--answers: the Markdown as written"

