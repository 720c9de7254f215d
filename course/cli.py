"""The `course` command line: parse, call the module that does the job, print.

Exit codes: 0 the story held / success; 1 a check deviated; 2 usage or input
error; 130 interrupted (Ctrl-C). A closed pipe (`course verify | head`) ends
quietly with 0.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterator, TypeVar

import click

from course import output
from course.completion import complete_chapter, complete_dir, complete_lab
from course.context import CourseContext, pass_context
from course.checklist import ChapterTime
from course.errors import INTERRUPTED, CourseError, UsageError, caused_by_interrupt
from course.failures import observed_predictions
from course.locate import beside, pastable, path_problem, suggest
from course.requirements import missing_library, require_dependencies
from course.nextstep import next_step
from course.progress import read_last_test, save_result
from course.redlights import record as record_redlights
from course.render import show_lesson
from course.status import NOT_TESTED, course_status
from course.workspace import check_practice_target, require_git, start_practice

T = TypeVar("T")

# The order a learner meets the commands in; the author's come last.
ORDER = ("practice", "test", "watch", "hint", "diff", "redlight", "reset", "status", "list", "show",
         "capstone", "local-model", "checkpoint", "verify", "dev")

EPILOG = """\b
Chapter ids: 3, 03, message-ir and 03-message-ir all name chapter 03.
Inside a practice dir (or any dir below it) the chapter id and DIR may be left out.

\b
Examples:
  course practice 02                 make practice/02-event-stream and see its first red light
  cd practice/02-event-stream
  course test --lab 2.1              one lab, against its expected count
  course watch                       re-run on every save
  course hint                        one rung of the hint ladder for the first open lab
  course diff --show                 your teaching files against the target
  course status                      every chapter: where you are and what is next

\b
Authors: `course dev --help` lists the tools that prove, regenerate and carry chapters.

\b
Exit status: 0 success, 1 a check deviated, 2 usage or input error, 130 interrupted.
Shell completion (bash, zsh, fish): see the README."""


def _print_version(context: click.Context, parameter: click.Parameter, value: bool) -> None:
    """`--version`, looked up only when asked (importlib.metadata costs every other command time)."""
    if not value or context.resilient_parsing:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("tiny-pi-course")
    except PackageNotFoundError:
        found = "(not installed: running from a checkout)"
    click.echo(f"course {found}")
    context.exit()


class ClosedPipe(Exception):
    """The reader of stdout went away (`course checkpoint 01 | head -1`).

    Not an OSError on purpose: click's own main() turns an EPIPE into exit
    status 1 before our main() sees it; this passes through click to main(),
    which ends quietly with 0 as the README says.
    """


class LearnerOrder(click.Group):
    """Commands listed in the learner's order, each with its whole first sentence.

    Parsing (`--help`, `--version`) and the command itself run inside
    `make_context` and `invoke`; a closed pipe in either leaves as ClosedPipe.
    """

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        with _pipe_closed_as_closed_pipe():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: click.Context) -> Any:
        with _pipe_closed_as_closed_pipe():
            return super().invoke(ctx)

    def list_commands(self, ctx: click.Context) -> list[str]:
        known = super().list_commands(ctx)
        return [name for name in ORDER if name in known] + [name for name in known if name not in ORDER]

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            rows.append((name, command.get_short_help_str(limit=1_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(
    cls=LearnerOrder,
    invoke_without_command=True,
    epilog=EPILOG,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version and exit.")
@click.pass_context
def cli(click_context: click.Context) -> None:
    """Rebuild a tiny agent runtime chapter by chapter, and prove every step."""
    if click_context.invoked_subcommand is None:
        click.echo(click_context.get_help())


CHAPTER = dict(required=False, shell_complete=complete_chapter)
DIRECTORY = dict(required=False, shell_complete=complete_dir)
LAB = dict(help="Only this lab, e.g. 2.1.", shell_complete=complete_lab)


@cli.command("list")
@pass_context
def list_command(ctx: CourseContext) -> None:
    """Chapters, their labs and focused test counts, and your progress in each."""
    report = course_status(ctx.practice_home, ctx.catalog, here=_here())
    for chapter, progress in zip(ctx.catalog.chapters, report.chapters):
        output.say(f"{chapter.name}  {chapter.title}  [{chapter.mode}]", bold=True)
        output.say(f"    {chapter.summary}")
        output.say(f"    focused tests: {chapter.expected_passed}  ({', '.join(chapter.focused_tests)})")
        for lab in chapter.labs:
            output.say(f"    lab {lab.id}: {lab.title} ({lab.expected_passed} tests)")
        if progress.exists:
            when = f", {progress.last.when}" if progress.last and progress.state != NOT_TESTED else ""
            output.say(f"    practice: {output.display_path(progress.directory)} - last test: {progress.verdict()}{when}")
        else:
            output.say(f"    practice: none yet ({suggest('practice', chapter.nn)})")


def _here() -> Path | None:
    from course.locate import enclosing_practice_dir

    return enclosing_practice_dir(Path.cwd())


@cli.command()
@click.argument("chapter_id", **CHAPTER)  # type: ignore[arg-type]
@click.option("--pager/--no-pager", default=None, help="Page the lesson (default: on a terminal, when it is longer than the screen).")
@click.option("--answer", "answer", is_flag=False, flag_value="", default=None, metavar="[N]",
              help="Open fold N alone (an answer key or a prediction's answer); without N, list the folds.")
@click.option("--answers", "every_answer", is_flag=True, hidden=True)
@pass_context
def show(ctx: CourseContext, chapter_id: str | None, pager: bool | None, answer: str | None, every_answer: bool) -> None:
    """The lesson of a chapter: rendered and paged in a terminal (answer keys folded), plain Markdown when piped."""
    from course.render import fold_text, folds

    chapter = ctx.chapter(chapter_id) if chapter_id else ctx.locate("show", None, None).chapter
    if every_answer:
        raise UsageError(f"--answers is gone: it opened every fold at once, the answers to predictions still ahead "
                         f"among them; open one with `{suggest('show', chapter.nn, '--answer', 'N')}` "
                         f"(`{suggest('show', chapter.nn, '--answer')}` lists them)")
    text = chapter.lesson.read_text(encoding="utf-8")
    if answer is None:
        show_lesson(text, pager=pager, how_to_open=lambda number: suggest("show", chapter.nn, "--answer", str(number)))
        return
    found = folds(text)
    if not found:
        raise UsageError(f"chapter {chapter.name}'s lesson has no folds")
    if answer == "":
        output.say(f"The folds of chapter {chapter.nn}'s lesson; open one with "
                   f"`{suggest('show', chapter.nn, '--answer', 'N')}`:")
        for fold in found:
            output.say(f"  {fold.number:>2}  {fold.summary}" + (f"  (in: {fold.section})" if fold.section else ""))
        return
    wanted = answer.strip()
    if not wanted.isdigit() or not 1 <= int(wanted) <= len(found):
        raise UsageError(f"chapter {chapter.name}'s lesson has no fold {answer!r}: its folds are numbered 1 to "
                         f"{len(found)} (`{suggest('show', chapter.nn, '--answer')}` lists them)")
    show_lesson(fold_text(found[int(wanted) - 1]), pager=pager)


@cli.command("local-model")
@click.option("--port", default="8080", show_default=True, metavar="PORT", callback=lambda _context, _parameter, value: _port(value),
              help="The port to listen on.")
@click.option("--host", default="127.0.0.1", show_default=True, metavar="HOST", help="The address to listen on.")
@pass_context
def local_model_command(ctx: CourseContext, port: int, host: str) -> None:
    """Serve a small real model on this machine for `python -m tiny_pi.agent` (the local-model extra).

    Prints the --base-url, --model and --context-window to use, then runs
    llama.cpp's llama-server with gemma-3-270m and the course's chat template
    (it makes real tool calls) in the foreground until Ctrl-C. Exit 2 without
    the extra, 3 when the port is taken (the line names the pid that holds it).
    """
    from course import local_model

    server = local_model.prepare(ctx.root, host, port)
    for line in output.local_model_lines(server):
        output.say(line)
    ended = local_model.serve(server)
    output.say(output.local_model_ending(ended))
    sys.exit(0 if ended.stopped or ended.status == 0 else 1)


def _port(value: str) -> int:
    """`--port`, checked here: one line for a bad value, where click's range check prints three."""
    if not value.isdigit() or not 1 <= int(value) <= 65535:
        raise UsageError(f"--port takes a whole number from 1 to 65535, not {value!r}")
    return int(value)


@cli.command()
@click.argument("chapter_id", shell_complete=complete_chapter)
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@pass_context
def checkpoint(ctx: CourseContext, chapter_id: str, as_json: bool) -> None:
    """Locate a chapter's parent and target and prove its story holds (for authors).

    Inside a practice dir it says that it proves the course's chapter, not the
    code there, points to `course test`, and advertises no answer.
    """
    from course import checks as proofs
    chapter = ctx.chapter(chapter_id)
    require_git()  # the red-light exercises are git patches
    require_dependencies(ctx.root)
    in_practice = _here() is not None
    mine = (f"This proves the course's own chapter {chapter.nn} (its parent, target and red-light patches), "
            "not the code of your practice dir; your code: `course test`")
    if not as_json:
        output.chapter_header(chapter)
        if in_practice:
            output.say(f"  {mine}", fg="yellow")
        output.locations(chapter, answer=not in_practice)
        output.say("\nProving the story, each check in its own throw-away copy:")
    started = time.monotonic()
    with output.progress(f"Proving chapter {chapter.nn}", enabled=not as_json):
        checks = _run(proofs.prove_chapter, ctx.catalog, chapter)
    duration = time.monotonic() - started
    if as_json:
        output.emit_json(output.report("checkpoint", checks, duration, chapter=chapter.name))
    else:
        output.checklist(checks)
        output.summary_line(checks, duration, f"Chapter {chapter.nn}: the story holds", f"Chapter {chapter.nn}: the story does NOT hold")
        if in_practice:
            output.say(f"{mine}.")
    sys.exit(0 if all(check.ok for check in checks) else 1)


@cli.command("verify")
@click.argument("chapter_ids", nargs=-1, shell_complete=complete_chapter)
@click.option("--fresh", is_flag=True, help="Run every story again, even those whose inputs did not change.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@pass_context
def verify_command(ctx: CourseContext, chapter_ids: tuple[str, ...], fresh: bool, as_json: bool) -> None:
    """Prove every chapter (or the given ones) plus lineage and lesson cards (for authors)."""
    from course import checks as proofs
    catalog = ctx.catalog
    resolved = [catalog.resolve(c) for c in chapter_ids] if chapter_ids else list(catalog.chapters)
    chapters = list({chapter.name: chapter for chapter in resolved}.values())  # `verify 2 02` proves 02 once
    require_git()
    require_dependencies(ctx.root)
    started = time.monotonic()
    times: list[ChapterTime] = []
    with output.progress(f"Proving {len(chapters)} chapter(s)", enabled=not as_json):
        checks = _run(proofs.verify, catalog, chapters, fresh, times)
    duration = time.monotonic() - started
    if as_json:
        output.emit_json(
            output.report("verify", checks, duration, chapters=[c.name for c in chapters],
                          times=[{"chapter": t.chapter, "seconds": round(t.seconds, 3), "cached": t.cached}
                                 for t in times])
        )
    else:
        output.checklist(checks, show_chapter=True)
        output.say("Stories: " + ", ".join(
            f"{t.chapter} {'unchanged, verdict reused' if t.cached else f'{t.seconds:.1f} s'}" for t in times))
        output.summary_line(checks, duration, "The course holds", "The course does NOT hold")
    sys.exit(0 if all(check.ok for check in checks) else 1)


@cli.command()
@click.argument("chapter_id", shell_complete=complete_chapter)
@click.argument("directory", **DIRECTORY)  # type: ignore[arg-type]
@click.option("--nested", is_flag=True, help="Make DIR even inside another git work tree (another practice dir, a repository).")
@pass_context
def practice(ctx: CourseContext, chapter_id: str, directory: str | None, nested: bool) -> None:
    """Copy a chapter's starting point into DIR (a git repo of its own) and show its first red light."""
    from course import checks as proofs
    chapter = ctx.chapter(chapter_id)
    require_git()
    require_dependencies(ctx.root)
    target = check_practice_target(ctx.practice_dir(chapter, directory), ctx.root, nested)
    start_practice(chapter, target, ctx.root)
    output.say(f"Made {output.display_path(target)}")
    output.say("  LEARNING.md holds the checkpoint card; `git diff` there shows your own work.")
    red = chapter.first_red_light
    if not proofs.lab_by_lab(chapter):
        with output.progress(f"Running chapter {chapter.nn}'s focused tests", limit=chapter.time_limit):
            run = _run(proofs.first_run, chapter, target)
        text = run.output
        if chapter.mode == "observe":
            blanks = ", ".join(chapter.practice_blanks)
            # With blanks to fill in, failing tests are the expected start; a run that cannot even collect is not.
            shown = run.outcome == "passed" or (bool(blanks) and run.outcome == "failed")
            note = f"; what fails waits for you to fill in {blanks}" if blanks else ""
            output.say(f"\nFocused tests: {run.summary()} (observe mode: the target is complete{note}).")
        else:
            shown = proofs.red_light_check(chapter, run).ok
            output.say(f"\nFirst red light: {run.summary()}")
            for fragment in red.fragments:
                output.say(f"  {'seen' if fragment in run.output else 'MISSING'}: {fragment}")
            output.say(f"\n{red.explanation}")
    else:
        with output.progress(f"Running chapter {chapter.nn}'s labs in order, to the first that fails",
                             limit=chapter.time_limit):
            first = _run(proofs.first_practice_labs, chapter, target)
        shown = proofs.first_labs_check(chapter, first).ok
        every_lab = suggest("test", chapter.nn, pastable(output.display_path(target)))
        for line in output.first_labs_lines(chapter, first, every_lab):
            output.say(line)
        output.say(f"\n{red.explanation}")
        text = first.output
    if shown:
        output.say("This is the expected starting point.", fg="green")
        output.say(f"First step: {chapter.first_step}")
        output.say(f"Then: cd {shlex.quote(output.display_path(target))} && {suggest('test', chapter.nn)}")
    else:
        output.say("This is NOT the documented starting point:", fg="red")
        click.echo(proofs.excerpt(text))
    sys.exit(0 if shown else 1)


@cli.command("test")
@click.argument("chapter_id", **CHAPTER)  # type: ignore[arg-type]
@click.argument("directory", **DIRECTORY)  # type: ignore[arg-type]
@click.option("--lab", "lab_id", **LAB)  # type: ignore[arg-type]
@click.option("--timeout", callback=lambda _context, _parameter, value: _seconds(value),
              help="Seconds the tests may take, at most 3600 (default: the chapter's time limit).")
@click.option("-v", "--verbose", is_flag=True, help="Also print pytest's whole output.")
@click.option("--tests", "by_lab", is_flag=True, help="List every test, lab by lab (with --lab, that lab's), passed or failed.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@pass_context
def test_command(ctx: CourseContext, chapter_id: str | None, directory: str | None, lab_id: str | None,
                 timeout: float | None, verbose: bool, by_lab: bool, as_json: bool) -> None:
    """Run a chapter's focused tests (or one lab) in your practice dir and compare the counts.

    Inside a practice dir, CHAPTER_ID and DIR can be left out.
    """
    from course import checks as proofs
    place = ctx.locate("test", chapter_id, directory, lab_id)
    chapter = place.chapter
    lab = chapter.lab(lab_id) if lab_id else None
    if not as_json:
        what = f"lab {lab.id}" if lab else f"chapter {chapter.nn}'s focused tests"
        output.say(f"Testing {output.display_path(place.directory)} ({what}):")
    started = time.monotonic()
    with output.progress(f"Running {f'lab {lab.id}' if lab else 'the focused tests'}", enabled=not as_json,
                         limit=timeout or chapter.time_limit):
        checks = _run(proofs.check_practice, chapter, place.directory, lab, None, timeout, verbose or as_json)
    duration = time.monotonic() - started
    before = read_last_test(place.directory)
    last = save_result(place.directory, chapter, lab, checks)
    run = next((check.run for check in checks if check.run is not None), None)
    was_green = before is not None and before.chapter == chapter.name and before.ok and before.lab is None
    update = record_redlights(place.directory, chapter, run, last.ok, lab is None, was_green)
    ctx.remember(place)
    following = ctx.catalog.following(chapter)
    following_words = beside(place.directory, following, ctx.practice_home) if following is not None else []
    step = next_step(chapter, last, update.state, place.dir_words(), following, "test", following_words)
    if as_json:
        output.emit_json(output.report(
            "test", checks, duration, chapter=chapter.name, directory=str(place.directory.absolute()), next=step,
            redlight_seen=update.seen.id if update.seen else None,
            redlights_done=[r.id for r in update.done], redlights=dict(update.state.states),
            predictions=[guess.to_json() for guess in observed_predictions(run, chapter, lab)],
        ))
    else:
        hint = place.command("test", *(["--lab", lab.id] if lab else []), "-v")
        for line in output.result_lines(chapter, lab, checks, duration, update, step, verbose, by_lab, hint):
            output.say(line)
    sys.exit(0 if all(check.ok for check in checks) else 1)


def _seconds(value: str | None) -> float | None:
    """`--timeout`, checked here rather than by click: its range check lets nan through, and its
    message takes three lines where every other bad input gets one."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= 3600:  # nan fails every comparison
        raise UsageError(f"--timeout takes seconds, more than 0 and at most 3600, not {value!r}")
    return seconds


def _run(function: Callable[..., Awaitable[T]], *args: Any) -> T:
    """trio.run, imported only here: the commands that run tests need trio and the runner
    (`course.checks`, imported inside each of them); every other command starts faster without."""
    import trio

    return trio.run(function, *args)


def main() -> None:
    """Entry point: the course's own errors in one line, Ctrl-C as 130, a closed pipe as quiet success."""
    try:
        try:
            cli.main(standalone_mode=False, prog_name="course")
        finally:
            sys.stdout.flush()
    except BaseException as error:  # noqa: BLE001 - every ending is decided here, once
        sys.exit(_exit_status(error))


def _exit_status(error: BaseException) -> int:
    if isinstance(error, SystemExit):
        return error.code if isinstance(error.code, int) else (0 if error.code is None else 1)
    if isinstance(error, click.exceptions.Exit):
        return error.exit_code
    if _closed_pipe(error):
        _silence_stdout()
        return 0
    if isinstance(error, click.exceptions.Abort) or caused_by_interrupt(error):
        click.echo(INTERRUPTED, err=True)
        return 130
    if isinstance(error, click.UsageError):  # a bad option or argument: one line, as every bad input gets
        click.echo(_usage_line(error), err=True)
        return error.exit_code
    if isinstance(error, click.ClickException):
        error.show()
        return error.exit_code
    without = missing_library(error)
    if without is not None:  # a library imported by one command only (GitPython for reset) is missing
        click.echo(without, err=True)
        return 2
    leaves = _leaves(error) if isinstance(error, BaseExceptionGroup) else [error]
    if all(isinstance(leaf, (CourseError, OSError)) for leaf in leaves):
        for leaf in leaves:
            if isinstance(leaf, OSError):
                leaf = path_problem(leaf, _written_path(leaf))
            click.echo(f"course: {leaf}", err=True)
        return max(getattr(leaf, "exit_code", 2) for leaf in leaves)
    raise error


def _usage_line(error: click.UsageError) -> str:
    """click's message with the command it is about, where click prints the usage block too."""
    where = error.ctx.command_path if error.ctx is not None else "course"
    return f"{where}: {error.format_message()} (see '{where} --help')"


WRITE_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)  # the destination is what failed


def _written_path(error: OSError) -> str:
    """The path an OS error is about: for a copy that could not be written, the copy, not its source."""
    if error.errno in WRITE_ERRORS and error.filename2:
        return str(error.filename2)
    return str(error.filename or "a path")


def _closed_pipe(error: BaseException) -> bool:
    if isinstance(error, BaseExceptionGroup):
        return all(_closed_pipe(leaf) for leaf in _leaves(error))
    return isinstance(error, (BrokenPipeError, ClosedPipe)) or (
        isinstance(error, OSError) and error.errno == errno.EPIPE)


@contextlib.contextmanager
def _pipe_closed_as_closed_pipe() -> Iterator[None]:
    try:
        yield
    except OSError as error:
        if error.errno != errno.EPIPE:
            raise
        raise ClosedPipe() from error


def _silence_stdout() -> None:
    """The reader went away: send what Python still wants to flush at exit nowhere."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    leaves: list[BaseException] = []
    for error in group.exceptions:
        leaves += _leaves(error) if isinstance(error, BaseExceptionGroup) else [error]
    return leaves


# The learner's loop (watch, hint, diff, status, reset) lives in its own module.
from course.learner_commands import register as _register_learner_commands  # noqa: E402

_register_learner_commands(cli)

# The capstone, the final exam, lives in its own package (course/capstone).
from course.capstone.command import capstone as _capstone  # noqa: E402

cli.add_command(_capstone)

# The author's tools (`course dev ...`) live apart from the learner's, in course/dev.
from course.dev.cli import dev as _dev  # noqa: E402

cli.add_command(_dev)
