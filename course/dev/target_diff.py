"""Show a chapter's target diff: what the learner writes, from parent to target.

    course dev target-diff 03            # the whole diff (coloured on a terminal)
    course dev target-diff 03 --stat     # only which files change, and how much
    course dev target-diff 03 tiny_pi/messages/records.py   # one file

This is the view a learner gets after predicting, so it must show exactly
the chapter's work and nothing else: both snapshots are copied without
caches first (a stray __pycache__ would otherwise fill the diff), then git
compares the copies under the names parent/ and target/.
"""

from __future__ import annotations

import sys

import click

from course.catalog import find_root, load_catalog
from course.errors import CourseError
from course.target_diff import target_diff


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("chapter_id")
@click.argument("paths", nargs=-1)
@click.option("--stat", is_flag=True, help="Only the files that change and how much.")
@click.option(
    "--color/--no-color", default=None,
    help="Colour the diff (default: only when stdout is a terminal).",
)
def main(chapter_id: str, paths: tuple[str, ...], stat: bool, color: bool | None) -> None:
    """Show CHAPTER_ID's target diff (parent -> target), optionally only PATHS.

    Predict first, then look: this is the answer to the chapter. Paths are
    relative to a snapshot, e.g. tiny_pi/messages/records.py. Exit status: 0 shown,
    2 unknown chapter or path.
    """
    try:
        chapter = load_catalog(find_root()).resolve(chapter_id)
        text = target_diff(chapter, paths, stat, sys.stdout.isatty() if color is None else color)
    except CourseError as error:
        click.echo(f"target_diff: {error}", err=True)
        sys.exit(error.exit_code)
    if not text:
        click.echo(f"{chapter.name}: parent and target are identical" + (" in those files" if paths else ""))
        return
    click.echo(text, nl=False, color=True)


if __name__ == "__main__":
    main()
