"""Ask a question about a directory; the agent reads files to answer it.

    python -m tiny_pi.agent --base-url http://localhost:11434/v1 --model llama3.2 \\
        --root . "What is this project called?"

The reply streams to stdout with one line per tool call and per result; a
summary (how the run ended, turns, tokens) goes to stderr. The API key, if
the server wants one, comes from TINY_PI_API_KEY, never from the command
line (which other users of the machine can see). Exit status: 0 when the
model finished, 1 on an error or the turn limit, 2 for bad usage, 130 on
Ctrl-C, which aborts the running turn and keeps what it had produced.

Starter file of chapter 07: lab 7.5 writes it.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Run one question from the command line; the exit status says how it ended."""
    raise NotImplementedError("lab 7.5: the command line")


if __name__ == "__main__":
    sys.exit(main())
