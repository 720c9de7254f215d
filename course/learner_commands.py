"""The learner's loop on the command line: watch, hint, diff, status, reset, redlight.

Only parsing and printing live here; each command's logic is in its own
module (watch, hints, learner_diff, status, reset). `register` adds the
commands to the `course` group, so cli.py needs one import and one call.

Exit codes as everywhere: 0 success, 1 a check deviated (red tests, a declined
reset), 2 usage or input error (course.errors.UsageError). A comparison is not
a check: `course diff` exits 0 whenever it compared, whatever differs.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import click

from course import hints as hint_ladder
from course import output
from course import redlights
from course.completion import complete_chapter, complete_dir, complete_lab
from course.context import CourseContext, pass_context
from course.errors import UsageError
from course.learner_diff import MISSING, SAME, compare, line_colour
from course.locate import beside, enclosing_practice_dir, suggest
from course.progress import read_last_test
from course.render import colour_setting
from course.status import course_status, first_open_lab
from course.verdict_copy import differing_files
from course.workspace import require_git

CHAPTER = dict(required=False, shell_complete=complete_chapter)
DIRECTORY = dict(required=False, shell_complete=complete_dir)
# Quiet time after a save before `course watch` runs the tests: long enough for an editor's
# write-rename-chmod burst, short enough to feel immediate.
DEBOUNCE_MS = 200


# watch ----------------------------------------------------------------------------


@click.command("watch")
@click.argument("chapter_id", **CHAPTER)  # type: ignore[arg-type]
@click.argument("directory", **DIRECTORY)  # type: ignore[arg-type]
@click.option("--lab", "lab_id", help="Run only this lab, e.g. 2.1.", shell_complete=complete_lab)
@click.option("--once", is_flag=True, help="Wait for one save, run once, exit 0 when green and 1 when not.")
@click.option(
    "--poll",
    is_flag=True,
    help="Poll for changes instead of using file events (network drives, containers, VM shares).",
)
@click.option(
    "--debounce",
    type=click.IntRange(10, 10_000),
    default=DEBOUNCE_MS,
    show_default=True,
    help="Quiet time in ms after a save before the tests run.",
)
@pass_context
def watch_command(
    ctx: CourseContext,
    chapter_id: str | None,
    directory: str | None,
    lab_id: str | None,
    once: bool,
    poll: bool,
    debounce: int,
) -> None:
    """Re-run a chapter's focused tests (or one lab) whenever a file in your practice dir is saved."""
    import trio  # here, not at the top: the commands that run no tests start faster without it

    from course.watch import WatchSession, choose_mode

    place = ctx.locate("watch", chapter_id, directory, lab_id)
    chapter = place.chapter
    lab = chapter.lab(lab_id) if lab_id else None
    mode = choose_mode(place.directory, poll)
    clear = click.clear if sys.stdout.isatty() else None
    ctx.remember(place)
    following = ctx.catalog.following(chapter)
    session = WatchSession(
        chapter,
        lab,
        place.directory,
        once=once,
        echo=output.say,
        clear=clear,
        debounce_ms=debounce,
        dir_words=tuple(place.dir_words()),
        following=following,
        following_dir_words=tuple(beside(place.directory, following, ctx.practice_home)) if following else (),
    )
    last_ok = trio.run(session.run, mode)
    if session.stopped_by is not None:
        output.say(f"Stopped watching ({session.stopped_by}) after {session.runs} run(s).")
        sys.exit(0)
    sys.exit(0 if last_ok else 1)


# hint -----------------------------------------------------------------------------


@click.command("hint")
@click.argument("chapter_id", **CHAPTER)  # type: ignore[arg-type]
@click.argument("directory", **DIRECTORY)  # type: ignore[arg-type]
@click.option("--lab", "lab_id", help="The lab, e.g. 2.1 (default: the first lab not green in your last run).",
              shell_complete=complete_lab)
@click.option("--next", "next_", is_flag=True, help="Climb one rung: the next hint.")
@click.option("--all", "all_", is_flag=True, help="Show every rung of the ladder.")
@click.option("--reset", "reset_", is_flag=True, help="Forget the rungs seen (of --lab, or of every lab).")
@pass_context
def hint_command(
    ctx: CourseContext,
    chapter_id: str | None,
    directory: str | None,
    lab_id: str | None,
    next_: bool,
    all_: bool,
    reset_: bool,
) -> None:
    """A hint ladder per lab, one rung at a time: where to look, the signature, the idea, a sketch."""
    if next_ + all_ + reset_ > 1:
        raise UsageError("choose one of --next, --all and --reset")
    place = ctx.locate("hint", chapter_id, directory, lab_id)
    chapter, target = place.chapter, place.directory
    action = hint_ladder.NEXT if next_ else hint_ladder.ALL if all_ else hint_ladder.RESET if reset_ else hint_ladder.SHOW
    if lab_id:
        lab = chapter.lab(lab_id)
    elif action == hint_ladder.RESET:
        forgot = hint_ladder.forget_all(target, chapter)
        output.say(f"Forgot the hints seen for every lab of chapter {chapter.nn}." if forgot else "No hints were remembered; nothing to forget.")
        return
    else:
        last = read_last_test(target)
        found = first_open_lab(chapter, last)
        if found is None:
            output.say(
                f"Every lab of chapter {chapter.nn} is green in your last run; no hint needed. "
                f"(For a lab's hints anyway: {place.command('hint', '--lab', 'ID')}.)"
            )
            return
        lab = found
        why = "no `course test` result yet" if last is None else "the first lab not green in your last `course test`"
        output.say(f"({why}: lab {lab.id})", dim=True)
    view = hint_ladder.climb(target, chapter, lab, action)
    lines = hint_ladder.render(view, place.dir_words())
    output.say(lines[0], bold=True)
    for line in lines[1:]:
        output.say(line)


# diff -----------------------------------------------------------------------------


@click.command("diff")
@click.argument("chapter_id", **CHAPTER)  # type: ignore[arg-type]
@click.argument("directory", **DIRECTORY)  # type: ignore[arg-type]
@click.option("--show", is_flag=True, help="Show the code: a coloured unified diff.")
@click.option("--target", "parent_target", is_flag=True,
              help="The chapter's own diff, parent -> target (the answer): files and sizes; the code with --show.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout (counts only).")
@pass_context
def diff_command(ctx: CourseContext, chapter_id: str | None, directory: str | None, show: bool,
                 parent_target: bool, as_json: bool) -> None:
    """Your teaching files against the target: which differ and how; the code only with --show.

    With --target, the chapter's parent -> target diff instead. Exits 0
    whenever the comparison was made: green code written differently is no
    deviation, so what differs is the output (`same` and `same_code` in --json),
    not the exit status; 2 when there is nothing to compare (usage or input).
    """
    if parent_target:
        from course.target_diff import target_diff

        require_git()
        chapter = ctx.chapter(chapter_id) if chapter_id else ctx.locate("diff", None, directory).chapter
        text = target_diff(chapter, stat=not show, color=show and sys.stdout.isatty())
        click.echo(text.rstrip("\n") if text else f"{chapter.name}: parent and target are identical")
        if not show:
            output.say(f"Predict the code first, then look: `{suggest('diff', chapter.nn, '--target', '--show')}`")
        return
    place = ctx.locate("diff", chapter_id, directory)
    chapter, target = place.chapter, place.directory
    files = compare(target, chapter)
    differ = [f for f in files if f.status != SAME]
    not_used = differing_files(chapter, target)
    if as_json:
        document = {"command": "diff", "chapter": chapter.name, "directory": str(target),
                    "same": not differ, "same_code": all(f.status == SAME or f.same_code for f in files),
                    "files": [f.to_json() for f in files], "tests_and_config_not_used": not_used}
        click.echo(json.dumps(document, indent=2))
        return
    output.say(f"Your teaching files in {output.display_path(target)} against the target of chapter {chapter.name}:")
    for item in files:
        colour = "green" if item.status == SAME or item.same_code else "yellow" if item.status == MISSING else "red"
        output.say("  " + item.summary(), fg=colour)
    if differ and all(f.same_code for f in differ):
        output.say("Your code does what the target's does: what differs is only docstrings, comments and layout.")
    if not_used:
        output.say("Your tests and config that differ from the chapter's (course test uses the chapter's): "
                   + ", ".join(not_used), fg="yellow")
    if show:
        for item in differ:
            click.echo("")
            for line in item.diff:
                click.echo(click.style(line, fg=line_colour(line)))
    elif differ:
        output.say(f"Predict what differs, then look: `{place.command('diff', '--show')}`")


# status ---------------------------------------------------------------------------


@click.command("status")
@click.argument("directories", nargs=-1, metavar="[DIR]...", shell_complete=complete_dir)
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@pass_context
def status_command(ctx: CourseContext, directories: tuple[str, ...], as_json: bool) -> None:
    """Your progress: per chapter, your practice dir and its last `course test`, and what is next.

    Practice dirs are remembered wherever `course practice` made them; a DIR
    given here, or the practice dir you are in, stands for its chapter.
    """
    here = enclosing_practice_dir(Path.cwd())
    report = course_status(ctx.practice_home, ctx.catalog, [Path(d) for d in directories], here=here)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
        return
    width = max((len(p.chapter.name) for p in report.chapters), default=0)
    output.say("Progress:")
    for progress in report.chapters:
        verdict = progress.verdict()
        colour = "green" if verdict.startswith("green") else "red" if "red" in verdict else None
        when = f"  last test {progress.last.when}" if progress.last and progress.state != "not tested yet" else ""
        where = f"  in {output.display_path(progress.directory)}" if progress.exists else ""
        click.echo(f"  {progress.chapter.name:<{width}}  {click.style(verdict, fg=colour)}{when}{where}")
        for other in progress.others:
            output.say(f"  {'':<{width}}  (also {output.display_path(other)})")
    output.say(report.summary() + ".")
    output.say(f"Next: {report.next_step()}")


# reset ----------------------------------------------------------------------------


@click.command("reset")
@click.argument("chapter_id", **CHAPTER)  # type: ignore[arg-type]
@click.argument("directory", **DIRECTORY)  # type: ignore[arg-type]
@click.option("--file", "files", multiple=True, metavar="F", help="Only this file (relative to DIR); repeatable.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@pass_context
def reset_command(ctx: CourseContext, chapter_id: str | None, directory: str | None, files: tuple[str, ...], yes: bool) -> None:
    """Restore files of your practice dir from the chapter's starting point; your versions are committed first."""
    from course.reset import bring_back_line, open_practice_repo, plan_reset, reset  # git: only for this command

    require_git()
    place = ctx.locate("reset", chapter_id, directory)
    if place.how == "default":  # a reset rewrites files: only where the learner said, or stands
        raise UsageError(
            f"name the practice dir to reset (`{suggest('reset', place.chapter.nn, 'DIR')}`), or run the command inside it"
        )
    chapter, target = place.chapter, place.directory
    plan = plan_reset(chapter, target, files)
    open_practice_repo(target).close()
    start = "target" if chapter.mode == "observe" else "parent"
    if not plan.changes:
        output.say(f"Nothing to reset: the files already match chapter {chapter.nn}'s starting point ({start}).")
        return
    output.say(f"Reset in {output.display_path(target)}, back to chapter {chapter.name}'s starting point ({start}):")
    for change in plan.changes:
        output.say(f"  {change.describe()}")
    output.say("Your current versions are saved first, as a commit on the branch course-saves of that repository.")
    if not yes:
        if not _confirmed():
            output.say("Nothing was changed.")
            sys.exit(1)
    sha = reset(chapter, plan)
    short = sha[:10]
    restored = sum(1 for change in plan.changes if change.action != "remove")
    removed = len(plan.changes) - restored
    output.say(f"Saved your versions as commit {short} (branch course-saves).")
    output.say(f"Restored {restored} file(s), removed {removed}.")
    output.say(bring_back_line(plan, sha))
    output.say(f"Then: `{place.command('test')}`")


def _confirmed() -> bool:
    """Ask on a terminal (Ctrl-C there exits 130, nothing changed); read one line from a pipe."""
    if sys.stdin.isatty():
        return click.confirm("Reset these files?", default=False)
    click.echo("Reset these files? [y/N]: ", nl=False)
    answer = sys.stdin.readline()
    if not answer:
        raise UsageError("no answer to the confirmation; nothing was changed. Pass --yes to reset without asking.")
    click.echo(answer.rstrip("\n"))
    return answer.strip().lower() in ("y", "yes")


# redlight -------------------------------------------------------------------------


EXERCISE_ID = re.compile(r"\d+\.[Rr]\d+")


@click.command("redlight")
@click.argument("chapter_id", **CHAPTER)  # type: ignore[arg-type]
@click.argument("directory", **DIRECTORY)  # type: ignore[arg-type]
@click.option("--id", "exercise_id", help="The exercise, e.g. 2.R1 (default: the first not done).")
@click.option("--check", is_flag=True,
              help="Run the focused tests once: exit 0 when the exercise's predicted failure shows, 1 when not.")
@click.option("--json", "as_json", is_flag=True, help="With --check (implied): one JSON document on stdout.")
@click.option("--poll", is_flag=True, help="Poll for changes instead of using file events (as `course watch --poll`).")
@click.option("--debounce", type=click.IntRange(10, 10_000), default=DEBOUNCE_MS, show_default=True,
              help="Quiet time in ms after a save before the tests run.")
@click.option("--revert", is_flag=True, hidden=True)
@pass_context
def redlight_command(ctx: CourseContext, chapter_id: str | None, directory: str | None, exercise_id: str | None,
                     check: bool, as_json: bool, poll: bool, debounce: int, revert: bool) -> None:
    """Say what to break by hand for a red-light exercise, then watch until its failure shows and it is green again.

    Your code is never changed: break it yourself, as the exercise says. Each
    save runs the focused tests (as `course watch` does, the verdict saved as
    `course test` saves it) and one line says whether the lesson's failure
    shows; the watch ends once the code is green again after it. With --check,
    one run and one line: exit 0 when the predicted failure shows, 1 when not
    (green, or red another way), 2 for bad input.
    """
    if revert:
        raise UsageError("course redlight no longer changes your code, so there is nothing to take off: put your "
                         "lines back by hand (`git diff` in your practice dir shows what you changed), then "
                         "`course redlight --check` says whether it is green again")
    from course.redlight_loop import instruction_lines

    if exercise_id is None and chapter_id is not None and EXERCISE_ID.fullmatch(chapter_id):
        # `course redlight 16.R1`, as the lessons name the exercises: the id names its chapter too.
        exercise_id, chapter_id = chapter_id, chapter_id.split(".")[0]
    place = ctx.locate("redlight", chapter_id, directory)
    chapter = place.chapter
    if not chapter.redlights:
        raise UsageError(f"chapter {chapter.name} has no red-light exercises")
    if exercise_id is not None:
        exercise = redlights.find(chapter, exercise_id)
    else:
        pending = redlights.read(place.directory, chapter).pending(chapter)
        if pending is None:
            ids = ", ".join(r.id for r in chapter.redlights)
            line = f"Every red-light exercise of chapter {chapter.nn} is done; to do one again: " \
                   f"`{place.command('redlight', '--id', chapter.redlights[0].id)}` (its exercises: {ids})."
            if as_json:
                click.echo(json.dumps({"command": "redlight", "chapter": chapter.name, "directory": str(place.directory),
                                       "exercise": None, "state": "all-done", "seen": False}, indent=2))
            else:
                output.say(line)
            sys.exit(1 if check or as_json else 0)
        exercise = pending
    ctx.remember(place)
    if check or as_json:
        _redlight_check(place, exercise, f"`{place.command('redlight', '--id', exercise.id, '--check')}` says when "
                        "it is green again", as_json)
        return
    restore_hint = "this watch says when it is green again, and stops there"
    import trio

    from course.watch import RedLightWatch, choose_mode

    for line in instruction_lines(chapter, exercise, place.command, watching=True):
        output.say(line)
    session = RedLightWatch(chapter, place.directory, exercise, restore_hint, echo=output.say, debounce_ms=debounce)
    trio.run(session.run, choose_mode(place.directory, poll))
    if session.stopped_by is not None:
        output.say(f"Stopped watching ({session.stopped_by}) after {session.runs} run(s).")
    sys.exit(0)


def _redlight_check(place: Any, exercise: Any, restore_hint: str, as_json: bool) -> None:
    """One run of the focused tests, one line (or one JSON document); exit 0 when the failure shows."""
    import trio

    from course.checks import check_practice
    from course.redlight_loop import observe

    chapter = place.chapter
    with output.progress("Running the focused tests", enabled=not as_json, limit=chapter.time_limit):
        checks = trio.run(check_practice, chapter, place.directory, None, None, None, False)
    seen = observe(place.directory, chapter, exercise, checks)
    if as_json:
        click.echo(json.dumps({"command": "redlight", "chapter": chapter.name,
                               "directory": str(place.directory.absolute()), **seen.to_json()}, indent=2))
    else:
        output.say(seen.line(restore_hint), fg="green" if seen.ok or seen.done else None)
    sys.exit(0 if seen.ok else 1)


def register(group: click.Group) -> None:
    """Add the learner's commands to `group`, and make NO_COLOR turn colour off for all of them."""
    setting = colour_setting()
    if setting is not None:
        group.context_settings["color"] = setting
    for command in (watch_command, hint_command, diff_command, status_command, reset_command, redlight_command):
        group.add_command(command)
