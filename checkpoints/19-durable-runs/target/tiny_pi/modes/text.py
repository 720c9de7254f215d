"""Text mode: the reply and the tool lines stream to stdout; each prompt's summary goes to stderr.

It is how `python -m tiny_pi.agent` behaved from chapter 07 on: PROMPT, or
one prompt per line of stdin, each answered before the next is read; the
first prompt that does not end in `stop` ends the run with its exit status.
JSON mode reuses this loop with another printer.
"""

from __future__ import annotations

import json
import os
import signal as signals
import sys
import unicodedata
from typing import Callable, Iterator, TextIO

import trio

from tiny_pi.agent_events import AgentEvent, AgentOutcome
from tiny_pi.messages import AssistantMessage, ToolCall, ToolResultMessage, text_of
from tiny_pi.resources import TemplateError
from tiny_pi.runtime import Runtime

LINE_WIDTH = 100
EXIT_CODES = {"stop": 0, "aborted": 130}  # every other end is a failure: 1
STOP_SIGNALS = (signals.SIGINT, signals.SIGTERM, signals.SIGHUP)  # Ctrl-C, `kill`, a closed terminal


class TerminalPrinter:
    """Shows a run as it happens: reply text as it streams, one line per tool call and result.

    A reader that goes away (`| head -1`) is handled as in JSON mode: the first
    BrokenPipeError silences `out`, and that event and every later one call
    `on_closed` instead (text mode passes `runtime.abort`).
    """

    def __init__(self, out: TextIO, on_closed: Callable[[], None] = lambda: None) -> None:
        self.out = out
        self.on_closed = on_closed
        self.closed = False
        self.mid_line = False

    def __call__(self, event: AgentEvent) -> None:
        if not self.closed:
            try:
                self.show(event)
            except BrokenPipeError:
                self.closed = True
                silence(self.out)
        if self.closed:
            self.on_closed()

    def show(self, event: AgentEvent) -> None:
        """Print what `event` adds to the screen, if anything."""
        match event.type:
            case "text_delta":
                self.write(printable(event.delta, keep="\n\t"))
            case "tool_execution_start":
                self.line(describe_call(event.tool_call))
            case "tool_execution_end":
                self.line(describe_result(event.result))
            case "turn_end" | "agent_end":
                self.finish_line()

    def write(self, piece: str) -> None:
        """Show `piece` now: a pipe would otherwise hold it back until its buffer fills."""
        self.out.write(piece)
        self.out.flush()
        self.mid_line = not piece.endswith("\n")

    def line(self, line: str) -> None:
        """A line of its own, even when the reply's text stopped mid-line."""
        self.finish_line()
        self.write(line + "\n")

    def finish_line(self) -> None:
        """End the line in progress, if there is one."""
        if self.mid_line:
            self.write("\n")


def silence(out: TextIO) -> None:
    """Point `out`'s file descriptor at os.devnull: its reader is gone.

    Python flushes stdout once more at exit; that flush must not fail again.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, out.fileno())
    os.close(devnull)


def printable(piece: str, keep: str = "") -> str:
    """`piece` with its control characters escaped (`\\x1b`), except those in `keep`.

    The model, a tool or a file name wrote this text, not the agent: an escape
    sequence in it would retitle, clear or overwrite the user's terminal.
    """
    return "".join(
        char.encode("unicode_escape").decode("ascii")
        if unicodedata.category(char) == "Cc" and char not in keep
        else char
        for char in piece
    )


def short(line: str, width: int = LINE_WIDTH) -> str:
    """One line, at most `width` characters: whitespace runs become one space, controls are escaped."""
    flat = printable(" ".join(line.split()))
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def describe_call(call: ToolCall) -> str:
    """`[tool] read {"path": "README.md"}`: the call as the model wrote it."""
    arguments = call.raw_arguments if call.raw_arguments is not None else json.dumps(call.arguments)
    return short(f"[tool] {call.name} {arguments}")


def describe_result(result: ToolResultMessage) -> str:
    """`[ok] read: ...` or `[error] read: ...`: the start of what goes back to the model."""
    status = "error" if result.is_error else "ok"
    return short(f"[{status}] {result.tool_name}: {text_of(result)}")


def summary(outcome: AgentOutcome) -> str:
    """How the run ended and what it cost, over all its turns."""
    usage = outcome.usage
    line = f"[{outcome.stop_reason}] turns: {outcome.turns}, tokens: "
    if usage_reported(outcome):
        line += (
            f"input {usage.input}, output {usage.output}, "
            f"cache read {usage.cache_read or 0}, cache write {usage.cache_write or 0}"
        )
    else:
        line += "not reported by the server"
    if outcome.error_message:
        line += f"\nerror: {printable(outcome.error_message)}"
    return line


def usage_reported(outcome: AgentOutcome) -> bool:
    """Whether a server counted any turn: its ledger (chapter 05) always sets cache_read, 0 included."""
    return any(
        isinstance(message, AssistantMessage) and message.usage.cache_read is not None
        for message in outcome.messages
    )


async def abort_on_interrupt(
    runtime: Runtime, received: list[int], scope: trio.CancelScope,
    *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The first stop signal aborts the running prompt; a second, or one between prompts, cancels `scope`.

    Each signal's number is added to `received`: the exit status is 128 plus the first.
    """
    with trio.open_signal_receiver(*STOP_SIGNALS) as arrivals:
        task_status.started()
        async for number in arrivals:
            received.append(number)
            if runtime.agent.aborting or not runtime.busy:
                scope.cancel()  # a running bash still has its group ended: that cleanup is shielded
            runtime.abort()


def read_prompts(prompt: str | None, lines: TextIO) -> Iterator[str]:
    """The PROMPT alone; without one, the non-empty lines of `lines`, stripped, read as they arrive."""
    if prompt is not None:
        yield prompt
        return
    for line in lines:
        if line.strip():
            yield line.strip()


async def run_prompts(runtime: Runtime, prompts: Iterator[str], received: list[int], scope: trio.CancelScope) -> int:
    """Every prompt in order, each answered before the next is read; the first that does not stop ends it.

    The next prompt is read in a thread: stdin may be a pipe whose writer is slow. A prompt
    template that cannot be filled (chapter 12) ends the run with exit status 2. A stop
    signal is handled by abort_on_interrupt: `received` and `scope` are for it.
    """
    status = 0
    async with trio.open_nursery() as nursery:
        await nursery.start(abort_on_interrupt, runtime, received, scope)
        while status == 0:
            try:
                prompt = await trio.to_thread.run_sync(next, prompts, None, abandon_on_cancel=True)
            except TemplateError as error:  # nothing of this prompt was sent or saved
                print(error, file=sys.stderr)
                status = 2
                break
            if prompt is None:
                break
            runtime.prompt(prompt)
            await runtime.flush()
            status = prompt_status(runtime)
        nursery.cancel_scope.cancel()  # the prompts are over: stop listening for signals
    return status


def prompt_status(runtime: Runtime) -> int:
    """Show how the last prompt ended (on stderr) and turn it into an exit status."""
    outcome = runtime.last_outcome
    if outcome is not None:
        print(summary(outcome), file=sys.stderr)
    if runtime.failure is not None or outcome is None:  # the runtime said why on stderr
        return 1
    return EXIT_CODES.get(outcome.stop_reason, 1)


async def run_text(runtime: Runtime, prompts: Iterator[str], received: list[int], scope: trio.CancelScope) -> int:
    """Text mode: stream each reply to stdout; closing it aborts the run."""
    runtime.subscribe(TerminalPrinter(sys.stdout, runtime.abort))
    return await run_prompts(runtime, prompts, received, scope)
