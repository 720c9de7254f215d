"""How deep each lesson is: the measures `course verify` checks, with what is behind them.

    course dev depth                 # every chapter: copy share, each lab's give-away, the rest
    course dev depth 03 --copied     # also the teaching-file lines the lesson prints verbatim
    course dev depth 10 --dictated   # also each lab's statements the lesson prints or narrates

Per chapter: the copy share (new teaching-file lines that the lesson's code
blocks print verbatim; goal at most 35 %), per lab the give-away share (the
statements of the lab's code, as its last hint rung shows it, that the lesson
prints or narrates step by step: course/dev/dictation.py; goal at most 35 %,
rebuild chapters), the lesson's length (under 900 lines), the message texts a
focused test checks that neither the lesson nor a hint states, and the last
hint rungs that do not hold their lab's code word for word. Exit 1 when any
chapter misses a goal, 2 on a usage error.
"""

from __future__ import annotations

import sys

import click

from course.catalog import find_root, load_catalog
from course.errors import CourseError
from course.dev.dictation import GIVEAWAY_GOAL, chapter_depths
from course.dev.lessons import (
    COPY_SHARE_GOAL,
    LESSON_LINE_LIMIT,
    copy_share,
    lesson_length,
    rung_problems,
    unstated_messages,
)


@click.command()
@click.argument("chapter_ids", nargs=-1)
@click.option("--copied", is_flag=True, help="List the lines the lesson prints verbatim.")
@click.option("--dictated", is_flag=True, help="List each lab's statements the lesson prints or narrates, and where.")
def main(chapter_ids: tuple[str, ...], copied: bool, dictated: bool) -> None:
    """Each chapter's lesson depth: copy share, each lab's give-away, length, unstated messages, last hint rungs."""
    try:
        catalog = load_catalog(find_root())
        chapters = [catalog.resolve(c) for c in chapter_ids] if chapter_ids else list(catalog.chapters)
    except CourseError as error:
        click.echo(f"depth: {error}", err=True)
        sys.exit(2)
    missed = False
    for chapter in chapters:
        share = copy_share(chapter)
        length = lesson_length(chapter)
        unstated = unstated_messages(chapter)
        rungs = rung_problems(chapter)
        rebuild = chapter.mode == "rebuild"
        over = rebuild and share.share > COPY_SHARE_GOAL
        labs = chapter_depths(chapter) if rebuild else []
        missed |= over or length >= LESSON_LINE_LIMIT or bool(unstated) or bool(rungs)
        missed |= any(lab.over for lab in labs)
        click.echo(
            f"{chapter.name}: copy share {share.percent} % ({share.copied} of {share.total} new lines)"
            f"{' - over the goal' if over else ''}; lesson {length} lines"
            f"{' - too long' if length >= LESSON_LINE_LIMIT else ''}"
        )
        for lab in labs:
            click.echo(
                f"  lab {lab.lab}: given away {lab.percent} % ({len(lab.given)} of {lab.total} statements)"
                f"; worst {lab.worst}{' - over the goal' if lab.over else ''}"
            )
            if dictated:
                for given in lab.given:
                    first_line = given.statement.text.split(chr(10), 1)[0]
                    click.echo(f"    {given.statement.where} {given.statement.function}(): {given.how}: {first_line}")
        for message in unstated:
            click.echo(f"  not stated: {message.test_file}:{message.line} {message.how} {message.text!r}")
        for problem in rungs:
            click.echo(f"  hint: {problem}")
        if copied:
            for line in share.copied_lines:
                click.echo(f"  copied: {line}")
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
