"""Start run hosts (course/runhost.py), early or just in time, with the standard library only.

A command that runs tests spends its first half second importing click,
trio and the course, and a host spends as long importing pytest. Started
first (course/launch.py calls `prestart()` before anything heavy is
imported), the host imports on the other core while the command imports on
this one; the command's RunPool then adopts it with `take()`. A host started
later by the pool is the same program with the same environment: the two
differ only in when they paid their start-up.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence

from course.run_env import SettingError, run_environment

# os.path, not pathlib: this module is imported before the host starts, so every import here delays it.
HOST_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runhost.py")


class Spawned:
    """A host, ready or not yet, and the course's end of its socket.

    `process` is the host's keeper, which forks the host and sweeps after it
    (course/runhost.py); the host is the keeper's only child.
    """

    def __init__(self, process: subprocess.Popen[bytes], control: socket.socket,
                 env: Mapping[str, str], preload: tuple[str, ...]) -> None:
        self.process = process
        self.control = control
        self.env = dict(env)
        self.preload = preload

    def kill(self, patience: float = 5.0) -> None:
        """Close the socket (the host then sweeps its runs and exits); end it if it does not.

        `process` is the host's keeper (course/runhost.py): SIGTERM makes it
        kill a host that does not answer (stopped, or stuck) and sweep what
        the host's runs left behind. Only when the keeper does not exit
        either is the whole group killed outright.
        """
        self.control.close()
        for ending, wait in ((None, patience), (signal.SIGTERM, 5.0)):
            if ending is not None:
                try:
                    self.process.send_signal(ending)
                except ProcessLookupError:
                    pass
            try:
                self.process.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait()


def spawn(preload: Sequence[str] = (), env: Mapping[str, str] | None = None) -> Spawned:
    """Start a host that imports `preload` besides pytest; it says "ready" on the socket."""
    env = run_environment() if env is None else env
    ours, theirs = socket.socketpair()
    try:
        process = subprocess.Popen(
            [sys.executable, "-P", HOST_SCRIPT, str(theirs.fileno()), *preload],
            cwd=os.sep,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(theirs.fileno(),),
            start_new_session=True,  # Ctrl-C at the terminal reaches the course, which then ends the runs
        )
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    return Spawned(process, ours, env, tuple(preload))


_early: Spawned | None = None


def prestart() -> Spawned | None:
    """Start a host with the core libraries only, for the command's first RunPool to adopt.

    Returns the host waiting to be adopted (None where none could start:
    then the pool starts its own), so a caller can watch what becomes of it.
    """
    global _early
    if _early is not None or not hasattr(os, "fork") or os.environ.get("COURSE_WARM", "1") == "0":
        return _early
    try:
        _early = spawn()
    except (OSError, SettingError):
        return None  # the pool will start its own (and a setting it cannot use is said there, in one line)
    return _early


def waiting() -> bool:
    """Whether a prestarted host is still waiting for a pool to adopt it."""
    return _early is not None


def take(env: Mapping[str, str]) -> Spawned | None:
    """The prestarted host, once, if it has the environment a run needs now."""
    global _early
    spawned, _early = _early, None
    if spawned is not None and spawned.env != dict(env):
        spawned.kill()
        return None
    return spawned


def discard() -> None:
    """End a prestarted host that no pool adopted (the command stopped before running tests).

    A command's process does this as it exits; a caller that runs commands
    in a longer-lived process (the course's own test suite) calls it after each.
    """
    global _early
    spawned, _early = _early, None
    if spawned is not None:
        spawned.kill()


atexit.register(discard)
