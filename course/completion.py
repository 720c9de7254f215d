"""Shell completion for chapter ids, lab ids and directories (bash, zsh and fish, through click).

Completion runs on every Tab, so it reads only chapter.toml files, never runs
anything, and never fails: any trouble means "no suggestions".
"""

from __future__ import annotations

from pathlib import Path

import click
from click.shell_completion import CompletionItem

from course.catalog import Catalog, find_root, load_catalog
from course.errors import CourseError


def _catalog() -> Catalog | None:
    try:
        return load_catalog(find_root())
    except (CourseError, OSError):
        return None


def complete_chapter(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Chapter ids as `02` (with the title as help); a word that is not one yet may be a DIR."""
    catalog = _catalog()
    items = []
    if catalog is not None:
        for chapter in catalog.chapters:
            for spelling in (chapter.nn, chapter.name):
                if spelling.startswith(incomplete):
                    items.append(CompletionItem(spelling, help=chapter.title))
                    break
    if param.name == "chapter_id" and not items:
        items.append(CompletionItem(incomplete, type="dir"))
    return items


def complete_lab(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The lab ids of the chapter typed before, or of the practice dir you are in."""
    from course.locate import chapter_of, enclosing_practice_dir

    catalog = _catalog()
    if catalog is None:
        return []
    chapter = None
    # While `--lab` waits for its value, click leaves the words before it unparsed in ctx.args.
    typed = ctx.params.get("chapter_id") or (ctx.args[0] if ctx.args else None)
    if typed:
        try:
            chapter = catalog.resolve(str(typed))
        except CourseError:
            chapter = None
    if chapter is None:
        here = enclosing_practice_dir(Path.cwd())
        chapter = chapter_of(here, catalog) if here is not None else None
    chapters = [chapter] if chapter is not None else list(catalog.chapters)
    return [CompletionItem(lab.id, help=lab.title) for c in chapters for lab in c.labs if lab.id.startswith(incomplete)]


def complete_dir(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Directories: the shell lists them itself."""
    return [CompletionItem(incomplete, type="dir")]
