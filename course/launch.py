"""The `course` entry point: start a run host first, then import the CLI.

Commands that run tests need a run host (course/runhost.py), which spends
about as long importing pytest as this process spends importing click,
trio and the course. Started here, before either, the two overlap on two
cores instead of following each other. Every other command starts nothing.
"""

from __future__ import annotations

import atexit
import gc
import sys

# The commands that run tests through a RunPool; tests/test_launch.py checks the names.
RUNS_TESTS = frozenset({"checkpoint", "verify", "test", "practice", "watch"})

# When the process exits, Python's shutdown would walk every object the imports
# made (about a tenth of a second of a green `course test`) only to find no
# garbage worth collecting: the operating system takes the memory back. Frozen
# objects are never walked again. Every file the course writes is closed where
# it is written, so nothing waits for a collection to be flushed. At exit only:
# the course's own test suite calls main() many times in one process.
atexit.register(gc.freeze)


def main() -> None:
    try:
        if runs_tests(sys.argv[1:]):
            from course import hosts

            hosts.prestart()
        from course.cli import main as cli_main
        from course.errors import endings_as_interrupts
    except ModuleNotFoundError as error:
        from course.requirements import end_without_library, missing_library

        if missing_library(error) is None:
            raise
        end_without_library(error)
    except BaseException as error:  # Ctrl-C while starting up: nothing was begun (a worker dies with us)
        from course.errors import caused_by_interrupt, end_interrupted

        if not caused_by_interrupt(error):
            raise
        end_interrupted()
    with endings_as_interrupts():  # SIGTERM and SIGHUP clean up as Ctrl-C does
        cli_main()


def runs_tests(args: list[str]) -> bool:
    """Whether ARGS name a command that runs tests: `course verify` and `course dev verify` alike.

    Asking for a command's help runs nothing, so it starts nothing either.
    """
    if args[:1] == ["dev"]:
        args = args[1:]
    return bool(args) and args[0] in RUNS_TESTS and "--help" not in args
