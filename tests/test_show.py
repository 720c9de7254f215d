"""`course show`: the lesson rendered in a terminal (rich), Markdown when piped, answer keys folded in both, NO_COLOR honoured."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import mini
from loop_helpers import run_in_pty

LESSON = Path("checkpoints/01-adder/README.md")
COLOUR = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:3[0-7]|9[0-7]|4[0-7]|10[0-7]|38;|48;)[0-9;]*m")


def test_show_is_plain_markdown_when_piped(mini_course: Path) -> None:
    result = mini(mini_course, "show", "1")
    assert result.returncode == 0
    lesson = (mini_course / LESSON).read_text()
    start, end = lesson.index("<details>"), lesson.index("</details>") + len("</details>")
    folded = "> **Answer key** (fold 1): folded. `course show 01 --answer 1` shows it."
    assert result.stdout == lesson[:start] + folded + lesson[end:], "as written, but for the fold"


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
    assert "Answer key (fold 1): folded. course show 01 --answer 1 shows it." in plain
    opened = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", run_in_pty(mini_course, "show", "1", "--answer", "1", "--no-pager"))
    assert "Answer key" in opened and "Five, the sum." in opened and "<summary>" not in opened
    piped = mini(mini_course, "show", "1")
    assert "What does `add(2, 3)` return?" in piped.stdout and "## Adding" in piped.stdout, "piped, it is Markdown"
    assert "Five, the sum." not in piped.stdout, "`course show | less` must not open the answer key"
    assert "> **Answer key** (fold 1): folded. `course show 01 --answer 1` shows it." in piped.stdout
    opened = mini(mini_course, "show", "1", "--answer", "1")
    assert opened.stdout == "## Acceptance questions\n\n**Answer key** (fold 1)\n\n1. Five, the sum.\n", opened.stdout



def add_a_prediction(mini_course: Path) -> None:
    """A prediction with its folded answer, before the lesson's table."""
    lesson = mini_course / LESSON
    lesson.write_text(lesson.read_text().replace(
        "| Call | Result |",
        "**Predict first.** What does `add(10, 20)` give?\n"
        "<details><summary>The answer (open after your prediction)</summary>\n\nThirty, of course.\n</details>\n\n"
        "| Call | Result |"))


def test_a_predictions_answer_is_folded_like_an_answer_key(mini_course: Path) -> None:
    add_a_prediction(mini_course)
    piped = mini(mini_course, "show", "1")
    assert "**Predict first.** What does `add(10, 20)` give?" in piped.stdout
    assert "Thirty, of course." not in piped.stdout and "<details>" not in piped.stdout
    assert ("> **The answer (open after your prediction)** (fold 1): folded. `course show 01 --answer 1` shows it."
            in piped.stdout)
    assert "> **Answer key** (fold 2): folded." in piped.stdout, "the answer key after it is folded on its own"
    opened = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", run_in_pty(mini_course, "show", "1", "--answer", "1", "--no-pager"))
    assert "Thirty, of course." in opened and "<summary>" not in opened
    assert "Five, the sum." not in opened, "opening one fold leaves the others folded"


def test_folds_open_one_at_a_time_and_are_listed_without_a_number(mini_course: Path) -> None:
    add_a_prediction(mini_course)
    listed = mini(mini_course, "show", "1", "--answer")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0] == "The folds of chapter 01's lesson; open one with `course show 01 --answer N`:"
    assert [line.split("  (in:")[0].strip() for line in lines[1:]] == [
        "1  The answer (open after your prediction)", "2  Answer key"]
    assert "Thirty" not in listed.stdout and "Five" not in listed.stdout, "a listing opens nothing"
    second = mini(mini_course, "show", "1", "--answer", "2")
    assert "Five, the sum." in second.stdout and "Thirty" not in second.stdout


def test_the_old_answers_flag_and_a_bad_fold_are_one_line_and_exit_2(mini_course: Path) -> None:
    old = mini(mini_course, "show", "1", "--answers")
    assert old.returncode == 2 and old.stdout == "", old
    assert old.stderr == ("course: --answers is gone: it opened every fold at once, the answers to predictions still "
                          "ahead among them; open one with `course show 01 --answer N` (`course show 01 --answer` "
                          "lists them)\n")
    for bad in ("9", "0", "x", " 1x"):
        wrong = mini(mini_course, "show", "1", "--answer", bad)
        assert wrong.returncode == 2 and len(wrong.stderr.splitlines()) == 1 and "Traceback" not in wrong.stderr, wrong
        assert wrong.stderr.startswith(f"course: chapter 01-adder's lesson has no fold {bad!r}: its folds are numbered 1 to 1")
    dash = mini(mini_course, "show", "1", "--answer", "-1")  # click reads it as an option: one line all the same
    # click words the option error its own way ("No such option: -1" in 8.1, "No such option '-1'." later);
    # the course's part is the prefix, the one line and the pointer to --help.
    assert dash.returncode == 2 and len(dash.stderr.splitlines()) == 1, dash
    assert dash.stderr.startswith("course show: No such option") and "-1" in dash.stderr, dash
    assert dash.stderr.endswith(" (see 'course show --help')\n"), dash


def test_every_lesson_folds_its_predictions_and_learning_md_holds_no_answer() -> None:
    from conftest import REPO
    from course.cards import render_learning
    from course.catalog import load_catalog
    from course.dev.predictions import prediction_problems

    catalog = load_catalog(REPO)
    for chapter in catalog.chapters:
        assert prediction_problems(chapter.lesson.read_text(encoding="utf-8")) == [], chapter.name
        learning = render_learning(chapter)
        # A lab's plain-pytest line names every test of the lab, the red light's among them; that
        # gives nothing away. Anywhere else, naming the red light's test would answer its prediction.
        answers = "\n".join(line for line in learning.splitlines() if not line.startswith("- plain pytest"))
        for redlight in chapter.redlights:
            assert redlight.test not in answers and redlight.learn not in learning, redlight.id
        for lab in chapter.labs:
            if lab.title.startswith("Predict") and lab.goal:
                assert lab.goal not in learning, lab.id
    two = catalog.resolve("02")
    shown = course_show(two)
    assert "read: ['a', 'done:ok']" not in shown, "the trace that answers section 3's prediction is folded"


def test_the_prediction_check_names_an_answer_shown_unfolded() -> None:
    from course.dev.predictions import prediction_problems

    unfolded = "> **Predict first.** What prints?\n\n```python\nprint(1)\n```\n\n```text\n# output\n1\n```\n"
    assert prediction_problems(unfolded) == ["line 1: the prediction's answer is shown unfolded (the output at line 7)"]
    folded = unfolded.replace("```text", "<details><summary>The answer</summary>\n\n```text") + "</details>\n"
    assert prediction_problems(folded) == []
    far = "**Predict:** which?\n\n## One\n\ntext\n\n## Two\n\n<details>\n\nthat one\n</details>\n"
    assert prediction_problems(far) == ["line 1: no folded answer (`<details>`) in this section or the next"]
    assert prediction_problems("**Predict:** which?\n\nIt is that one.\n") == [
        "line 1: no folded answer (`<details>`) after the prediction"]
    answered_by_prose = ("**Predict:** which?\n\nIt is that one.\n\n### Next\n\n**Predict:** and now?\n\n"
                         "<details>\n\nthis\n</details>\n")
    assert prediction_problems(answered_by_prose) == [
        "line 1: no folded answer (`<details>`) before the next prediction (line 7)"], "the next one's fold is not its"
    asked_at_once = "**Predict 1:** a?\n\n**Predict 2:** b?\n\n<details>\n\nboth\n</details>\n"
    assert prediction_problems(asked_at_once) == []


def course_show(chapter) -> str:  # type: ignore[no-untyped-def]
    """`course show NN` piped: the lesson's Markdown with its folds folded."""
    from conftest import REPO

    result = mini(REPO, "show", chapter.nn)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_fold_names_its_section_not_a_comment_in_the_code_above_it(mini_course: Path) -> None:
    """A `# comment` inside a fenced block is code: the fold stands in the section whose heading is prose.

    Before: chapter 17's first four folds said they stood in "not-run: the signatures",
    the comment line of the code block above each.
    """
    lesson = mini_course / LESSON
    lesson.write_text(lesson.read_text().replace(
        "| Call | Result |",
        "## Adding, predicted\n\n```python\n# not-run: the signature\ndef add(a, b): ...\n```\n\n"
        "**Predict first.** What does `add(10, 20)` give?\n"
        "<details><summary>The answer (open after your prediction)</summary>\n\nThirty, of course.\n</details>\n\n"
        "| Call | Result |"))
    opened = mini(mini_course, "show", "1", "--answer", "1")
    assert opened.returncode == 0, opened.stderr
    assert opened.stdout.startswith("## Adding, predicted\n"), opened.stdout
    assert "(in: Adding, predicted)" in mini(mini_course, "show", "1", "--answer").stdout
