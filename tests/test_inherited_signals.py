"""A command started with a signal ignored keeps ignoring it; one started plainly ends by it.

`nohup course verify` (SIGHUP ignored: an instructor's long run that must
outlive the terminal) and `course test &` in a script (a shell without job
control starts a background job with SIGINT ignored) must finish their runs
when the terminal closes or Ctrl-C reaches the foreground job. The runs
themselves get the signals a plain pytest at a terminal has. Started
plainly, the same signal ends the command as the README says: 129 for a
closed terminal, 130 for Ctrl-C.

Each test starts `python -m course` as a process in a session of its own,
with the dispositions set by a wrapper that then execs it (as nohup does),
waits until the learner's code is being imported by the run, and signals the
whole process group; only a command that ignored the signal is let go on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO
from hostile_helpers import wait_until_gone
from loop_helpers import course_env, practice

# The learner's code: says it is being imported, waits (bounded) for the go, and checks the run's
# own signal dispositions, which must be a terminal's whatever the command inherited.
WAITING_ADDER = """\
import os, signal, time
from pathlib import Path

_flags = Path(os.environ["SIGNAL_TEST_FLAGS"])
(_flags / "importing").touch()
_deadline = time.monotonic() + 30
while not (_flags / "go").exists() and time.monotonic() < _deadline:
    time.sleep(0.01)
SEEN = (signal.getsignal(signal.SIGHUP), signal.getsignal(signal.SIGINT))

def add(a, b):
    assert SEEN == (signal.SIG_DFL, signal.default_int_handler), f"the run inherited {SEEN}"
    return a + b
"""

# nohup's part: ignore the signals named, then become `python -m course ...`.
IGNORING = (
    "import os, signal, sys\n"
    "for number in filter(None, sys.argv[1].split(',')):\n"
    "    signal.signal(int(number), signal.SIG_IGN)\n"
    "os.execv(sys.executable, [sys.executable, '-m', 'course', *sys.argv[2:]])\n"
)


def run_signalled(root: Path, tmp_path: Path, args: list[str], ignored: tuple[int, ...], sent: tuple[int, ...],
                  before_signal=None) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`course ARGS` with IGNORED ignored; SENT to its process group while the run imports the learner's code."""
    flags = tmp_path / "flags"
    flags.mkdir()
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = course_env(root, SIGNAL_TEST_FLAGS=str(flags), TMPDIR=str(scratch))
    process = subprocess.Popen(
        [sys.executable, "-c", IGNORING, ",".join(str(int(number)) for number in ignored), *args],
        cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )
    try:
        if before_signal is not None:
            before_signal(flags)
        deadline = time.monotonic() + 60
        while not (flags / "importing").exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the run never imported the learner's code"
            time.sleep(0.01)
        for number in sent:
            os.killpg(process.pid, number)
        if set(sent) <= set(ignored):
            (flags / "go").touch()  # an ignored signal is dropped when sent: nothing to wait for
        # Else no go: the command must end by the signal while its run still waits.
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert list(scratch.glob("course-verdict-*")) == [], "the throw-away copy of the learner's code was left"
    assert wait_until_gone(str(root)) == []
    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr), flags


@pytest.fixture
def learner(mini_course: Path, tmp_path: Path) -> Path:
    directory = practice(mini_course, tmp_path / "p")
    (directory / "tiny_pi/adder.py").write_text(WAITING_ADDER)
    return directory


def test_signals_ignored_at_start_stay_ignored_and_the_run_finishes(
        mini_course: Path, tmp_path: Path, learner: Path) -> None:
    """SIGHUP as under nohup, SIGINT as for a background job: both ignored, both sent; the verdict is green.

    Before the run host reset SIGHUP, the runs inherited it ignored too and the verdict differed.
    """
    both = (signal.SIGHUP, signal.SIGINT)
    result, _ = run_signalled(mini_course, tmp_path, ["test", "1", str(learner)], both, both)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Green: 3/3 checks passed" in result.stdout and "Interrupted" not in result.stderr


@pytest.mark.parametrize("sent, status", [(signal.SIGHUP, -signal.SIGHUP), (signal.SIGINT, 130)],
                         ids=["SIGHUP-129", "SIGINT-130"])
def test_the_same_signal_not_ignored_ends_the_command(
        mini_course: Path, tmp_path: Path, learner: Path, sent: int, status: int) -> None:
    """The README: a closed terminal ends a command by its own signal (a shell shows 129), Ctrl-C with 130."""
    result, _ = run_signalled(mini_course, tmp_path, ["test", "1", str(learner)], (), (sent,))
    assert result.returncode == status, result.stdout + result.stderr
    assert "Green" not in result.stdout and "Traceback" not in result.stderr
    if sent == signal.SIGINT:
        assert result.stderr.strip() == "Interrupted; nothing was left half-made."


@pytest.mark.parametrize("ignored", [True, False], ids=["SIGINT-ignored", "SIGINT-not-ignored"])
def test_watch_keeps_an_ignored_ctrl_c_ignored(mini_course: Path, tmp_path: Path, learner: Path,
                                              ignored: bool) -> None:
    """`course watch --once &` in a script: the foreground's Ctrl-C does not stop it; a plain one stops (exit 0)."""
    def save(flags: Path) -> None:  # --once runs at the first save after the watcher is live: save until it runs
        deadline = time.monotonic() + 30
        while not (flags / "importing").exists() and time.monotonic() < deadline:
            (learner / "tiny_pi/notes.txt").write_text(str(time.monotonic()))
            time.sleep(0.3)

    result, _ = run_signalled(mini_course, tmp_path, ["watch", "1", str(learner), "--once", "--poll", "--debounce", "50"],
                              (signal.SIGINT,) if ignored else (), (signal.SIGINT,), before_signal=save)
    assert result.returncode == 0, result.stdout + result.stderr
    if ignored:
        assert "Green: 3/3 checks passed" in result.stdout and "Stopped watching" not in result.stdout, result.stdout
    else:
        assert "Stopped watching (SIGINT)" in result.stdout and "Green" not in result.stdout, result.stdout
