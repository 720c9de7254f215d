"""The endings the CLI reports in one line instead of a traceback.

`UsageError` is the user's input (exit 2, with the valid choices);
`ChapterError` is a damaged course file (exit 2, naming the file and key);
a Ctrl-C, however Python wrapped it, is INTERRUPTED (exit 130).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from types import FrameType
from typing import Iterator, NoReturn

# What a Ctrl-C prints, wherever it lands (exit status 130).
INTERRUPTED = "Interrupted; nothing was left half-made."


def end_interrupted() -> NoReturn:
    """Print the interrupted line and exit 130: for a Ctrl-C before the CLI has taken over."""
    print(INTERRUPTED, file=sys.stderr)
    sys.exit(130)


# Signals that end a command from outside: `kill` (SIGTERM) and a closed terminal (SIGHUP).
_ENDINGS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


@contextlib.contextmanager
def endings_as_interrupts() -> Iterator[None]:
    """SIGTERM and SIGHUP end the command as Ctrl-C does, and then by their own signal.

    Killed where it stood, a command leaves behind what only its `finally`
    blocks remove (the throw-away copy of the learner's code a verdict runs
    in) and skips the orderly end of its runs. So the signal is handed to the
    SIGINT handler of the moment (trio's while trio runs, which waits for a
    safe point), every clean-up runs, and once it has, the command dies by the
    signal that ended it: the status a shell shows stays 143 or 129. A signal
    ignored when the command started (nohup) stays ignored.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived = _HANDED_ON
    arrived.clear()

    def interrupt(number: int, frame: FrameType | None) -> None:
        arrived.append(number)
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt

    replaced = {number: signal.signal(number, interrupt) for number in _ENDINGS
                if signal.getsignal(number) == signal.SIG_DFL}
    try:
        yield
    finally:
        for number, handler in replaced.items():
            signal.signal(number, handler)
        if arrived:
            sys.stdout.flush()
            signal.raise_signal(arrived[0])


# The endings endings_as_interrupts handed on as Ctrl-C, in the order they came.
_HANDED_ON: list[int] = []


def end_by_signal(number: int) -> NoReturn:
    """End the command as Ctrl-C does, and then by signal `number` (a SIGTERM trio heard for us).

    For code that receives SIGTERM or SIGHUP itself (trio's signal
    receiver): the interrupt unwinds every clean-up, and
    endings_as_interrupts then ends the process by `number`.
    """
    _HANDED_ON.append(number)
    raise KeyboardInterrupt


def handed_on_as_interrupt() -> int | None:
    """The SIGTERM or SIGHUP that reached the SIGINT handler in Ctrl-C's place, if one did.

    A handler that is told SIGINT (trio's signal receiver in `course watch`)
    asks here which signal it really was, to name it.
    """
    return _HANDED_ON[-1] if _HANDED_ON else None


def caused_by_interrupt(error: BaseException) -> bool:
    """Whether a Ctrl-C lies at the root of ERROR.

    Python does not always let a KeyboardInterrupt through unchanged: one that
    lands while a class body runs `__set_name__` comes out as a RuntimeError
    caused by it, and trio gathers it into an exception group. Each of these is
    still the learner pressing Ctrl-C, and gets the same one line.
    """
    seen: set[int] = set()
    pending = [error]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, KeyboardInterrupt):
            return True
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return False


class CourseError(Exception):
    """A problem the CLI explains in one paragraph and exits with status 2."""

    exit_code = 2


class UsageError(CourseError):
    """Bad input from the command line: an unknown chapter, lab or directory."""


class ChapterError(CourseError):
    """A chapter's files disagree with chapter.toml or with each other."""
