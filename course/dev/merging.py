"""Three-way merges of snapshot files and of red-light patches, done by git.

Authors change an early snapshot and the change must reach later ones
without wiping out what later chapters did to the same files; a red-light
patch must keep applying to a target whose lines moved. Both are three-way
merges, and git's merge machinery is better at them than anything written
here, so this module only feeds it temporary files and reads the verdict.
"""

from __future__ import annotations

import difflib
import subprocess
import tempfile
from pathlib import Path

import git
from attrs import frozen

from course.workspace import _git_env

Files = dict[str, bytes]
CONFLICT_EXCERPT_LINES = 40


@frozen
class Merge:
    """The result of one three-way merge: the text (with conflict markers when not clean)."""

    content: bytes
    clean: bool

    def conflict_regions(self) -> str:
        """The conflicted hunks, indented, for an author to read in a terminal."""
        shown: list[str] = []
        inside = False
        for line in self.content.decode("utf-8", "replace").splitlines():
            if line.startswith("<<<<<<< "):
                inside = True
            if inside:
                shown.append("    " + line)
            if line.startswith(">>>>>>> "):
                inside = False
        if len(shown) > CONFLICT_EXCERPT_LINES:
            shown = shown[:CONFLICT_EXCERPT_LINES] + ["    ..."]
        return "\n".join(shown)


def merge_text(base: bytes, current: bytes, incoming: bytes, labels: tuple[str, str]) -> Merge:
    """`git merge-file`: keep what `current` changed since `base` and add what `incoming` changed.

    A binary file, or one git cannot merge, comes back as not clean.
    """
    if current == base:
        return Merge(incoming, True)
    if incoming == base or incoming == current:
        return Merge(current, True)
    with tempfile.TemporaryDirectory(prefix="course-merge-") as scratch:
        paths = []
        for name, data in (("current", current), ("base", base), ("incoming", incoming)):
            path = Path(scratch) / name
            path.write_bytes(data)
            paths.append(str(path))
        status, out, _err = git.Git(scratch).execute(
            ["git", "merge-file", "-p", "-L", labels[0], "-L", "before", "-L", labels[1], *paths],
            with_extended_output=True,
            with_exceptions=False,
            stdout_as_string=False,
            strip_newline_in_stdout=False,
        )
    return Merge(bytes(out), status == 0)


# Red-light patches ----------------------------------------------------------------


def _write_tree(root: Path, files: Files) -> None:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def _read_tree(root: Path) -> Files:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def patched(files: Files, patch: bytes) -> Files | None:
    """`files` with a patch applied (`git apply`), or None when it does not apply."""
    with tempfile.TemporaryDirectory(prefix="course-patch-") as scratch:
        tree = Path(scratch) / "tree"
        tree.mkdir()
        _write_tree(tree, files)
        patch_file = Path(scratch) / "change.patch"
        patch_file.write_bytes(patch)
        result = subprocess.run(
            ["git", "apply", "--whitespace=nowarn", str(patch_file)],
            cwd=tree,
            capture_output=True,
            env=_git_env(),
            check=False,
        )
        if result.returncode != 0:
            return None
        return _read_tree(tree)


def unified_patch(before: Files, after: Files) -> bytes:
    """A unified diff (`a/` and `b/` prefixes, as `git apply -p1` wants) from `before` to `after`."""
    out: list[str] = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        if old == new:
            continue
        old_lines = (old or b"").decode("utf-8").splitlines(keepends=True)
        new_lines = (new or b"").decode("utf-8").splitlines(keepends=True)
        old_name = f"a/{name}" if old is not None else "/dev/null"
        new_name = f"b/{name}" if new is not None else "/dev/null"
        for line in difflib.unified_diff(old_lines, new_lines, old_name, new_name, n=3):
            out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out).encode("utf-8")


def rebase_patch(patch: bytes, old: Files, new: Files, labels: tuple[str, str]) -> bytes | Merge | None:
    """A red-light patch written for `old` made to apply to `new`.

    Returns the patch unchanged when it still applies, a rewritten patch
    when the patched files merge cleanly, the failed Merge when they do not,
    and None when the patch did not even apply to `old` (nothing to rebase).
    """
    if patched(new, patch) is not None:
        return patch
    broken_old = patched(old, patch)
    if broken_old is None:
        return None
    broken_new = dict(new)
    for name in set(old) | set(broken_old):
        if old.get(name) == broken_old.get(name):
            continue
        base, mine, incoming = old.get(name), broken_old.get(name), new.get(name)
        if base is None or mine is None or incoming is None:
            return Merge(b"", False)  # the patch adds or deletes a file the carry also touches
        merge = merge_text(base, mine, incoming, labels)
        if not merge.clean:
            return merge
        broken_new[name] = merge.content
    rewritten = unified_patch(
        {n: new[n] for n in new if broken_new.get(n) != new[n]},
        {n: broken_new[n] for n in broken_new if new.get(n) != broken_new[n]},
    )
    if patched(new, rewritten) != broken_new:
        return Merge(b"", False)
    return rewritten
