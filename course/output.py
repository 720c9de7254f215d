"""Everything the CLI prints: checklists for people, one JSON document for machines.

Kept apart from the commands so that `--json` never mixes with prose: a
command either builds a report for `emit_json` or lines for `echo`.
"""

from __future__ import annotations

import json
from typing import Iterable

import click

from course.catalog import Chapter
from course.checks import Check

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
        "command": command,
        "ok": all(check.ok for check in checks),
        "passed_checks": sum(check.ok for check in checks),
        "total_checks": len(checks),
        "duration": round(duration, 3),
        **extra,
        "checks": [check.to_json() for check in checks],
    }


def checklist(checks: Iterable[Check], show_chapter: bool = False, details: bool = True) -> None:
    """One line per check; a failed one adds expected, actual and (unless told not to) its output."""
    for check in checks:
        mark = OK_MARK if check.ok else FAIL_MARK
        label = f"{check.chapter}: {check.name}" if show_chapter else check.name
        if check.ok:
            click.echo(f"  {click.style(mark, fg='green')} {label} - {check.actual}")
            continue
        click.echo(f"  {click.style(mark, fg='red', bold=True)} {label}")
        click.echo(f"         expected: {check.expected}")
        click.echo(f"         actual:   {check.actual}")
        if details and check.detail:
            for line in check.detail.splitlines():
                click.echo(f"         | {line}")


def summary_line(checks: list[Check], duration: float, success: str, failure: str) -> None:
    passed = sum(check.ok for check in checks)
    verdict = success if passed == len(checks) else failure
    colour = "green" if passed == len(checks) else "red"
    click.echo(click.style(f"{verdict}: {passed}/{len(checks)} checks passed in {duration:.1f} s", fg=colour))


def chapter_header(chapter: Chapter) -> None:
    click.echo(click.style(f"Chapter {chapter.nn}: {chapter.title}", bold=True))
    click.echo(f"  {chapter.summary}")


def locations(chapter: Chapter) -> None:
    """Where the chapter lives, without showing the answer."""
    base = f"checkpoints/{chapter.name}"
    click.echo(f"  parent:         {base}/parent")
    click.echo(f"  target:         {base}/target")
    click.echo(f"  lesson:         {base}/README.md  (course show {chapter.nn})")
    click.echo("  teaching files: " + ", ".join(chapter.teaching_files))
    click.echo("  focused tests:  " + ", ".join(chapter.focused_tests))
    click.echo("  target diff:    predict first, then look:")
    click.echo(f"                  python -m tools.target_diff {chapter.nn}   (--stat for the file list)")
    click.echo(f"                  or: git diff --no-index {base}/parent {base}/target")


def digest(lines: list[str]) -> None:
    """The learner-sized account of the first failure."""
    if not lines:
        return
    click.echo("")
    for line in lines:
        click.echo(f"  {line}")
