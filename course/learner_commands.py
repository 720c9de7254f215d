"""The learner's loop on the command line: status.

Only parsing and printing live here; each command's logic is in its own
module (status). `register` adds the
commands to the `course` group, so cli.py needs one import and one call.

Exit codes as everywhere: 0 success, 1 a check deviated (red tests, files
that differ, a declined reset), 2 usage or input error (course.errors.UsageError).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from course.context import CourseContext, pass_context
from course.render import colour_setting
from course.status import course_status, default_practice_dir


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


def register(group: click.Group) -> None:
    """Add the learner's commands to `group`, and make NO_COLOR turn colour off for all of them."""
    setting = colour_setting()
    if setting is not None:
        group.context_settings["color"] = setting
    for command in (status_command,):
        group.add_command(command)
