"""The runner: one spec per run, a host per pool, a verdict that is true and nothing left running.

Every test that runs something runs it on both paths a run can take: on a
host started for it ("fresh"), and as the second run of a host that already
served one ("reused", the path of `watch`, `verify` and a prestarted host).
The reused path proves it was reused: the pool must have started one host.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
import trio

from course.runner import (
    COLLECTION_ERROR, CONFIG_ERROR, CRASHED, FAILED, MEMORY, NO_TESTS, NOT_RUN, PASSED, SKIPPED, TIMEOUT,
    RunPool, RunSpec, run_environment,
)
from course.catalog import Lab
from course.results import XFAILED
from hostile_helpers import alive, kill_pid_file
from course.run_env import bytecode_cache

INI = "[pytest]\npythonpath = .\ntestpaths = tests\n"


def snapshot(root: Path, tests: str, package: str | None = None, ini: str = INI) -> Path:
    """A minimal snapshot: its own pytest.ini, one test file, optionally a tiny_pi package."""
    (root / "tests").mkdir(parents=True)
    (root / "pytest.ini").write_text(ini)
    (root / "tests" / "test_x.py").write_text(textwrap.dedent(tests))
    if package is not None:
        (root / "tiny_pi").mkdir()
        (root / "tiny_pi" / "__init__.py").write_text(package)
    return root


def spec(path: Path, *selection: str, limit: float = 30.0, memory: float = 2.0) -> RunSpec:
    return RunSpec.for_pytest(path, selection, time_limit=limit, memory_limit=memory)


@pytest.fixture(params=["fresh", "reused"])
def run(request: pytest.FixtureRequest, tmp_path: Path):
    """Run a snapshot on a fresh host, or on a host that has served a run before."""
    warm_up = snapshot(tmp_path / "warm-up", "def test_ok(): pass\n")

    def go(path: Path, *selection: str, limit: float = 30.0, memory: float = 2.0):
        async def main():
            async with RunPool(reuse=request.param == "reused") as pool:
                if request.param == "reused":
                    assert (await pool.run(spec(warm_up))).outcome == PASSED
                result = await pool.run(spec(path, *selection, limit=limit, memory=memory))
                assert pool.spawned_hosts == 1, "the run did not take the path this test claims"
                return result

        return trio.run(main)

    return go


def test_counts_come_from_the_reports_of_each_test(tmp_path: Path, run) -> None:
    snap = snapshot(tmp_path / "s", """
        def test_one(): pass
        def test_two(): assert 1 == 2
        class TestGroup:
            def test_three(self): pass
    """)
    result = run(snap)
    assert result.outcome == FAILED
    assert (result.passed, result.failed) == (2, 1)
    assert result.case("tests/test_x.py::TestGroup::test_three").outcome == PASSED
    assert "assert 1 == 2" in result.case("tests/test_x.py::test_two").message


def test_a_parameter_id_with_dots_or_colons_keeps_its_test_name(tmp_path: Path, run) -> None:
    # A lab selects by the name after the last "::": an id like "2.0" must not become "2::0".
    snap = snapshot(tmp_path / "s", """
        import pytest
        @pytest.mark.parametrize("value", ['"jsonrpc": "2.0"', "a::b"])
        def test_p(value): pass
        class TestGroup:
            @pytest.mark.parametrize("value", ["1.5"])
            def test_q(self, value): pass
    """)
    result = run(snap)
    assert result.passed == 3
    assert [case.node_id for case in result.tests] == [
        'tests/test_x.py::test_p["jsonrpc": "2.0"]', "tests/test_x.py::test_p[a::b]",
        "tests/test_x.py::TestGroup::test_q[1.5]",
    ]
    assert [case.name for case in result.tests] == ['test_p["jsonrpc": "2.0"]', "test_p[a::b]", "TestGroup.test_q[1.5]"]
    lab = Lab(id="1.1", title="t", select="test_p or test_q", expected_passed=3)
    assert all(lab.selects(case.node_id) for case in result.tests)


def test_skipped_and_xfailed_tests_never_count_as_passed(tmp_path: Path, run) -> None:
    snap = snapshot(tmp_path / "s", """
        import pytest
        def test_skipped(): pytest.skip("later")
        @pytest.mark.xfail(reason="known")
        def test_xfail(): assert False
        def test_real(): pass
    """)
    result = run(snap)
    assert result.outcome == PASSED
    assert [(case.name, case.outcome) for case in result.tests] == [
        ("test_skipped", SKIPPED), ("test_xfail", XFAILED), ("test_real", PASSED),
    ]
    assert result.passed == 1


def test_a_selection_that_matches_nothing_is_no_tests_never_green(tmp_path: Path, run) -> None:
    snap = snapshot(tmp_path / "s", "def test_one(): pass\n")
    result = run(snap, "-k", "nothing_has_this_name")
    assert result.outcome == NO_TESTS
    assert result.summary() == "no tests ran: the selection matched no test"


def test_collection_error_is_its_own_outcome(tmp_path: Path, run) -> None:
    snap = snapshot(tmp_path / "s", "from tiny_pi.nowhere import thing\ndef test_x(): pass\n")
    result = run(snap)
    assert result.outcome == COLLECTION_ERROR
    assert "No module named 'tiny_pi'" in result.output
    assert [(case.file, case.name) for case in result.tests] == [("tests/test_x.py", "")]


def test_a_conftest_that_fails_to_load_shows_pytests_own_error(tmp_path: Path, run) -> None:
    snap = snapshot(tmp_path / "s", "def test_one(): pass\n")
    (snap / "conftest.py").write_text("import tiny_pi.missing_helper\n")
    result = run(snap)
    assert result.outcome == CONFIG_ERROR
    assert "ImportError while loading conftest" in result.output
    assert "No module named 'tiny_pi'" in result.output
    assert "os._exit" not in result.summary()


def test_a_run_never_sees_the_callers_pythonpath_colours_or_another_tiny_pi(
    tmp_path: Path, monkeypatch, run
) -> None:
    intruder = tmp_path / "intruder"
    (intruder / "tiny_pi").mkdir(parents=True)
    (intruder / "tiny_pi" / "__init__.py").write_text("WHO = 'intruder'\n")
    for name, value in [("PYTHONPATH", str(intruder)), ("PYTEST_ADDOPTS", "-k nothing_matches_this"),
                        ("FORCE_COLOR", "1"), ("PY_COLORS", "1"), ("TERM", "xterm-256color"), ("COLUMNS", "311")]:
        monkeypatch.setenv(name, value)
    snap = snapshot(tmp_path / "s", """
        import os, tiny_pi
        def test_own_package():
            assert tiny_pi.WHO == "own", tiny_pi.__file__
        def test_environment():
            assert "PYTHONPATH" not in os.environ and "FORCE_COLOR" not in os.environ
            assert "PY_COLORS" not in os.environ
            assert (os.environ["TERM"], os.environ["COLUMNS"], os.environ["NO_COLOR"]) == ("dumb", "80", "1")
            assert os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1"
            assert "PYTHONDONTWRITEBYTECODE" not in os.environ
        def test_colour_free_failure():
            assert "red" == "green"
    """, package="WHO = 'own'\n")
    result = run(snap)
    assert result.passed == 2, result.output
    assert "\x1b" not in result.output
    assert not list(snap.rglob("__pycache__")), "a run must not write bytecode into the snapshot"
    assert not (snap / ".pytest_cache").exists()


def test_a_runs_processes_share_its_bytecode_outside_the_dir_and_it_goes_with_the_run(
    tmp_path: Path, monkeypatch, run
) -> None:
    """Compiled once per run, not once per process the tests start; never written into the dir."""
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")  # the caller's choice is not the run's
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path / "callers-cache"))
    snap = snapshot(tmp_path / "s", """
        import importlib.util, os, subprocess, sys, tiny_pi
        def test_a_started_process_finds_the_package_compiled():
            cached = importlib.util.cache_from_source(tiny_pi.__file__)
            assert os.path.isfile(cached) and cached.startswith(os.environ["PYTHONPYCACHEPREFIX"] + os.sep)
            assert not cached.startswith(os.path.dirname(tiny_pi.__file__))
            seen = subprocess.run([sys.executable, "-c", "import sys; print(sys.pycache_prefix)"],
                                  capture_output=True, text=True, check=True).stdout.strip()
            assert seen == os.environ["PYTHONPYCACHEPREFIX"]
    """, package="WHO = 'own'\n")
    result = run(snap)
    assert result.passed == 1, result.output
    prefix = Path(bytecode_cache(os.environ))
    assert not (tmp_path / "callers-cache").exists()
    assert prefix.is_dir() and not (prefix / str(snap).lstrip(os.sep)).exists(), "the run's own bytecode outlived it"
    assert not list(snap.rglob("__pycache__"))


def test_a_dir_run_again_right_after_an_edit_is_judged_on_the_edit(tmp_path: Path, run) -> None:
    """Python checks bytecode against a file's size and whole-second mtime: an edit that keeps both must count.

    A run's bytecode of its own dir is removed when the run ends (course/runhost.py),
    so nothing compiled from the code before the edit is there to be reused.
    """
    snap = snapshot(tmp_path / "s", """
        import tiny_pi
        def test_value():
            assert tiny_pi.VALUE == 1
    """, package="VALUE = 1\n")
    module = snap / "tiny_pi" / "__init__.py"
    assert run(snap).passed == 1
    stamp = module.stat()
    module.write_text("VALUE = 2\n")  # same size
    os.utime(module, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # and the same modification time
    result = run(snap)
    assert result.failed == 1 and "assert 2 == 1" in result.output, result.output


def test_a_run_collects_garbage_as_a_plain_pytest_run_does(tmp_path: Path, run) -> None:
    """The host imports with the collector off (start-up time) and freezes what it imported:
    the run's child must still collect its own cycles, or a test that makes them runs out of memory."""
    snap = snapshot(tmp_path / "s", """
        import gc
        def test_collector_on():
            assert gc.isenabled()
        def test_cycles_are_collected():
            class Node:
                pass
            def cycle():
                node = Node()
                node.me = node
            gc.collect()
            before = len([o for o in gc.get_objects() if isinstance(o, Node)])
            for _ in range(50_000):
                cycle()
            assert len([o for o in gc.get_objects() if isinstance(o, Node)]) - before < 50_000
    """)
    result = run(snap)
    assert result.passed == 2, result.output


def test_filterwarnings_error_in_a_chapter_config_keeps_a_correct_solution_green(tmp_path: Path, run) -> None:
    """The course adds no warning of its own to a run (its reporter is a plugin object, not a module)."""
    snap = snapshot(tmp_path / "s", "def test_one(): pass\n", ini=INI + "filterwarnings =\n    error\n")
    result = run(snap)
    assert result.outcome == PASSED, result.output
    assert "Warning" not in result.output


def test_an_endless_test_is_killed_at_the_time_limit_and_named(tmp_path: Path, run) -> None:
    pid_file = tmp_path / "child.pid"
    snap = snapshot(tmp_path / "s", f"""
        import subprocess, trio
        def test_quick(): pass
        def test_never_ends():
            child = subprocess.Popen(["sleep", "300"])
            open({str(pid_file)!r}, "w").write(str(child.pid))
            trio.run(trio.sleep_forever)
    """)
    started = time.monotonic()
    result = run(snap, limit=3)
    assert time.monotonic() - started < 15
    assert result.outcome == TIMEOUT
    assert result.summary() == (
        "the tests did not finish in 3 s - a stream that never ends? (still running: tests/test_x.py::test_never_ends)"
    )
    assert result.case("tests/test_x.py::test_never_ends").outcome == NOT_RUN
    assert not alive(int(pid_file.read_text())), "the test's child process outlived the run"


def test_a_test_that_ends_the_interpreter_is_never_green(tmp_path: Path, run) -> None:
    """Writing a report of its own and calling os._exit(0) does not make a run pass."""
    snap = snapshot(tmp_path / "s", f"""
        import os
        def test_one():
            open({str(tmp_path / 'report.xml')!r}, "w").write("<testsuite tests='1'/>")
            os._exit(0)
        def test_two(): pass
    """)
    result = run(snap)
    assert result.outcome == CRASHED
    assert result.passed == 0
    assert "before it finished its session" in result.summary()


def test_memory_beyond_the_limit_is_reported_as_memory(tmp_path: Path, run) -> None:
    snap = snapshot(tmp_path / "s", """
        def test_greedy():
            hoard = [bytearray(64 * 1024 * 1024) for _ in range(64)]
            assert hoard
    """)
    result = run(snap, memory=1)
    assert result.outcome == MEMORY
    assert result.summary() == "the tests used more than 1 GiB of memory"


DAEMON = """
    import os, pathlib, sys, time
    def test_escape():
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                pathlib.Path({pid_file!r}).write_text(str(os.getpid()))
                os.execve("/bin/sleep", ["sleep", "300"], {{}})  # no environment left to find it by
            os._exit(0)
        time.sleep(0.5)
"""

FORK_LOOP = """
    import os, time
    def note(pid):  # whole or absent: a process killed mid-write must not leave half a number
        with open({pid_file!r} + ".new", "w") as handle:
            handle.write(str(pid))
        os.replace({pid_file!r} + ".new", {pid_file!r})
    def test_keeps_forking():
        note(os.getpid())
        if os.fork() == 0:
            os.setsid()
            while True:  # each generation forks the next and exits at once
                if os.fork() != 0:
                    os._exit(0)
                note(os.getpid())
                time.sleep(0.001)
        time.sleep(0.5)
"""


@pytest.mark.parametrize("code", [DAEMON, FORK_LOOP], ids=["setsid-double-fork-no-env", "keeps-forking"])
def test_nothing_a_run_started_outlives_it(tmp_path: Path, run, code: str) -> None:
    pid_file = tmp_path / "escapee.pid"
    snap = snapshot(tmp_path / "s", code.format(pid_file=str(pid_file)))
    result = run(snap, limit=10)
    assert result.outcome == PASSED, result.output
    time.sleep(0.3)
    assert not alive(int(pid_file.read_text())), "a process of the run outlived it"


def test_no_descriptor_or_socket_of_a_run_reaches_the_host(tmp_path: Path, run) -> None:
    """A test cannot start a run nobody supervises: the only channel to its host is a socket, and it has none."""
    snap = snapshot(tmp_path / "s", """
        import os, stat
        def test_only_standard_streams_and_the_report():
            kinds = {}
            for name in os.listdir("/proc/self/fd"):
                try:
                    mode = os.fstat(int(name)).st_mode
                except OSError:
                    continue
                kinds[int(name)] = mode
            sockets = [fd for fd, mode in kinds.items() if stat.S_ISSOCK(mode)]
            assert sockets == [], "a socket reached the run"
    """)
    result = run(snap)
    assert result.outcome == PASSED, result.output


def test_a_test_that_kills_its_host_gets_a_clear_verdict(tmp_path: Path, run) -> None:
    snap = snapshot(tmp_path / "s", """
        import os, signal
        def test_kills_parent():
            os.kill(os.getppid(), signal.SIGKILL)
            import time; time.sleep(30)
    """)
    result = run(snap, limit=20)
    assert result.outcome == CRASHED
    assert "did a test kill the process that supervises it?" in result.summary()


def test_terminal_control_sequences_never_reach_the_result(tmp_path: Path, run) -> None:
    snap = snapshot(tmp_path / "s", r"""
        import sys
        def test_noisy():
            sys.stdout.write("\x1b[2J\x1b]0;owned\x07\x1b[8mhidden\x1b[0m\r[ok] fake\n")
            assert False, "\x1b[31mred\x1b[0m"
    """)
    result = run(snap, "-s")
    case = result.case("tests/test_x.py::test_noisy")
    for text in (result.output, case.message, case.details):
        assert not any(char in text for char in "\x1b\x07\r"), repr(text)
    assert "hidden[ok] fake" in result.output


def test_huge_output_is_bounded(tmp_path: Path, run) -> None:
    snap = snapshot(tmp_path / "s", """
        import sys
        def test_loud():
            for _ in range(200):
                sys.stdout.write("x" * 100_000 + "\\n")
            assert False, "the end"
    """)
    result = run(snap, "-s")
    assert result.outcome == FAILED
    assert len(result.output) < 400_000
    assert "bytes of output left out" in result.output
    assert "the end" in result.output


def test_run_environment_drops_what_could_change_results() -> None:
    env = run_environment({"PYTHONPATH": "x", "PYTEST_PLUGINS": "y", "PYTEST_ADDOPTS": "-x", "HOME": "/h",
                           "FORCE_COLOR": "1", "PY_COLORS": "1", "COLUMNS": "311", "PYTHONWARNINGS": "error"})
    assert env["HOME"] == "/h"
    for name in ("PYTHONPATH", "PYTEST_PLUGINS", "PYTEST_ADDOPTS", "FORCE_COLOR", "PY_COLORS", "PYTHONWARNINGS"):
        assert name not in env
    assert env["COLUMNS"] == "80" and env["NO_COLOR"] == "1"


@pytest.mark.parametrize("jobs", ["1", "3"])  # neither is the default of a one- or two-core machine
def test_course_jobs_bounds_the_runs_at_once_and_so_the_hosts_started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     jobs: str) -> None:
    """Four runs asked for at once: as many hosts (each serves one run at a time) as COURSE_JOBS, no more."""
    monkeypatch.setenv("COURSE_JOBS", jobs)
    quick = snapshot(tmp_path / "quick", "def test_x(): pass\n")
    results = []

    async def main():
        async with RunPool() as pool:
            async with trio.open_nursery() as nursery:
                for _ in range(4):
                    async def go():
                        results.append(await pool.run(spec(quick)))
                    nursery.start_soon(go)
            return pool.spawned_hosts

    assert trio.run(main) == int(jobs)
    assert [result.outcome for result in results] == [PASSED] * 4


def test_concurrent_runs_on_reused_hosts_never_see_each_others_tiny_pi(tmp_path: Path) -> None:
    """Many runs of two snapshots, interleaved on two hosts: each imports only its own package."""
    check = """
import sys, tiny_pi
from pathlib import Path
def test_x():
    assert tiny_pi.WHO == Path.cwd().name
    assert Path(tiny_pi.__file__).resolve().parent.parent == Path.cwd().resolve()
    assert not [m for m in sys.modules if m == "course" or m.startswith("course.")], "the course tool leaked in"
"""
    one = snapshot(tmp_path / "one", check, package="WHO = 'one'\n")
    two = snapshot(tmp_path / "two", check, package="WHO = 'two'\n")
    results = []

    async def main():
        async with RunPool() as pool:
            async with trio.open_nursery() as nursery:
                for snap in (one, two, one, two, one, two):
                    async def go(s=snap):
                        results.append(await pool.run(spec(s)))
                    nursery.start_soon(go)
            assert pool.spawned_hosts <= os.cpu_count(), "hosts were not reused"

    trio.run(main)
    assert [r.outcome for r in results] == [PASSED] * 6, [r.output for r in results]


def test_a_run_starts_with_nothing_of_tiny_pi_or_the_course_imported(tmp_path: Path, run) -> None:
    snap = snapshot(tmp_path / "s", """
import sys
def test_modules_before_the_test_imported_anything():
    assert not [m for m in sys.modules if m.startswith(("tiny_pi", "course", "tests."))]
""")
    result = run(snap)
    assert result.outcome == PASSED, result.output


ESCAPE_THEN_HIT_THE_HOST = """
    import os, pathlib, signal, time
    def test_escape_then_hit_the_host():
        pid_file = pathlib.Path({pid_file!r})
        if os.fork() == 0:
            os.setsid()  # a daemon: its own session, so no process group of the run holds it
            pid_file.write_text(str(os.getpid()))
            os.execv("/bin/sleep", ["sleep", "300"])
        while not pid_file.exists():
            time.sleep(0.01)
        {hit}
        time.sleep(60)
"""
HITS = {
    "SIGKILL": "os.kill(os.getppid(), signal.SIGKILL)",
    "SIGSTOP": "os.kill(os.getppid(), signal.SIGSTOP)",
    "SIGKILL-group": "os.killpg(os.getpgid(os.getppid()), signal.SIGKILL)",
}


@pytest.mark.parametrize("hit", list(HITS))
def test_a_run_that_kills_or_stops_its_host_leaves_no_daemon(tmp_path: Path, run, hit: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep does not depend on the host surviving: a killed host's orphans are swept by the
    process above it, and a stopped host is killed at the deadline, its orphans swept the same way.

    Before: the daemon, re-parented to init, slept on after the run."""
    from course import runs

    monkeypatch.setattr(runs, "HOST_GRACE", 1.0)  # how long past the limit a silent host is waited for
    pid_file = tmp_path / "daemon.pid"
    snap = snapshot(tmp_path / "s", ESCAPE_THEN_HIT_THE_HOST.format(pid_file=str(pid_file), hit=HITS[hit]))
    # Started by this process, as a test's own server would be: no run's, so no sweep's.
    bystander = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        result = run(snap, limit=3)
        assert result.outcome in (CRASHED, TIMEOUT), result.output
        deadline = time.monotonic() + 3
        while alive(int(pid_file.read_text())) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(int(pid_file.read_text())), "the run's daemon outlived its killed host"
        assert bystander.poll() is None, "the sweep killed a process no run started"
    finally:
        kill_pid_file(pid_file)
        bystander.kill()
        bystander.wait()


# A host its run broke, then the pool's next run ------------------------------------------

BREAKS = {
    # the run's child kills itself: the host saw it end, swept, reported; it is whole and is reused
    "child-SIGKILL": ("os.kill(os.getpid(), signal.SIGKILL)", 1),
    # the host itself killed, or stopped (silent past the limit): it must never serve again
    "host-SIGKILL": ("os.kill(os.getppid(), signal.SIGKILL)", 2),
    "host-SIGSTOP": ("os.kill(os.getppid(), signal.SIGSTOP)", 2),
}


@pytest.mark.parametrize("hit", list(BREAKS))
def test_the_run_after_one_that_broke_its_host_gets_a_true_verdict(tmp_path: Path, hit: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs in one pool, as `verify` makes across chapters and `watch` across saves.

    A host that was killed or stopped by its own run's test goes out of the
    pool: the next run gets a host that is alive, and the verdict its own tests earn.
    Before: a broken host went back to the idle list, and the next run was sent to a dead socket.
    """
    from course import runs

    monkeypatch.setattr(runs, "HOST_GRACE", 0.5)  # how long past the limit a silent host is waited for
    code, hosts_needed = BREAKS[hit]
    breaker = snapshot(tmp_path / "breaker", f"""
        import os, signal, time
        def test_hit():
            {code}
            time.sleep(30)
    """)
    honest = snapshot(tmp_path / "honest", "def test_one(): pass\ndef test_two(): assert 1 == 2\n")

    async def main():
        async with RunPool() as pool:
            first = await pool.run(spec(breaker, limit=1.5))
            second = await pool.run(spec(honest))
            return first, second, pool.spawned_hosts

    first, second, spawned = trio.run(main)
    assert first.outcome in (CRASHED, TIMEOUT), first.output
    assert second.outcome == FAILED, second.summary() + "\n" + second.output
    assert [(case.name, case.outcome) for case in second.tests] == [("test_one", PASSED), ("test_two", FAILED)]
    assert spawned == hosts_needed, f"{spawned} hosts started for two runs"
