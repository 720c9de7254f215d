"""Running a command under a time limit, and leaving nothing of it running.

The agent and a check's command may start children (a shell starts a
program, `bash` starts a server). A command ends when its own process
exits, or is killed at the time limit; either way, everything it started
and left running is killed then. Three things make that possible:

- the command leads a process group of its own (start_new_session), so
  one signal to the group reaches everything that stayed in it;
- a process that left the group (setsid, a daemon) is still found below
  this one in /proc while the processes between them live;
- once they are gone, Linux hands such an orphan to the nearest ancestor
  that asked to be a child subreaper, else to init, out of reach. The
  harness asks (`adopt_orphans`), so every orphan of a task is its child.

The output goes to a temporary file, not a pipe: a process that escaped
with the pipe's end would keep the pipe open after the command exited,
and whoever reads the pipe to its end would wait as long as that process
lives.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Mapping, Sequence

from attrs import frozen

PR_SET_CHILD_SUBREAPER = 36  # prctl's option number (linux/prctl.h)
SWEEP_ROUNDS = 200  # a process may fork while a round runs: look again, at most this often
SWEEP_PAUSE = 0.01  # seconds for the killed to die before the next look


@frozen
class Finished:
    """How a command ended: its exit status (None: killed at the time limit), its output, its group."""

    status: int | None
    output: str
    group: int


@frozen
class Below:
    """A process below this one, as /proc shows it: its id, its parent's, its group's, alive or a zombie."""

    pid: int
    parent: int
    group: int
    alive: bool


def run_limited(
    argv: Sequence[str], cwd: Path, time_limit: float, env: Mapping[str, str] | None = None
) -> Finished:
    """Run `argv` in `cwd` with no stdin; when it exits, or at `time_limit` seconds, end all it started.

    Whatever ends the wait (the exit, the limit, an exception such as a
    signal's), every process below this one is killed before this returns.
    """
    with tempfile.TemporaryFile() as output:
        process = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
            start_new_session=True,  # the group's id is the child's pid
        )
        try:
            status: int | None = process.wait(timeout=time_limit)
        except subprocess.TimeoutExpired:
            status = None
        finally:
            end_descendants(spare=process.pid)  # while the tree still links them, and the orphans adopted
            kill_group(process.pid)  # any left in its group that are no longer below this process
            process.wait()
        output.seek(0)
        text = output.read().decode("utf-8", errors="replace")
    return Finished(status, text, process.pid)


def kill_group(group: int) -> bool:
    """Kill every process left in `group`; False when none was left."""
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def adopt_orphans() -> bool:
    """Ask Linux to make this process a child subreaper; False where it cannot (then orphans go to init).

    An orphan (its parent exited: a daemon, a setsid child of a shell that
    ended) is handed to the nearest ancestor that asked, so end_descendants
    finds it. A process asks for itself once; its children do not inherit it.
    """
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):  # no prctl: not Linux
        return False


def end_descendants(spare: int | None = None) -> int:
    """Kill every process below this one, a process group at a time; reap the orphans; return how many live on.

    Killing a group is one step that no member can outrun by forking. A
    process in this process's own group is killed alone, never the group.
    `spare`, a child whose exit status subprocess still has to collect, is
    killed but not reaped here.
    """
    own_group = os.getpgid(0)
    below = descendants(os.getpid())
    for _ in range(SWEEP_ROUNDS):
        alive = [process for process in below if process.alive]
        if not alive:
            break
        for group in {process.group for process in alive} - {own_group}:
            send(os.killpg, group)
        for process in alive:
            if process.group == own_group:
                send(os.kill, process.pid)
        time.sleep(SWEEP_PAUSE)
        below = descendants(os.getpid())
    reap_orphans(below, spare)
    return sum(process.alive for process in below)


def descendants(root: int) -> list[Below]:
    """Every process below `root`, from /proc (none where there is no /proc)."""
    children: dict[int, list[Below]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in filter(str.isdigit, names):
        try:
            stat = Path("/proc", name, "stat").read_bytes()
        except OSError:  # it ended while we looked
            continue
        state, parent, group = stat[stat.rfind(b")") + 2 :].split()[:3]  # after the command's name
        children.setdefault(int(parent), []).append(Below(int(name), int(parent), int(group), state not in b"ZX"))
    found: list[Below] = []
    todo = [root]
    while todo:
        for process in children.get(todo.pop(), []):
            found.append(process)
            todo.append(process.pid)
    return found


def reap_orphans(below: list[Below], spare: int | None) -> None:
    """Collect the exit status of every child of this process that has ended, but `spare`'s."""
    for process in below:
        if process.parent == os.getpid() and not process.alive and process.pid != spare:
            try:
                os.waitpid(process.pid, os.WNOHANG)
            except ChildProcessError:
                pass


def send(kill: Callable[[int, int], None], target: int) -> None:
    """SIGKILL through `kill` (os.kill or os.killpg); one that is gone, or not ours to kill, is skipped."""
    try:
        kill(target, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
