"""The learner's loop on the command line: watch, hint, diff, status, reset.

Only parsing and printing live here; each command's logic is in its own
module (watch, hints, learner_diff, status, reset). `register` adds the
commands to the `course` group, so cli.py needs one import and one call.

Exit codes as everywhere: 0 success, 1 a check deviated (red tests, files
that differ, a declined reset), 2 usage or input error (course.errors.UsageError).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
import trio

from course import hints as hint_ladder
from course.context import CourseContext, pass_context
from course.errors import UsageError
from course.learner_diff import MISSING, SAME, compare, line_colour
from course.render import colour_setting
from course.reset import bring_back_line, open_practice_repo, plan_reset, reset
from course.status import course_status, default_practice_dir, first_open_lab, read_last_test
from course.watch import DEFAULT_DEBOUNCE_MS, WatchSession, choose_mode
from course.workspace import practice_is_usable


def _colourise(line: str) -> str:
    """Colour a result-screen line by what it says; click drops the codes when piped or NO_COLOR."""
    stripped = line.lstrip()
    if stripped.startswith("Green"):
        return click.style(line, fg="green", bold=True)
    if stripped.startswith("Not yet"):
        return click.style(line, fg="red", bold=True)
    if stripped.startswith("[FAIL]"):
        return click.style(line, fg="red")
    if stripped.startswith("[ok]"):
        return click.style(line, fg="green")
    if stripped.startswith("== run"):
        return click.style(line, bold=True)
    return line


# watch ----------------------------------------------------------------------------


@click.command("watch")
@click.argument("chapter_id")
@click.argument("directory", required=False)
@click.option("--lab", "lab_id", help="Run only this lab's selection, e.g. 2.1.")
@click.option("--once", is_flag=True, help="Wait for one save, run once, exit 0 when green and 1 when not.")
@click.option(
    "--poll",
    is_flag=True,
    help="Poll for changes instead of using file events (network drives, containers, VM shares).",
)
@click.option(
    "--debounce",
    type=click.IntRange(10, 10_000),
    default=DEFAULT_DEBOUNCE_MS,
    show_default=True,
    help="Quiet time in ms after a save before the tests run.",
)
@pass_context
def watch_command(
    ctx: CourseContext,
    chapter_id: str,
    directory: str | None,
    lab_id: str | None,
    once: bool,
    poll: bool,
    debounce: int,
) -> None:
    """Re-run a chapter's focused tests (or one lab) whenever a file in DIRECTORY is saved."""
    chapter = ctx.chapter(chapter_id)
    lab = chapter.lab(lab_id) if lab_id else None
    target = ctx.learner_dir(chapter, directory)
    practice_is_usable(target)
    mode = choose_mode(target, poll)
    clear = click.clear if sys.stdout.isatty() else None
    session = WatchSession(
        chapter,
        lab,
        target,
        once=once,
        echo=lambda line: click.echo(_colourise(line)),
        clear=clear,
        debounce_ms=debounce,
    )
    last_ok = trio.run(session.run, mode)
    if session.stopped_by is not None:
        click.echo(f"Stopped watching ({session.stopped_by}) after {session.runs} run(s).")
        sys.exit(0)
    sys.exit(0 if last_ok else 1)


# hint -----------------------------------------------------------------------------


@click.command("hint")
@click.argument("chapter_id")
@click.argument("directory", required=False)
@click.option("--lab", "lab_id", help="The lab, e.g. 2.1 (default: the first lab not green in your last run).")
@click.option("--next", "next_", is_flag=True, help="Climb one rung: the next hint.")
@click.option("--all", "all_", is_flag=True, help="Show every rung of the ladder.")
@click.option("--reset", "reset_", is_flag=True, help="Forget the rungs seen (of --lab, or of every lab).")
@pass_context
def hint_command(
    ctx: CourseContext,
    chapter_id: str,
    directory: str | None,
    lab_id: str | None,
    next_: bool,
    all_: bool,
    reset_: bool,
) -> None:
    """A hint ladder per lab, one rung at a time: where to look, the signature, the idea, a sketch."""
    if next_ + all_ + reset_ > 1:
        raise UsageError("choose one of --next, --all and --reset")
    chapter = ctx.chapter(chapter_id)
    target = ctx.learner_dir(chapter, directory)
    practice_is_usable(target)
    action = hint_ladder.NEXT if next_ else hint_ladder.ALL if all_ else hint_ladder.RESET if reset_ else hint_ladder.SHOW
    if lab_id:
        lab = chapter.lab(lab_id)
    elif action == hint_ladder.RESET:
        forgot = hint_ladder.forget_all(target, chapter)
        click.echo(f"Forgot the hints seen for every lab of chapter {chapter.nn}." if forgot else "No hints were remembered; nothing to forget.")
        return
    else:
        last = read_last_test(target)
        found = first_open_lab(chapter, last)
        if found is None:
            click.echo(
                f"Every lab of chapter {chapter.nn} is green in your last run; no hint needed. "
                f"(For a lab's hints anyway: course hint {chapter.nn} --lab ID.)"
            )
            return
        lab = found
        why = "no `course test` result yet" if last is None else "the first lab not green in your last `course test`"
        click.echo(click.style(f"({why}: lab {lab.id})", dim=True))
    view = hint_ladder.climb(target, chapter, lab, action)
    lines = hint_ladder.render(view)
    click.echo(click.style(lines[0], bold=True))
    for line in lines[1:]:
        click.echo(line)


# diff -----------------------------------------------------------------------------


@click.command("diff")
@click.argument("chapter_id")
@click.argument("directory", required=False)
@click.option("--show", is_flag=True, help="Show the code: a coloured unified diff (yours -> target).")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout (counts only).")
@pass_context
def diff_command(ctx: CourseContext, chapter_id: str, directory: str | None, show: bool, as_json: bool) -> None:
    """Your teaching files against the target: which differ and by how much; the code only with --show.

    Exits 0 when every teaching file matches the target and 1 when one differs, like diff(1).
    """
    chapter = ctx.chapter(chapter_id)
    target = ctx.learner_dir(chapter, directory)
    practice_is_usable(target)
    files = compare(target, chapter)
    differ = [f for f in files if f.status != SAME]
    if as_json:
        document = {"command": "diff", "chapter": chapter.name, "directory": str(target),
                    "same": not differ, "files": [f.to_json() for f in files]}
        click.echo(json.dumps(document, indent=2))
        sys.exit(1 if differ else 0)
    click.echo(f"Your teaching files in {target} against the target of chapter {chapter.name}:")
    for item in files:
        colour = "green" if item.status == SAME else "yellow" if item.status == MISSING else "red"
        click.echo("  " + click.style(item.summary(), fg=colour))
    if show:
        for item in differ:
            click.echo("")
            for line in item.diff:
                click.echo(click.style(line, fg=line_colour(line)))
    elif differ:
        where = "" if directory is None else f" {directory}"
        click.echo(f"Predict what differs, then look: course diff {chapter.nn}{where} --show")
    sys.exit(1 if differ else 0)


# status ---------------------------------------------------------------------------


@click.command("status")
@click.argument("directories", nargs=-1, metavar="[DIR]...")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@pass_context
def status_command(ctx: CourseContext, directories: tuple[str, ...], as_json: bool) -> None:
    """Your progress: per chapter, the practice dir and its last `course test`.

    Practice dirs are looked for in their default place (practice/NN-slug);
    a DIR given here, or the current directory when it is a practice dir,
    stands for its chapter instead.
    """
    dirs = [Path(d) for d in directories]
    here = Path.cwd()
    if not dirs and (here / "LEARNING.md").is_file() and (here / "pytest.ini").is_file():
        dirs = [here]
    report = course_status(ctx.root, ctx.catalog, dirs)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
        return
    width = max((len(p.chapter.name) for p in report.chapters), default=0)
    click.echo("Progress (practice dirs in their default place, practice/NN-slug, unless named):")
    for progress in report.chapters:
        verdict = progress.verdict()
        colour = "green" if verdict.startswith("green") else "red" if "red" in verdict else None
        when = f"  last test {progress.last.when}" if progress.last and progress.state != "not tested yet" else ""
        where = ""
        if progress.exists and progress.directory != default_practice_dir(ctx.root, progress.chapter):
            where = f"  in {progress.directory}"
        click.echo(f"  {progress.chapter.name:<{width}}  {click.style(verdict, fg=colour)}{when}{where}")
    click.echo(report.summary() + ".")
    click.echo(f"Next: {report.next_step()}")


# reset ----------------------------------------------------------------------------


@click.command("reset")
@click.argument("chapter_id")
@click.argument("directory")
@click.option("--file", "files", multiple=True, metavar="F", help="Only this file (relative to DIRECTORY); repeatable.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@pass_context
def reset_command(ctx: CourseContext, chapter_id: str, directory: str, files: tuple[str, ...], yes: bool) -> None:
    """Restore files of DIRECTORY from the chapter's starting point; your versions are committed first."""
    chapter = ctx.chapter(chapter_id)
    target = Path(directory)
    practice_is_usable(target)
    plan = plan_reset(chapter, target, files)
    open_practice_repo(target).close()
    start = "target" if chapter.mode == "observe" else "parent"
    if not plan.changes:
        click.echo(f"Nothing to reset: the files already match chapter {chapter.nn}'s starting point ({start}).")
        return
    click.echo(f"Reset in {target}, back to chapter {chapter.name}'s starting point ({start}):")
    for change in plan.changes:
        click.echo(f"  {change.describe()}")
    click.echo("Your current versions are saved first, as a commit on the branch course-saves of that repository.")
    if not yes:
        try:
            agreed = click.confirm("Reset these files?", default=False)
        except click.exceptions.Abort:
            raise UsageError("no answer to the confirmation; nothing was changed. Pass --yes to reset without asking.") from None
        if not agreed:
            click.echo("Nothing was changed.")
            sys.exit(1)
    sha = reset(chapter, plan)
    short = sha[:10]
    restored = sum(1 for change in plan.changes if change.action != "remove")
    removed = len(plan.changes) - restored
    click.echo(f"Saved your versions as commit {short} (branch course-saves).")
    click.echo(f"Restored {restored} file(s), removed {removed}.")
    click.echo(bring_back_line(plan, sha))
    click.echo(f"Then: course test {chapter.nn} {target}")


def register(group: click.Group) -> None:
    """Add the learner's commands to `group`, and make NO_COLOR turn colour off for all of them."""
    setting = colour_setting()
    if setting is not None:
        group.context_settings["color"] = setting
    for command in (watch_command, hint_command, diff_command, status_command, reset_command):
        group.add_command(command)
