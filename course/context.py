"""What every command needs: the course root, its catalog, and where practice dirs are."""

from __future__ import annotations

from pathlib import Path

import click

from course.catalog import Catalog, Chapter, find_root, is_packaged, load_catalog
from course.locate import DefaultDir, Place, locate


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

    @property
    def practice_home(self) -> Path:
        """Where `course practice NN` puts a dir: practice/ of a checkout, else practice/ here.

        An installed course (its chapters shipped inside the package) has no
        checkout to hold practice dirs; like rustlings, it makes them in the
        current directory, and the index remembers where.
        """
        return Path.cwd() / "practice" if is_packaged(self.root) else self.root / "practice"

    def practice_dir(self, chapter: Chapter, directory: str | None) -> Path:
        if directory is None:
            return self.practice_home / chapter.name
        return Path(directory)

    def locate(self, command: str, chapter_id: str | None, directory: str | None, lab_id: str | None = None) -> Place:
        """The practice dir and chapter a learner command works on (course.locate)."""
        from course.index import practice_dirs

        remembered = {name: dirs[0] for name, dirs in practice_dirs(self.catalog).items() if dirs}
        return locate(self.catalog, command, chapter_id, directory, DefaultDir(self.practice_home, remembered), lab_id)

    def remember(self, place: Place) -> None:
        from course.index import remember

        remember(place.directory, place.chapter, self.root)


pass_context = click.make_pass_decorator(CourseContext, ensure=True)
