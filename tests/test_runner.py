"""The isolated runner: a fresh interpreter per run, nothing inherited, a hard time limit."""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path

import pytest
import trio

from course.runner import COLLECTION_ERROR, FAILED, PASSED, TIMEOUT, RunPool, isolated_env


def snapshot(root: Path, tests: str, package: str | None = None) -> Path:
    """A minimal snapshot: its own pytest.ini, one test file, optionally a tiny_pi package."""
    (root / "tests").mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\ntestpaths = tests\n")
    (root / "tests" / "test_x.py").write_text(textwrap.dedent(tests))
    if package is not None:
        (root / "tiny_pi").mkdir()
        (root / "tiny_pi" / "__init__.py").write_text(package)
    return root


@pytest.fixture(params=["cold", "warm"])
def run(request: pytest.FixtureRequest):
    """Every runner test holds for a fresh interpreter and for a fork of the warm worker."""

    def go(path: Path, *selection: str, limit: float = 30.0):
        async def main():
            async with RunPool(warm=request.param == "warm") as pool:
                assert (pool.worker is not None) == (request.param == "warm")
                return await pool.run(path, selection, time_limit=limit)

        return trio.run(main)

    return go


def test_counts_come_from_the_junit_report(tmp_path: Path, run) -> None:
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


def test_collection_error_is_its_own_outcome(tmp_path: Path, run) -> None:
    snap = snapshot(tmp_path / "s", "from tiny_pi.nowhere import thing\ndef test_x(): pass\n")
    result = run(snap)
    assert result.outcome == COLLECTION_ERROR
    assert "No module named 'tiny_pi'" in result.output


def test_a_run_never_sees_the_callers_pythonpath_or_another_tiny_pi(tmp_path: Path, monkeypatch, run) -> None:
    intruder = tmp_path / "intruder"
    (intruder / "tiny_pi").mkdir(parents=True)
    (intruder / "tiny_pi" / "__init__.py").write_text("WHO = 'intruder'\n")
    monkeypatch.setenv("PYTHONPATH", str(intruder))
    monkeypatch.setenv("PYTEST_ADDOPTS", "-k nothing_matches_this")
    snap = snapshot(tmp_path / "s", """
        import os, tiny_pi
        def test_own_package():
            assert tiny_pi.WHO == "own", tiny_pi.__file__
        def test_environment():
            assert "PYTHONPATH" not in os.environ
            assert os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1"
            assert os.environ["PYTHONDONTWRITEBYTECODE"] == "1"
    """, package="WHO = 'own'\n")
    result = run(snap)
    assert result.outcome == PASSED, result.output
    assert result.passed == 2
    assert not list(snap.rglob("__pycache__")), "a run must not write bytecode into the snapshot"
    assert not (snap / ".pytest_cache").exists()


def test_an_endless_test_is_killed_at_the_time_limit_with_its_children(tmp_path: Path, run) -> None:
    pid_file = tmp_path / "child.pid"
    snap = snapshot(tmp_path / "s", f"""
        import subprocess, trio
        def test_never_ends():
            child = subprocess.Popen(["sleep", "300"])
            open({str(pid_file)!r}, "w").write(str(child.pid))
            trio.run(trio.sleep_forever)
    """)
    started = time.monotonic()
    result = run(snap, limit=3)
    elapsed = time.monotonic() - started
    assert result.outcome == TIMEOUT
    assert result.summary() == "the tests did not finish in 3 s - a stream that never ends?"
    assert elapsed < 10
    child = int(pid_file.read_text())
    time.sleep(0.2)
    assert not _alive(child), "the test's child process outlived the run"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie re-parented to init is dead for our purposes.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


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


def test_isolated_env_drops_what_could_change_results() -> None:
    env = isolated_env({"PYTHONPATH": "x", "PYTEST_PLUGINS": "y", "PYTEST_ADDOPTS": "-x", "HOME": "/h"})
    assert env["HOME"] == "/h"
    assert "PYTHONPATH" not in env and "PYTEST_PLUGINS" not in env and "PYTEST_ADDOPTS" not in env


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_concurrent_runs_never_see_each_others_tiny_pi(tmp_path: Path, warm: bool) -> None:
    """Many runs of two snapshots, interleaved on one worker: each imports only its own package."""
    check = """
import sys, tiny_pi
from pathlib import Path
def test_x():
    assert tiny_pi.WHO == Path.cwd().name
    assert Path(tiny_pi.__file__).resolve().parent.parent == Path.cwd().resolve()
    assert "course" not in sys.modules, "the course tool leaked into a run"
"""
    one = snapshot(tmp_path / "one", check, package="WHO = 'one'\n")
    two = snapshot(tmp_path / "two", check, package="WHO = 'two'\n")
    results = []

    async def main():
        async with RunPool(warm=warm) as pool, trio.open_nursery() as nursery:
            for snap in (one, two, one, two, one, two):
                async def go(s=snap):
                    results.append(await pool.run(s, (), time_limit=30))
                nursery.start_soon(go)

    trio.run(main)
    assert [r.outcome for r in results] == [PASSED] * 6, [r.output for r in results]


def test_the_warm_worker_never_imports_tiny_pi_or_the_course(tmp_path: Path) -> None:
    snap = snapshot(tmp_path / "s", """
import sys
def test_modules_before_the_test_imported_anything():
    assert not [m for m in sys.modules if m.startswith(("tiny_pi", "course", "tests."))]
""")

    async def main():
        async with RunPool(warm=True) as pool:
            return await pool.run(snap, (), time_limit=30)

    result = trio.run(main)
    assert result.outcome == PASSED, result.output
