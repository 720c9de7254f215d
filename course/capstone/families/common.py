"""What several families share: how a learner command's ending becomes codes, and small case helpers."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping

from course.capstone.processes import Finished
from course.capstone.records import Ending, note_ending


def ending(finished: Finished, expected: Iterable[int] = (0,), note: str = "") -> list[str]:
    """The common codes of one learner command: its time limit, its exit status, what it left running.
    A command that ended otherwise than expected is noted for the report (which command, how); so is
    one that ended with a traceback, whatever its status: a crash that exits 1 where a failed task
    exits 1 too is a crash all the same, and its codes would otherwise point elsewhere."""
    codes = []
    expected = tuple(expected)
    exception = finished.exception()
    if finished.timed_out or finished.status not in expected or exception is not None:
        noted = Ending(finished.command, finished.status, expected, exception, note)
        note_ending(noted)
        codes.append(noted.code)
    if finished.leftovers:
        codes.append("E-LEFT-RUNNING")
    return codes


def write_files(root: Path, files: Mapping[str, str]) -> None:
    """Make each file (its folders too) under `root` with its text."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def listing(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (links not followed) and its bytes: to see whether anything changed."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            found[path.relative_to(folder).as_posix()] = path.read_bytes()
        else:
            found[path.relative_to(folder).as_posix()] = b""
    return found
