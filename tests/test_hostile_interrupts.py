"""Hostile input, part 3: interrupted work. A practice dir is whole or absent, never half-made.

`course practice` builds the dir in a hidden sibling and renames it into
place; the signals that end a command are held back while the sibling is
built or removed (workspace.signals_deferred). These tests interrupt it at
random moments, inject failures into each step, and fill a real disk.
"""

from __future__ import annotations

import errno
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

import git
import pytest

from conftest import REPO, mini
from course import workspace
from course.errors import CourseError
from hostile_helpers import leftovers, runs_started, set_time_limit, wait_until_gone, work_dir

RUNS = 12
PARENT_FILES = {"pytest.ini", "tiny_pi/__init__.py", "tests/test_01_adder.py"}
WHOLE = PARENT_FILES | {"LEARNING.md", ".gitignore"}


def assert_whole_or_absent(directory: Path) -> str:
    """The promise: no DIR at all, or DIR with one commit holding every file; never a staging sibling."""
    hidden = [entry.name for entry in directory.parent.iterdir() if entry.name.startswith(f".{directory.name}.")]
    assert hidden == [], f"staging left behind: {hidden}"
    if not directory.exists():
        return "absent"
    repo = git.Repo(directory)
    try:
        assert len(list(repo.iter_commits())) == 1
        assert set(repo.git.ls_files().splitlines()) == WHOLE
        assert not repo.is_dirty(untracked_files=True)
    finally:
        repo.close()
    return "whole"


def practice_process(course_root: Path, directory: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, COURSE_ROOT=str(course_root))
    return subprocess.Popen(
        [sys.executable, "-m", "course", "practice", "1", str(directory)],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def interrupted_practice(course_root: Path, directory: Path, ready: Callable[[], bool]) -> str:
    """`course practice` into DIRECTORY, Ctrl-C once `ready()` holds; the state it leaves behind."""
    process = practice_process(course_root, directory)
    deadline = time.monotonic() + 60
    while not ready() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    state = assert_whole_or_absent(directory)
    if "Traceback" in stderr:
        assert "/course/" not in stderr, f"a traceback from course code:\n{stderr}"
    else:
        assert process.returncode in (0, 1, 130, -signal.SIGINT), (process.returncode, stderr)
    return state


def test_ctrl_c_at_random_moments_leaves_a_whole_practice_dir_or_none(mini_course: Path, tmp_path: Path) -> None:
    """12 runs, each interrupted once; the delays are spread evenly over one run's duration.

    The first run is not interrupted: its duration sets the spread. A Ctrl-C
    that lands while Python itself is still starting (before any course code
    runs) may print Python's own traceback; one that lands in course code
    must not. When the machine slows down after the first run (another test
    taking the cores), every delay may land before the dir is made; one more
    run then waits for the dir to appear, so both endings are always tried.
    """
    started = time.monotonic()
    reference = practice_process(mini_course, tmp_path / "reference")
    reference.communicate(timeout=120)
    duration = time.monotonic() - started
    assert reference.returncode == 0
    assert assert_whole_or_absent(tmp_path / "reference") == "whole"

    rng = random.Random(7)
    seen = []
    for index in range(RUNS):
        moment = time.monotonic() + duration * (index + rng.random()) / RUNS
        seen.append(interrupted_practice(mini_course, tmp_path / f"work{index}", lambda: time.monotonic() >= moment))
    if "whole" not in seen:
        late = tmp_path / "late"
        seen.append(interrupted_practice(mini_course, late, (late / "LEARNING.md").exists))
    assert "absent" in seen and "whole" in seen, seen


@pytest.mark.parametrize("step", ["copy_snapshot", "_commit_start"])
def test_ctrl_c_inside_a_build_step_leaves_nothing(
    mini_course: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    """Deterministic: the Ctrl-C arrives in the middle of a step; the step finishes, the build stops."""
    original = getattr(workspace, step)

    def interrupted_step(*args: object) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # held back: delivered when the build has been cleared away
        original(*args)

    monkeypatch.setattr(workspace, step, interrupted_step)
    area = tmp_path / "area"
    area.mkdir()
    directory = area / "new" / "work"
    with pytest.raises(KeyboardInterrupt):
        workspace.make_practice_dir(mini_course / "checkpoints/01-adder/parent", directory, "# card\n", "start")
    assert list(area.iterdir()) == [], "the parent dirs this command made are taken back too"


def test_a_ctrl_c_the_kernel_hands_to_another_thread_still_waits_for_the_block() -> None:
    """A signal sent to the process may reach any thread that does not block it.

    Found under pytest-xdist, whose worker has a second thread: a Ctrl-C that
    arrived there was raised in the main thread at once, half-way through
    clearing a staging dir. Here it is delivered to such a thread on purpose.
    """
    release = threading.Event()
    bystander = threading.Thread(target=release.wait)
    bystander.start()  # started outside the block, so it does not block SIGINT
    reached_the_end = False
    try:
        with pytest.raises(KeyboardInterrupt):
            with workspace.signals_deferred() as interrupted:
                assert bystander.ident is not None
                signal.pthread_kill(bystander.ident, signal.SIGINT)
                deadline = time.monotonic() + 5
                while not interrupted() and time.monotonic() < deadline:
                    time.sleep(0.01)  # the handler runs in this thread, between two of these
                assert interrupted()
                reached_the_end = True
    finally:
        release.set()
        bystander.join()
    assert reached_the_end


@pytest.mark.parametrize("step", ["copy_snapshot", "_commit_start"])
def test_a_failed_step_leaves_nothing_and_says_so_in_one_paragraph(
    mini_course: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    """An injected full disk half-way through a step (the real one is below, when mount is allowed)."""
    original = getattr(workspace, step)

    def failing_step(*args: object) -> None:
        original(*args)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "somewhere"))

    monkeypatch.setattr(workspace, step, failing_step)
    area = tmp_path / "area"
    area.mkdir()
    directory = area / "work"
    with pytest.raises(CourseError) as caught:
        workspace.make_practice_dir(mini_course / "checkpoints/01-adder/parent", directory, "# card\n", "start")
    message = str(caught.value)
    assert message.startswith(f"could not make the practice dir {directory}: No space left on device")
    assert message.endswith("nothing was left behind.")
    assert list(area.iterdir()) == []


@pytest.fixture
def tiny_disk(tmp_path: Path):
    """A 64 kB tmpfs (root only); the test is skipped where mounting is not allowed."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount_point)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_a_full_disk_leaves_nothing_half_made(mini_course: Path, tiny_disk: Path) -> None:
    """The copy (git's hooks, here) runs out of space: exit 2, one paragraph, the disk as it was."""
    directory = tiny_disk / "deeper" / "work"
    result = mini(mini_course, "practice", "1", str(directory))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert f"could not make the practice dir {directory}" in result.stderr
    assert "No space left on device" in result.stderr
    assert "nothing was left behind." in result.stderr
    assert list(tiny_disk.iterdir()) == []


def test_a_mount_point_as_dir_is_refused_and_left_as_it_was(mini_course: Path, tiny_disk: Path) -> None:
    """An empty mount point passes the checks, but cannot be replaced by a rename: say so, change nothing."""
    result = mini(mini_course, "practice", "1", str(tiny_disk))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "is it a mount point?" in result.stderr
    assert tiny_disk.is_dir() and list(tiny_disk.iterdir()) == []
    assert [entry.name for entry in tiny_disk.parent.iterdir() if entry.name.startswith(".")] == []


def test_an_existing_empty_dir_is_replaced_in_one_step(mini_course: Path, tmp_path: Path) -> None:
    """`mkdir work && course practice 01 work`: allowed, and at no moment is work/ missing or half-made."""
    directory = tmp_path / "work"
    directory.mkdir()
    result = mini(mini_course, "practice", "1", str(directory))
    assert result.returncode == 0, result.stdout + result.stderr
    assert assert_whole_or_absent(directory) == "whole"


@pytest.mark.parametrize("pause", [0.5, 0.0], ids=["running", "starting"])
@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_ctrl_c_during_course_test_stops_every_run(mini_course: Path, tmp_path: Path, warm: bool, pause: float) -> None:
    """Runs stuck in a loop, Ctrl-C: exit 130 with one line, and no pytest (nor run host) left.

    With no pause the signal lands while a run host may still be starting,
    which once left it behind.

    Before: the KeyboardInterrupt came out of trio's nursery as an exception
    group, which the CLI printed as a traceback with exit status 1.
    """
    set_time_limit(mini_course, 60)
    learner = work_dir(mini_course, tmp_path / "work")
    (learner / "tiny_pi/adder.py").write_text("def add(a, b):\n    while True:\n        pass\n")
    env = dict(os.environ, COURSE_ROOT=str(mini_course), COURSE_WARM="1" if warm else "0")
    process = subprocess.Popen([sys.executable, "-m", "course", "test", "1", str(learner)], cwd=REPO, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    # Starting: a run host exists. Running: a host has forked a run.
    started = runs_started if pause else lambda marker: [
        entry for entry in leftovers(marker) if "runhost.py" in entry
    ]
    while not started(str(mini_course)):
        assert time.monotonic() < deadline, "the runs never started"
        time.sleep(0.02)
    time.sleep(pause)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    # 130, or death by SIGINT itself, which a shell reports as 130 too: about 1 run in 100, with
    # no bytecode cache and the signal landing as the early host starts, ends that way after the
    # one line is printed. Its cause is not found yet; the line and the clean-up are still checked.
    assert process.returncode in (130, -signal.SIGINT), stderr
    assert stderr.strip() == "Interrupted; nothing was left half-made."
    assert wait_until_gone(str(mini_course)) == []


@pytest.mark.parametrize("command", ["test", "watch"])
@pytest.mark.parametrize("ending", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_or_sighup_during_a_run_leaves_no_copy_of_the_learners_code(
        mini_course: Path, tmp_path: Path, command: str, ending: signal.Signals) -> None:
    """A terminal closed (SIGHUP) or a `kill` (SIGTERM) while the tests run: the verdict copy goes,
    the runs go, and the command still ends by that signal (a shell shows 143 or 129).

    Before: SIGINT cleaned up, but SIGTERM and SIGHUP killed the command where it stood and
    left a course-verdict-* copy of the learner's code in the temporary directory."""
    set_time_limit(mini_course, 60)
    learner = work_dir(mini_course, tmp_path / "work")
    (learner / "tiny_pi/adder.py").write_text("def add(a, b):\n    while True:\n        pass\n")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = dict(os.environ, COURSE_ROOT=str(mini_course), TMPDIR=str(scratch))
    args = ["test", "1", str(learner)] if command == "test" else ["watch", "1", str(learner), "--poll"]
    process = subprocess.Popen([sys.executable, "-m", "course", *args], cwd=REPO, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not runs_started(str(mini_course)):
        assert time.monotonic() < deadline, "the runs never started"
        time.sleep(0.02)
    assert list(scratch.glob("course-verdict-*")), "no verdict copy was made, so this proves nothing"
    process.send_signal(ending)
    stdout, stderr = process.communicate(timeout=30)
    if command == "watch" and ending == signal.SIGTERM:  # watch's own way to stop: between runs, too
        assert process.returncode == 0 and "Stopped watching (SIGTERM)" in stdout, stderr
    else:
        assert process.returncode == -ending, stderr
    assert "Traceback" not in stderr
    assert list(scratch.glob("course-verdict-*")) == []
    assert wait_until_gone(str(mini_course)) == []
