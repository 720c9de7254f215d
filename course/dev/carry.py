"""Carry a change made in one snapshot forward through every later snapshot.

    course dev carry 03                  # target(03) was edited; HEAD holds the old version
    course dev carry 03 --base OLD_DIR   # the old version is a snapshot directory
    course dev carry 03 --from parent    # parent(03) was edited (a focused test, a starter)
    course dev carry 03 --dry-run        # say what would change, write nothing

Snapshots repeat each other on purpose, so a fix to target(03) is also owed
to parent(04), target(04), parent(05), ... Copying the file would wipe out
what later chapters changed in it; forgetting it breaks lineage. The chain
of snapshots is treated like a stack of commits being rebased: each later
snapshot receives the change its predecessor just received, through a
three-way merge (`git merge-file`), so a later chapter's own edits to the
same file survive. A red-light patch whose target moved under it is merged
the same way and rewritten, since a patch that no longer applies is as
broken as a snapshot that lost the fix.
A file a chapter leaves behind (`left_behind`) is carried no further than it.

Nothing is written until every merge of the whole chain has succeeded in
memory: at the first conflict the carry stops, names the file and the
snapshot, and leaves every snapshot exactly as it was. Each snapshot that
changes is then rebuilt in a staging directory beside it and swapped in, so
it is either fully updated or untouched.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import click
import git
from attrs import frozen

from course.catalog import Catalog, Chapter, find_root, load_catalog
from course.dev import checkout_root
from course.errors import CourseError, UsageError
from course.lineage import is_ignored, snapshot_files
from course.dev.merging import Files, Merge, merge_text, rebase_patch
from course.workspace import copy_snapshot

SIDES = ("parent", "target")


@frozen
class Snapshot:
    """One parent/ or target/ directory of a chapter, in chain order."""

    chapter: Chapter
    side: str

    @property
    def path(self) -> Path:
        return self.chapter.root / self.side

    @property
    def label(self) -> str:
        return f"{self.chapter.name}/{self.side}"


@frozen
class Change:
    """What the carry does to one file of one snapshot."""

    path: str
    action: str  # "copied" (took the new version), "merged" (three-way), "added", "deleted"
    content: bytes | None  # None: the file is deleted


@frozen
class Step:
    """The carry's result for one later snapshot: what changes in it."""

    snapshot: Snapshot
    changes: tuple[Change, ...]


@frozen
class PatchUpdate:
    """A red-light patch rewritten so it applies to its chapter's carried target."""

    chapter: Chapter
    patch: str  # relative to the chapter directory, as chapter.toml names it
    content: bytes

    @property
    def path(self) -> Path:
        return self.chapter.root / self.patch


@frozen
class Plan:
    """Everything a carry writes, computed before anything is written."""

    steps: tuple[Step, ...]
    patches: tuple[PatchUpdate, ...]


@frozen
class Conflict:
    """Why the carry stopped: the first file of the chain it cannot merge by itself."""

    where: str  # the snapshot (03-message-ir/target) or chapter whose file clashes
    path: str
    reason: str
    excerpt: str = ""

    def describe(self) -> str:
        text = f"conflict in {self.path} of {self.where}: {self.reason}"
        if self.excerpt:
            text += "\n" + self.excerpt
        return text


class CarryConflict(CourseError):
    """The carry stopped at a conflict; nothing was written (exit status 1)."""

    exit_code = 1

    def __init__(self, conflict: Conflict) -> None:
        super().__init__(conflict.describe())
        self.conflict = conflict


# Reading snapshots ---------------------------------------------------------------


def read_snapshot(root: Path) -> Files:
    """Every file of a snapshot directory (caches left out), by relative path."""
    return {name: (root / name).read_bytes() for name in sorted(snapshot_files(root))}


def read_head(course_root: Path, snapshot_dir: Path) -> Files:
    """A snapshot's files as committed in git HEAD: the version before the author's edit."""
    try:
        repo = git.Repo(course_root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise UsageError(
            f"{course_root} is not a git repository, so there is no old version of "
            f"{snapshot_dir.name}/ to compare with: pass --base DIR (a copy made before the edit)"
        ) from None
    try:
        relative = snapshot_dir.resolve().relative_to(Path(repo.working_tree_dir).resolve()).as_posix()
        tree = repo.head.commit.tree / relative
    except (ValueError, KeyError):
        raise UsageError(
            f"{snapshot_dir} is not in git HEAD (never committed?): commit it before editing, "
            "or pass --base DIR (a copy made before the edit)"
        ) from None
    finally:
        repo.close()
    files: Files = {}
    for item in tree.traverse():
        name = Path(item.path).relative_to(relative).as_posix()
        if item.type == "blob" and not is_ignored(name):
            files[name] = item.data_stream.read()
    return files


# The chain -----------------------------------------------------------------------


def chain_after(catalog: Catalog, chapter: Chapter, side: str) -> list[Snapshot]:
    """Every snapshot that comes after (chapter, side), in the order lineage links them."""
    order = [Snapshot(c, s) for c in catalog.chapters for s in SIDES]
    start = order.index(Snapshot(chapter, side))
    return order[start + 1 :]


def carry_step(before: Files, after: Files, snapshot: Snapshot, current: Files, source: str) -> Step:
    """Give `snapshot` (whose files are `current`) the change `before` -> `after` of its predecessor.

    This is one commit of a rebase: the predecessor's change is replayed on
    top of what the snapshot already holds.
    """
    changes = []
    for name in sorted(set(before) | set(after)):
        old, new, mine = before.get(name), after.get(name), current.get(name)
        if old == new or mine == new:
            continue  # nothing changed here, or the later snapshot already has it
        if mine == old:
            action = "deleted" if new is None else "added" if old is None else "copied"
            changes.append(Change(name, action, new))
            continue
        if old is None:
            reason = f"{source} adds this file, but {snapshot.label} already has a different one"
            raise CarryConflict(Conflict(snapshot.label, name, reason))
        if new is None:
            reason = f"{source} deletes this file, but {snapshot.label} changed it: delete or keep it by hand"
            raise CarryConflict(Conflict(snapshot.label, name, reason))
        if mine is None:
            reason = f"{source} changes this file, but {snapshot.label} no longer has it: carry the change by hand"
            raise CarryConflict(Conflict(snapshot.label, name, reason))
        merge = merge_text(old, mine, new, (snapshot.label, f"carried from {source}"))
        if not merge.clean:
            reason = f"the change from {source} overlaps what {snapshot.label} changed in it"
            raise CarryConflict(Conflict(snapshot.label, name, reason, merge.conflict_regions()))
        changes.append(Change(name, "merged", merge.content))
    return Step(snapshot, tuple(changes))


def rebased_patches(chapter: Chapter, old: Files, new: Files) -> list[PatchUpdate]:
    """Red-light patches of `chapter` rewritten for its changed target (only those that need it)."""
    updates = []
    for redlight in chapter.redlights:
        path = chapter.root / redlight.patch
        patch = path.read_bytes()
        result = rebase_patch(patch, old, new, (f"{chapter.name}/{redlight.patch}", "carried target"))
        if result is None or result == patch:
            continue  # already broken before the carry (verify says so), or still applies
        if isinstance(result, Merge):
            reason = (
                f"red-light {redlight.id} no longer applies to the carried target, "
                "and the lines it breaks overlap the carried change: rewrite the patch by hand"
            )
            raise CarryConflict(Conflict(chapter.name, redlight.patch, reason, result.conflict_regions()))
        updates.append(PatchUpdate(chapter, redlight.patch, result))
    return updates


def _updated(files: Files, step: Step) -> Files:
    updated = dict(files)
    for change in step.changes:
        if change.content is None:
            updated.pop(change.path, None)
        else:
            updated[change.path] = change.content
    return updated


def plan_carry(before: Files, after: Files, source: Snapshot, chain: list[Snapshot]) -> Plan:
    """Every snapshot's and patch's changes, computed in memory.

    Raises CarryConflict at the first conflict in chain order, before a
    single byte is written.
    """
    steps = []
    patches = []
    if source.side == "target":
        patches += rebased_patches(source.chapter, before, after)
    label, previous = source.label, source.chapter
    for snapshot in chain:
        if snapshot.chapter.number != previous.number:  # a file the last chapter leaves behind goes no further
            before = {name: data for name, data in before.items() if name not in previous.left_behind}
            after = {name: data for name, data in after.items() if name not in previous.left_behind}
            previous = snapshot.chapter
        current = read_snapshot(snapshot.path)
        step = carry_step(before, after, snapshot, current, label)
        updated = _updated(current, step)
        steps.append(step)
        if snapshot.side == "target" and step.changes:
            patches += rebased_patches(snapshot.chapter, current, updated)
        before, after, label = current, updated, snapshot.label
    return Plan(tuple(steps), tuple(patches))


# Writing -------------------------------------------------------------------------


def apply_plan(plan: Plan) -> None:
    """Write the plan: each snapshot swapped in whole from a staging copy beside it.

    All staging copies are built before the first swap, so a full disk or a
    bad path fails while every snapshot is still untouched. Patches are
    replaced file by file, each atomically.
    """
    staged: list[tuple[Path, Path]] = []
    try:
        for step in plan.steps:
            if not step.changes:
                continue
            path = step.snapshot.path
            staging = Path(tempfile.mkdtemp(prefix=f".carry-{step.snapshot.side}-", dir=path.parent))
            staged.append((path, staging))
            build = staging / "new"
            copy_snapshot(path, build)
            for change in step.changes:
                _write(build, change)
        for update in plan.patches:
            temporary = update.path.with_name(f".{update.path.name}.carry")
            temporary.write_bytes(update.content)
            staged.append((update.path, temporary))
        for path, staging in staged:
            if staging.is_dir():
                os.rename(path, staging / "old")
                os.rename(staging / "new", path)
            else:
                os.replace(staging, path)
    finally:
        for _path, staging in staged:
            if staging.is_dir():
                shutil.rmtree(staging, ignore_errors=True)
            else:
                staging.unlink(missing_ok=True)


def _write(root: Path, change: Change) -> None:
    target = root / change.path
    if change.content is None:
        target.unlink()
        for parent in target.parents:
            if parent == root or any(parent.iterdir()):
                break
            parent.rmdir()
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(change.content)


# Command line --------------------------------------------------------------------


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("chapter_id")
@click.option(
    "--from", "side", type=click.Choice(SIDES), default="target", show_default=True,
    help="Which snapshot of CHAPTER_ID you edited.",
)
@click.option(
    "--base", "base_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The snapshot as it was before your edit (default: its version in git HEAD).",
)
@click.option("--dry-run", is_flag=True, help="Show what would change; write nothing.")
def main(chapter_id: str, side: str, base_dir: Path | None, dry_run: bool) -> None:
    """Carry your edit of CHAPTER_ID's target (or parent) forward through every later snapshot.

    The change is the difference between the snapshot's old version (git HEAD,
    or --base DIR) and its working tree. Each later snapshot receives it by a
    three-way merge, so what later chapters changed in the same files is kept;
    files added or deleted by the edit are added or deleted wherever the later
    snapshot still had the old version. A red-light patch that no longer
    applies to its carried target is rewritten the same way.

    On the first conflict the carry stops, names the file and the snapshot,
    shows the clashing lines, exits 1 and writes nothing at all. Resolve it by
    hand in that snapshot (or make your edit differently), then run again:
    snapshots that already have the change are left alone.

    Exit status: 0 carried (or nothing to carry), 1 conflict, 2 usage error.
    """
    try:
        root = find_root() if dry_run else checkout_root("carry")
        catalog = load_catalog(root)
        chapter = catalog.resolve(chapter_id)
        source = Snapshot(chapter, side)
        before = read_snapshot(base_dir) if base_dir is not None else read_head(root, source.path)
        after = read_snapshot(source.path)
        edited = sorted(name for name in set(before) | set(after) if before.get(name) != after.get(name))
        if not edited:
            where = f"--base {base_dir}" if base_dir is not None else "git HEAD"
            click.echo(f"nothing to carry: {source.label} is the same as in {where}")
            return
        click.echo(f"carrying {source.label}: " + ", ".join(edited))
        chain = chain_after(catalog, chapter, side)
        plan = plan_carry(before, after, source, chain)
    except CarryConflict as stop:
        click.echo(click.style("carry stopped: ", fg="red", bold=True) + str(stop), err=True)
        click.echo("nothing was written: every snapshot is as it was.", err=True)
        sys.exit(stop.exit_code)
    except CourseError as error:
        click.echo(f"carry: {error}", err=True)
        sys.exit(error.exit_code)
    for step in plan.steps:
        if step.changes:
            summary = ", ".join(f"{c.path} ({c.action})" for c in step.changes)
            click.echo(f"  {step.snapshot.label}: {summary}")
        else:
            click.echo(f"  {step.snapshot.label}: already up to date")
    for update in plan.patches:
        click.echo(f"  {update.chapter.name}/{update.patch}: rewritten to apply to the carried target")
    if dry_run:
        click.echo("dry run: nothing was written.")
        return
    apply_plan(plan)
    changed = sum(1 for step in plan.steps if step.changes)
    click.echo(f"carried into {changed} snapshot(s). Check the course: course verify")


if __name__ == "__main__":
    main()
