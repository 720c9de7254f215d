"""The author's side of the course: `course dev ...` and the modules only authors need.

Nothing a learner's command runs imports from here at start-up; `course verify`
reaches the lesson checks (course.dev.lessons) only when it runs them. This
file stays free of imports beyond the standard library, because CI runs
`python -S -m tools.floors` before anything is installed.
"""

from __future__ import annotations

from pathlib import Path


def checkout_root(tool: str) -> Path:
    """The course an author tool may write in; never the chapters inside an installed package.

    A regular install keeps its chapters in site-packages, where an edit would
    be lost at the next upgrade and never reach the repository.
    """
    from course.catalog import find_root, is_packaged
    from course.errors import UsageError

    root = find_root()
    if is_packaged(root):
        raise UsageError(
            f"{tool} writes chapter files, and this course is an installed copy: "
            "run it inside a checkout of the course, or set COURSE_ROOT to one"
        )
    return root
