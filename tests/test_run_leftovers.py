"""Nothing a run leaves behind grows with the number of runs.

A learner runs `course test` hundreds of times: whatever each run leaves in
the course's cache (bytecode, parsed chapter.toml, stored verdicts) or in
the practice dir (`.course/`) must be the same after the tenth run as after
the second.

Before: every run left one empty folder in the bytecode cache (the mirror of
its throw-away copy's parent, a new name each time): 200 runs, 200 folders.
"""

from __future__ import annotations

import os
from pathlib import Path

from conftest import mini
from course.run_env import cache_home
from loop_helpers import RIGHT, WRONG, practice


def tree(root: Path) -> set[str]:
    return {os.path.relpath(os.path.join(top, name), root)
            for top, folders, files in os.walk(root) for name in folders + files}


def test_runs_of_every_kind_leave_nothing_that_grows(mini_course: Path, tmp_path: Path) -> None:
    directory = practice(mini_course, tmp_path / "p")
    adder = directory / "tiny_pi/adder.py"
    adder.write_text(RIGHT)
    assert mini(mini_course, "test", "1", str(directory)).returncode == 0  # compiles the libraries once
    cache = Path(cache_home())
    before = tree(cache)
    dir_before = {path for path in tree(directory) if not path.startswith(".git" + os.sep)}
    for code, args in ((WRONG, ()), (WRONG, ("--lab", "1.1")), (RIGHT, ())):
        adder.write_text(code)
        mini(mini_course, "test", "1", str(directory), *args)
    grown = sorted(tree(cache) - before)
    assert grown == [], f"runs left behind in the cache: {grown[:5]}"
    dir_after = {path for path in tree(directory) if not path.startswith(".git" + os.sep)}
    assert dir_after == dir_before, sorted(dir_after ^ dir_before)
