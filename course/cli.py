"""The `course` command line: parse, call the module that does the job, print.

Exit codes: 0 the story held / success; 1 a check deviated; 2 usage or input error.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click
import trio

from course import output
from course.cards import render_learning
from course.catalog import Chapter
from course.context import CourseContext, pass_context
from course.checks import ChapterTime, check_practice, excerpt, prove_chapter, red_light_check, run_spec, verify
from course.errors import INTERRUPTED, CourseError
from course.failures import digest
from course.progress import save_result
from course.render import show_lesson
from course.runner import RunPool, RunResult
from course.verdict_copy import verdict_copy
from course.status import NOT_TESTED, chapter_progress
from course.workspace import check_practice_target, make_practice_dir, practice_is_usable


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Rebuild a tiny agent runtime chapter by chapter, and prove every step."""


@cli.command("list")
@pass_context
def list_command(ctx: CourseContext) -> None:
    """Chapters, their labs and focused test counts, and your progress in each."""
    for chapter in ctx.catalog.chapters:
        click.echo(click.style(f"{chapter.name}  {chapter.title}", bold=True) + f"  [{chapter.mode}]")
        click.echo(f"    {chapter.summary}")
        click.echo(f"    focused tests: {chapter.expected_passed}  ({', '.join(chapter.focused_tests)})")
        for lab in chapter.labs:
            click.echo(f"    lab {lab.id}: {lab.title} ({lab.expected_passed} tests)")
        progress = chapter_progress(ctx.root, chapter)
        where = f"practice/{chapter.name}"
        if progress.exists:
            when = f", {progress.last.when}" if progress.last and progress.state != NOT_TESTED else ""
            click.echo(f"    practice: {where} - last test: {progress.verdict()}{when}")
        else:
            click.echo(f"    practice: none yet (course practice {chapter.nn})")


@cli.command()
@click.argument("chapter_id")
@click.option("--pager", is_flag=True, help="Page the rendered lesson (less -R style).")
@click.option("--answers", is_flag=True, help="Open the folded answer keys in a terminal.")
@pass_context
def show(ctx: CourseContext, chapter_id: str, pager: bool, answers: bool) -> None:
    """The lesson of a chapter: rendered in a terminal (answer keys folded), plain Markdown when piped."""
    chapter = ctx.chapter(chapter_id)
    how_to_open = None if answers else f"course show {chapter.nn} --answers"
    show_lesson(chapter.lesson.read_text(encoding="utf-8"), pager=pager, how_to_open=how_to_open)


@cli.command()
@click.argument("chapter_id")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@pass_context
def checkpoint(ctx: CourseContext, chapter_id: str, as_json: bool) -> None:
    """Locate a chapter's parent and target and prove its story holds."""
    chapter = ctx.chapter(chapter_id)
    if not as_json:
        output.chapter_header(chapter)
        output.locations(chapter)
        click.echo("\nProving the story, each check in its own throw-away copy:")
    started = time.monotonic()
    checks = trio.run(prove_chapter, ctx.catalog, chapter)
    duration = time.monotonic() - started
    if as_json:
        output.emit_json(output.report("checkpoint", checks, duration, chapter=chapter.name))
    else:
        output.checklist(checks)
        output.summary_line(checks, duration, f"Chapter {chapter.nn}: the story holds", f"Chapter {chapter.nn}: the story does NOT hold")
    sys.exit(0 if all(check.ok for check in checks) else 1)


@cli.command("verify")
@click.argument("chapter_ids", nargs=-1)
@click.option("--fresh", is_flag=True, help="Run every story again, even those whose inputs did not change.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@pass_context
def verify_command(ctx: CourseContext, chapter_ids: tuple[str, ...], fresh: bool, as_json: bool) -> None:
    """Prove every chapter (or the given ones) plus lineage and lesson cards."""
    catalog = ctx.catalog
    chapters = [catalog.resolve(c) for c in chapter_ids] if chapter_ids else list(catalog.chapters)
    started = time.monotonic()
    times: list[ChapterTime] = []
    checks = trio.run(verify, catalog, chapters, fresh, times)
    duration = time.monotonic() - started
    if as_json:
        output.emit_json(
            output.report("verify", checks, duration, chapters=[c.name for c in chapters],
                          times=[{"chapter": t.chapter, "seconds": round(t.seconds, 3), "cached": t.cached}
                                 for t in times])
        )
    else:
        output.checklist(checks, show_chapter=True)
        click.echo("Stories: " + ", ".join(
            f"{t.chapter} {'unchanged, verdict reused' if t.cached else f'{t.seconds:.1f} s'}" for t in times))
        output.summary_line(checks, duration, "The course holds", "The course does NOT hold")
    sys.exit(0 if all(check.ok for check in checks) else 1)


@cli.command()
@click.argument("chapter_id")
@click.argument("directory", required=False)
@pass_context
def practice(ctx: CourseContext, chapter_id: str, directory: str | None) -> None:
    """Copy a chapter's starting point into DIRECTORY and show its first red light."""
    chapter = ctx.chapter(chapter_id)
    target = check_practice_target(ctx.practice_dir(chapter, directory), ctx.root)
    source = chapter.practice_start
    message = f"Start of chapter {chapter.name} ({'target' if chapter.mode == 'observe' else 'parent'})"
    make_practice_dir(source, target, render_learning(chapter), message)
    click.echo(f"Made {target}")
    click.echo("  LEARNING.md holds the checkpoint card; `git diff` there shows your own work.")
    run = trio.run(_first_run, chapter, target)
    red = chapter.first_red_light
    if chapter.mode == "observe":
        shown = run.outcome == "passed"
        click.echo(f"\nFocused tests: {run.summary()} (observe mode: the target is complete).")
    else:
        shown = red_light_check(chapter, run).ok
        click.echo(f"\nFirst red light: {run.summary()}")
        for fragment in red.fragments:
            mark = "seen" if fragment in run.output else "MISSING"
            click.echo(f"  {mark}: {fragment}")
        click.echo(f"\n{red.explanation}")
    if shown:
        click.echo(click.style("This is the expected starting point.", fg="green"))
        click.echo(f"First step: {chapter.first_step}")
        click.echo(f"Then: cd {target} && course test {chapter.nn}")
    else:
        click.echo(click.style("This is NOT the documented starting point:", fg="red"))
        click.echo(excerpt(run.output))
    sys.exit(0 if shown else 1)


async def _first_run(chapter: Chapter, directory: Path) -> RunResult:
    async with RunPool(chapter.warm_imports) as pool:
        with verdict_copy(chapter, directory) as copy:
            return await pool.run(run_spec(chapter, copy, chapter.focused_tests))


@cli.command("test")
@click.argument("chapter_id")
@click.argument("directory", required=False)
@click.option("--lab", "lab_id", help="Run only this lab's selection, e.g. 2.1.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True, max=3600),
              help="Seconds the tests may take (default: the chapter's time limit).")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@pass_context
def test_command(
    ctx: CourseContext, chapter_id: str, directory: str | None, lab_id: str | None, timeout: float | None,
    as_json: bool,
) -> None:
    """Run a chapter's focused tests (or one lab) in a practice dir and compare the counts."""
    chapter = ctx.chapter(chapter_id)
    lab = chapter.lab(lab_id) if lab_id else None
    target = ctx.learner_dir(chapter, directory)
    practice_is_usable(target)
    started = time.monotonic()
    checks = trio.run(check_practice, chapter, target, lab, None, timeout)
    duration = time.monotonic() - started
    save_result(target, chapter, lab, checks)
    next_step = _next_step(chapter, checks, lab)
    if as_json:
        output.emit_json(output.report("test", checks, duration, chapter=chapter.name, directory=str(target), next=next_step))
    else:
        output.checklist(checks, details=False)
        failing = next((check.run for check in checks if not check.ok and check.run is not None), None)
        if failing is not None:
            output.digest(digest(failing, chapter))
        output.summary_line(checks, duration, "Green", "Not yet")
        click.echo(f"Next: {next_step}")
    sys.exit(0 if all(check.ok for check in checks) else 1)


def _next_step(chapter: Chapter, checks: list, lab: object) -> str:
    for check in checks:
        if check.kind == "lab" and not check.ok:
            lab_id = check.name.split()[1]
            return f"make lab {lab_id} green: course test {chapter.nn} --lab {lab_id} (stuck? course hint {chapter.nn} --lab {lab_id})"
    if lab is not None:
        position = [l.id for l in chapter.labs].index(lab.id)  # type: ignore[attr-defined]
        if position + 1 < len(chapter.labs):
            following = chapter.labs[position + 1]
            return f"lab {following.id} {following.title}: course test {chapter.nn} --lab {following.id}"
        return f"run every lab at once: course test {chapter.nn}"
    if not all(check.ok for check in checks):
        return "read the first failure above and fix it"
    if chapter.redlights:
        redlight = chapter.redlights[0]
        return f"the red-light exercise {redlight.id}: {redlight.title} (see the lesson)"
    return "on to the next chapter"


def main() -> None:
    """Entry point: turn the course's own errors into one paragraph and exit status 2."""
    try:
        cli.main(standalone_mode=False, prog_name="course")
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except click.exceptions.Abort:
        click.echo(INTERRUPTED, err=True)
        sys.exit(130)
    except CourseError as error:
        click.echo(f"course: {error}", err=True)
        sys.exit(error.exit_code)
    except KeyboardInterrupt:
        click.echo(INTERRUPTED, err=True)
        sys.exit(130)
    except BaseExceptionGroup as group:
        # trio wraps what is raised inside a nursery; a Ctrl-C is still a Ctrl-C,
        # and the course's own errors are still one paragraph each.
        if group.split(KeyboardInterrupt)[1] is None:
            click.echo(INTERRUPTED, err=True)
            sys.exit(130)
        errors, rest = group.split(CourseError)
        if errors is None or rest is not None:
            raise
        for leaf in _leaves(errors):
            click.echo(f"course: {leaf}", err=True)
        sys.exit(2)


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    leaves: list[BaseException] = []
    for error in group.exceptions:
        leaves += _leaves(error) if isinstance(error, BaseExceptionGroup) else [error]
    return leaves


# The learner's loop (watch, hint, diff, status, reset) lives in its own module.
from course.learner_commands import register as _register_learner_commands  # noqa: E402

_register_learner_commands(cli)
