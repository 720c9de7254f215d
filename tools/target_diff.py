"""Show a chapter's target diff: what the learner writes, from parent to target.

    python -m tools.target_diff 03            # the whole diff (coloured on a terminal)
    python -m tools.target_diff 03 --stat     # only which files change, and how much
    python -m tools.target_diff 03 tiny_pi/messages/records.py   # one file

This is the view a learner gets after predicting, so it must show exactly
the chapter's work and nothing else: both snapshots are copied without
caches first (a stray __pycache__ would otherwise fill the diff), then git
compares the copies under the names parent/ and target/.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import click
import git

from course.catalog import Chapter, find_root, load_catalog
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
