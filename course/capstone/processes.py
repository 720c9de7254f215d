"""Learner commands as processes: run under a time limit, and nothing of them left running.

Every command a case runs carries a mark in its environment, which every
process it starts inherits unless it clears its environment: a variable
whose name is drawn for the run and looks like any program's setting
(`VORNEL_PROFILE`), and whose value, drawn for the command, looks like an
id. Nothing in it names the course, so an agent cannot tell from it that it
is examined. Once the command has exited, /proc is searched for processes
with that mark (or another word the case names, such as an MCP server's
argument): one that is still there after a short grace was left running
by the agent. The capstone counts it and kills it, and at the end of the
run (or when it is interrupted) kills whatever still carries the run's
variable, so a run never leaves anything behind either.

Output goes to files, not pipes: a process the agent left running would
hold a pipe open, and a reader waiting for its end would wait with it.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
from pathlib import Path
from typing import Awaitable, Callable, Mapping, Sequence

import trio
from attrs import frozen

PROC = Path("/proc")
GRACE = 2.0  # seconds a process being killed by the agent may take to be gone
POLL = 0.05


SETTING_ENDS = ("PROFILE", "MODE", "LEVEL", "HOME", "OPTS", "CONFIG", "THEME", "CACHE")
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@frozen
class Marker:
    """The run's mark: a variable name drawn for the run; each command gets a value of its own."""

    name: str

    @classmethod
    def drawn(cls) -> Marker:
        word = "".join(secrets.choice(LETTERS) for _ in range(4 + secrets.randbelow(4)))
        return cls(f"{word}_{secrets.choice(SETTING_ENDS)}")

    def value(self) -> str:
        """A value for one command: it looks like an id."""
        return secrets.token_hex(8)

    def needle(self, value: str) -> str:
        """What one command's processes carry in their environment."""
        return f"{self.name}={value}"

    @property
    def any_value(self) -> str:
        """What every process of the run carries (at the start of a variable)."""
        return f"\0{self.name}="


@frozen
class Finished:
    """How a learner command ended: which command (its module, or a script's label), its exit status
    (None: killed at its time limit), its output, and how many of its processes were still running
    after it exited."""

    command: str
    status: int | None
    stdout: str
    stderr: str
    leftovers: int

    @property
    def timed_out(self) -> bool:
        return self.status is None

    def exception(self) -> str | None:
        """The class of the exception a Python traceback on stderr ended with (never its message), or None."""
        return raised(self.stderr)


# A traceback's header, after its gutter (`  + `, `    | ` inside an exception group's traceback).
TRACEBACK = re.compile(r"([ |+]*)(?:Exception Group )?Traceback \(most recent call last\):$")
# An exception's line: its class (maybe with its module) at the start, then `:` and its message, or nothing.
EXCEPTION_LINE = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]*\.)*([A-Za-z_][A-Za-z0-9_]*)(?::|$)")
GROUP_MEMBER = re.compile(r"([ |+]*)\| (\S.*)$")  # a line inside a group's box that is not indented


def raised(stderr: str) -> str | None:
    """The class of the exception a traceback on stderr ended with (`NotImplementedError`), or None.

    Its line is the first after the traceback's header that is not indented
    within the header's gutter (the frames are). Of several tracebacks (a
    chained exception) the last one at the outermost gutter ended the
    process; an exception group is named with the first exception in it
    (`ExceptionGroup: ValueError`). Never the message: it may hold a case.
    """
    lines = stderr.splitlines()
    found: list[tuple[int, int, str]] = []  # (the gutter's width, the exception line's index, the class)
    for index, line in enumerate(lines):
        header = TRACEBACK.fullmatch(line)
        if header is None:
            continue
        width = len(header.group(1))
        for number in range(index + 1, len(lines)):
            gutter, rest = lines[number][:width], lines[number][width:]
            if gutter.strip(" |+") or not rest:
                break
            if not rest[0].isspace():
                match = EXCEPTION_LINE.match(rest)
                if match is not None:
                    found.append((width, number, match.group(1)))
                break
    if not found:
        return None
    outer = min(width for width, _, _ in found)
    _, line_number, top = [entry for entry in found if entry[0] == outer][-1]
    own = GROUP_MEMBER.match(lines[line_number])
    if not top.endswith("Group") or own is None:
        return top
    for line in lines[line_number + 1:]:  # the group's first exception, with or without a traceback
        inside = GROUP_MEMBER.match(line)
        if inside is not None and len(inside.group(1)) > len(own.group(1)) and not TRACEBACK.fullmatch(line):
            match = EXCEPTION_LINE.match(inside.group(2))
            if match is not None and not match.group(1).endswith("Group"):  # the first that is not a group
                return f"{top}: {match.group(1)}"
    return top


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
            text = b"\0" + (entry / "environ").read_bytes() + b"\0" + (entry / "cmdline").read_bytes()
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
    return kill_marked(words)


def kill_marked(words: Sequence[str]) -> int:
    """Kill, at once, every process that carries one of `words`: the end of a run, or of an interrupted one."""
    left = marked(words)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return len(left)


async def run_command(
    command: str, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], output: Path, time_limit: float,
    marks: Sequence[str], stdin: bytes | None = None, during: During | None = None,
) -> Finished:
    """Run `argv` in a session of its own, feed it `stdin`, wait (at most `time_limit`), sweep its leftovers.

    `marks` are what its processes carry (its environment's marker first);
    `command` names it in the report. `during`, when given, runs beside the
    command with its Process (to signal it, say) and is cancelled once the
    command has exited.
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
            leftovers = await sweep(marks)
    return Finished(command, status, read(out_file), read(err_file), leftovers)


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
