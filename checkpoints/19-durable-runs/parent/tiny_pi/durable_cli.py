"""`python -m tiny_pi.agent ... --durable FILE`: the conversation as a durable run in a SQLite file.

Text mode only. A run starts by taking up what the file still holds to do
(a process killed mid-turn left it there), then answers PROMPT, or each line
of stdin, in order. Without a PROMPT and with stdin a terminal, it only
resumes:

    python -m tiny_pi.agent --base-url URL --model M --tools read,write --durable run.db "Write hi.txt"
    kill -9 <its pid>                    # in the middle of the write, say
    python -m tiny_pi.agent --base-url URL --model M --tools read,write --durable run.db
    python -m tiny_pi.durable_view run.db

`read` and `ls` only look, so they declare the replay policy `safe`: cut off,
they run again. Every other tool is `unsafe`: cut off, the model is told it
was interrupted and may have partially run. A FILE that cannot be a durable
store (a directory, not SQLite, another program's database) is one line on
stderr and exit status 2, before anything is sent. Ctrl-C, `kill` and a
closed terminal stop the run where it is, as a crash would: the next start
takes it up. Exit status: 0 when the model finished, 1 on an error reply or
the turn limit, 128 plus the signal's number when one stopped it.
"""

from __future__ import annotations

import argparse
import sys
from signal import SIGINT
from typing import Iterator

import trio

from tiny_pi.agent_loop import ToolUsingModel
from tiny_pi.durable_run import DurableRun, unfinished
from tiny_pi.durable_store import SqliteStore, StoreError
from tiny_pi.durable_tasks import SAFE
from tiny_pi.messages import AssistantMessage
from tiny_pi.modes.text import STOP_SIGNALS, TerminalPrinter, read_prompts
from tiny_pi.tools import ToolRegistry

LOOKING_TOOLS = {"read": SAFE, "ls": SAFE}  # a rerun of these changes nothing


def conflict(args: argparse.Namespace) -> str | None:
    """Why the other options rule out --durable, or None."""
    if args.session is not None:
        return "--durable and --session both keep the conversation: give one of them"
    if args.mode != "text":
        return f"--durable runs in text mode, not {args.mode}"
    if args.mcp_config is not None:
        return "--durable does not start MCP servers: leave out --mcp-config"
    return None


def run_durable(args: argparse.Namespace, model: ToolUsingModel, registry: ToolRegistry, system_prompt: str | None) -> int:
    """Open the store (exit 2 if it cannot be one), resume it, answer the prompts; the exit status."""
    try:
        store = SqliteStore.open(args.durable)
    except StoreError as error:
        print(f"python -m tiny_pi.agent: --durable {error}", file=sys.stderr)
        return 2
    received: list[int] = []
    prompts = read_prompts(args.prompt, sys.stdin) if args.prompt is not None or not sys.stdin.isatty() else iter(())
    try:
        status = trio.run(serve, store, model, registry, system_prompt, args.max_turns, prompts, received)
    except KeyboardInterrupt:  # a Ctrl-C before the run could listen: nothing was running yet
        received.append(SIGINT)
    finally:
        store.close()
    if received:
        print(f"\nstopped by signal {received[0]}; {store.path} keeps the run: start again to finish it", file=sys.stderr)
        return 128 + received[0]
    return status


async def serve(
    store: SqliteStore, model: ToolUsingModel, registry: ToolRegistry, system_prompt: str | None,
    max_turns: int, prompts: Iterator[str], received: list[int],
) -> int:
    """What the store still holds to do, then each prompt; the first that does not end in `stop` ends it."""
    printer = TerminalPrinter(sys.stdout)
    status = 0
    async with trio.open_nursery() as nursery:
        await nursery.start(stop_on_signal, received, nursery.cancel_scope)
        run = await DurableRun.open(store, model, registry, replay=LOOKING_TOOLS, system_prompt=system_prompt,
                                    max_turns=max_turns, on_event=printer)
        left = unfinished(run.tasks())
        if left:
            print(f"[resume] {len(left)} unfinished task(s) in {store.path}", file=sys.stderr)
            status = await answer(run, printer, store)
        while status == 0:
            prompt = await trio.to_thread.run_sync(next, prompts, None, abandon_on_cancel=True)
            if prompt is None:
                break
            await run.prompt(prompt)
            status = await answer(run, printer, store)
        nursery.cancel_scope.cancel()  # done: stop listening for signals
    return status


async def answer(run: DurableRun, printer: TerminalPrinter, store: SqliteStore) -> int:
    """Run every pending task; say how the conversation stands on stderr, as an exit status."""
    await run.run()
    printer.finish_line()
    last = run.messages()[-1]
    reason = last.stop_reason if isinstance(last, AssistantMessage) else "turn_limit"
    print(f"[{reason}] {len(run.entries())} entries, {store.seq} commits in {store.path}", file=sys.stderr)
    if isinstance(last, AssistantMessage) and last.error_message:
        print(f"error: {last.error_message}", file=sys.stderr)
    if reason == "turn_limit":
        print(f"error: turn limit reached: the model still wanted tools after {run.max_turns} turns", file=sys.stderr)
    return 0 if reason == "stop" else 1


async def stop_on_signal(
    received: list[int], scope: trio.CancelScope, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """The first stop signal cancels the run where it is: the store keeps it for the next start."""
    with trio.open_signal_receiver(*STOP_SIGNALS) as arrivals:
        task_status.started()
        async for number in arrivals:
            received.append(number)
            scope.cancel()
            return
