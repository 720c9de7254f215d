"""Bad input gets one line and exit status 2, never a traceback; every printed suggestion works.

Each test here answers a probe that once ended in a traceback, a silent
no-op or a suggestion that failed when pasted (issue 21, item 4).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import made_practice, mini, mini_process
from course.index import index_path


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", "3601", "soon"])
def test_a_timeout_that_is_no_number_of_seconds_is_one_line_and_exit_2(mini_course: Path, tmp_path: Path,
                                                                       value: str) -> None:
    """Before: `--timeout nan` passed click's range check (nan compares false with both ends)
    and ended in a traceback with exit status 1."""
    directory = made_practice(mini_course, "1", tmp_path / "p")
    result = mini_process(mini_course, "test", "1", str(directory), f"--timeout={value}")
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert "--timeout" in result.stderr and value in result.stderr


def test_a_timeout_of_seconds_is_taken(mini_course: Path, tmp_path: Path) -> None:
    directory = made_practice(mini_course, "1", tmp_path / "p")
    result = mini(mini_course, "test", "1", str(directory), "--timeout", "30.5")
    assert result.returncode == 1 and "Not yet" in result.stdout, result.stdout + result.stderr


def add_index_entry(course_root: Path, directory: str) -> None:
    """An entry in the index of practice dirs that no `course practice` made (edited by hand, a bug)."""
    path = index_path()
    data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"dirs": []}
    data["dirs"].append({"dir": directory, "chapter": "01-adder", "course": str(course_root.resolve()),
                         "used": 9e99})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


@pytest.mark.parametrize("bad", ["/tmp/a\u0000b", "/tmp/\ud800", ""], ids=["nul", "surrogate", "empty"])
@pytest.mark.parametrize("command", [("status",), ("list",), ("test", "1")])
def test_an_index_entry_that_cannot_be_used_is_skipped(mini_course: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch, bad: str,
                                                      command: tuple[str, ...]) -> None:
    """Before: a dir with a NUL in the index made `course status`, `list` and `test` crash."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    made_practice(mini_course, "1", tmp_path / "kept-dir")
    add_index_entry(mini_course, bad)
    result = mini(mini_course, *command, cwd=tmp_path)
    assert "Traceback" not in result.stderr
    assert result.returncode in (0, 1), result.stderr
    assert "kept-dir" in result.stdout  # the usable entry is still used
