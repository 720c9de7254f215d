"""The code under examination: a copy of DIR's tiny_pi/ package, frozen by its hash.

The cases never run the learner's directory itself: its `tiny_pi/` is
copied to a temporary directory (bytecode caches left out) and hashed, and
every learner command runs from the copy (`PYTHONPATH` names it). After
the run the copy is hashed again: a copy that changed means something the
cases ran wrote into the agent's own code, and the run does not count.
The learner's directory is only read.

The copy is compiled once, here, into its own `__pycache__` folders (the
hash leaves them out), so the commands that start side by side do not each
compile it again; the copy and its bytecode go with the run's directory.
"""

from __future__ import annotations

import compileall
import hashlib
import os
import shutil
from pathlib import Path
from typing import Iterable

from attrs import frozen

from course.errors import UsageError

PACKAGE = "tiny_pi"
ENTRY = Path(PACKAGE) / "agent.py"
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".hypothesis")


@frozen
class FrozenCode:
    """A copy of a learner's package, and the hash it had when copied."""

    root: Path  # PYTHONPATH: holds tiny_pi/
    digest: str

    def unchanged(self) -> bool:
        return tree_digest(self.root / PACKAGE) == self.digest


def freeze(directory: Path, into: Path) -> FrozenCode:
    """Copy `directory`'s tiny_pi/ into `into` and hash the copy."""
    source = directory / PACKAGE
    if not (directory / ENTRY).is_file():
        raise UsageError(f"{directory} has no {ENTRY.as_posix()}: the capstone runs `python -m tiny_pi.agent` "
                         "from a practice dir's tiny_pi/ package")
    shutil.copytree(source, into / PACKAGE, ignore=IGNORED, symlinks=True)
    frozen = FrozenCode(into, tree_digest(into / PACKAGE))
    compileall.compile_dir(into / PACKAGE, quiet=2)  # a file that does not compile fails where it is run
    return frozen


def shipped_answer(digest: str, targets: Iterable[tuple[str, Path]]) -> str | None:
    """The name of the chapter whose target's tiny_pi/ has `digest` (the course's own answer, copied), or None."""
    return next((name for name, target in targets if (target / PACKAGE).is_dir()
                 and tree_digest(target / PACKAGE) == digest), None)


def tree_digest(root: Path) -> str:
    """SHA-256 over every path under `root` and every byte of its files (links by their target)."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if "__pycache__" in path.parts:
            continue
        digest.update(relative.encode("utf-8", "surrogateescape") + b"\0")
        if path.is_symlink():
            digest.update(b"link:" + os.readlink(path).encode("utf-8", "surrogateescape"))
        elif path.is_file():
            digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()
