"""The early host: started before the CLI imports, adopted by the first pool, never left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import trio

from conftest import REPO
from course import hosts
from course.cli import cli
from course.launch import RUNS_TESTS
from course.runner import PASSED, RunPool, RunSpec
from hostile_helpers import leftovers, wait_until_gone


def test_every_command_that_prestarts_a_host_exists() -> None:
    assert RUNS_TESTS <= set(cli.commands), RUNS_TESTS - set(cli.commands)


def test_a_command_that_runs_no_tests_starts_without_trio_or_the_runner() -> None:
    """`course hint`, `status`, `list`... import the CLI only; trio and the run machinery
    (about half of the import time) load inside the commands that run tests."""
    probe = ("import sys, course.cli; "
             "print(sorted(m for m in ('trio', 'course.checks', 'course.runs', 'course.watch') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_first_pool_adopts_the_prestarted_host(tmp_path: Path) -> None:
    """A host started before the CLI imported anything serves the command's first run."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "tests" / "test_x.py").write_text("def test_one(): pass\n")
    spawned = hosts.prestart()
    assert spawned is not None and spawned.preload == ()

    async def main():
        async with RunPool(["wave"]) as pool:
            result = await pool.run(RunSpec.for_pytest(tmp_path, (), time_limit=30, memory_limit=2))
            assert not hosts.waiting(), "the pool did not adopt the prestarted host"
            assert pool.spawned_hosts == 0, "the pool started a host of its own"
            return result

    result = trio.run(main)
    assert result.outcome == PASSED, result.output
    assert spawned.process.poll() is not None, "the pool's exit must end the adopted host"


def test_a_prestarted_host_with_another_environment_is_not_used(tmp_path: Path, monkeypatch) -> None:
    """A host's start-up environment is part of how a run behaves: a stale one is replaced."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "tests" / "test_x.py").write_text("import os\ndef test_one(): assert os.environ['LATE'] == '1'\n")
    spawned = hosts.prestart()
    assert spawned is not None
    monkeypatch.setenv("LATE", "1")

    async def main():
        async with RunPool() as pool:
            result = await pool.run(RunSpec.for_pytest(tmp_path, (), time_limit=30, memory_limit=2))
            assert pool.spawned_hosts == 1
            return result

    result = trio.run(main)
    assert result.outcome == PASSED, result.output
    assert spawned.process.poll() is not None


def test_a_command_killed_outright_takes_its_hosts_and_runs_along(tmp_path: Path) -> None:
    """SIGKILL leaves no atexit and no finally to run: the host's socket closes, the host sweeps
    the run and exits (and had the host been killed, the kernel would kill the run: PDEATHSIG)."""
    marker = str(tmp_path)
    snapshot = tmp_path / "snap"
    (snapshot / "tests").mkdir(parents=True)
    (snapshot / "pytest.ini").write_text("[pytest]\n")
    started = tmp_path / "started"
    (snapshot / "tests" / "test_hang.py").write_text(textwrap.dedent(f"""
        import pathlib, subprocess, time
        def test_hangs_with_a_child():
            subprocess.Popen(["sleep", "300"])
            pathlib.Path({str(started)!r}).write_text("yes")
            time.sleep(300)
    """))
    probe = textwrap.dedent(f"""
        import trio
        from pathlib import Path
        from course.runner import RunPool, RunSpec
        async def main():
            async with RunPool() as pool:
                await pool.run(RunSpec.for_pytest(Path({str(snapshot)!r}), (), time_limit=300, memory_limit=2))
        trio.run(main)
    """)
    command = subprocess.Popen([sys.executable, "-c", probe], cwd=REPO, env=dict(os.environ, COURSE_MARK=marker))
    deadline = time.monotonic() + 30
    while not started.exists():
        assert time.monotonic() < deadline, "the run never started"
        time.sleep(0.02)
    assert len(leftovers(marker)) >= 3  # host, run, the run's child (and the probe)
    command.send_signal(signal.SIGKILL)
    command.wait()
    assert wait_until_gone(marker) == []


def course_watching_hosts(marker: str, *args: str) -> tuple[int, str, list[str]]:
    """Run `course ARGS` to its end, noting every run host that exists meanwhile."""
    process = subprocess.Popen([sys.executable, "-m", "course", *args], cwd=REPO,
                               env=dict(os.environ, COURSE_MARK=marker),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen = []
    while process.poll() is None:
        seen += [entry for entry in leftovers(marker) if "runhost.py" in entry]
        time.sleep(0.005)
    assert process.stderr is not None
    return process.returncode, process.stderr.read(), seen


def test_an_unadopted_host_is_killed_when_the_command_exits(tmp_path: Path) -> None:
    """A usage error after the host started: the command exits 2, the host goes with it."""
    code, stderr, seen = course_watching_hosts(str(tmp_path), "checkpoint", "99")
    assert code == 2 and "Traceback" not in stderr
    assert seen, "no host was started early, so this proves nothing"
    assert wait_until_gone(str(tmp_path)) == []


def test_commands_that_run_no_tests_start_no_host(tmp_path: Path) -> None:
    code, _, seen = course_watching_hosts(str(tmp_path), "list")
    assert code == 0
    assert seen == []


def test_a_pool_cancelled_while_its_host_starts_leaves_no_host(tmp_path: Path, monkeypatch) -> None:
    """A Ctrl-C (here: a cancel scope) while the host imports must not leave it behind."""
    marker = str(tmp_path)
    monkeypatch.setenv("COURSE_MARK", marker)

    (tmp_path / "tests").mkdir()
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "tests" / "test_x.py").write_text("def test_one(): pass\n")

    async def main():
        with trio.move_on_after(0.05) as scope:
            async with RunPool(["hypothesis"]) as pool:
                await pool.run(RunSpec.for_pytest(tmp_path, (), time_limit=30, memory_limit=2))
        return scope.cancelled_caught

    assert trio.run(main), "the run finished before the cancel: this proves nothing"
    assert wait_until_gone(marker) == []


def test_a_malformed_request_ends_the_host_without_a_run() -> None:
    """Only the course holds the socket; a request it cannot read is a broken course: the host exits."""
    for garbage in (b"not json\n", b"[1, 2]\n", b'{"directory": "/"}\n'):
        spawned = hosts.spawn()
        try:
            spawned.control.settimeout(20)
            assert json.loads(spawned.control.recv(100)) == {"ready": True}
            spawned.control.sendall(garbage)  # no descriptors attached: not a run
            assert spawned.process.wait(timeout=20) is not None
        finally:
            spawned.kill()
