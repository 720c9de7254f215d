"""`course capstone [DIR] [--json] [--chapter NN] [--seed N]`: parse, run the capstone, print its counts and codes.

Only parsing and printing live here; the run is course.capstone.runner's,
the words course.capstone.report's. Exit status: 0 every family examined
passed, 1 some did not (or the frozen code changed), 2 bad usage.
"""

from __future__ import annotations

import sys

import click

from course import output
from course.completion import complete_dir
from course.context import CourseContext, pass_context
from course.errors import UsageError


def _seed(value: str | None) -> int | None:
    if value is None:
        return None
    if not value.isdigit() or int(value) >= 2**63:
        raise UsageError(f"--seed takes a whole number from 0 to 2**63 - 1, not {value!r}")
    return int(value)


def course_version() -> str | None:
    """The installed course's version (the JSON names the course that graded), or None from a checkout."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tiny-pi-course")
    except PackageNotFoundError:
        return None


@click.command("capstone")
@click.argument("directory", required=False, shell_complete=complete_dir)
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout (counts and codes only).")
@click.option("--chapter", "required", metavar="NN",
              help="(instructors) The chapter DIR must have reached: an earlier practice dir is refused (exit 2), "
                   "so every grade covers the same families.")
@click.option("--seed", callback=lambda _context, _parameter, value: _seed(value), metavar="N",
              help="(authors) Draw the cases from seed N instead of a fresh one, to reproduce a run.")
@pass_context
def capstone(
    ctx: CourseContext, directory: str | None, as_json: bool, required: str | None, seed: int | None
) -> None:
    """The final exam of your agent: fresh cases at every run, counts and failure codes only.

    DIR defaults to the practice dir you are in, else your latest one (the
    highest chapter from 07 on). Its tiny_pi/ is copied and frozen; the
    cases run `python -m tiny_pi.agent`, `tiny_pi.eval`, `tiny_pi.session`
    and `tiny_pi.durable_view` against model and MCP servers the course
    starts. Families that need a later chapter than DIR's are listed as not
    examined.
    """
    import trio

    from course.capstone.frozen import shipped_answer
    from course.capstone.place import examined
    from course.capstone.report import document, lines
    from course.capstone.runner import run_capstone
    from course.capstone.seeds import fresh_seed
    from course.index import practice_dirs
    from course.locate import DefaultDir

    remembered = {name: dirs[0] for name, dirs in practice_dirs(ctx.catalog).items() if dirs}
    need = ctx.catalog.resolve(required) if required is not None else None
    place = examined(ctx.catalog, directory, DefaultDir(ctx.practice_home, remembered), need)
    drawn = fresh_seed() if seed is None else seed
    with output.progress("Running the capstone", enabled=not as_json):
        report = trio.run(run_capstone, place.directory, place.chapter.number, place.chapter.name, drawn)
    shipped = shipped_answer(report.digest, ((chapter.name, chapter.target) for chapter in ctx.catalog.chapters))
    if as_json:
        output.emit_json(document(report, course_version(), shipped))
    else:
        for line in lines(report, str(place.directory.absolute()), seeded=seed is not None, shipped=shipped):
            output.say(line)
    sys.exit(0 if report.ok else 1)
