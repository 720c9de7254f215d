"""The hint ladder: one rung at a time, the full code only at the top.

Each lab's `hints` in chapter.toml climb from "where to look" through "the
signature" and "the idea in words" to "a partial sketch", and end with "the
full code": the lab's core functions as `# file:` excerpts of the target
(`course verify` matches them word for word). The lesson gives contracts and
traces, not bodies, so a learner who is truly stuck still has a way out, but
only by asking for it rung by rung. A learner who sees every rung at once
stops thinking at the first one, so the ladder remembers how far each learner
has climbed (in the practice dir's `.course/hints.json`, never in checkpoints/)
and shows the next rung only when asked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from attrs import frozen

from course.catalog import Chapter, Lab
from course.locate import suggest
from course.progress import read_state, remove_state, write_state

HINTS_FILE = "hints.json"
RUNG_NAMES = ("where to look", "the signature", "the idea in words", "a partial sketch")
CODE_RUNG = "the full code"
# A hint (or lesson) line that starts a code excerpt of the target: `# file: tiny_pi/x.py`.
EXCERPT = "# file:"
ELISION = "# ..."  # a line of an excerpt that stands for code left out

SHOW = "show"
NEXT = "next"
ALL = "all"
RESET = "reset"


def rung_name(index: int, text: str = "") -> str:
    """The name of rung `index` (0-based): 'the full code' when it shows the target's code,
    else the ladder's four kinds, then 'one more hint'."""
    if rung_excerpts(text):
        return CODE_RUNG
    return RUNG_NAMES[index] if index < len(RUNG_NAMES) else "one more hint"


def rung_excerpts(text: str) -> list[tuple[str, str]]:
    """(file, code) for each `# file: path` section of a hint; prose before the first is free."""
    sections: list[tuple[str, list[str]]] = []
    for line in text.split("\n"):
        if line.strip().startswith(EXCERPT):
            sections.append((line.strip()[len(EXCERPT) :].strip(), []))
        elif sections:
            sections[-1][1].append(line)
    return [(name, "\n".join(lines)) for name, lines in sections]


def excerpt_chunks(code: str) -> list[str]:
    """The parts of an excerpt between `# ...` elision lines, without their edge blank lines."""
    chunks: list[list[str]] = [[]]
    for line in code.split("\n"):
        if line.strip() == ELISION:
            chunks.append([])
        else:
            chunks[-1].append(line)
    result = []
    for lines in chunks:
        while lines and not lines[0].strip():
            lines.pop(0)
        while lines and not lines[-1].strip():
            lines.pop()
        if lines:
            result.append("\n".join(lines))
    return result


def lab_files(lab: Lab) -> tuple[str, ...]:
    """The files a lab's code goes in: those its last rung quotes, in order (none if it quotes none).

    The last rung holds the lab's code as `# file:` excerpts of the target (a
    check in `course verify` keeps them true), so it already says where a
    lab's work lives; nothing else has to.
    """
    named = [name for name, _ in rung_excerpts(lab.hints[-1])] if lab.hints else []
    return tuple(dict.fromkeys(named))


@frozen
class Rung:
    number: int  # 1-based
    name: str
    text: str
    new: bool


@frozen
class HintView:
    """What `course hint` shows for one lab after an action."""

    chapter: Chapter
    lab: Lab
    action: str
    seen: int
    rungs: tuple[Rung, ...]
    saved: bool = True

    @property
    def total(self) -> int:
        return len(self.lab.hints)

    @property
    def at_top(self) -> bool:
        return self.seen >= self.total


def _read_state(directory: Path, chapter: Chapter) -> dict[str, int]:
    """Rungs seen per lab id; a missing, foreign or damaged file means none."""
    try:
        data = json.loads(read_state(directory, HINTS_FILE) or "")
    except ValueError:
        return {}
    if not isinstance(data, dict) or data.get("chapter") != chapter.name:
        return {}
    seen = data.get("seen")
    if not isinstance(seen, dict):
        return {}
    return {str(k): v for k, v in seen.items() if isinstance(v, int) and not isinstance(v, bool) and v >= 0}


def _write_state(directory: Path, chapter: Chapter, seen: dict[str, int]) -> bool:
    """Write atomically (progress.write_state), so an interrupted write never loses the whole ladder."""
    return write_state(directory, HINTS_FILE, json.dumps({"chapter": chapter.name, "seen": seen}, indent=2))


def seen_rungs(directory: Path, chapter: Chapter, lab: Lab) -> int:
    return min(_read_state(directory, chapter).get(lab.id, 0), len(lab.hints))


def climb(directory: Path, chapter: Chapter, lab: Lab, action: str = SHOW) -> HintView:
    """Apply `action` to the learner's place on `lab`'s ladder and say what to show.

    show:  the rungs seen so far; the first one on the first call
    next:  one more rung (the ladder stops at the top, the full code)
    all:   every rung
    reset: forget the rungs seen; show nothing
    """
    state = _read_state(directory, chapter)
    before = min(state.get(lab.id, 0), len(lab.hints))
    total = len(lab.hints)
    if action == RESET:
        after = 0
    elif action == NEXT:
        after = min(before + 1, total)
    elif action == ALL:
        after = total
    elif action == SHOW:
        after = max(before, min(1, total))
    else:
        raise ValueError(f"unknown hint action {action!r}")
    saved = True
    if after != before or (action == RESET and lab.id in state):
        state[lab.id] = after
        if after == 0:
            state.pop(lab.id, None)
        saved = _write_state(directory, chapter, state)
    rungs = tuple(
        Rung(number=i + 1, name=rung_name(i, lab.hints[i]), text=lab.hints[i], new=i >= before)
        for i in range(after)
    )
    return HintView(chapter=chapter, lab=lab, action=action, seen=after, rungs=rungs, saved=saved)


def render(view: HintView, dir_words: Sequence[str] = ()) -> list[str]:
    """The lines of a hint screen: the rungs so far, newest marked, and the way up.

    `dir_words` is the practice dir as the learner typed it, carried by every
    command shown, so each works when pasted where it was printed.
    """
    chapter, lab = view.chapter, view.lab
    base = suggest("hint", chapter.nn, *dir_words, "--lab", lab.id)
    test = suggest("test", chapter.nn, *dir_words, "--lab", lab.id)
    lines = [f"Lab {lab.id} {lab.title}"]
    if view.total == 0:
        lines.append("  This lab has no hints in chapter.toml.")
        if lab.goal:
            lines.append(f"  Its goal: {lab.goal}")
        return lines
    if view.action == RESET:
        lines.append(f"  Forgot the hints you had seen; `{base}` starts again at rung 1.")
        return lines
    lines[0] += f" - hint {view.seen} of {view.total}"
    for rung in view.rungs:
        mark = " (new)" if rung.new and view.action != SHOW else ""
        lines.append(f"  {rung.number}. {rung.name}{mark}:")
        lines += [f"     {line}" if line else "" for line in rung.text.splitlines()]
    if view.at_top:
        if view.action == NEXT and not any(rung.new for rung in view.rungs):
            lines.append("  That was the last rung: there is nothing above the full code.")
        if rung_name(view.total - 1, lab.hints[-1]) == CODE_RUNG:
            diff = suggest("diff", chapter.nn, *dir_words)
            lines.append(
                f"  Close it and write the code from what you understood, then run `{test}`; "
                f"`{diff}` compares your files with the target."
            )
        else:
            lines.append(
                f"  The rest is yours: re-read the lab's tests, run `{test}` and read the first failure line by line."
            )
    else:
        following = rung_name(view.seen, lab.hints[view.seen])
        if following == CODE_RUNG:
            following += " (the answer: read it, then close it and write your own)"
        lines.append(f"  Still stuck after trying? `{base} --next` shows {view.seen + 1} of {view.total}: {following}.")
    if not view.saved:
        lines.append("  (could not write .course/hints.json here: the ladder will not remember this)")
    return lines


def forget_all(directory: Path, chapter: Chapter) -> bool:
    """Forget every lab's rungs for `chapter`; True when there was something to forget."""
    if not _read_state(directory, chapter):
        return False
    return remove_state(directory, HINTS_FILE)
