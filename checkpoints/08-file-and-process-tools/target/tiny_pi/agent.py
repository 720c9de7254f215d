"""Ask a question about a directory; the agent reads files to answer it.

    python -m tiny_pi.agent --base-url http://localhost:11434/v1 --model llama3.2 \\
        --root . "What is this project called?"

The reply streams to stdout with one line per tool call and per result; a
summary (how the run ended, turns, tokens) goes to stderr. The API key, if
the server wants one, comes from TINY_PI_API_KEY, never from the command
line (which other users of the machine can see). Exit status: 0 when the
model finished, 1 on an error or the turn limit, 2 for bad usage, 130 on
Ctrl-C, which aborts the running turn and keeps what it had produced;
`kill` (SIGTERM) and a closed terminal (SIGHUP) abort it the same way and
exit 143 and 129: 128 plus the signal's number, as a shell reports them.
"""

from __future__ import annotations

import argparse
import json
import os
import signal as signals
import sys
import unicodedata
from pathlib import Path
from typing import TextIO

import trio

from tiny_pi.abort import AbortSignal
from tiny_pi.agent_events import AgentEvent, AgentOutcome
from tiny_pi.agent_loop import DEFAULT_MAX_TURNS, ToolUsingModel, run_agent
from tiny_pi.bash_tool import DEFAULT_TIMEOUT
from tiny_pi.messages import AgentContext, AssistantMessage, ToolCall, ToolResultMessage, text_of, user_message
from tiny_pi.providers.openai_compatible import OpenAICompatibleModel
from tiny_pi.tools import ToolRegistry
from tiny_pi.toolset import DEFAULT_TOOLS, chosen_tools, tool_names

API_KEY_VARIABLE = "TINY_PI_API_KEY"
LINE_WIDTH = 100
EXIT_CODES = {"stop": 0, "aborted": 130}  # every other end is a failure: 1
STOP_SIGNALS = (signals.SIGINT, signals.SIGTERM, signals.SIGHUP)  # Ctrl-C, `kill`, a closed terminal


class TerminalPrinter:
    """Shows a run as it happens: reply text as it streams, one line per tool call and result."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.mid_line = False

    def __call__(self, event: AgentEvent) -> None:
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
    signal: AbortSignal, received: list[int], scope: trio.CancelScope,
    *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The first stop signal aborts the run through `signal`; a second one cancels `scope` at once.

    Each signal's number is added to `received`: the exit status is 128 plus the first.
    """
    with trio.open_signal_receiver(*STOP_SIGNALS) as arrivals:
        task_status.started()
        async for number in arrivals:
            received.append(number)
            if signal.aborted:
                scope.cancel()  # a running bash still has its group ended: that cleanup is shielded
            signal.abort()


async def ask(
    model: ToolUsingModel, registry: ToolRegistry, prompt: str, max_turns: int, out: TextIO,
    received: list[int],
) -> AgentOutcome | None:
    """One question, answered by as many turns as the model needs; None if a second signal cut it short."""
    context = AgentContext(messages=[user_message(prompt)])
    signal = AbortSignal()
    outcome = None
    async with trio.open_nursery() as nursery:
        await nursery.start(abort_on_interrupt, signal, received, nursery.cancel_scope)
        outcome = await run_agent(
            model, context, registry, signal=signal, max_turns=max_turns, on_event=TerminalPrinter(out)
        )
        nursery.cancel_scope.cancel()  # the run is over: stop listening for signals
    return outcome


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line; argparse exits with status 2 and a usage line when it is wrong."""
    parser = argparse.ArgumentParser(
        prog="python -m tiny_pi.agent",
        description="Answer a question about a directory with the tools you allow.",
        epilog=f"The API key, if any, is read from ${API_KEY_VARIABLE}.",
    )
    parser.add_argument("--base-url", required=True, help="e.g. http://localhost:11434/v1")
    parser.add_argument("--model", required=True, help="the model name the server knows")
    parser.add_argument("--root", type=Path, default=Path("."), help="the directory the tools work in")
    parser.add_argument("--max-turns", type=int, default=DEFAULT_MAX_TURNS, help="model calls per run")
    parser.add_argument(
        "--tools", metavar="NAMES", default=DEFAULT_TOOLS,
        help="some of read,ls,write,edit,bash; default read,ls",
    )
    parser.add_argument(
        "--bash-timeout", metavar="S", type=float, default=DEFAULT_TIMEOUT,
        help="seconds per bash command; default 30",
    )
    parser.add_argument("prompt")
    args = parser.parse_args(argv)
    if args.max_turns < 1:
        parser.error(f"--max-turns must be at least 1, got {args.max_turns}")
    if not args.root.is_dir():
        parser.error(f"--root {args.root} is not a directory")
    if args.bash_timeout <= 0:
        parser.error(f"--bash-timeout must be above 0, got {args.bash_timeout:g}")
    try:
        args.tools = tool_names(args.tools)
    except ValueError as error:
        parser.error(f"--tools: {error}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run one question from the command line; the exit status says how it ended."""
    args = parse_args(argv)
    model = OpenAICompatibleModel(
        base_url=args.base_url, model=args.model, api_key=os.environ.get(API_KEY_VARIABLE)
    )
    registry = ToolRegistry(chosen_tools(args.root, args.tools, args.bash_timeout))
    received: list[int] = []  # the stop signals that arrived, in order
    try:
        outcome = trio.run(ask, model, registry, args.prompt, args.max_turns, sys.stdout, received)
    except KeyboardInterrupt:  # a Ctrl-C before the run could listen
        outcome, received = None, [signals.SIGINT]
    if outcome is None:
        print(f"\nstopped by {signals.Signals(received[0]).name}", file=sys.stderr)
    else:
        print(summary(outcome), file=sys.stderr)
    if received:
        return 128 + received[0]
    return EXIT_CODES.get(outcome.stop_reason, 1)


if __name__ == "__main__":
    sys.exit(main())
