"""The early worker: started before the CLI imports, adopted by the first pool, never left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import trio

from conftest import REPO
from course import prestart
from course.cli import cli
from course.launch import RUNS_TESTS
from course.runner import PASSED, RunPool
from hostile_helpers import leftovers, wait_until_gone


def test_every_command_that_prestarts_a_worker_exists() -> None:
    assert RUNS_TESTS <= set(cli.commands), RUNS_TESTS - set(cli.commands)


def test_the_first_pool_adopts_the_prestarted_worker_and_adds_its_imports(tmp_path: Path) -> None:
    """The worker starts with the core only; the pool asks it for the chapter's extra imports."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "tests" / "test_x.py").write_text(textwrap.dedent("""
        import sys
        def test_the_chapter_import_was_preloaded_by_the_worker():
            assert "wave" in sys.modules
    """))
    prestart.prestart_nowait()
    spawned = prestart.take()
    assert spawned is not None and spawned.imports == ()
    prestart._waiting = spawned  # put it back, as if launch.py had started it

    async def main():
        async with RunPool(["wave"]) as pool:
            assert prestart.take() is None, "the pool did not adopt the prestarted worker"
            assert pool.worker is not None and pool.worker.socket_path == spawned.socket_path
            return await pool.run(tmp_path, ())

    result = trio.run(main)
    assert result.outcome == PASSED, result.output
    assert spawned.process.poll() is not None, "the pool's exit must end the adopted worker"
    assert not spawned.folder.exists()


def test_a_worker_dies_with_a_command_killed_outright(tmp_path: Path) -> None:
    """SIGKILL leaves no atexit to run: the worker asked the kernel to kill it with its parent."""
    marker = str(tmp_path)
    probe = textwrap.dedent("""
        import time
        from course import prestart
        worker = prestart.spawn_nowait(())
        assert worker.process.stdout.readline() == b"ready\\n"  # serving: it no longer writes to us
        print("up", flush=True)
        time.sleep(60)
    """)
    command = subprocess.Popen([sys.executable, "-c", probe], cwd=REPO, env=dict(os.environ, COURSE_MARK=marker),
                               stdout=subprocess.PIPE, text=True)
    assert command.stdout is not None and command.stdout.readline().strip() == "up"
    deadline = time.monotonic() + 20
    while not [entry for entry in leftovers(marker) if "warm.py" in entry]:
        assert time.monotonic() < deadline, "the worker never started"
        time.sleep(0.02)
    command.send_signal(signal.SIGKILL)
    command.wait()
    assert wait_until_gone(marker) == []


def test_an_unadopted_worker_is_killed_when_the_command_exits(tmp_path: Path) -> None:
    """A usage error after the worker started: the command exits 2, the worker goes with it."""
    marker = str(tmp_path)
    done = subprocess.run([sys.executable, "-m", "course", "checkpoint", "99"], cwd=REPO,
                          env=dict(os.environ, COURSE_MARK=marker), capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert wait_until_gone(marker) == []


def test_commands_that_run_no_tests_start_no_worker(tmp_path: Path) -> None:
    marker = str(tmp_path)
    process = subprocess.Popen([sys.executable, "-m", "course", "list"], cwd=REPO,
                               env=dict(os.environ, COURSE_MARK=marker), stdout=subprocess.PIPE, text=True)
    seen = []
    while process.poll() is None:
        seen += [entry for entry in leftovers(marker) if "warm.py" in entry]
        time.sleep(0.01)
    assert process.returncode == 0
    assert seen == []
