"""Lessons and colour for a terminal, plain text for everything else.

A lesson is Markdown. In a terminal, rich renders its headings, code blocks
(highlighted with the terminal's own palette, so light and dark themes both
read) and tables. Piped into a file, a pager or grep, the Markdown source is
the most useful plain text there is, so it goes out as it is written. A
`<details>` block (a lesson's answer key, or the answer to a prediction) folds on a web page; rich would print
it open, and so would `course show | less`, so it is folded by hand, in a
terminal and in a pipe alike, each fold numbered, and the learner opens one
at a time (`course show NN --answer N`): opening every fold at once would
answer the predictions still ahead, the red-light exercises' among them. NO_COLOR
(https://no-color.org) turns colour off everywhere: rich honours it itself,
and `colour_setting()` gives click the same answer.
"""

from __future__ import annotations

import os
import re
import sys
from typing import TYPE_CHECKING, Callable, TextIO

from attrs import frozen

if TYPE_CHECKING:
    from rich.console import Console

MAX_WIDTH = 100
CODE_THEME = "ansi_dark"


def no_color(env: dict[str, str] | None = None) -> bool:
    """NO_COLOR set to anything but the empty string means: no colour."""
    return bool((os.environ if env is None else env).get("NO_COLOR", ""))


def colour_setting() -> bool | None:
    """click's `color` context setting: False under NO_COLOR, else click decides (tty or not)."""
    return False if no_color() else None


def lesson_console(stream: TextIO | None = None) -> "Console":
    from rich.console import Console  # imported here: every other command starts faster

    console = Console(file=stream or sys.stdout, highlight=False)
    if console.is_terminal and console.width > MAX_WIDTH:
        console.width = MAX_WIDTH  # long lines of prose are hard to read
    return console


# A block opens with `<details>`, its `<summary>` on the same line or the next one (optional).
DETAILS = re.compile(r"^<details>\s*(?:<summary>(.*?)</summary>[ \t]*\n)?(.*?)^</details>[ \t]*$", re.M | re.S)


HEADING = re.compile(r"^#{1,6} +(.+?)\s*$", re.M)
# A fenced code block, whose `# comment` lines are code, not headings.
FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)


@frozen
class Fold:
    """One `<details>` block of a lesson: its number (from 1, in reading order), summary, section and body."""

    number: int
    summary: str
    section: str
    body: str


def folds(text: str) -> list[Fold]:
    """Every `<details>` block, each with the heading of the section it stands in."""
    found = []
    prose = FENCE.sub(lambda code: re.sub(r"[^\n]", " ", code.group(0)), text)  # the same offsets, no code
    for number, match in enumerate(DETAILS.finditer(text), start=1):
        headings = HEADING.findall(prose, 0, match.start())
        found.append(Fold(number, match.group(1) or "Details", headings[-1] if headings else "", match.group(2)))
    return found


def fold_details(text: str, how_to_open: Callable[[int], str]) -> str:
    """Each `<details>` block as one line naming it and how to open it; `how_to_open(n)` is fold n's command."""
    count = iter(range(1, 1_000_000))

    def folded(match: re.Match[str]) -> str:
        summary = match.group(1) or "Details"
        number = next(count)
        return f"> **{summary}** (fold {number}): folded. `{how_to_open(number)}` shows it."

    return DETAILS.sub(folded, text)


def fold_text(fold: Fold) -> str:
    """One fold on its own, as Markdown: where it stands in the lesson, its summary, its body."""
    where = f"## {fold.section}\n\n" if fold.section else ""
    return f"{where}**{fold.summary}** (fold {fold.number})\n\n{fold.body.strip()}\n"


def open_details(text: str) -> str:
    """Each `<details>` block as its summary in bold and its body, for a terminal."""

    def opened(match: re.Match[str]) -> str:
        summary = match.group(1) or "Details"
        return f"**{summary}**\n\n{match.group(2)}"

    return DETAILS.sub(opened, text)


def show_lesson(
    text: str, pager: bool | None = None, stream: TextIO | None = None,
    how_to_open: Callable[[int], str] | None = None,
) -> None:
    """Render `text` for a terminal, or write its Markdown when the output is not one.

    `<details>` blocks stay folded unless `how_to_open` is None: an answer key
    piped into a pager is as visible as one printed open.
    A lesson longer than the screen goes through a pager, as git does: $PAGER
    (default `less`), with LESS=FRX unless set, so a short text just prints and
    colours survive. `pager=False` never pages.
    """
    console = lesson_console(stream)
    if how_to_open is not None:
        text = fold_details(text, how_to_open)
    if not console.is_terminal:
        out = stream or sys.stdout
        out.write(text if text.endswith("\n") else text + "\n")
        out.flush()
        return
    from rich.markdown import Markdown

    if how_to_open is None:
        text = open_details(text)

    markdown = Markdown(text, code_theme=CODE_THEME, hyperlinks=False)
    with console.capture() as captured:  # rendered once, then printed or paged
        console.print(markdown)
    rendered = captured.get()
    if pager is None:
        pager = rendered.count("\n") > console.size.height
    if pager:
        import pydoc

        os.environ.setdefault("LESS", "FRX")
        pydoc.pager(rendered)
    else:
        console.file.write(rendered)
        console.file.flush()
