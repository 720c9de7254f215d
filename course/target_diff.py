"""A chapter's target diff, parent -> target: the answer to the chapter, shown only when asked.

`course diff NN --target` prints which files change and by how much;
`--show` adds the code (the same spoiler guard as for the learner's own
diff). Both snapshots are copied without caches first (a stray __pycache__
would otherwise fill the diff), then git compares the copies under the names
parent/ and target/. `course dev target-diff` is the authors' spelling.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import git

from course.catalog import Chapter
from course.errors import CourseError, UsageError
from course.lineage import snapshot_files
from course.workspace import copy_snapshot


def target_diff(chapter: Chapter, paths: tuple[str, ...] = (), stat: bool = False, color: bool = False) -> str:
    """The `git diff` of parent -> target, limited to `paths` when given."""
    known = snapshot_files(chapter.parent) | snapshot_files(chapter.target)
    unknown = [path for path in paths if path not in known]
    if unknown:
        choices = ", ".join(sorted(known))
        raise UsageError(f"{', '.join(unknown)} is in neither snapshot of {chapter.name}; files: {choices}")
    with tempfile.TemporaryDirectory(prefix="course-diff-") as scratch:
        base = Path(scratch)
        for side in ("parent", "target"):
            copy_snapshot(chapter.root / side, base / side)
            if paths:
                _keep_only(base / side, set(paths))
        args = ["git", "diff", "--no-index", f"--color={'always' if color else 'never'}"]
        if stat:
            args.append("--stat")
        args += ["parent", "target"]
        status, out, err = git.Git(base).execute(
            args, with_extended_output=True, with_exceptions=False, strip_newline_in_stdout=False
        )
    if status not in (0, 1):  # 1 only means "there are differences"
        raise CourseError(f"git diff failed: {err}")
    return str(out)


def _keep_only(root: Path, keep: set[str]) -> None:
    for name in snapshot_files(root) - keep:
        (root / name).unlink()
