"""What every command needs: the course root, its catalog, and where practice dirs go."""

from __future__ import annotations

from pathlib import Path

import click

from course.catalog import Catalog, Chapter, find_root, load_catalog


class CourseContext:
    """What every command needs: the course root and, lazily, its catalog."""

    def __init__(self) -> None:
        self.root = find_root()
        self._catalog: Catalog | None = None

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = load_catalog(self.root)
        return self._catalog

    def chapter(self, chapter_id: str) -> Chapter:
        return self.catalog.resolve(chapter_id)

    def practice_dir(self, chapter: Chapter, directory: str | None) -> Path:
        if directory is None:
            return self.root / "practice" / chapter.name
        return Path(directory)

    def learner_dir(self, chapter: Chapter, directory: str | None) -> Path:
        """DIR, else the current directory when it is a practice dir, else the default one."""
        if directory is not None:
            return Path(directory)
        here = Path.cwd()
        if (here / "LEARNING.md").is_file() and (here / "pytest.ini").is_file():
            return here
        return self.practice_dir(chapter, None)


pass_context = click.make_pass_decorator(CourseContext, ensure=True)
