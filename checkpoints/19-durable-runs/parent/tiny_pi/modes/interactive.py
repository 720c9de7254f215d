"""Interactive mode: a prompt loop on a terminal.

At the prompt (`> `), a line is a prompt for the agent, or a slash command:
/session, /tree, /compact, /quit; any other `/NAME key=value ...` is one of
chapter 12's prompt templates, filled in and sent as the prompt. While the
agent works, a line typed steers it: it reaches the model with the next
call. Ctrl-C aborts the running turn; at the prompt, Ctrl-C twice in a
row, or Ctrl-D, exits. SIGTERM (`kill`) and SIGHUP (the terminal was
closed) abort the running turn and exit, with 143 and 129.

Lines are read in a thread with `os.read` on the terminal: a line at a time
(the terminal is in line mode), and no Python buffer that a thread left
waiting at exit could hold locked.
"""

from __future__ import annotations

import os
import signal as signals
import sys
from pathlib import Path
from typing import Mapping

import trio

from tiny_pi.compaction import CompactionError
from tiny_pi.modes.text import STOP_SIGNALS, TerminalPrinter, printable, silence, summary
from tiny_pi.resources import Template, TemplateError, expand_prompt
from tiny_pi.runtime import Runtime, RuntimeRefused
from tiny_pi.session import tree_lines
from tiny_pi.session_log import SessionError, read_session

PROMPT = "> "
COMMANDS = "/session, /tree, /compact, /quit"
WELCOME = f"tiny_pi: type a prompt; commands: {COMMANDS}; Ctrl-C aborts a turn, Ctrl-D exits"
EXIT_HINT = "(Ctrl-C again exits; so does Ctrl-D)"
NO_SESSION = "no session: start with --session FILE to keep the conversation"


class Interactive:
    """The prompt loop around one Runtime; `run` returns the exit status."""

    def __init__(
        self, runtime: Runtime, session_path: Path | None, fd: int = 0, templates: Mapping[str, Template] | None = None,
        received: list[int] | None = None,
    ) -> None:
        self.runtime = runtime
        self.session_path = session_path
        self.templates = dict(templates or {})  # chapter 12's prompt templates, by name
        self.fd = fd  # the terminal's file descriptor, read a line at a time
        self.exit_armed = False  # a Ctrl-C at the prompt; the next one exits
        self.status: int | None = None
        self.received = received if received is not None else []  # a SIGTERM or SIGHUP that ended the session

    async def run(self) -> int:
        """Read and handle lines until /quit, Ctrl-D or a second Ctrl-C at the prompt."""
        self.runtime.subscribe(TerminalPrinter(sys.stdout))
        say(WELCOME)
        show_prompt()
        async with trio.open_nursery() as nursery:
            await nursery.start(self.watch_interrupts, nursery.cancel_scope)
            while self.status is None:
                line = await trio.to_thread.run_sync(read_line, self.fd, abandon_on_cancel=True)
                if not line:  # Ctrl-D: let the running prompt end, then leave
                    await self.runtime.flush()
                    self.status = 0
                else:
                    await self.handle(line.decode("utf-8", errors="replace").strip(), nursery)
            nursery.cancel_scope.cancel()
        return self.status

    async def handle(self, line: str, nursery: trio.Nursery) -> None:
        """A line: a steer while the agent works; at the prompt, a command or a new prompt."""
        self.exit_armed = False
        if self.runtime.busy:
            if line:
                self.runtime.steer(line)
                say(f"[steer] {printable(line)}")
        elif line.startswith("/") and line.split()[0][1:] not in self.templates:
            await self.command(line)
        elif line:
            try:
                self.runtime.prompt(expand_prompt(line, self.templates))
            except (RuntimeRefused, TemplateError) as error:
                say(f"error: {error}")
                show_prompt()
                return
            nursery.start_soon(self.answer)
        else:
            show_prompt()

    async def answer(self) -> None:
        """Wait for the prompt's answer, show its summary, and give the prompt back."""
        await self.runtime.flush()
        if self.runtime.last_outcome is not None:
            say(summary(self.runtime.last_outcome))
        show_prompt()

    async def command(self, line: str) -> None:
        """Run one slash command, then give the prompt back."""
        name = line.split()[0]
        if name == "/quit":
            self.status = 0
            return
        if name == "/session":
            self.show_session()
        elif name == "/tree":
            self.show_tree()
        elif name == "/compact":
            try:
                await self.runtime.compact()
            except (RuntimeRefused, CompactionError) as error:
                say(f"error: {error}")
        else:
            say(f"unknown command {name}; the commands are {COMMANDS}")
        show_prompt()

    def show_session(self) -> None:
        """`/session`: the file and how many entries it holds."""
        if self.session_path is None:
            say(NO_SESSION)
            return
        try:
            entries = len(read_session(self.session_path, skip_uncommitted=True).entries)
        except SessionError as error:
            say(f"error: {error}")
            return
        say(f"session: {self.session_path} ({entries} entries)")

    def show_tree(self) -> None:
        """`/tree`: the session's tree, as `python -m tiny_pi.session FILE` prints it."""
        if self.session_path is None:
            say(NO_SESSION)
            return
        try:
            lines = tree_lines(read_session(self.session_path, skip_uncommitted=True))
        except SessionError as error:
            lines = [f"error: {error}"]
        for line in lines:
            say(line)

    async def watch_interrupts(
        self, scope: trio.CancelScope, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Ctrl-C aborts a running prompt; at the prompt, the first one warns and the second exits.

        SIGTERM and SIGHUP abort a running prompt and exit at once: 128 plus the signal's number.
        """
        with trio.open_signal_receiver(*STOP_SIGNALS) as arrivals:
            task_status.started()
            async for number in arrivals:
                if number != signals.SIGINT:  # `kill`, or a closed terminal
                    if number == signals.SIGHUP:  # nobody is left to read: a write would fail
                        silence(sys.stdout)
                        silence(sys.stderr)
                    self.received.append(number)
                    self.runtime.abort()  # the runtime's dispose waits for the aborted prompt
                    self.status = 128 + number
                    scope.cancel()
                elif self.runtime.busy:
                    self.runtime.abort()
                elif self.exit_armed:
                    self.status = 130
                    scope.cancel()
                else:
                    self.exit_armed = True
                    say(EXIT_HINT)
                    show_prompt()


def read_line(fd: int) -> bytes:
    """The next line of the terminal `fd`; b"" at Ctrl-D, and once the terminal is gone (EIO after a hang-up)."""
    try:
        return os.read(fd, 65536)
    except OSError:  # its SIGHUP comes to watch_interrupts
        return b""


def say(line: str) -> None:
    """A line for the person at the terminal: on stderr, like each prompt's summary, never mixed into the reply."""
    print(line, file=sys.stderr, flush=True)


def show_prompt() -> None:
    """The prompt, without a newline: the typed line follows it."""
    sys.stdout.write(PROMPT)
    sys.stdout.flush()


async def run_interactive(
    runtime: Runtime, session_path: Path | None, templates: Mapping[str, Template], received: list[int]
) -> int:
    """Interactive mode, on the terminal of stdin and stdout; a SIGTERM or SIGHUP that ends it goes in `received`."""
    return await Interactive(runtime, session_path, templates=templates, received=received).run()
