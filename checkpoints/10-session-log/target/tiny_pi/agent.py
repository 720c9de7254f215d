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

Without a PROMPT, and with stdin not a terminal, every non-empty line of
stdin is a prompt of one conversation (one Agent), run in order:

    printf 'What is this project called?\nWhat does it do?\n' | python -m tiny_pi.agent ...

A summary follows each prompt. The first prompt that does not end in `stop`
ends the session with that prompt's exit status; the lines after it are not
sent. At the end of the input the status is 0.

With --session FILE the conversation lives in FILE, a JSON Lines log
(tiny_pi.session_log): a run resumes from its last entry, or from entry ID
with --branch ID, and every message is on disk before the next model call
(a model change that cannot be written exits 74, EX_IOERR, sending nothing).
A session that is not whole is refused (exit 2) before anything is sent.
"""

from __future__ import annotations

import argparse
import json
import os
import signal as signals
import sys
import unicodedata
from pathlib import Path
from typing import Iterator, TextIO

import trio

from tiny_pi.agent_events import AgentEvent, AgentOutcome
from tiny_pi.agent_loop import DEFAULT_MAX_TURNS, ToolUsingModel
from tiny_pi.bash_tool import DEFAULT_TIMEOUT
from tiny_pi.messages import AssistantMessage, ToolCall, ToolResultMessage, text_of
from tiny_pi.providers.openai_compatible import OpenAICompatibleModel
from tiny_pi.session import OpenSession, SessionRecorder, open_session
from tiny_pi.session_log import SessionError
from tiny_pi.session_writer import SessionWriteError
from tiny_pi.stateful_agent import Agent
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
    agent: Agent, received: list[int], scope: trio.CancelScope,
    *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The first stop signal aborts the running prompt; a second, or one between prompts, cancels `scope`.

    Each signal's number is added to `received`: the exit status is 128 plus the first.
    """
    with trio.open_signal_receiver(*STOP_SIGNALS) as arrivals:
        task_status.started()
        async for number in arrivals:
            received.append(number)
            if agent.aborting or not agent.state.running:
                scope.cancel()  # a running bash still has its group ended: that cleanup is shielded
            agent.abort()


def read_prompts(prompt: str | None, lines: TextIO) -> Iterator[str]:
    """The PROMPT alone; without one, the non-empty lines of `lines`, stripped, read as they arrive."""
    if prompt is not None:
        yield prompt
        return
    for line in lines:
        if line.strip():
            yield line.strip()


async def converse(
    model: ToolUsingModel, registry: ToolRegistry, prompts: Iterator[str], max_turns: int, out: TextIO,
    received: list[int],
    session: OpenSession | None = None,
) -> int | None:
    """Every prompt in one conversation, in order; the first that does not stop ends it.

    The next prompt is read in a thread: stdin may be a pipe whose writer is slow.
    None: a stop signal cancelled the session before it was over.
    """
    status = 0
    async with trio.open_nursery() as nursery:
        resumed = session.messages if session is not None else ()
        agent = Agent(model, registry, nursery, max_turns=max_turns, messages=resumed)
        agent.subscribe(TerminalPrinter(out))
        if session is not None:  # saves the new messages before every model call
            agent.subscribe(SessionRecorder(session.writer, agent))
        await nursery.start(abort_on_interrupt, agent, received, nursery.cancel_scope)
        while status == 0:
            prompt = await trio.to_thread.run_sync(next, prompts, None, abandon_on_cancel=True)
            if prompt is None:
                break
            agent.prompt(prompt)
            await agent.wait_for_idle()
            outcome = agent.state.outcome
            print(summary(outcome), file=sys.stderr)
            status = EXIT_CODES.get(outcome.stop_reason, 1)
        nursery.cancel_scope.cancel()  # the session is over: stop listening for signals
        return status
    return None  # cancelled: the session was cut short


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
    parser.add_argument("prompt", nargs="?", help="the question; without it, one prompt per line of stdin")
    parser.add_argument("--session", type=Path, metavar="FILE", help="a JSON Lines log to resume and append to")
    parser.add_argument("--branch", metavar="ID", help="continue the session from entry ID")
    args = parser.parse_args(argv)
    if args.prompt is None and sys.stdin.isatty():
        parser.error("give a PROMPT, or pipe prompts into stdin, one a line")
    if args.branch is not None and args.session is None:
        parser.error("--branch needs --session")
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
    """Run the prompt, or every line of stdin; the exit status says how the session ended."""
    args = parse_args(argv)
    try:
        session = open_session(args.session, args.branch, args.model) if args.session else None
    except SessionWriteError as error:  # the model change did not reach the disk: send nothing
        print(f"{error}; nothing was sent", file=sys.stderr)
        return os.EX_IOERR
    except (SessionError, OSError) as error:  # refused before anything is sent or written
        print(error, file=sys.stderr)
        return 2
    model = OpenAICompatibleModel(
        base_url=args.base_url, model=args.model, api_key=os.environ.get(API_KEY_VARIABLE)
    )
    registry = ToolRegistry(chosen_tools(args.root, args.tools, args.bash_timeout))
    received: list[int] = []  # the stop signals that arrived, in order
    try:
        prompts = read_prompts(args.prompt, sys.stdin)
        status = trio.run(converse, model, registry, prompts, args.max_turns, sys.stdout, received, session)
    except KeyboardInterrupt:  # a Ctrl-C before the run could listen
        status, received = None, [signals.SIGINT]
    if status is None:
        print(f"\nstopped by {signals.Signals(received[0]).name}", file=sys.stderr)
    if received:
        return 128 + received[0]
    return status


if __name__ == "__main__":
    sys.exit(main())
