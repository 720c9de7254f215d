"""pytest plugins the course loads into a run, by top-level name.

This directory itself is put on a run's module path (PYTHONPATH for a cold
run, `sys.path` in the warm worker), so `-p lab_sorter` works without the
`course` package being importable there: a learner's tests must not be able
to import the tool that judges them, and a course run straight from a
checkout, with nothing installed, must still find its plugins.
"""

from pathlib import Path

DIRECTORY = Path(__file__).parent
