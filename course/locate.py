"""Where a learner command works: which practice dir, which chapter, and how to say it back.

A practice dir knows its chapter (the title line of its LEARNING.md), so
inside one, or in any directory below it, no chapter id is needed. A chapter
id that disagrees with the dir is refused before anything is run or written:
running chapter 05's tests in a chapter 02 dir would overwrite its progress,
and resetting it to chapter 05's parent would hand over the answers of 03-04.

Every command a learner is told to run next is built here, so it carries the
DIR when one was typed and quotes every path for the shell: what is printed
works when pasted where it was printed.
"""

from __future__ import annotations

import errno
import os
import re
import shlex
import shutil
import stat
import tempfile
from pathlib import Path

from attrs import frozen

from course.catalog import Catalog, Chapter
from course.errors import UsageError

LEARNING = "LEARNING.md"
_TITLE = re.compile(r"# Chapter (\d+):")


def path_problem(error: OSError | RuntimeError, directory: Path | str) -> UsageError:
    """One line for an OS error on a path: too long, a loop, no permission, a full disk.

    A failed copy of a whole tree (shutil.Error) is said as its first file's
    failure, and a full disk names the file system that is full.
    """
    if isinstance(error, RuntimeError):  # Path.resolve() on a symbolic-link loop (Python < 3.13)
        return UsageError(f"{directory}: a loop of symbolic links; give a real directory path.")
    number, reason = error.errno, error.strerror or str(error)
    if isinstance(error, shutil.Error):
        directory, number, reason = _first_failure(error, directory)
    if number == errno.ELOOP:
        reason = "a loop of symbolic links"
    elif number in (errno.ENOSPC, errno.EDQUOT):
        reason = f"{reason}: {_what_is_full(Path(directory))}"
    return UsageError(f"{_short(str(directory))}: {reason}.")


_ERRNO = re.compile(r"\[Errno (\d+)\] ([^:]+)")


def _first_failure(error: shutil.Error, directory: Path | str) -> tuple[Path | str, int | None, str]:
    """The first file a tree copy failed on, its errno and its reason.

    shutil.copytree gathers one (source, destination, text) per failed file
    and keeps each OSError only as its text, so the errno is read back from it.
    """
    entries = error.args[0] if error.args and isinstance(error.args[0], list) else []
    failures = [entry for entry in entries if isinstance(entry, tuple) and len(entry) == 3]
    if not failures:
        return directory, None, str(error)
    _, destination, why = failures[0]
    more = f" (and {len(failures) - 1} more file(s))" if len(failures) > 1 else ""
    match = _ERRNO.match(str(why))
    if match is None:
        return destination, None, f"{why}{more}"
    return destination, int(match.group(1)), f"{match.group(2).strip()}{more}"


def _what_is_full(path: Path) -> str:
    temporary = Path(tempfile.gettempdir())
    if inside(path, temporary):
        return f"the disk of the temporary directory {temporary} is full (free some space there, or set TMPDIR to a directory on another disk)"
    return "the disk it is on is full"


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else f"{text[:60]}...{text[-40:]} ({len(text)} characters)"


def chapter_of(directory: Path, catalog: Catalog) -> Chapter | None:
    """The chapter a practice dir was made for, from the first line of its LEARNING.md."""
    try:
        with (directory / LEARNING).open(encoding="utf-8") as stream:
            first = stream.readline()
    except (OSError, UnicodeDecodeError):
        return None
    match = _TITLE.match(first)
    if match is None:
        return None
    number = int(match.group(1))
    return next((chapter for chapter in catalog.chapters if chapter.number == number), None)


def is_practice_dir(directory: Path) -> bool:
    """A dir `course practice` made: a LEARNING.md titled with its chapter.

    Its pytest.ini is not needed: a learner who deleted it still has a
    practice dir, whose verdict names pytest.ini as missing (the chapter's
    ran instead) and whose `course reset --file pytest.ini` brings it back.
    """
    try:
        with (directory / LEARNING).open(encoding="utf-8") as stream:
            return _TITLE.match(stream.readline()) is not None
    except (OSError, UnicodeDecodeError):
        return False


def enclosing_practice_dir(start: Path) -> Path | None:
    """The practice dir holding `start` (itself or a parent), or None."""
    try:
        here = start.absolute()
    except OSError:
        return None
    for candidate in (here, *here.parents):
        if is_practice_dir(candidate):
            return candidate
    return None


def inside(path: Path, folder: Path) -> bool:
    try:
        resolved, base = path.resolve(), folder.resolve()
    except (OSError, RuntimeError):
        return False
    return resolved == base or base in resolved.parents


def shown(path: Path) -> str:
    """A path as the learner can paste it here: relative to the current dir when below it."""
    try:
        relative = path.absolute().relative_to(Path.cwd())
    except (ValueError, OSError):
        return pastable(str(path))
    return pastable(str(relative)) if str(relative) != "." else "."


def pastable(path: str) -> str:
    """A path no command takes for an option when pasted: `-dash` is written `./-dash`."""
    return f"./{path}" if path.startswith("-") else path


def beside(directory: Path, chapter: Chapter, home: Path) -> list[str]:
    """The DIR for `chapter`'s practice dir next to `directory`; none when `directory` is in the default place.

    A learner who made a practice dir somewhere of their own expects the next
    one there too, not inside the course checkout.
    """
    if inside(directory.parent, home) and inside(home, directory.parent):
        return []
    return [shown(directory.parent / chapter.name)]


@frozen
class Place:
    """The practice dir a command works in, its chapter, and how it was found."""

    chapter: Chapter
    directory: Path
    typed: str | None  # DIR as typed; None when found from the current dir or by default
    how: str  # "typed", "here" (the current dir or a parent), "default"

    def dir_words(self) -> list[str]:
        """The DIR a suggested command must carry to work where it is printed."""
        return [] if self.typed is None else [pastable(self.typed)]

    def command(self, name: str, *extra: str) -> str:
        """`course NAME NN [DIR] EXTRA...`, every word shell-quoted."""
        return suggest(name, self.chapter.nn, *self.dir_words(), *extra)


def suggest(*words: str) -> str:
    """A `course` command line, quoted for the shell."""
    return shlex.join(["course", *words])


def split_arguments(catalog: Catalog, first: str | None, second: str | None) -> tuple[str | None, str | None]:
    """`course test [CHAPTER] [DIR]`: a lone argument that names no chapter but a directory is DIR."""
    if first is None or second is not None:
        return first, second
    try:
        catalog.resolve(first)
    except UsageError:
        try:
            if Path(first).expanduser().is_dir():
                return None, first
        except OSError:
            return None, first
    return first, second


def locate(
    catalog: Catalog,
    command: str,
    chapter_id: str | None,
    directory: str | None,
    default_dir: "DefaultDir",
    lab_id: str | None = None,
) -> Place:
    """The practice dir and chapter of a learner command, or a one-line refusal (exit 2)."""
    chapter_id, directory = split_arguments(catalog, chapter_id, directory)
    wanted = catalog.resolve(chapter_id) if chapter_id is not None else None
    if wanted is not None and lab_id is not None:
        wanted.lab(lab_id)  # a wrong lab id is named before anything about the dir
    if directory is not None:
        path = Path(directory).expanduser()
        how, typed = "typed", directory
    else:
        found = enclosing_practice_dir(Path.cwd())
        if found is not None:
            path, how, typed = found, "here", None
        elif wanted is not None:
            path, how, typed = default_dir(wanted), "default", None
        else:
            raise UsageError(
                f"name a chapter (`{suggest(command, '02')}`) or run this inside a practice dir; "
                f"{catalog.choices()}"
            )
    check_learner_path(path, catalog.root, wanted, directory)
    made_for = chapter_of(path, catalog)
    if wanted is not None and made_for is not None and made_for != wanted:
        where = shown(path) if typed is None else typed
        words = [command, made_for.nn] + ([typed] if typed is not None else [])
        raise UsageError(f"{where} is a chapter {made_for.nn} practice dir; did you mean `{suggest(*words)}`?")
    chapter = wanted or made_for
    if chapter is not None and lab_id is not None:
        chapter.lab(lab_id)
    if chapter is None:
        raise UsageError(
            f"{directory} has no LEARNING.md naming its chapter; name one: "
            f"`{suggest(command, '02', directory or '.')}`. {catalog.choices()}"
        )
    return Place(chapter=chapter, directory=path, typed=typed, how=how)


class DefaultDir:
    """Where a chapter's practice dir is when none is named: practice/NN-slug, or the last one used."""

    def __init__(self, home: Path, remembered: dict[str, Path] | None = None) -> None:
        self.home = home
        self.remembered = remembered or {}

    def __call__(self, chapter: Chapter) -> Path:
        default = self.home / chapter.name
        if not default.exists() and chapter.name in self.remembered:
            return self.remembered[chapter.name]
        return default


def check_learner_path(path: Path, root: Path, chapter: Chapter | None, typed: str | None) -> None:
    """A DIR a learner command may work in: it exists, is a practice dir, is not under checkpoints/."""
    label = typed if typed is not None else shown(path)
    try:
        try:
            info = os.stat(path)
        except FileNotFoundError:
            info = None
        exists = info is not None
        is_dir = info is not None and stat.S_ISDIR(info.st_mode)
        under_checkpoints = inside(path, root / "checkpoints")
        has_config = is_dir and ((path / "pytest.ini").is_file() or is_practice_dir(path))
    except (OSError, RuntimeError) as error:
        raise path_problem(error, label) from None
    if under_checkpoints:
        make = suggest("practice", chapter.nn) if chapter else suggest("practice", "NN")
        raise UsageError(
            f"{label} is inside checkpoints/, the course's own snapshots, which no command writes; "
            f"work in a practice dir: `{make}`"
        )
    if not exists:
        if chapter is None:
            raise UsageError(f"{label} does not exist. Make a practice dir first: `course practice NN DIR`.")
        words = ["practice", chapter.nn] + ([typed] if typed is not None else [])
        raise UsageError(f"{label} does not exist. Make it first: `{suggest(*words)}`")
    if not is_dir:
        raise UsageError(f"{label} is not a directory.")
    if not has_config:
        raise UsageError(
            f"{label} has no pytest.ini and no LEARNING.md naming its chapter: "
            "it does not look like a practice dir made by `course practice`."
        )
