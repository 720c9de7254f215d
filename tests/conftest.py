"""Shared helpers: run the `course` command, and copies of fixture courses.

Two ways to run a command. `course()` calls the entry point `python -m course`
calls (course.launch.main) inside the test process, with its own argv, cwd,
environment, stdin and captured output; a command that runs tests still starts
a run host and runs every test in that host's forked children. It is what most
tests use: it decides and prints what the command does, without paying for a
fresh interpreter each time. `course_process()` runs `python -m course` as a
learner does: the end-to-end layer, for what only a process shows (start-up,
exit statuses and signals, a terminal, an installed copy), and every command
at least once.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Mapping

import pytest

from course.catalog import load_catalog
from course.workspace import check_practice_target, start_practice

REPO = Path(__file__).resolve().parent.parent
CHECKPOINTS = REPO / "checkpoints"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# The index of practice dirs (course/index.py) lives in the user's state dir, and parsed
# chapter.toml files (course/parsed_toml.py) in the cache dir; the suite's CLI runs keep
# theirs in throw-away ones, so a test run never touches the real home.
for _name, _prefix in (("XDG_STATE_HOME", "course-tests-state-"), ("XDG_CACHE_HOME", "course-tests-cache-")):
    os.environ[_name] = tempfile.mkdtemp(prefix=_prefix)
    atexit.register(shutil.rmtree, os.environ[_name], ignore_errors=True)
# A suite started in the background by a shell without job control inherits SIGINT ignored,
# and every `course` it starts would too (an ignored signal survives exec): the Ctrl-C tests
# would then test nothing. The learner's Ctrl-C reaches a foreground command, so restore that.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# A CLI run from a practice dir must use this checkout's `course`, not whichever one is installed.
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))


def tree_hash(root: Path) -> str:
    """A digest of every path and byte under `root`, caches included (they must not appear)."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        digest.update(path.relative_to(root).as_posix().encode())
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_START_HASH] = tree_hash(CHECKPOINTS)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """No command may write under checkpoints/: checked once every test has run, whatever their order.

    A change fails the session (exit status 1) even when every test passed,
    because the write may have come from any test's command.
    """
    if tree_hash(CHECKPOINTS) != session.config.stash[_START_HASH]:
        reporter = session.config.pluginmanager.getplugin("terminalreporter")
        reporter.write_line(
            "FAILED: a command wrote under checkpoints/ during this session (git status checkpoints/ shows what)",
            red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_START_HASH = pytest.StashKey[str]()


@pytest.fixture(autouse=True)
def fresh_verify_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test starts with an empty verdict store, so a test that runs verify really runs it."""
    directory = tmp_path_factory.mktemp("verify-cache")
    monkeypatch.setenv("COURSE_CACHE", str(directory))
    return directory


def course(*args: str, cwd: Path | None = None, env: Mapping[str, str | None] | None = None,
           input: str = "") -> subprocess.CompletedProcess[str]:
    """`course ARGS` in this process, answered as a process answers: exit code, stdout, stderr.

    The entry point is the one `python -m course` calls (course.launch.main),
    so a command that runs tests starts its run host first, as a learner's
    does, and its runs happen in that host's forked children, never here.
    An unexpected exception escapes (and fails the test) where the real
    command would print a traceback. A None in `env` unsets that variable.
    """
    from course import hosts
    from course.launch import main

    stdout, stderr = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("COURSE_ROOT", raising=False)
        patch.setenv("COURSE_JOBS", "1")  # the suite already runs a test per core (pytest-xdist)
        for name, value in (env or {}).items():
            if value is None:
                patch.delenv(name, raising=False)
            else:
                patch.setenv(name, value)
        patch.chdir(cwd or REPO)
        patch.setattr(sys, "argv", ["course", *args])
        patch.setattr(sys, "stdin", io.StringIO(input))
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                main()
                code: object = 0
            except SystemExit as ending:
                code = ending.code
            finally:
                hosts.discard()
    returncode = code if isinstance(code, int) else (0 if code is None else 1)
    return subprocess.CompletedProcess(["course", *args], returncode, stdout.getvalue(), stderr.getvalue())


def course_process(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
                   timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """`python -m course ARGS` in a fresh interpreter, exactly as a learner runs it.

    The end-to-end layer: start-up, exit statuses, signals, what reaches a
    real stdout. Everything else uses `course()`, which decides and prints the same.
    """
    full_env = dict(os.environ)
    full_env.pop("COURSE_ROOT", None)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "course", *args],
        cwd=cwd or REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def installed_layout(site: Path) -> Path:
    """SITE laid out as a regular install lays the course out: site/course with the chapters as course/checkpoints."""
    from course.workspace import IGNORED_NAMES

    ignore = shutil.ignore_patterns(*IGNORED_NAMES)
    shutil.copytree(REPO / "course", site / "course", ignore=ignore)
    shutil.copytree(REPO / "checkpoints", site / "course" / "checkpoints", ignore=ignore)
    return site


@pytest.fixture
def mini_course(tmp_path: Path) -> Path:
    """A private copy of the one-chapter fixture course, free to break."""
    root = tmp_path / "mini-course"
    shutil.copytree(FIXTURES / "mini-course", root)
    return root


def made_practice(root: Path, chapter_id: str, directory: Path) -> Path:
    """DIRECTORY as `course practice CHAPTER DIRECTORY` leaves it, made in-process.

    For tests about what a learner does next: the dir, its first commit and
    the index entry are the command's own (workspace.start_practice); only the
    first red-light run and its printout are skipped. `course practice` itself
    runs in test_chapters.py and test_cli_mini.py (there as a process, too).
    """
    chapter = load_catalog(root).resolve(chapter_id)
    start_practice(chapter, check_practice_target(directory, root), root)
    return directory


def mini(root: Path, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    """`course ARGS` against a fixture course, in this process (see course())."""
    env = {"COURSE_ROOT": str(root), **kwargs.pop("env", {})}  # type: ignore[dict-item]
    return course(*args, env=env, **kwargs)  # type: ignore[arg-type]


def mini_process(root: Path, *args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    """`course ARGS` against a fixture course, in a fresh interpreter (see course_process())."""
    env = {"COURSE_ROOT": str(root), **kwargs.pop("env", {})}  # type: ignore[dict-item]
    return course_process(*args, env=env, **kwargs)  # type: ignore[arg-type]
