"""Stream one reply from any OpenAI-compatible endpoint, with the code you built.

    python -m tiny_pi.chat --base-url http://localhost:11434/v1 --model llama3.2 "Say hi"

The API key, if the server wants one, comes from the environment variable
TINY_PI_API_KEY, never from the command line (which other users can see).
Ctrl-C aborts the call instead of killing the program: the reply stops, the
text that had arrived stays on screen, and the summary says `[aborted]`.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import AsyncIterator, TextIO

import trio

from tiny_pi.abort import AbortSignal
from tiny_pi.messages import AgentContext, AssistantMessage, Model, user_message
from tiny_pi.providers import OpenAICompatibleModel

API_KEY_VARIABLE = "TINY_PI_API_KEY"


async def chat(
    model: Model,
    prompt: str,
    out: TextIO,
    system: str | None = None,
    abort: AbortSignal | None = None,
) -> AssistantMessage:
    """Send one prompt, print the text as it arrives, return the final message."""
    context = AgentContext(messages=[user_message(prompt)], system_prompt=system)
    stream = model.stream(context, signal=abort)
    async with stream:
        async for event in stream:
            if event.type == "text_delta":
                out.write(event.delta)
                out.flush()
    out.write("\n")
    return await stream.result()


async def chat_until_interrupted(
    model: Model, prompt: str, out: TextIO, system: str | None = None
) -> AssistantMessage:
    """`chat`, with Ctrl-C turned into an abort: the call ends in a fact, not a traceback."""
    abort = AbortSignal()
    with trio.open_signal_receiver(signal.SIGINT) as interrupts:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(abort_on_first, interrupts, abort)
            message = await chat(model, prompt, out, system, abort)
            nursery.cancel_scope.cancel()  # the call is over: stop listening
    return message


async def abort_on_first(interrupts: AsyncIterator[int], abort: AbortSignal) -> None:
    """Wait for the first Ctrl-C and flip the signal; the provider does the rest."""
    async for _ in interrupts:
        abort.abort()
        return


def summary(message: AssistantMessage) -> str:
    """One line about how the call ended and what it cost."""
    usage = message.usage
    line = (
        f"[{message.stop_reason}] tokens: input {usage.input}, output {usage.output}, "
        f"cache read {usage.cache_read or 0}, cache write {usage.cache_write or 0}"
    )
    if message.error_message:
        line += f"\nerror: {message.error_message}"
    return line


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line: where the server is, which model, and the prompt."""
    parser = argparse.ArgumentParser(
        prog="python -m tiny_pi.chat",
        description="Stream one reply from an OpenAI-compatible endpoint.",
        epilog=f"The API key, if any, is read from ${API_KEY_VARIABLE}.",
    )
    parser.add_argument("--base-url", required=True, help="e.g. http://localhost:11434/v1")
    parser.add_argument("--model", required=True, help="the model name the server knows")
    parser.add_argument("--system", default=None, help="an optional system prompt")
    parser.add_argument("prompt")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Exit status 0 when the reply completed, 1 when it ended in an error, 130 on Ctrl-C."""
    args = parse_args(argv)
    model = OpenAICompatibleModel(
        base_url=args.base_url, model=args.model, api_key=os.environ.get(API_KEY_VARIABLE)
    )
    try:
        message = trio.run(chat_until_interrupted, model, args.prompt, sys.stdout, args.system)
    except KeyboardInterrupt:  # a second Ctrl-C, after the call was over
        print("\ninterrupted", file=sys.stderr)
        return 130
    print(summary(message), file=sys.stderr)
    if message.stop_reason == "aborted":
        return 130  # the shell's code for "stopped by Ctrl-C"
    return 1 if message.stop_reason == "error" else 0


if __name__ == "__main__":
    sys.exit(main())
