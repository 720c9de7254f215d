"""Learner commands as processes: run under a time limit, and nothing of them left running.

Every command a case runs carries a mark in its environment
(`COURSE_CAPSTONE_RUN=<random>`), which every process it starts inherits
unless it clears its environment. Once the command has exited, /proc is
searched for processes with that mark (or another word the case names,
such as an MCP server's argument): one that is still there after a short
grace was left running by the agent. The capstone counts it and kills it,
so a run never leaves anything behind either.

Output goes to files, not pipes: a process the agent left running would
hold a pipe open, and a reader waiting for its end would wait with it.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Awaitable, Callable, Mapping, Sequence

import trio
from attrs import frozen

MARK_VARIABLE = "COURSE_CAPSTONE_RUN"
PROC = Path("/proc")
GRACE = 2.0  # seconds a process being killed by the agent may take to be gone
POLL = 0.05


@frozen
class Finished:
    """How a learner command ended: its exit status (None: killed at its time limit), its output,
    and how many of its processes were still running after it exited."""

    status: int | None
    stdout: str
    stderr: str
    leftovers: int

    @property
    def timed_out(self) -> bool:
        return self.status is None


During = Callable[[trio.Process], Awaitable[None]]


def can_sweep() -> bool:
    """Whether this system shows other processes' environments (Linux's /proc)."""
    return (PROC / str(os.getpid()) / "environ").is_file()


def marked(words: Sequence[str]) -> list[int]:
    """The live processes (not zombies) whose environment or command line holds one of `words`."""
    needles = [word.encode() for word in words]
    found = []
    for entry in PROC.iterdir() if can_sweep() else ():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            state = (entry / "stat").read_bytes().rpartition(b")")[2].split()[0]
            text = (entry / "environ").read_bytes() + b"\0" + (entry / "cmdline").read_bytes()
        except (OSError, IndexError):
            continue  # gone meanwhile, or not ours to read
        if state != b"Z" and any(needle in text for needle in needles):
            found.append(int(entry.name))
    return found


async def sweep(words: Sequence[str], grace: float = GRACE) -> int:
    """How many marked processes outlive a grace; those are killed before this returns."""
    with trio.move_on_after(grace):
        while marked(words):
            await trio.sleep(POLL)  # polling /proc: no event says "a stranger's process is gone"
    left = marked(words)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return len(left)


async def run_command(
    argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], output: Path, time_limit: float,
    stdin: bytes | None = None, during: During | None = None, marks: Sequence[str] = (),
) -> Finished:
    """Run `argv` in a session of its own, feed it `stdin`, wait (at most `time_limit`), sweep its leftovers.

    `during`, when given, runs beside the command with its Process (to
    signal it, say) and is cancelled once the command has exited.
    """
    out_file, err_file = output.with_suffix(".out"), output.with_suffix(".err")
    with open(out_file, "wb") as out, open(err_file, "wb") as err:
        process = await trio.lowlevel.open_process(
            list(argv), cwd=cwd, env=dict(env), stdout=out, stderr=err, start_new_session=True,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        )
    try:
        async with trio.open_nursery() as nursery:
            if stdin is not None:
                nursery.start_soon(feed, process, stdin)
            if during is not None:
                nursery.start_soon(during, process)
            with trio.move_on_after(time_limit):
                await process.wait()
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                kill_group(process)
                await process.wait()
                status = None
            else:
                status = process.returncode
            leftovers = await sweep([f"{MARK_VARIABLE}={env[MARK_VARIABLE]}", *marks])
    return Finished(status, read(out_file), read(err_file), leftovers)


async def feed(process: trio.Process, data: bytes) -> None:
    """Write `data` to the command's stdin and close it; a command that stopped reading is no error."""
    assert process.stdin is not None
    try:
        await process.stdin.send_all(data)
        await process.stdin.aclose()
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


def kill_group(process: trio.Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        process.kill()


def read(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")
