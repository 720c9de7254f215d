"""Everything the CLI prints: checklists for people, one JSON document for machines.

Kept apart from the commands so that `--json` never mixes with prose: a
command either builds a report for `emit_json` or lines for `echo`.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import shutil
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, Sequence

import click

from course.catalog import Chapter, Lab
from course.checklist import Check
from course.failures import digest as failure_digest
from course.failures import Prediction, first_failure, observed_predictions, tests_by_lab
from course.locate import shown
from course.redlights import Update
from course.verdict_copy import ADDED, CHANGED, DELETED, UNREADABLE, Replaced
from course.results import FAILED, PASSED, pytest_counts

if TYPE_CHECKING:  # course.local_model is imported only by its own command
    from course.checks import FirstLabs
    from course.local_model import Ended, LocalServer

# The version of the shape of every --json report; docs/course-test.schema.json is its contract
# for `course test --json`. A new key keeps the version; a key removed, renamed or retyped raises it.
SCHEMA_VERSION = 1

OK_MARK = "[ok]  "
FAIL_MARK = "[FAIL]"


def emit_json(document: dict[str, object]) -> None:
    """Exactly one JSON document on stdout, nothing else there, and always valid UTF-8.

    A path whose name is not UTF-8 arrives as a str with lone surrogates
    (Python's surrogateescape); written raw, those bytes would make the
    whole document undecodable. Then the document is written with \\u
    escapes instead, which a reader turns back into the same str (and
    os.fsencode into the same bytes).
    """
    text = json.dumps(document, indent=2, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(document, indent=2)
    click.echo(text)


def report(command: str, checks: list[Check], duration: float, **extra: object) -> dict[str, object]:
    return {
        "schema_version": SCHEMA_VERSION,
        "command": command,
        "ok": all(check.ok for check in checks),
        "passed_checks": sum(check.ok for check in checks),
        "total_checks": len(checks),
        "duration": round(duration, 3),
        **extra,
        "checks": [check.to_json() for check in checks],
    }


# Lines for people ---------------------------------------------------------------------

# A wrapped line continues under the text after its marker, not under the marker.
_HANGING = re.compile(r"^(\s*)(\[ok\]\s+|\[FAIL\]\s+|expected:\s+|actual:\s+|Next:\s+|E\s+|>\s+|\|\s|- |\d+\. |[\w .'-]{1,28}:\s+)?")


def wrap(line: str, width: int) -> list[str]:
    """`line` cut to `width` columns, continuation lines indented under its text (a hanging indent)."""
    if len(line) <= width or width < 30:
        return [line]
    match = _HANGING.match(line)
    lead = len(match.group(1)) if match else 0
    marker = len(match.group(2) or "") if match else 0
    indent = " " * min(lead + (marker or 2), width // 2)
    pieces = textwrap.wrap(line, width=width, initial_indent="", subsequent_indent=indent,
                           break_long_words=True, break_on_hyphens=False, drop_whitespace=True)
    if pieces and line[:lead] and not pieces[0].startswith(line[:lead]):
        pieces[0] = line[:lead] + pieces[0]
    return pieces or [line]


def terminal_width(err: bool = False) -> int | None:
    """The width to wrap to: the terminal's, or None when the output is not a terminal (never wrap)."""
    stream = sys.stderr if err else sys.stdout
    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return shutil.get_terminal_size((100, 24)).columns


RED_ON_PURPOSE = "Red on purpose"


def colour_of(line: str) -> dict[str, object]:
    """The style of a result line, from what it says; click drops it when piped or under NO_COLOR."""
    stripped = line.lstrip()
    if stripped.startswith("Green"):
        return {"fg": "green", "bold": True}
    if stripped.startswith("Not yet") or stripped.startswith("[FAIL]"):
        return {"fg": "red", "bold": stripped.startswith("Not yet")}
    if stripped.startswith("[ok]"):
        return {"fg": "green"}
    if stripped.startswith(("== run", "That is red light", "Red light", RED_ON_PURPOSE)):
        return {"bold": True}
    return {}


def say(line: str = "", err: bool = False, **style: object) -> None:
    """Echo one line, wrapped to the terminal with a hanging indent, styled by what it says."""
    width = terminal_width(err)
    chosen = style or colour_of(line)
    for piece in wrap(line, width) if width else [line]:
        click.echo(click.style(piece, **chosen) if chosen else piece, err=err)  # type: ignore[arg-type]


def checklist_lines(checks: Iterable[Check], show_chapter: bool = False, details: bool = True) -> list[str]:
    """One line per check; a failed one adds expected, actual and (unless told not to) its output."""
    lines = []
    for check in checks:
        mark = OK_MARK if check.ok else FAIL_MARK
        label = f"{check.chapter}: {check.name}" if show_chapter else check.name
        if check.ok:
            lines.append(f"  {mark} {label} - {check.actual}")
            continue
        lines += [f"  {mark} {label}", f"         expected: {check.expected}", f"         actual:   {check.actual}"]
        if details and check.detail:
            lines += [f"         | {line}" for line in check.detail.splitlines()]
    return lines


def checklist(checks: Iterable[Check], show_chapter: bool = False, details: bool = True) -> None:
    for line in checklist_lines(checks, show_chapter, details):
        say(line)


def summary_text(checks: Sequence[Check], duration: float, success: str, failure: str) -> str:
    passed = sum(check.ok for check in checks)
    verdict = success if passed == len(checks) else failure
    return f"{verdict}: {passed}/{len(checks)} checks passed in {duration:.1f} s"


def summary_line(checks: list[Check], duration: float, success: str, failure: str) -> None:
    say(summary_text(checks, duration, success, failure))


def result_lines(
    chapter: Chapter,
    lab: Lab | None,
    checks: Sequence[Check],
    duration: float,
    update: Update,
    next_step: str,
    verbose: bool = False,
    by_lab: bool = False,
    verbose_hint: str = "",
    verdict_first: bool = False,
) -> list[str]:
    """The verdict of one `course test` or one `course watch` run, the same lines for both.

    `verdict_first` (watch, whose screen is cleared each run) puts the verdict
    and the first failure at the top and the checklist after them.
    """
    lines: list[str] = []
    run = next((check.run for check in checks if check.run is not None), None)
    # Broken on purpose is not "not yet": the learner did what the exercise asked.
    failure = f"{RED_ON_PURPOSE} ({update.seen.id})" if update.seen is not None else "Not yet"
    summary = summary_text(checks, duration, "Green", failure)
    if verbose and run is not None:
        lines += ["pytest's output:", *[f"  {line}" for line in run.output.rstrip().splitlines()], ""]
    if verdict_first:
        lines.append(summary)
    else:
        lines += checklist_lines(checks, details=False)
    if by_lab and run is not None:
        lines.append("")
        for title, rows in tests_by_lab(run, chapter, lab):
            lines.append(f"  {title}:")
            lines += [f"    {'[ok]  ' if outcome == 'passed' else '[' + outcome + ']'} {name}" for name, outcome in rows]
    if update.seen is not None:
        redlight = update.seen
        lines += ["", f"That is red light {redlight.id}, as the lesson predicted: now restore your code.",
                  f"  {redlight.test} failed showing {redlight.fragment!r}", f"  {redlight.learn}"]
    else:
        failing = next((check.run for check in checks if not check.ok and check.run is not None), None)
        guesses = observed_predictions(run, chapter, lab)
        if guesses:
            lines += [] if verdict_first else [""]
            lines += prediction_lines(guesses, chapter)
        first = first_failure(failing, lab) if failing is not None else None
        # A wrong prediction is named in full above; only a failure of another kind needs pytest's digest.
        if failing is not None and (first is None or first.node_id not in {g.node_id for g in guesses}):
            lines += [] if verdict_first else [""]
            lines += [f"  {line}" for line in failure_digest(failing, chapter, lab=lab)]
            if verbose_hint and not verbose and first is not None:
                lines.append(f"  the whole pytest report: {verbose_hint}")
    for redlight in update.done:
        lines.append(f"Red light {redlight.id} done: it failed as predicted, and your code is green again.")
    if verdict_first:
        lines += [f"  {OK_MARK if c.ok else FAIL_MARK} {c.name} - {c.actual}" for c in checks]
    else:
        lines.append(summary)
    lines.append(f"Next: {next_step}")
    return lines


def first_labs_lines(chapter: Chapter, first: FirstLabs, every_lab: str) -> list[str]:
    """`course practice`'s first red light: the labs it ran, the first failure, the labs that wait.

    `every_lab` is the command that runs every lab at once (`course test NN DIR`).
    """
    lines = ["", f"First red light, {first_labs_summary(first)}"]
    for fragment in chapter.first_red_light.fragments:
        lines.append(f"  {'seen' if fragment in first.output else 'MISSING'}: {fragment}")
    lines += checklist_lines(first.checks, details=False)
    failing = [(check, run) for check, run in zip(first.checks, first.runs) if not check.ok]
    if failing:
        check, run = failing[0]
        lines += ["", *[f"  {line}" for line in failure_digest(run, chapter, lab=chapter.lab(check.lab or ""))]]
    if first.waiting:
        ids = [lab.id for lab in first.waiting]
        labs = f"lab {ids[0]}" if len(ids) == 1 else f"labs {', '.join(ids[:-1])} and {ids[-1]}"
        tests = f"{first.waiting_tests} test" + ("" if first.waiting_tests == 1 else "s")
        lines.append(f"Not run yet: {labs}, {tests}; every lab at once: {every_lab}")
    return lines


def first_labs_summary(first: FirstLabs) -> str:
    """Where the first red light stopped, and what the failing labs it ran counted together.

    It runs on past the first failing lab while a documented fragment has not
    shown: the header then names every failing lab it ran and counts their
    tests once each, so it agrees with the lab lines below it.
    """
    failing = [(check.lab, run) for check, run in zip(first.checks, first.runs) if not check.ok]
    if len(failing) < 2 or any(run.outcome not in (PASSED, FAILED) for _, run in failing):
        return f"at lab {first.lab.id}: {first.run.summary()}"
    cases = list({(case.file, case.name): case for _, run in failing for case in run.tests}.values())
    passed = sum(case.call == PASSED for case in cases)
    counts = ", ".join([f"{passed} passed", *pytest_counts(cases, with_collection=False)])
    return f"labs {failing[0][0]} to {failing[-1][0]}: {counts}"


def prediction_lines(guesses: Sequence[Prediction], chapter: Chapter) -> list[str]:
    """One line per prediction of an observe chapter: right, or the test's own words on why not."""
    files = ", ".join(chapter.starter_files)
    right = sum(guess.right for guess in guesses)
    lines = [f"  Your predictions ({files}): {right} of {len(guesses)} right"]
    for guess in guesses:
        if guess.right:
            lines.append(f"    {OK_MARK} prediction {guess.key}: right")
        elif guess.message.startswith(f"prediction {guess.key}:"):
            lines.append(f"    {FAIL_MARK} {guess.message}")
        else:
            lines.append(f"    {FAIL_MARK} prediction {guess.key}: {guess.message}")
    return lines


# How each kind of replaced file is named in the verdict's note.
_REPLACED_WORDS = {
    CHANGED: "yours differs",
    DELETED: "missing from your dir",
    ADDED: "the chapter has none",
    UNREADABLE: "not a regular file, or unreadable",
}


def replaced_note(replaced: Sequence[Replaced], chapter_nn: str, directory: Path) -> str:
    """One line naming every file of the learner's the verdict did not use, and how to take the chapter's.

    A test or config file that differs or is missing was run in the chapter's
    version; one the chapter lacks, or a file of tiny_pi/ that could not be
    read, was left out. Only the first kind can be taken back with `course reset`.
    """
    taken = [item for item in replaced if item.how in (CHANGED, DELETED)]
    left_out = [item for item in replaced if item.how not in (CHANGED, DELETED)]
    parts = []
    for words, items in (("the verdict used the chapter's", taken), ("the verdict left out", left_out)):
        if items:
            parts.append(f"{words}: " + ", ".join(f"{item.path} ({_REPLACED_WORDS[item.how]})" for item in items))
    if taken:
        command = shlex.join(["course", "reset", chapter_nn, str(directory), "--file", taken[0].path])
        parts.append(f"to take the chapter's versions: {command}"
                     + (" (and the same for each file named)" if len(taken) > 1 else ""))
    return "; ".join(parts)


def chapter_header(chapter: Chapter) -> None:
    say(f"Chapter {chapter.nn}: {chapter.title}", bold=True)
    say(f"  {chapter.summary}")


def locations(chapter: Chapter, answer: bool = True) -> None:
    """Where the chapter lives, without showing the answer; every command works from any dir.

    `answer=False` (a learner in a practice dir) leaves out the way to the target diff.
    """
    say(f"  parent:         {chapter.parent}")
    say(f"  target:         {chapter.target}")
    say(f"  lesson:         course show {chapter.nn}")
    say("  teaching files: " + ", ".join(chapter.teaching_files))
    say("  focused tests:  " + ", ".join(chapter.focused_tests))
    if not answer:
        return
    say("  target diff:    predict first, then look:")
    say(f"                  course diff {chapter.nn} --target          (which files change, and how much)")
    say(f"                  course diff {chapter.nn} --target --show   (the code)")


@contextlib.contextmanager
def progress(message: str, enabled: bool = True, limit: float | None = None) -> Iterator[None]:
    """A live line on stderr while something slow runs: only on a terminal, never with --json.

    It shows the seconds so far (and the time limit), so a run that hangs is
    seen to be running rather than silent; it is erased when the work ends.
    """
    try:
        live = enabled and sys.stderr.isatty() and sys.stdout.isatty()  # piped output gets no live line
    except (AttributeError, ValueError):
        live = False
    if not live:
        yield
        return
    from rich.console import Console  # imported here: only a terminal pays for it
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = [SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn()]
    if limit is not None:
        columns.append(TextColumn(f"(limit {limit:g} s)"))
    console = Console(stderr=True)
    with Progress(*columns, console=console, transient=True, refresh_per_second=8) as bar:
        bar.add_task(message, total=None)
        yield


def display_path(path: Path) -> str:
    """A path for the learner: relative to the current dir when it is below it (course.locate.shown)."""
    return shown(path)


def local_model_lines(server: LocalServer) -> list[str]:
    """What `course local-model` prints before the server starts: the flags first, ready to paste."""
    return [
        f"tiny_pi flags: {server.agent_flags}",
        f'  e.g. python -m tiny_pi.agent {server.agent_flags} "What is this project called? Read README.md first."',
        f"  (its context holds {server.context_tokens} tokens: from chapter 11 on, add --context-window {server.context_tokens})",
        f"Starting llama.cpp's server with gemma-3-270m as {server.model!r} ({display_path(server.weights)}):",
        "  a small base model: its tool calls are real, its answers were right in none of ten tries (see the README).",
        "It is ready when it prints 'listening on'; Ctrl-C stops it.",
    ]


def local_model_ending(ended: Ended) -> str:
    if ended.stopped:
        return "Stopped the local model server."
    if ended.status == 0:
        return "The local model server ended."
    return f"The local model server ended with status {ended.status} (its messages are above)."
