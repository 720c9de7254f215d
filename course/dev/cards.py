"""Regenerate every lesson's checkpoint card and red-light note, the README's chapter list and the key tables.

The chapter list of README.md comes from every chapter.toml; the key tables of
checkpoints/README.md come from the chapter.toml schema (course.schema).

    course dev cards            # rewrite stale cards
    course dev cards --check    # only report; exit 1 when a card is stale

The card and the red-light note are the parts of a lesson an author must
never edit by hand: `course verify` fails when they no longer match chapter.toml.
The note's markers go at the top of the red-light section once, by hand.
"""

from __future__ import annotations

import sys

import click

from course.cards import (
    CHAPTERS_BEGIN,
    CHAPTERS_END,
    KEYS_BEGIN,
    KEYS_END,
    REDLIGHTS_BEGIN,
    REDLIGHTS_END,
    between,
    render_chapter_list,
    render_key_tables,
    replace_between,
    stale_parts,
    with_card,
    with_redlight_note,
)
from course.catalog import find_root, load_catalog
from course.dev import checkout_root
from course.errors import CourseError


@click.command()
@click.option("--check", is_flag=True, help="Report stale cards without writing.")
def main(check: bool) -> None:
    """Regenerate (or --check) every lesson's checkpoint card and red-light note, the README's chapter list and the key tables."""
    try:
        catalog = load_catalog(find_root() if check else checkout_root("cards"))
    except CourseError as error:
        click.echo(f"cards: {error}", err=True)
        sys.exit(2)
    stale = []
    generated = [
        ("README.md", "the chapter list", CHAPTERS_BEGIN, CHAPTERS_END, render_chapter_list(catalog.chapters)),
        ("checkpoints/README.md", "the chapter.toml key tables", KEYS_BEGIN, KEYS_END, render_key_tables()),
    ]
    for name, what, begin, end, content in generated:
        readme = catalog.root / name
        if not readme.is_file():
            continue
        text = readme.read_text(encoding="utf-8")
        if between(text, begin, end) not in (None, content):
            stale.append(name)
            if not check:
                readme.write_text(replace_between(text, begin, end, content), encoding="utf-8")
                click.echo(f"rewrote {what} of {name}")
    for chapter in catalog.chapters:
        text = chapter.lesson.read_text(encoding="utf-8")
        parts = stale_parts(text, chapter)
        if not parts:
            continue
        stale.append(chapter.name)
        if check:
            continue
        if "red-light note" in parts and REDLIGHTS_BEGIN not in text:
            click.echo(f"{chapter.name}: put {REDLIGHTS_BEGIN} and {REDLIGHTS_END} at the top of the "
                       "lesson's red-light section, then run again", err=True)
            sys.exit(1)
        text = with_card(text, chapter)
        if chapter.redlights:
            text = with_redlight_note(text, chapter)
        chapter.lesson.write_text(text, encoding="utf-8")
        click.echo(f"rewrote the {' and the '.join(parts)} of {chapter.name}")
    if check and stale:
        click.echo("stale cards: " + ", ".join(stale))
        sys.exit(1)
    if not stale:
        click.echo("every card is current")


if __name__ == "__main__":
    main()
