"""A lesson's predictions, and whether each one's answer is folded.

A prediction asks the learner to commit before seeing: it works only if the
answer is not on the same screen. A lesson marks a prediction prompt with a
paragraph (or a quote) that opens with **Predict in bold (`**Predict first.**`,
`**Predict:**`, `**Prediction 2: ...**`), and folds its answer the way an answer
key is folded: in a `<details>` block (`course show` folds it, and
`--answer N` opens one fold at a time; LEARNING.md holds no lesson text). The check reads the lesson's
lines: after a prompt, the next `<details>` block opens before any `# output`
block (a shown run is an answer) and with at most one heading between the two
(the answer is in the prompt's section or the one right after it), and
before the next prediction, unless that one follows with nothing but prose
between (a few predictions asked at once, answered together).
"""

from __future__ import annotations

import re

PROMPT = re.compile(r"^(?:>\s*)?\*\*Predict")
HEADING = re.compile(r"^#{1,6} ")
FENCE = "```"
OUTPUT = "# output"
OPEN = "<details>"


def prediction_problems(text: str) -> list[str]:
    """One line per prediction prompt whose answer is not folded right after it."""
    lines = text.splitlines()
    events: list[tuple[int, str]] = []  # (line number, "prompt" | "heading" | "output" | "fold")
    fence: str | None = None
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if fence is not None:
            if stripped == FENCE:
                fence = None
            continue
        if stripped.startswith(FENCE):
            fence = stripped[len(FENCE):].strip()
            following = lines[number].strip() if number < len(lines) else ""
            events.append((number, "output" if fence.startswith("text") and following == OUTPUT else "block"))
            continue
        if PROMPT.match(line):
            events.append((number, "prompt"))
        elif HEADING.match(line):
            events.append((number, "heading"))
        elif line.startswith(OPEN):
            events.append((number, "fold"))
    problems = []
    for index, (number, kind) in enumerate(events):
        if kind != "prompt":
            continue
        headings = 0
        passed = False  # a heading or a code block since the prompt: the prompt's own lines are over
        for later, what in events[index + 1:]:
            if what == "fold":
                break
            if what == "prompt" and passed:
                problems.append(f"line {number}: no folded answer (`<details>`) before the next prediction (line {later})")
                break
            passed = passed or what in ("heading", "block")
            if what == "output":
                problems.append(f"line {number}: the prediction's answer is shown unfolded (the output at line {later})")
                break
            if what == "heading":
                headings += 1
                if headings > 1:
                    problems.append(f"line {number}: no folded answer (`<details>`) in this section or the next")
                    break
        else:
            problems.append(f"line {number}: no folded answer (`<details>`) after the prediction")
    return problems
