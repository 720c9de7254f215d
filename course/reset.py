"""Put files of a practice dir back to the chapter's starting point, losing nothing.

A learner who wants a clean slate should never have to choose between
starting over and keeping what they tried. So before a single byte changes,
the whole working tree is saved as a commit on the practice repo's
`course-saves` branch (HEAD, the index and the learner's own branches are not
touched, so `git diff` keeps meaning "my work since the start"). Only then
are the files restored from the parent (the practice dir's starting snapshot).

Paths are checked before anything happens: a file outside DIR, or a path
that passes through a symlink leading outside DIR, is refused, because
"restore" must never write somewhere the learner did not mean.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

import git
from attrs import frozen

from course.catalog import Chapter
from course.errors import CourseError, UsageError
from course.progress import LAST_TEST, remove_state
from course.workspace import IGNORED_NAMES

SAVES_BRANCH = "course-saves"
RESTORE = "restore"
CREATE = "create"
REMOVE = "remove"

_IGNORED_PARTS = {name for name in IGNORED_NAMES if "*" not in name}


@frozen
class Change:
    """What reset does to one file, relative to the practice dir."""

    path: str
    action: str

    def describe(self) -> str:
        return {
            RESTORE: f"restore {self.path} (yours differs from the starting point)",
            CREATE: f"restore {self.path} (missing in yours)",
            REMOVE: f"remove  {self.path} (not in the starting point)",
        }[self.action]


@frozen
class ResetPlan:
    directory: Path
    source: Path
    changes: tuple[Change, ...]


def _inside(path: Path, directory: Path) -> bool:
    return path == directory or directory in path.parents


def safe_relative(directory: Path, name: str) -> str:
    """`name` (relative to DIR, or absolute) as a path inside DIR, or a UsageError.

    Refuses `..` escapes, absolute paths elsewhere, and any path whose
    components pass through a symlink that resolves outside DIR.
    """
    base = Path(os.path.abspath(directory))
    real_base = base.resolve()
    given = Path(name).expanduser()
    candidate = Path(os.path.normpath(given if given.is_absolute() else base / given))
    if not _inside(candidate, base) and not _inside(candidate, real_base):
        raise UsageError(f"{name} is outside {directory}: reset only touches files of the practice dir.")
    root = base if _inside(candidate, base) else real_base
    relative = candidate.relative_to(root)
    if not relative.parts:
        raise UsageError(f"{name} is the practice dir itself; name a file inside it, or leave --file out.")
    probe = root
    for part in relative.parts:
        probe = probe / part
        if probe.is_symlink() and not _inside(probe.resolve(), real_base):
            raise UsageError(
                f"{name} goes through the symbolic link {probe.relative_to(root)}, which points outside "
                f"{directory}; nothing was changed."
            )
    if not _inside(candidate.resolve(), real_base):
        raise UsageError(f"{name} resolves outside {directory}; nothing was changed.")
    return relative.as_posix()


def _snapshot_files(source: Path) -> set[str]:
    files = set()
    for path in source.rglob("*"):
        relative = path.relative_to(source)
        if any(part in _IGNORED_PARTS for part in relative.parts) or path.suffix == ".pyc":
            continue
        if path.is_file() or path.is_symlink():
            files.add(relative.as_posix())
    return files


def _differs(source: Path, mine: Path) -> bool:
    if mine.is_symlink() or not mine.is_file():
        return True
    return source.read_bytes() != mine.read_bytes()


def plan_reset(chapter: Chapter, directory: Path, files: Sequence[str] = ()) -> ResetPlan:
    """What a reset would change: every file of the starting point (or just `files`).

    Files the chapter asks the learner to write (teaching and starter files)
    that the starting point lacks are removed, so the dir is as it started;
    any other file of the learner (notes, experiments) is left alone.
    """
    source = chapter.practice_start
    known = _snapshot_files(source)
    owned = known | set(chapter.teaching_files) | set(chapter.starter_files)
    if files:
        wanted = []
        for name in files:
            relative = safe_relative(directory, name)
            if relative not in owned:
                raise UsageError(
                    f"{name} is not a file of chapter {chapter.name}'s starting point, so there is "
                    "nothing to restore it from. Files reset knows: " + ", ".join(sorted(owned))
                )
            wanted.append(relative)
    else:
        wanted = sorted(owned)
        for relative in wanted:
            safe_relative(directory, relative)
    changes = []
    for relative in dict.fromkeys(wanted):
        mine = directory / relative
        if mine.is_dir() and not mine.is_symlink():
            raise UsageError(f"{relative} is a directory in {directory}, where a file belongs; nothing was changed.")
        if relative in known:
            if not (mine.exists() or mine.is_symlink()):
                changes.append(Change(relative, CREATE))
            elif _differs(source / relative, mine):
                changes.append(Change(relative, RESTORE))
        elif mine.exists() or mine.is_symlink():
            changes.append(Change(relative, REMOVE))
    return ResetPlan(directory=directory, source=source, changes=tuple(changes))


def open_practice_repo(directory: Path) -> git.Repo:
    """The practice dir's own repository (never an enclosing one, such as the course's).

    Its `.git` must be a real directory inside DIR: a `.git` that is a symbolic
    link, or a file naming a git dir elsewhere (`gitdir: ...`), would make
    the save commit write into another repository, outside DIR.
    """
    dot_git = directory / ".git"
    if dot_git.is_symlink() or (dot_git.exists() and not dot_git.is_dir()):
        kind = "a symbolic link" if dot_git.is_symlink() else "a file, not a directory"
        raise UsageError(
            f"{dot_git} is {kind}: the repository it leads to is not inside {directory}, and reset "
            "would save your versions there; nothing was changed."
        )
    try:
        repo = git.Repo(directory)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise UsageError(
            f"{directory} is not a git repository, so your versions could not be kept before a reset; "
            "nothing was changed. (`course practice` makes practice dirs as git repositories.)"
        ) from None
    if (
        repo.working_tree_dir is None
        or Path(repo.working_tree_dir).resolve() != directory.resolve()
        or Path(repo.git_dir).resolve() != dot_git.resolve()
    ):
        repo.close()
        raise UsageError(f"{directory} is not the top of its own git repository; nothing was changed.")
    return repo


def _identity(repo: git.Repo) -> dict[str, str]:
    """The learner's git identity when they have one, else the course's."""
    env: dict[str, str] = {}
    reader = repo.config_reader()
    if not reader.get_value("user", "name", default=""):
        env["GIT_AUTHOR_NAME"] = env["GIT_COMMITTER_NAME"] = "course"
    if not reader.get_value("user", "email", default=""):
        env["GIT_AUTHOR_EMAIL"] = env["GIT_COMMITTER_EMAIL"] = "course@localhost"
    return env


def save_versions(repo: git.Repo, message: str) -> str:
    """Commit the whole working tree to `course-saves` without touching HEAD or the index.

    A temporary index is filled from the working tree (so .gitignore'd caches
    and .course/ stay out), written as a tree, and committed on top of the
    previous save (or of HEAD for the first one). Returns the commit's sha.
    """
    with tempfile.TemporaryDirectory(prefix="course-reset-") as scratch:
        env = {"GIT_INDEX_FILE": str(Path(scratch) / "index"), **_identity(repo)}
        with repo.git.custom_environment(**env):
            head_valid = repo.head.is_valid()
            if head_valid:
                repo.git.read_tree("HEAD")
            repo.git.add("--all", "--", ".")
            tree = repo.git.write_tree()
            try:
                parent = repo.git.rev_parse("--verify", "--quiet", f"refs/heads/{SAVES_BRANCH}")
            except git.GitCommandError:
                parent = repo.head.commit.hexsha if head_valid else ""
            parents = ["-p", parent] if parent else []
            sha = repo.git.commit_tree(tree, *parents, "-m", message)
            repo.git.update_ref("-m", "course reset", f"refs/heads/{SAVES_BRANCH}", sha)
    return sha


def _restore(source: Path, target: Path) -> None:
    """Replace `target` by a copy of `source`; a symlink there is replaced, not followed."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".course-reset-{target.name}-", dir=target.parent)
    os.close(handle)
    try:
        shutil.copyfile(source, temporary)
        shutil.copymode(source, temporary)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def apply_plan(plan: ResetPlan) -> list[tuple[str, OSError]]:
    """Apply every change it can; returns the ones the file system refused (read-only, immutable).

    One refused file must not stop the others, nor end in a traceback after
    half the plan ran: the caller reports exactly what was and was not done.
    """
    refused: list[tuple[str, OSError]] = []
    for change in plan.changes:
        mine = plan.directory / change.path
        try:
            if change.action == REMOVE:
                mine.unlink()
            else:
                _restore(plan.source / change.path, mine)
        except OSError as error:
            refused.append((change.path, error))
    # The last verdict described code that is gone now.
    remove_state(plan.directory, LAST_TEST)
    return refused


def reset(chapter: Chapter, plan: ResetPlan) -> str:
    """Save the learner's versions, then apply `plan`; returns the save's sha.

    Raises CourseError naming every file the file system refused (the rest
    is done, and the save commit keeps the learner's versions of all).
    """
    repo = open_practice_repo(plan.directory)
    try:
        names = ", ".join(change.path for change in plan.changes)
        message = (
            f"course reset {chapter.nn}: your versions before restoring the starting point\n\n"
            f"Files reset: {names}\n"
            f"Bring one back: git checkout <this commit> -- <file>"
        )
        try:
            sha = save_versions(repo, message)
        except git.GitCommandError as error:
            said = [line for line in str(error.stderr).strip(" '\n").splitlines() if line.strip()]
            raise CourseError(
                f"could not save your versions in {plan.directory}'s repository, so nothing was changed: "
                f"git said: {said[-1] if said else error}"
            ) from None
    finally:
        repo.close()
    refused = apply_plan(plan)
    if refused:
        problems = "; ".join(f"{path}: {error.strerror or error}" for path, error in refused)
        done = len(plan.changes) - len(refused)
        raise CourseError(
            f"reset changed {done} of {len(plan.changes)} file(s) in {plan.directory}; these were refused "
            f"by the file system: {problems}. Your versions of every file are saved in commit {sha[:10]} "
            "(branch course-saves)."
        )
    return sha
