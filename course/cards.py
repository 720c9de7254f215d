"""The checkpoint card, the red-light note and LEARNING.md, generated from chapter.toml.

A card written by hand drifts from the metadata the checks use; a
generated one cannot. The lesson keeps its card (and, when the chapter has
red-light exercises, the note on how they count) between markers, which
`course dev cards` rewrites and `course verify` compares.
"""

from __future__ import annotations

import re
import shlex
import textwrap
from typing import Sequence

from course.catalog import Chapter, Lab
from course.schema import markdown_tables

CARD_BEGIN = "<!-- card:begin -->"
CARD_END = "<!-- card:end -->"
CHAPTERS_BEGIN = "<!-- chapters:begin -->"
CHAPTERS_END = "<!-- chapters:end -->"
KEYS_BEGIN = "<!-- keys:begin -->"
KEYS_END = "<!-- keys:end -->"
REDLIGHTS_BEGIN = "<!-- redlights:begin -->"
REDLIGHTS_END = "<!-- redlights:end -->"


def plain_pytest(chapter: Chapter, lab: Lab | None = None) -> str:
    """The command a learner can run in a practice dir without the course tool."""
    words = ["python", "-m", "pytest", *chapter.focused_tests]
    if lab is not None and lab.select is not None:
        words += ["-k", lab.select]
    elif lab is not None:
        words = ["python", "-m", "pytest", *lab.nodes]
    return shlex.join(words)


def course_test(chapter: Chapter, lab: Lab | None = None) -> str:
    command = f"course test {chapter.nn}"
    return f"{command} --lab {lab.id}" if lab is not None else command


def render_card(chapter: Chapter, made: str | None = None) -> str:
    """The checkpoint card: everything a learner needs before the first keystroke.

    `made`: the practice dir the card is written into (LEARNING.md), which the
    card names instead of the default place: a learner who gave a DIR of their
    own works there, not in practice/NN-slug.
    """
    red = chapter.first_red_light
    mode = {
        "rebuild": "rebuild - you start from the parent and write the teaching files yourself",
        "observe": "observe - you get the finished target to run and read",
    }[chapter.mode]
    lines = [
        f"> **Checkpoint {chapter.nn} - {chapter.title}**",
        ">",
        f"> {chapter.summary}",
        ">",
        f"> - **Mode:** {mode}.",
        f"> - **Parent -> target:** `checkpoints/{chapter.name}/parent` -> `checkpoints/{chapter.name}/target`",
        "> - **Teaching files:** " + ", ".join(f"`{name}`" for name in chapter.teaching_files),
        "> - **Focused tests:** " + ", ".join(f"`{name}`" for name in chapter.focused_tests),
        first_red_light_line(chapter),
        f"> - **First step:** {chapter.first_step}",
        f"> - **Locate and prove:** `course checkpoint {chapter.nn}`",
        practice_dir_line(chapter, made),
        f"> - **Focused run:** `{course_test(chapter)}`, or without the tool: `{plain_pytest(chapter)}`",
        f"> - **Pass evidence:** {chapter.expected_passed} focused tests pass.",
        ">",
        "> | Lab | Title | Run | Expected |",
        "> | --- | --- | --- | --- |",
    ]
    for lab in chapter.labs:
        lines.append(
            f"> | {lab.id} | {lab.title} | `{course_test(chapter, lab)}` | {lab.expected_passed} passed |"
        )
    return "\n".join(lines) + "\n"


def practice_dir_line(chapter: Chapter, made: str | None = None) -> str:
    """Where the learner works: the dir that was made, or where `course practice NN [DIR]` makes one."""
    if made is not None:
        return f"> - **Practice dir:** this one, `{made}` (made by `course practice {chapter.nn}`)"
    return (f"> - **Practice dir:** `course practice {chapter.nn}` (then `cd practice/{chapter.name}`), "
            f"or `course practice {chapter.nn} DIR` (then `cd DIR`)")


def first_red_light_line(chapter: Chapter) -> str:
    """The card's red-light line: the parent's run, or for an observe chapter what its learner sees first.

    An observe chapter's practice dir starts from the target, so the parent's
    red light (which `course verify` still proves) is named second, as the
    parent's, never as the learner's first run.
    """
    red = chapter.first_red_light
    ending = {"failed": "failing tests", "collection-error": "a collection error"}[red.kind]
    shown = f"{ending}, showing " + "; ".join(f"`{fragment}`" for fragment in red.fragments)
    if chapter.mode != "observe":
        return f"> - **First red light:** {red.explanation} The run ends in {shown}."
    blanks = ", ".join(f"`{name}`" for name in chapter.starter_files)
    first = (f"your practice dir starts from the finished target with a blank {blanks}, so your first"
             f" `{course_test(chapter)}` fails only the tests that check what you write there (each says"
             ' "not written yet") and passes every other test' if blanks else
             f"your practice dir starts from the finished target, so your first `{course_test(chapter)}` is green")
    return f"> - **First red light:** {first}. The parent, which you never run, ends in {shown}: {red.explanation}"


def render_redlight_note(chapter: Chapter) -> str:
    """How a red-light exercise is counted, at the top of the lesson's red-light section.

    Only a run of the course tool records an exercise; a learner who breaks
    the code by hand and runs plain pytest sees the failure but gets no credit,
    so every lesson says so in the same generated words. It names no test and
    no failure text: those would answer the prediction the exercise asks for.
    """
    first = chapter.redlights[0].id
    run = course_test(chapter)
    which = "this exercise counts" if len(chapter.redlights) == 1 else "these exercises count"
    note = (
        f"**How {which}.** From a green `{run}`, break the code by hand (`course redlight --id "
        f"{first}` repeats what to break and watches your saves for the failure; it changes no code) and "
        f"run `{run}` while it is broken: "
        f"a plain pytest run records nothing. Then restore it; the next green `{run}` completes it."
    )
    # Wrap between words, never inside a `code span`: hide its spaces while filling.
    spans = re.sub(r"`[^`]*`", lambda span: span.group().replace(" ", "\0"), note)
    lines = textwrap.wrap(spans, width=90, initial_indent="> ", subsequent_indent="> ")
    return "\n".join(line.replace("\0", " ") for line in lines) + "\n"


def render_learning(chapter: Chapter, made: str | None = None) -> str:
    """LEARNING.md of a practice dir: the card plus how to work in this directory.

    It holds no answer to a prediction: the lesson folds those (course.dev.predictions),
    and LEARNING.md lies open in the learner's editor. So a lab that asks for a
    prediction (its title starts with "Predict") is listed without its goal, which
    states what the prediction should have been, and a red-light exercise without
    the test that fails and its lesson, which the learner is asked to predict.
    """
    answers = f"`course show {chapter.nn} --answer` lists the folds, `--answer N` opens one"
    parts = [
        f"# Chapter {chapter.nn}: {chapter.title}",
        "",
        render_card(chapter, made),
        "## Labs",
        "",
    ]
    for lab in chapter.labs:
        goal = lab.goal or ""
        if lab.title.startswith("Predict"):
            goal = f"A prediction: write yours down first; the lesson folds the answer ({answers})."
        parts += [
            f"### Lab {lab.id}: {lab.title}",
            "",
            goal,
            "",
            f"- with the course tool: `{course_test(chapter, lab)}`",
            f"- plain pytest, in this directory: `{plain_pytest(chapter, lab)}`",
            f"- pass evidence: {lab.expected_passed} passed",
            f"- stuck? `course hint {chapter.nn} --lab {lab.id}` shows one hint at a time",
            "",
        ]
    parts += ["## Red-light exercises", ""]
    for redlight in chapter.redlights:
        by_hand = f"by hand: {redlight.by_hand}" if redlight.by_hand else "the lesson says what to change by hand"
        parts += [
            f"- **{redlight.id} {redlight.title}** - {by_hand} "
            f"(`course redlight --id {redlight.id}` says it again and watches for the failure, then for "
            f"your restore; `--check` runs once); "
            f"predict which test fails and how, then run `{course_test(chapter)}` while it is broken; "
            f"the lesson's red-light section has the answer",
        ]
    parts += [
        "",
        "## Your work",
        "",
        "This directory is a git repository whose first commit is the starting point:",
        "`git diff` shows exactly what you have written. The lesson: `course show`.",
        "Inside this directory every `course` command knows its chapter: `course test`,",
        "`course watch`, `course hint`, `course diff`, `course status`.",
        "",
        *not_installed_lines(made),
        "",
    ]
    return "\n".join(parts)


def not_installed_lines(made: str | None) -> list[str]:
    """How to run this dir's `tiny_pi` from another folder: it is not installed, only on sys.path here."""
    where = shlex.quote(made) if made is not None else "DIR"
    return [
        "`tiny_pi` is not installed: the lesson's commands and snippets find it because they run in",
        "this directory (the current one is on Python's path). From any other folder, put this",
        f"directory on `PYTHONPATH` first: `PYTHONPATH={where} python -m tiny_pi.MODULE ...`",
        "(without it Python stops at once: `No module named 'tiny_pi'`).",
    ]


def render_chapter_list(chapters: Sequence[Chapter]) -> str:
    """The README's chapter table, so titles and counts are written only in chapter.toml."""
    lines = ["| Chapter | Title | Mode | Labs | Focused tests |", "| --- | --- | --- | --- | --- |"]
    for chapter in chapters:
        labs = ", ".join(lab.id for lab in chapter.labs)
        lesson = f"[{chapter.name}](checkpoints/{chapter.name}/README.md)"
        lines.append(f"| {lesson} | {chapter.title} | {chapter.mode} | {labs} | {chapter.expected_passed} |")
    return "\n".join(lines) + "\n"


def render_key_tables() -> str:
    """The chapter.toml key tables of checkpoints/README.md, from the records' own declarations."""
    return markdown_tables(Chapter)


def between(text: str, begin: str, end: str) -> str | None:
    """What stands between two marker lines, or None when the markers are missing."""
    start = text.find(begin)
    stop = text.find(end)
    if start < 0 or stop < start:
        return None
    return text[start + len(begin) : stop].strip("\n") + "\n"


def replace_between(text: str, begin: str, end: str, content: str) -> str:
    """`text` with `content` between the markers; the markers must be there."""
    start = text.find(begin)
    stop = text.find(end)
    if start < 0 or stop < start:
        raise ValueError(f"the markers {begin} / {end} are missing")
    return text[: start + len(begin)] + "\n" + content + text[stop:]


def lesson_card(text: str) -> str | None:
    """The card currently in a lesson's text, or None when the markers are missing."""
    return between(text, CARD_BEGIN, CARD_END)


def with_card(text: str, chapter: Chapter) -> str:
    """The lesson's text with a freshly generated card between the markers."""
    return replace_between(text, CARD_BEGIN, CARD_END, render_card(chapter))


def lesson_redlight_note(text: str) -> str | None:
    """The red-light note currently in a lesson's text, or None when the markers are missing."""
    return between(text, REDLIGHTS_BEGIN, REDLIGHTS_END)


def with_redlight_note(text: str, chapter: Chapter) -> str:
    """The lesson's text with a freshly generated red-light note between its markers."""
    return replace_between(text, REDLIGHTS_BEGIN, REDLIGHTS_END, render_redlight_note(chapter))


def stale_parts(text: str, chapter: Chapter) -> list[str]:
    """Which generated parts of a lesson no longer match chapter.toml (or have no markers)."""
    stale = []
    if lesson_card(text) != render_card(chapter):
        stale.append("card")
    if chapter.redlights and lesson_redlight_note(text) != render_redlight_note(chapter):
        stale.append("red-light note")
    return stale
