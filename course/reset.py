"""Put files of a practice dir back to the chapter's starting point, losing nothing.

A learner who wants a clean slate should never have to choose between
starting over and keeping what they tried. So before a single byte changes,
the whole working tree is saved as a commit on the practice repo's
`course-saves` branch (HEAD, the index and the learner's own branches are not
touched, so `git diff` keeps meaning "my work since the start"). Only then
are the files restored from the parent (the practice dir's starting snapshot).

"Saved" means the exact bytes on disk: every file reset will replace or
remove is put in the save by force, whatever `.gitignore`, `.git/info/exclude`
or a global excludes file say, and without git's line-ending or clean
filters; the saved tree is then read back and checked file by file before
anything is touched. A file that changes after the save is left alone.
Several resets at once each keep their save: the branch only moves from the
commit a save was made on (compare-and-swap), else the save is remade on
the new tip.

Paths are checked before anything happens: a file outside DIR, or a path
that passes through a symlink leading outside DIR, is refused, because
"restore" must never write somewhere the learner did not mean.
"""

from __future__ import annotations

import hashlib
import os
import random
import shlex
import shutil
import stat
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Mapping, Sequence

import git
from attrs import field, frozen

from course.catalog import Chapter
from course.errors import CourseError, UsageError
from course.progress import LAST_TEST, remove_state
from course.redlights import forget_green
from course.verdict_copy import CONFIG_NAMES, differing_files
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
    blanks: Mapping[str, Path] = field(factory=dict)  # starting versions that are not under `source`

    def start_file(self, relative: str) -> Path:
        """The starting version of `relative`: an observe chapter's blanks come from parent."""
        return self.blanks.get(relative, self.source / relative)


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
    any other file of the learner (notes, experiments) is left alone. A test
    or config file the learner added, which a verdict names as not used, is
    removed when named with `files`: the chapter's version of it is none.
    """
    source = chapter.practice_start
    blanks = chapter.practice_blanks
    known = _snapshot_files(source)
    owned = known | set(chapter.teaching_files) | set(chapter.starter_files)
    if files:
        owned |= set(differing_files(chapter, directory))
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
            elif _differs(blanks.get(relative, source / relative), mine):
                changes.append(Change(relative, RESTORE))
        elif mine.exists() or mine.is_symlink():
            changes.append(Change(relative, REMOVE))
    return ResetPlan(directory=directory, source=source, changes=tuple(changes), blanks=blanks)


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


# What a path holds on disk: (git mode, content), None when nothing is there.
# A fifo, socket or device holds no bytes to keep: ("special", b"").
DiskState = tuple[str, bytes] | None


def _disk_state(path: Path) -> DiskState:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return "120000", os.readlink(os.fsencode(path))
    if not stat.S_ISREG(info.st_mode):
        return "special", b""
    return ("100755" if info.st_mode & 0o111 else "100644"), path.read_bytes()


def _fingerprint(state: DiskState) -> tuple[str, bytes] | None:
    """A small stand-in for a DiskState, to tell later whether the file changed."""
    return None if state is None else (state[0], hashlib.sha256(state[1]).digest())


def _git(directory: Path, env: Mapping[str, str], *args: str, stdin: bytes | None = None) -> bytes:
    """Run git in `directory`; a failure raises GitCommandError with git's own words."""
    completed = subprocess.run(
        ["git", *args], cwd=directory, env={**os.environ, **env}, input=stdin, capture_output=True
    )
    if completed.returncode != 0:
        raise git.GitCommandError(["git", *args], completed.returncode, completed.stderr.decode(errors="replace"))
    return completed.stdout


def _saved_entries(directory: Path, env: Mapping[str, str], tree: str) -> dict[str, tuple[str, str]]:
    """path -> (mode, object id) of every file in `tree`."""
    entries = {}
    for record in _git(directory, env, "ls-tree", "-r", "-z", "--full-tree", tree).split(b"\0"):
        if record:
            meta, _, name = record.partition(b"\t")
            mode, _kind, object_id = meta.decode().split(" ")
            entries[os.fsdecode(name)] = (mode, object_id)
    return entries


def _force_into_index(directory: Path, env: Mapping[str, str], states: Mapping[str, DiskState]) -> dict[str, tuple[str, str]]:
    """Put the exact bytes of each planned file in the index, ignored or not; returns what was put."""
    wanted: dict[str, tuple[str, str]] = {}
    lines = []
    for relative, state in states.items():
        if state is None or state[0] == "special":
            continue
        mode, content = state
        object_id = _git(directory, env, "hash-object", "-w", "--no-filters", "--stdin", stdin=content).decode().strip()
        wanted[relative] = (mode, object_id)
        lines.append(f"{mode} {object_id}\t".encode() + os.fsencode(relative) + b"\0")
    if lines:
        _git(directory, env, "update-index", "-z", "--index-info", stdin=b"".join(lines))
    return wanted


def _branch_tip(directory: Path, env: Mapping[str, str]) -> str:
    try:
        return _git(directory, env, "rev-parse", "--verify", "--quiet", f"refs/heads/{SAVES_BRANCH}").decode().strip()
    except git.GitCommandError:
        return ""


_MOVE_ATTEMPTS = 40


def _commit_on_branch(directory: Path, env: Mapping[str, str], tree: str, head: str, message: str) -> str:
    """Commit `tree` on top of `course-saves` and move the branch there, never over another save.

    The branch moves only if it still points where this save was made on
    (update-ref's old-value check); when another reset moved it in between,
    the save is made again on the new tip, so every save stays reachable.
    """
    for _ in range(_MOVE_ATTEMPTS):
        tip = _branch_tip(directory, env)
        parent = tip or head
        parents = ["-p", parent] if parent else []
        sha = _git(directory, env, "commit-tree", tree, *parents, stdin=message.encode()).decode().strip()
        try:
            # An empty old value means: the branch must not exist yet.
            _git(directory, env, "update-ref", "-m", "course reset", f"refs/heads/{SAVES_BRANCH}", sha, tip)
            return sha
        except git.GitCommandError:
            if _branch_tip(directory, env) == tip:
                raise  # not a race: git refused for a reason of its own
            time.sleep(random.uniform(0.005, 0.05))
    raise git.GitCommandError(
        ["git", "update-ref"], 1, f"the branch {SAVES_BRANCH} kept moving under {_MOVE_ATTEMPTS} attempts to save"
    )


@frozen
class Saved:
    """A save commit, and what each planned file held when it was made."""

    sha: str
    states: Mapping[str, tuple[str, bytes] | None]


def save_versions(repo: git.Repo, message: str, paths: Sequence[str] = ()) -> Saved:
    """Commit the whole working tree to `course-saves` without touching HEAD or the index.

    A temporary index is filled from the working tree (so .gitignore'd caches
    and .course/ stay out), then `paths` (the files reset will touch) are put
    in by force with their exact bytes. The tree is read back and checked
    before it is committed on top of the previous save (or of HEAD for the
    first one): a save that lacked one of them would make reset lose it.
    """
    directory = Path(repo.working_tree_dir or ".")
    states = {relative: _disk_state(directory / relative) for relative in paths}
    with tempfile.TemporaryDirectory(prefix="course-reset-") as scratch:
        env = {"GIT_INDEX_FILE": str(Path(scratch) / "index"), **_identity(repo)}
        head = repo.head.commit.hexsha if repo.head.is_valid() else ""
        if head:
            _git(directory, env, "read-tree", head)
        _git(directory, env, "add", "--all", "--", ".")
        wanted = _force_into_index(directory, env, states)
        tree = _git(directory, env, "write-tree").decode().strip()
        saved = _saved_entries(directory, env, tree)
        missing = [relative for relative, entry in wanted.items() if saved.get(relative) != entry]
        if missing:
            raise CourseError(
                f"the save commit would not hold your version of {', '.join(missing)}, so nothing was changed."
            )
        sha = _commit_on_branch(directory, env, tree, head, message)
    return Saved(sha=sha, states={relative: _fingerprint(state) for relative, state in states.items()})


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


CHANGED_SINCE_SAVE = "it changed after your versions were saved, so it was left as it is"


def apply_plan(plan: ResetPlan, saved: Mapping[str, tuple[str, bytes] | None] | None = None) -> list[tuple[str, str]]:
    """Apply every change it can; returns (path, reason) for each one left undone.

    One refused file must not stop the others, nor end in a traceback after
    half the plan ran: the caller reports exactly what was and was not done.
    With `saved` (what each file held at the save), a file that no longer
    holds that is left alone, since the save does not have its new bytes;
    unless it already is what reset would make of it (another reset did it).
    """
    refused: list[tuple[str, str]] = []
    for change in plan.changes:
        mine = plan.directory / change.path
        now = _fingerprint(_disk_state(mine))
        goal = None if change.action == REMOVE else _fingerprint(_disk_state(plan.start_file(change.path)))
        if now == goal:
            continue
        if saved is not None and now != saved.get(change.path):
            refused.append((change.path, CHANGED_SINCE_SAVE))
            continue
        try:
            if change.action == REMOVE:
                mine.unlink()
            else:
                _restore(plan.start_file(change.path), mine)
        except OSError as error:
            refused.append((change.path, str(error.strerror or error)))
    # The last verdict described code that is gone now, and so did "the last whole-chapter run was
    # green" (a failure of the starting code is no red light), unless only tests or config were reset:
    # the verdict never uses those of the learner's.
    remove_state(plan.directory, LAST_TEST)
    if any(_judged(change.path) for change in plan.changes):
        forget_green(plan.directory)
    return refused


def _judged(relative: str) -> bool:
    """Whether the verdict uses the learner's version of this file (see course/verdict_copy.py)."""
    return not (relative.startswith("tests/") or relative in CONFIG_NAMES)


def bring_back_line(plan: ResetPlan, sha: str) -> str:
    """How to get one of the replaced or removed files back, as a command that works when pasted.

    It names a file the save commit really holds (a file reset only created
    was not there to save), and `git restore` writes the file without
    staging it, so the learner's index stays as it was.
    """
    try:
        saved = _saved_entries(plan.directory, {}, sha)
    except git.GitCommandError:
        saved = {}
    for change in plan.changes:
        if change.action != CREATE and change.path in saved:
            command = ["git", "-C", str(plan.directory), "restore", f"--source={sha[:10]}", "--", change.path]
            return "Bring a file back: " + shlex.join(command)
    return "Nothing to bring back: none of your files was replaced or removed (every file reset was missing)."


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
            f"Bring one back: git restore --source=<this commit> -- <file>"
        )
        try:
            saved = save_versions(repo, message, [change.path for change in plan.changes])
        except OSError as error:
            raise CourseError(
                f"could not read {error.filename or 'a file'} to save it ({error.strerror or error}), "
                "so nothing was changed."
            ) from None
        except git.GitCommandError as error:
            said = [line for line in str(error.stderr).strip(" '\n").splitlines() if line.strip()]
            raise CourseError(
                f"could not save your versions in {plan.directory}'s repository, so nothing was changed: "
                f"git said: {said[-1] if said else error}"
            ) from None
    finally:
        repo.close()
    sha = saved.sha
    refused = apply_plan(plan, saved.states)
    if refused:
        problems = "; ".join(f"{path}: {reason}" for path, reason in refused)
        done = len(plan.changes) - len(refused)
        raise CourseError(
            f"reset changed {done} of {len(plan.changes)} file(s) in {plan.directory}; these were left as "
            f"they are: {problems}. Your versions of every file are saved in commit {sha[:10]} "
            "(branch course-saves)."
        )
    return sha
