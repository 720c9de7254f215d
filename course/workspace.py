"""Copies of snapshots: throw-away ones for checks, and the learner's practice dir.

Two promises live here. `checkpoints/` is only ever read: every check runs
in its own temporary copy. A learner's practice dir is sacred: it is never
overwritten, and a failure or Ctrl-C while making one leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Mapping

if TYPE_CHECKING:
    import git

    from course.catalog import Chapter

from course.errors import ChapterError, CourseError, UsageError
from course.safe_text import printable

# Files a test run or an editor may leave in a snapshot; never part of one.
IGNORED_NAMES = ("__pycache__", ".pytest_cache", ".hypothesis", "*.pyc", ".course", ".git")

PRACTICE_GITIGNORE = """\
__pycache__/
*.pyc
.pytest_cache/
.hypothesis/
.course/
"""


def copy_snapshot(source: Path, destination: Path) -> None:
    """Copy a snapshot's files, leaving caches and repositories out."""
    shutil.copytree(
        source,
        destination,
        ignore=shutil.ignore_patterns(*IGNORED_NAMES),
        symlinks=True,
    )


@contextlib.contextmanager
def scratch_copy(source: Path, label: str) -> Iterator[Path]:
    """A temporary copy of `source`, removed afterwards whatever happens."""
    with tempfile.TemporaryDirectory(prefix=f"course-{label}-") as scratch:
        copy = Path(scratch) / "snapshot"
        copy_snapshot(source, copy)
        yield copy


async def apply_patch(copy: Path, patch: Path) -> None:
    """Apply a red-light patch to a copy of target, or say why it does not apply."""
    import trio  # here: only the checks that run tests call this, and the other commands start without trio

    result = await trio.run_process(
        ["git", "apply", "--whitespace=nowarn", str(patch.resolve())],
        cwd=str(copy),
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env=_git_env(),
    )
    if result.returncode != 0:
        problem = result.stderr.decode("utf-8", "replace").strip()
        raise ChapterError(f"{patch}: the red-light patch does not apply to target: {problem}")


def _git_env() -> dict[str, str]:
    """git must not find an enclosing repository (a temp dir under a checkout)."""
    env = dict(os.environ)
    env["GIT_CEILING_DIRECTORIES"] = tempfile.gettempdir()
    return env


# Practice dirs ---------------------------------------------------------------


GIT_MISSING = "git is not installed: practice dirs are git repositories"


def require_git() -> None:
    """Exit 2 with one line when git is not on PATH (the commands that need it call this first)."""
    if shutil.which("git") is None:
        raise UsageError(GIT_MISSING)


def enclosing_repository(path: Path) -> Path | None:
    """The git work tree that would hold `path` (a dir not made yet), or None."""
    for candidate in path.parents:
        try:
            if (candidate / ".git").exists():
                return candidate
        except OSError:
            return None
    return None


def check_practice_target(directory: Path, course_root: Path, nested: bool = False) -> Path:
    """Refuse any DIR where making a practice dir could destroy or confuse something."""
    given = directory.expanduser()
    try:
        resolved = given.resolve()
    except RuntimeError:  # a loop of symbolic links, before Python 3.13
        raise UsageError(f"{directory}: a loop of symbolic links; give a real directory path.") from None
    root = course_root.resolve()
    checkpoints = root / "checkpoints"
    if resolved == checkpoints or checkpoints in resolved.parents:
        raise UsageError(
            f"{directory} is inside checkpoints/, which holds the course's snapshots and is never "
            "written. Choose a directory elsewhere, e.g. practice/NN-slug."
        )
    if resolved == root or resolved in root.parents:
        raise UsageError(f"{directory} is the course repository or one of its parents; choose a new directory.")
    if resolved == Path.home().resolve() or resolved == Path(resolved.anchor):
        raise UsageError(f"{directory} is your home or the file system root; choose a new directory.")
    if ".git" in resolved.parts:
        raise UsageError(
            f"{directory} is inside a .git directory, where git keeps a repository's history; "
            "a practice dir there could corrupt it. Choose a directory elsewhere."
        )
    if given.is_symlink():
        raise UsageError(f"{directory} is a symbolic link; give a real directory path.")
    if resolved == Path.cwd().resolve():
        raise UsageError(
            f"{directory} is your current directory: it would be replaced under your shell's feet. "
            "Give a new directory instead, e.g. `course practice NN work`."
        )
    if resolved.exists() and not resolved.is_dir():
        raise UsageError(f"{directory} exists and is not a directory; nothing was changed.")
    repository = enclosing_repository(resolved)
    in_practice = repository == root and (root / "practice") in resolved.parents
    if repository is not None and not in_practice and not nested:
        if (repository / "LEARNING.md").is_file():
            what = "another practice dir"
        elif repository == root:
            what = "the course repository, outside practice/"
        else:
            what = "a git repository"
        raise UsageError(
            f"{directory} is inside {repository} ({what}): that repository would show your practice dir "
            "as untracked files. Choose a directory outside it, or pass --nested to make it there on purpose."
        )
    if resolved.is_dir() and any(resolved.iterdir()):
        raise UsageError(
            f"{directory} already exists and is not empty; it was left exactly as it was. "
            "Pick a new directory, or keep working in this one with `course test`."
        )
    return resolved


# Signals that end a command; held back while a practice dir is made or cleared away.
_ENDING_SIGNALS = {signal.SIGINT, signal.SIGTERM} | ({signal.SIGHUP} if hasattr(signal, "SIGHUP") else set())


@contextlib.contextmanager
def signals_deferred() -> Iterator[Callable[[], bool]]:
    """Hold Ctrl-C, SIGTERM and SIGHUP until the block ends; yield "has one arrived?".

    A KeyboardInterrupt can land between any two bytecodes, including inside a
    `finally` that is removing a staging directory, so cleanup must not be
    interruptible; yet the signal must still take effect the moment the block
    ends: Ctrl-C as KeyboardInterrupt, SIGTERM as termination. Two measures,
    because either alone leaks. Blocking the signals in this thread keeps them
    from child processes (git inherits the mask), but the kernel may hand a
    signal sent to the process to any other thread that does not block it, and
    Python then runs the handler here anyway; so for the block's length a
    handler that only records the signal stands in for the real one. The
    block is short: a snapshot is a few files.
    """
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    arrived: list[int] = []
    replaced = {number: signal.getsignal(number) for number in _ENDING_SIGNALS}
    # Not ignored signals (nohup, a background job), nor handlers Python did not install.
    replaced = {number: handler for number, handler in replaced.items()
                if handler is not None and handler != signal.SIG_IGN}
    for number in replaced:
        signal.signal(number, lambda received, _frame: arrived.append(received))
    previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _ENDING_SIGNALS)
    try:
        yield lambda: bool(arrived) or bool(signal.sigpending() & _ENDING_SIGNALS)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)  # what was held reaches `arrived` now
        for number, handler in replaced.items():
            signal.signal(number, handler)
        for number in dict.fromkeys(arrived):
            signal.raise_signal(number)  # now with the real handler: KeyboardInterrupt, or the end


def start_practice(chapter: Chapter, directory: Path, course_root: Path) -> None:
    """Make CHAPTER's practice dir at DIRECTORY (already checked) and note it in the index.

    Everything `course practice` does before it runs the first red light: the
    suite uses it to set up learners' dirs without a command per test.
    """
    from course.cards import render_learning
    from course.index import remember

    message = f"Start of chapter {chapter.name} ({'target' if chapter.mode == 'observe' else 'parent'})"
    # The dir as a line of text: a name that is not UTF-8 shows U+FFFD, a control character nothing.
    where = printable(str(directory.absolute()).encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
    learning = render_learning(chapter, where)
    make_practice_dir(chapter.practice_start, directory, learning, message, chapter.practice_blanks)
    remember(directory, chapter, course_root)


def make_practice_dir(
    source: Path, directory: Path, learning_md: str, message: str, blanks: Mapping[str, Path] | None = None
) -> None:
    """Create `directory` as a git repo holding `source` plus LEARNING.md, all or nothing.

    `blanks` maps relative paths to files that replace `source`'s (an observe
    chapter's starter files, see Chapter.practice_blanks).

    Everything is built in a hidden sibling and renamed into place as the last
    step (rename replaces an empty `directory` atomically), so an error, a full
    disk or Ctrl-C never leaves a half-made practice dir, nor the sibling.
    A Ctrl-C that arrives while building stops the build at the next step.
    Failures of the file system or of git become one paragraph (CourseError,
    exit 2), not a traceback.
    """
    import git  # here, not at the top: every command imports this module, few make practice dirs

    with signals_deferred() as interrupted:
        created: list[Path] = []
        staging: Path | None = None
        try:
            created = _make_parents(directory.parent)
            staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.course-", dir=directory.parent))
            build = staging / "dir"
            steps: list[Callable[[], object]] = [
                lambda: copy_snapshot(source, build),
                lambda: _copy_blanks(blanks or {}, build),
                lambda: (build / "LEARNING.md").write_text(learning_md, encoding="utf-8"),
                lambda: (build / ".gitignore").write_text(PRACTICE_GITIGNORE, encoding="utf-8"),
                lambda: _commit_start(build, message),
            ]
            for step in steps:
                if interrupted():
                    raise KeyboardInterrupt
                step()
            if interrupted():
                raise KeyboardInterrupt
            os.rename(build, directory)
            created = []
        except (OSError, git.GitError) as error:
            raise CourseError(_could_not_make(directory, error, _clear(staging, created))) from None
        except BaseException:
            _clear(staging, created)
            raise
        else:
            _clear(staging, created)


def _copy_blanks(blanks: Mapping[str, Path], build: Path) -> None:
    """Lay the blank versions over the copied snapshot (their folders exist: the snapshot has the files)."""
    for name, blank in blanks.items():
        shutil.copyfile(blank, build / name)


def _make_parents(folder: Path) -> list[Path]:
    """mkdir -p, returning the directories it created (deepest last), so a failure can take them back."""
    missing = []
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            break
        missing.append(candidate)
    for candidate in reversed(missing):
        candidate.mkdir(exist_ok=True)
    return list(reversed(missing))


def _clear(staging: Path | None, created: list[Path]) -> Path | None:
    """Remove the staging dir and parents this command created; returns what could not be removed."""
    if staging is not None:
        shutil.rmtree(staging, ignore_errors=True)
        if staging.exists():
            return staging
    for folder in reversed(created):
        try:
            folder.rmdir()
        except OSError:
            break
    return None


def _could_not_make(directory: Path, error: OSError | git.GitError, left: Path | None) -> str:
    import git

    if isinstance(error, git.GitCommandError):
        stderr = str(error.stderr).strip().strip("'").strip()
        lines = [line for line in stderr.splitlines() if line.strip()]
        command = error.command[1] if isinstance(error.command, list) and len(error.command) > 1 else "git"
        problem = f"`git {command}` failed: {lines[-1] if lines else error}"
    elif isinstance(error, OSError):
        problem = error.strerror or str(error)
        where = error.filename2 or error.filename  # a failed rename names its destination second
        if where:
            problem += f" ({where})"
        if error.errno == errno.EBUSY:
            problem += "; is it a mount point? Choose a new directory inside it"
    else:
        problem = str(error)
    tail = f"a partial copy is left at {left}; remove it." if left else "nothing was left behind."
    return f"could not make the practice dir {directory}: {problem}; {tail}"


def _commit_start(build: Path, message: str) -> None:
    import git

    repo = git.Repo.init(build, initial_branch="main")
    try:
        with repo.config_writer() as config:
            config.set_value("user", "name", "course")
            config.set_value("user", "email", "course@localhost")
        repo.git.add(A=True)
        repo.index.commit(message)
    finally:
        repo.close()

