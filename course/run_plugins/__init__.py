"""pytest plugins the course loads into a run, by top-level name.

This directory itself is put on a run's module path (at the end of
`sys.path`, by the warm worker or by a cold run's start line), so
`-p _course_lab_sorter` works without the `course` package being importable
there: a learner's tests must not be able to import the tool that judges
them, and a course run straight from a checkout, with nothing installed,
must still find its plugins. The `_course_` prefix keeps the names apart from
a learner's own modules; the warm worker preloads every module with it.
"""

from pathlib import Path

DIRECTORY = Path(__file__).parent
LAB_SORTER = "_course_lab_sorter"
STATEMENT_CACHE = "_course_statement_cache"
