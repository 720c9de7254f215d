"""The early worker: started before the CLI imports, adopted by the first pool, never left behind."""

from __future__ import annotations

import json
import os
import signal
import socket
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


def test_a_command_killed_outright_takes_its_worker_and_runs_along(tmp_path: Path) -> None:
    """SIGKILL leaves no atexit and no finally to run: the kernel ends the worker, each run's
    supervisor and each run (PR_SET_PDEATHSIG), and the supervisor kills what the run started."""
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
        from course.runner import RunPool
        async def main():
            async with RunPool() as pool:
                print(pool.worker.socket_path.parent, flush=True)
                await pool.run(Path({str(snapshot)!r}), (), time_limit=300)
        trio.run(main)
    """)
    command = subprocess.Popen([sys.executable, "-c", probe], cwd=REPO, env=dict(os.environ, COURSE_MARK=marker),
                               stdout=subprocess.PIPE, text=True)
    assert command.stdout is not None
    folder = Path(command.stdout.readline().strip())
    assert folder.is_dir()
    deadline = time.monotonic() + 30
    while not started.exists():
        assert time.monotonic() < deadline, "the run never started"
        time.sleep(0.02)
    assert len(leftovers(marker)) >= 4  # worker, supervisor, run, the run's child (and the probe)
    command.send_signal(signal.SIGKILL)
    command.wait()
    assert wait_until_gone(marker) == []
    assert not folder.exists(), "the worker's socket folder was left behind"


def course_watching_workers(marker: str, *args: str) -> tuple[int, str, list[str]]:
    """Run `course ARGS` to its end, noting every warm worker that exists meanwhile."""
    process = subprocess.Popen([sys.executable, "-m", "course", *args], cwd=REPO,
                               env=dict(os.environ, COURSE_MARK=marker),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen = []
    while process.poll() is None:
        seen += [entry for entry in leftovers(marker) if "warm.py" in entry]
        time.sleep(0.005)
    assert process.stderr is not None
    return process.returncode, process.stderr.read(), seen


def test_an_unadopted_worker_is_killed_when_the_command_exits(tmp_path: Path) -> None:
    """A usage error after the worker started: the command exits 2, the worker goes with it."""
    code, stderr, seen = course_watching_workers(str(tmp_path), "checkpoint", "99")
    assert code == 2 and "Traceback" not in stderr
    assert seen, "no worker was started early, so this proves nothing"
    assert wait_until_gone(str(tmp_path)) == []


def test_commands_that_run_no_tests_start_no_worker(tmp_path: Path) -> None:
    code, _, seen = course_watching_workers(str(tmp_path), "list")
    assert code == 0
    assert seen == []


def test_a_pool_cancelled_while_its_worker_starts_leaves_no_worker(tmp_path: Path, monkeypatch) -> None:
    """A Ctrl-C (here: a cancel scope) while the worker imports must not leave it behind."""
    marker = str(tmp_path)
    monkeypatch.setenv("COURSE_MARK", marker)

    async def main():
        with trio.move_on_after(0.05):
            async with RunPool(["hypothesis"]):
                await trio.sleep_forever()

    trio.run(main)
    assert wait_until_gone(marker) == []


def test_a_malformed_request_does_not_stop_the_worker() -> None:
    """The worker serves every command's runs: one bad line must not take it down."""
    spawned = prestart.spawn_nowait(())
    try:
        assert spawned.process.stdout is not None and spawned.process.stdout.readline() == b"ready\n"
        for garbage in (b"not json\n", b"[1, 2]\n", b'{"preload": "wave"}\n', b'{"cwd": "/", "args": []}\n'):
            with socket.socket(socket.AF_UNIX) as bad:
                bad.connect(str(spawned.socket_path))
                bad.sendall(garbage)
                bad.settimeout(10)
                assert bad.recv(100) == b""  # closed without an answer
        with socket.socket(socket.AF_UNIX) as good:
            good.connect(str(spawned.socket_path))
            good.sendall(json.dumps({"preload": ["wave"]}).encode() + b"\n")
            good.settimeout(20)
            assert json.loads(good.recv(100)) == {"ready": True}
        assert spawned.process.poll() is None
    finally:
        spawned.kill()
