"""`bash`: run one shell command in the project root, and leave nothing of it running.

The command runs as `bash -c COMMAND` in a session of its own, so it and
every process it starts share one process group, which can be signalled as
a whole. Whatever way the command ends (it exits, its time is up, or the
run is aborted and trio cancels the tool), the group gets SIGTERM, then
SIGKILL after a short grace: a grandchild that ignores SIGTERM dies too.

A textual guardrail refuses, before anything runs, a command that names a
path outside the root. It catches mistakes, not intent: a shell can reach
any path in ways no text check sees (a variable, `cd` through a symlink,
a script). `bash` is never truly confined, which is why it is off by
default and a person turns it on.
"""

from __future__ import annotations

import codecs
import os
import shlex
import signal as signals
import subprocess
from pathlib import Path
from typing import Any

import trio

from tiny_pi.abort import AbortSignal
from tiny_pi.messages import TextContent, text
from tiny_pi.tools import Tool

DEFAULT_TIMEOUT = 30.0  # seconds, unless the call or --bash-timeout says otherwise
MAX_OUTPUT_CHARS = 30_000  # the last characters of the output, its cut note included
NOTE_CHARS = 100  # room kept for the cut note, which is always shorter
KILL_GRACE = 0.5  # seconds between SIGTERM and SIGKILL
POLL_INTERVAL = 0.02
HIDDEN_VARIABLES = ("TINY_PI_API_KEY",)  # the agent's key stays out of the model's commands
ALLOWED_OUTSIDE = ("/dev/null",)

BASH_PARAMETERS = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "a bash command; it runs in the project root"},
        "timeout": {"type": "number", "description": "seconds before it is killed"},
    },
    "required": ["command"],
    "additionalProperties": False,
}


class CommandFailed(Exception):
    """The command ran and exited with a status other than 0; the message holds its report."""


class OutputTail:
    """The last `limit` characters of a command's output, and how many there were in all.

    Only the tail is kept, so a command that prints gigabytes costs no more
    memory than one that prints a page.
    """

    def __init__(self, limit: int = MAX_OUTPUT_CHARS) -> None:
        self.limit = limit
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.kept = ""
        self.total = 0

    def add(self, data: bytes, final: bool = False) -> None:
        """Take the next bytes; a character split between two reads is decoded once whole."""
        piece = self.decoder.decode(data, final)
        self.total += len(piece)
        self.kept = (self.kept + piece)[-self.limit :]

    def text(self) -> str:
        """All the output, or its end after a first line that says how much is left out."""
        if self.total <= self.limit:
            return self.kept
        shown = self.limit - NOTE_CHARS
        note = f"[output cut: the first {self.total - shown} of {self.total} characters are not shown]\n"
        return note + self.kept[-shown:]


def refuse_outside_paths(command: str, root: Path) -> None:
    """Refuse a command, before it runs, when one of its words names a path outside `root`."""
    for word in command_words(command):
        for candidate in (word, word.partition("=")[2]):  # `--out=../x` names `../x` too
            if candidate and leads_outside(candidate, root):
                raise ValueError(f"refused without running: {candidate!r} leads outside the project root")


def command_words(command: str) -> list[str]:
    """The words of a command as the shell splits them, with `>` and `;` as words of their own."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote: bash will refuse it; check the plain words anyway
        return command.split()


def leads_outside(word: str, root: Path) -> bool:
    """Whether `word`, read as a path from `root`, ends up outside it (`..`, `/etc`, `~`)."""
    if word.startswith("~"):
        return True
    if word in ALLOWED_OUTSIDE:
        return False
    base = root.resolve()
    return not Path(os.path.normpath(base / word)).is_relative_to(base)


async def run_command(command: str, root: Path, timeout: float, signal: AbortSignal) -> str:
    """Run `command` with bash in `root`: its report when it exits 0; otherwise raise.

    Raises CommandFailed for another exit status and TimeoutError when its
    time is up; an abort arrives as trio's cancellation. In every case the
    whole process group is gone before this returns or raises.
    """
    refuse_outside_paths(command, root)
    if not timeout > 0:  # NaN too, which json.loads accepts
        raise ValueError(f"timeout must be above 0 seconds, got {timeout}")
    if signal.aborted:
        raise RuntimeError("the run was aborted; the command was not started")
    environment = {name: value for name, value in os.environ.items() if name not in HIDDEN_VARIABLES}
    process = await trio.lowlevel.open_process(
        ["bash", "-c", command],
        cwd=root,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # one stream, in the order the command wrote it
        start_new_session=True,  # a process group of its own, to signal as a whole
    )
    output = OutputTail()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(collect_output, process, output)
        try:
            with trio.move_on_after(timeout) as clock:
                await process.wait()
        finally:
            with trio.CancelScope(shield=True):  # an abort must not skip the cleanup
                await stop_group(process)
            nursery.cancel_scope.deadline = trio.current_time() + KILL_GRACE  # a process that left the group
    if clock.cancelled_caught:
        ending = f"timed out after {timeout:g} s; the command and everything it started were killed"
        raise TimeoutError(command_report(output.text(), ending))
    ending = f"exit status {process.returncode}"
    if process.returncode != 0:
        raise CommandFailed(command_report(output.text(), ending))
    return command_report(output.text(), ending)


async def collect_output(process: trio.Process, output: OutputTail) -> None:
    """Read the merged output until every process that holds the pipe has closed it."""
    assert process.stdout is not None
    async for data in process.stdout:
        output.add(data)
    output.add(b"", final=True)


async def stop_group(process: trio.Process) -> None:
    """SIGTERM to the command's process group, SIGKILL to whatever is left after the grace."""
    signal_group(process, signals.SIGTERM)
    with trio.move_on_after(KILL_GRACE):
        await process.wait()  # the shell first: until it is reaped, the group is not empty
        while signal_group(process, 0):  # signal 0 only asks whether anyone is left
            await trio.sleep(POLL_INTERVAL)
    signal_group(process, signals.SIGKILL)
    await process.wait()


def signal_group(process: trio.Process, number: int) -> bool:
    """Send a signal to every process of the command's group; False when none is left."""
    try:
        os.killpg(process.pid, number)  # the group's id is the id of the shell that leads it
    except ProcessLookupError:
        return False
    return True


def command_report(output: str, ending: str) -> str:
    """The output, then how the command ended on a line of its own: the model needs both."""
    if output and not output.endswith("\n"):
        output += "\n"
    return f"{output}[{ending}]"


def bash_tool(root: Path, timeout: float = DEFAULT_TIMEOUT) -> Tool:
    """`bash {"command": ..., "timeout": ...}`: one command, `timeout` seconds at most."""

    async def execute(arguments: dict[str, Any], *, signal: AbortSignal) -> list[TextContent]:
        seconds = arguments.get("timeout", timeout)
        return [text(await run_command(arguments["command"], root, seconds, signal))]

    description = (
        f"Run a bash command in the project root; stdout and stderr together, the last "
        f"{MAX_OUTPUT_CHARS} characters, and the exit status. Killed after {timeout:g} s "
        "unless timeout says otherwise. Use paths inside the project."
    )
    return Tool("bash", description, BASH_PARAMETERS, execute)
