"""Start the warm worker (course/warm.py) without waiting for it, and without trio.

A command that runs tests spends its first half second importing click,
trio and the course itself, and the worker then spends as long again
importing pytest. Started first, the worker imports on the other core
while the command imports on this one: course/launch.py calls
`prestart_nowait()` before anything heavy is imported, and the command's
first RunPool adopts that worker with `take()`.

Only the standard library is imported here, so starting costs a few
milliseconds. A worker nobody adopted is killed when the command exits.
If the command is killed outright, the kernel tells the worker, which
removes its socket's folder and exits; its runs follow (see warm.py).
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from course.isolation import isolated_env

WORKER_SCRIPT = Path(__file__).with_name("warm.py")


class Spawned:
    """A worker process that was started and may not be ready yet."""

    def __init__(self, process: subprocess.Popen[bytes], folder: Path, imports: tuple[str, ...]) -> None:
        self.process = process
        self.folder = folder
        self.socket_path = folder / "warm.sock"
        self.imports = imports  # what it was asked to import when it started

    def kill(self) -> None:
        """Kill the worker and everything of its process group; remove its socket's folder."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        if self.process.stdout is not None:
            self.process.stdout.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def spawn_nowait(imports: Sequence[str]) -> Spawned:
    """Start a worker that preloads `imports`; it prints "ready" on its stdout when it can serve."""
    folder = Path(tempfile.mkdtemp(prefix="course-warm-"))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(folder / "warm.sock"))
        listener.listen(64)
        process = subprocess.Popen(
            [sys.executable, "-P", str(WORKER_SCRIPT), str(listener.fileno()), str(os.getpid()), *imports],
            cwd=str(folder),
            env=isolated_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            pass_fds=(listener.fileno(),),
            start_new_session=True,
        )
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        listener.close()
    return Spawned(process, folder, tuple(imports))


_waiting: Spawned | None = None


def prestart_nowait() -> None:
    """Start a worker with the core libraries only, for the command's first RunPool to adopt."""
    global _waiting
    if _waiting is not None or not hasattr(os, "fork") or os.environ.get("COURSE_WARM", "1") == "0":
        return
    try:
        _waiting = spawn_nowait(())
    except OSError:
        return  # no Unix sockets here, say: the pool starts its own worker or runs cold
    atexit.register(_kill_unadopted)


def take() -> Spawned | None:
    """The prestarted worker, once: the caller owns it from now on."""
    global _waiting
    spawned, _waiting = _waiting, None
    return spawned


def _kill_unadopted() -> None:
    spawned = take()
    if spawned is not None:
        spawned.kill()
