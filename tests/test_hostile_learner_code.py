"""Hostile input, part 1: the learner's code misbehaves, and `course test` still gives a verdict.

Each case puts misbehaving code in the fixture chapter's teaching file
(`tiny_pi/adder.py`, called by both focused tests) and runs `course test 01
DIR --lab 1.1`, one isolated run, with the chapter's time limit at 3 s (1.5 s
for the code that never ends, which spends all of it). Each
must end with a clear verdict, within the limit plus start-up, with no
process left behind and the course process's own memory bounded. Where the
two paths differ (a host started for the run, COURSE_WARM=0, versus the host
the command started before it imported itself) a case runs on both.
"""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from conftest import mini
from hostile_helpers import alive, kill_pid_file, run_course, set_time_limit, wait_until_gone, work_dir

LIMIT = 3
ENDLESS = 1.5
# Start-up of `course` and of the warm worker, the kill and the report, on a
# busy 2-core machine: generous, because a hang would cost minutes, not seconds.
OVERHEAD = 12
PATHS = pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])


@pytest.fixture
def course_root(mini_course: Path) -> Path:
    set_time_limit(mini_course, LIMIT)
    return mini_course


@pytest.fixture
def learner(course_root: Path, tmp_path: Path) -> Path:
    return work_dir(course_root, tmp_path / "work")


def write_adder(directory: Path, code: str) -> None:
    (directory / "tiny_pi/adder.py").write_text(textwrap.dedent(code))


def lab_run(course_root: Path, learner: Path, warm: bool = True, *extra: str):
    """`course test 01 DIR --lab 1.1` in this process, checked for leftovers; returns (result, elapsed)."""
    started = time.monotonic()
    result = mini(course_root, "test", "1", str(learner), "--lab", "1.1", *extra,
                  env={"COURSE_WARM": "1" if warm else "0"})
    elapsed = time.monotonic() - started
    assert wait_until_gone(str(course_root)) == [], "a process of the run outlived the command"
    return result, elapsed


def lab_process(course_root: Path, learner: Path, warm: bool):
    """The same as a process of its own: (result, peak RSS of the course process in kB)."""
    result, _, peak = run_course(course_root, "test", "1", str(learner), "--lab", "1.1", warm=warm)
    assert "Traceback" not in result.stderr, result.stderr
    assert wait_until_gone(str(course_root)) == [], "a process of the run outlived the command"
    return result, peak


@PATHS
def test_an_endless_cpu_loop_is_stopped_at_the_time_limit(course_root: Path, learner: Path, warm: bool) -> None:
    set_time_limit(course_root, ENDLESS)
    write_adder(learner, """
        def add(a, b):
            while True:
                pass
    """)
    result, elapsed = lab_run(course_root, learner, warm)
    assert result.returncode == 1
    assert f"the tests did not finish in {ENDLESS:g} s - a stream that never ends?" in result.stdout
    assert elapsed < ENDLESS + OVERHEAD


def test_a_deadlocked_trio_test_is_stopped_at_the_time_limit(course_root: Path, learner: Path) -> None:
    set_time_limit(course_root, ENDLESS)
    write_adder(learner, """
        import trio

        def add(a, b):
            async def main():
                first, second = trio.Event(), trio.Event()

                async def one():
                    await second.wait()
                    first.set()

                async def two():
                    await first.wait()
                    second.set()

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(one)
                    nursery.start_soon(two)

            trio.run(main)
            return a + b
    """)
    result, elapsed = lab_run(course_root, learner)
    assert result.returncode == 1
    assert f"the tests did not finish in {ENDLESS:g} s - a stream that never ends?" in result.stdout
    assert elapsed < ENDLESS + OVERHEAD


@PATHS
def test_a_test_printing_100_mb_costs_the_course_process_nothing(
    course_root: Path, learner: Path, warm: bool
) -> None:
    """pytest shows the 100 MB it captured when the test fails; the course keeps head and tail.

    The limit is raised for this one case: pytest itself needs a few seconds
    to replay 100 MB on this machine, and the point here is memory, not time.
    """
    set_time_limit(course_root, 30)
    write_adder(learner, """
        import os

        def add(a, b):
            block = b"x" * 999_999 + b"\\n"
            for _ in range(100):
                os.write(1, block)
            return 0
    """)
    result, peak = lab_process(course_root, learner, warm)
    assert result.returncode == 1
    assert "actual:   0/1 passed" in result.stdout
    assert "first failure: tests/test_01_adder.py::test_add_small" in result.stdout
    assert len(result.stdout) < 20_000
    assert 0 < peak < 100_000, f"course process peaked at {peak} kB"


@PATHS
def test_a_long_failure_message_reaches_the_learner_clipped(course_root: Path, learner: Path, warm: bool) -> None:
    """End to end, with a message pytest can still report quickly: one readable line, not 2 MB."""
    set_time_limit(course_root, 30)
    write_adder(learner, """
        def add(a, b):
            assert False, "y" * 2_000_000 + " the end"
    """)
    result, peak = lab_process(course_root, learner, warm)
    assert result.returncode == 1
    assert "actual:   0/1 passed" in result.stdout
    assert "AssertionError: yyyy" in result.stdout and "more characters]" in result.stdout
    assert len(result.stdout) < 20_000
    assert 0 < peak < 100_000, f"course process peaked at {peak} kB"


@PATHS
@pytest.mark.parametrize("status", [0, 3])
def test_a_test_that_calls_os_exit_is_a_crash_not_a_pass(
    course_root: Path, learner: Path, warm: bool, status: int
) -> None:
    """os._exit(0) used to read as "0/0 passed" (and as green in observe mode): pytest never finished its session."""
    write_adder(learner, f"""
        import os

        def add(a, b):
            os._exit({status})
    """)
    result, elapsed = lab_run(course_root, learner, warm)
    assert result.returncode == 1
    assert f"pytest ended with status {status} before it finished its session - did a test call os._exit()" in result.stdout
    assert "0/0 passed" not in result.stdout
    assert elapsed < LIMIT + OVERHEAD


@PATHS
def test_a_child_process_that_outlives_its_test_is_killed(
    course_root: Path, learner: Path, warm: bool, tmp_path: Path
) -> None:
    """The test passes; the `sleep` it left running must not survive the run."""
    pid_file = tmp_path / "child.pid"
    write_adder(learner, f"""
        import subprocess

        def add(a, b):
            child = subprocess.Popen(["sleep", "300"])
            open({str(pid_file)!r}, "w").write(str(child.pid))
            return a + b
    """)
    result, elapsed = lab_run(course_root, learner, warm)
    assert result.returncode == 0, result.stdout
    assert "[ok]   lab 1.1 Small - 1/1 passed" in result.stdout
    assert not alive(int(pid_file.read_text()))
    assert elapsed < LIMIT + OVERHEAD


DOUBLE_FORK = """
    import os, time

    def add(a, b):
        if os.fork() == 0:
            os.setsid()  # leave the run's session and process group
            if os.fork() == 0:
                open({pid_file!r}, "w").write(str(os.getpid()))
                time.sleep(300)
            os._exit(0)
        time.sleep(0.3)
        return a + b
"""


@PATHS
def test_a_double_forked_daemon_that_escaped_the_process_group_is_killed(
    course_root: Path, learner: Path, warm: bool, tmp_path: Path
) -> None:
    """Before: the daemon held the output pipe, so a passing run became a timeout, and it lived on.

    Now the run's host is a child subreaper: the daemon becomes its child and
    the sweep after the run kills it.
    """
    pid_file = tmp_path / "daemon.pid"
    write_adder(learner, DOUBLE_FORK.format(pid_file=str(pid_file)))
    try:
        result, elapsed = lab_run(course_root, learner, warm)
        assert result.returncode == 0, result.stdout
        assert "[ok]   lab 1.1 Small - 1/1 passed" in result.stdout
        time.sleep(0.2)
        assert not alive(int(pid_file.read_text()))
        assert elapsed < LIMIT + OVERHEAD
    finally:
        kill_pid_file(pid_file)


SCRUBBED_ESCAPE = """
    import subprocess, sys, time

    DAEMON = "import os, sys, time\\nif os.fork() == 0:\\n    os.setsid()\\n    open(sys.argv[1], 'w').write(str(os.getpid()))\\n    time.sleep(300)\\n"

    def add(a, b):
        subprocess.run([sys.executable, "-c", DAEMON, {pid_file!r}], env={{}},
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.3)
        return a + b
"""


@PATHS
def test_a_daemon_that_escaped_and_scrubbed_its_environment_is_killed(
    course_root: Path, learner: Path, warm: bool, tmp_path: Path
) -> None:
    """setsid *and* an empty environment: no marker finds it, the host's subreaper sweep does."""
    pid_file = tmp_path / "daemon.pid"
    write_adder(learner, SCRUBBED_ESCAPE.format(pid_file=str(pid_file)))
    try:
        result, elapsed = lab_run(course_root, learner, warm)
        assert result.returncode == 0, result.stdout + result.stderr
        assert elapsed < LIMIT + OVERHEAD
        time.sleep(0.2)
        assert not alive(int(pid_file.read_text())), "the scrubbed daemon outlived the run"
    finally:
        kill_pid_file(pid_file)


def test_a_syntax_error_in_a_teaching_file_is_named(course_root: Path, learner: Path) -> None:
    write_adder(learner, """
        def add(a, b):
            return a +
    """)
    result, elapsed = lab_run(course_root, learner)
    assert result.returncode == 1
    assert "the tests could not be collected (an import or syntax error), 0 ran" in result.stdout
    assert "could not import the tests in tests/test_01_adder.py" in result.stdout
    assert "SyntaxError: invalid syntax" in result.stdout
    assert "tiny_pi/adder.py" in result.stdout
    assert elapsed < LIMIT + OVERHEAD


def test_a_deleted_teaching_file_points_at_the_file_to_write(course_root: Path, learner: Path) -> None:
    (learner / "tiny_pi/adder.py").unlink()
    result, _ = lab_run(course_root, learner)
    assert result.returncode == 1
    assert "hint: create tiny_pi/adder.py, a teaching file of this chapter" in result.stdout


def test_a_deleted_or_emptied_focused_test_file_does_not_change_the_verdict(course_root: Path, learner: Path) -> None:
    """The verdict runs the chapter's own tests; the learner's copy is only reported as different."""
    (learner / "tests/test_01_adder.py").unlink()
    result, _ = lab_run(course_root, learner)
    assert result.returncode == 0, result.stdout
    assert "[ok]   lab 1.1 Small - 1/1 passed" in result.stdout
    assert "the verdict used the chapter's: tests/test_01_adder.py" in result.stdout


def test_a_test_killed_by_a_signal_names_the_signal(course_root: Path, learner: Path) -> None:
    write_adder(learner, """
        import os, signal

        def add(a, b):
            os.kill(os.getpid(), signal.SIGSEGV)
    """)
    result, _ = lab_run(course_root, learner)
    assert result.returncode == 1
    assert "pytest was killed by SIGSEGV" in result.stdout
