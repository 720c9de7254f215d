"""The two kinds of trouble the CLI reports without a traceback.

`UsageError` is the user's input (exit 2, with the valid choices);
`ChapterError` is a damaged course file (exit 2, naming the file and key).
"""

from __future__ import annotations

# What a Ctrl-C prints, wherever it lands (exit status 130).
INTERRUPTED = "Interrupted; nothing was left half-made."


class CourseError(Exception):
    """A problem the CLI explains in one paragraph and exits with status 2."""

    exit_code = 2


class UsageError(CourseError):
    """Bad input from the command line: an unknown chapter, lab or directory."""


class ChapterError(CourseError):
    """A chapter's files disagree with chapter.toml or with each other."""
