"""Bad input gets one line and exit status 2, never a traceback; every printed suggestion works.

Each test here answers a probe that once ended in a traceback, a silent
no-op or a suggestion that failed when pasted (issue 21, item 4).
"""

from __future__ import annotations

import errno
import json
import os
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import REPO, made_practice, mini, mini_process
from course.index import index_path
from course.locate import path_problem


@pytest.mark.parametrize(("args", "names"), [
    (["test", "--bogus"], ["course test", "--bogus"]),
    (["watch", "1", "--debounce", "abc"], ["course watch", "--debounce"]),
    (["watch", "1", "--debounce", "5"], ["course watch", "--debounce"]),
    (["frobnicate"], ["course", "frobnicate"]),
])
def test_a_bad_option_or_command_is_one_line_naming_it_and_exit_2(mini_course: Path, args: list[str],
                                                                   names: list[str]) -> None:
    """click's own usage errors took three lines (usage, a hint, the error); every other bad input gets one."""
    result = mini_process(mini_course, *args)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert all(name in result.stderr for name in names) and "--help" in result.stderr, result.stderr


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


SUGGESTION = re.compile(r"course (?:test|hint|watch|diff|reset|redlight|status|show) [^`\n()]*[^`\n() ]")


def test_every_suggestion_for_a_dir_named_like_an_option_works_when_pasted(mini_course: Path,
                                                                           tmp_path: Path) -> None:
    """Before: `cd -dash && course test 01`, `course test 01 -dash -v` and the rest all took
    `-dash` for an option when pasted; a path that starts with `-` is written `./-dash`."""
    printed = mini(mini_course, "practice", "1", "--", "-dash", cwd=tmp_path).stdout
    for command in (("test", "1", "--", "-dash"), ("test", "1", "./-dash"), ("status",), ("list",),
                    ("hint", "1", "--lab", "1.1", "--", "-dash")):
        result = mini(mini_course, *command, cwd=tmp_path)
        assert result.returncode in (0, 1), result.stderr
        printed += result.stdout
    change_dir = re.search(r"Then: cd (\S+) && ", printed)
    assert change_dir is not None, printed
    assert subprocess.run(["sh", "-c", f"cd {change_dir.group(1)}"], cwd=tmp_path).returncode == 0
    suggestions = sorted(set(SUGGESTION.findall(printed)))
    assert any("dash" in suggestion for suggestion in suggestions), printed
    for suggestion in suggestions:
        words = shlex.split(suggestion)
        assert "-dash" not in words, suggestion
        result = mini(mini_course, *words[1:], cwd=tmp_path)
        assert result.returncode in (0, 1), f"{suggestion}: {result.stderr}"


def _limit_file_size() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (16, 16))


def test_a_copy_that_cannot_be_written_is_one_line(mini_course: Path, tmp_path: Path) -> None:
    """Files above 16 bytes cannot be written (RLIMIT_FSIZE): the verdict's copy fails in one line.

    Before: `course: a path: [('…', '…', "[Errno 27] File too large: …"), …]`, shutil.Error's list."""
    directory = made_practice(mini_course, "1", tmp_path / "p")
    env = dict(os.environ, COURSE_ROOT=str(mini_course), PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTEST_XDIST_WORKER", None)
    result = subprocess.run([sys.executable, "-m", "course", "test", "1", str(directory)], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=120, preexec_fn=_limit_file_size)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert "File too large" in result.stderr and "course-verdict-" in result.stderr
    assert "[(" not in result.stderr and "Errno" not in result.stderr


def test_a_full_temporary_directory_is_named_in_one_line() -> None:
    """The disk of the temporary directory fills during a tree copy (ENOSPC): what is full, in one line."""
    temporary = Path(tempfile.gettempdir())
    destination = str(temporary / "course-verdict-x" / "snapshot" / "pytest.ini")
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/course/pytest.ini", None, destination)
    copy_failed = shutil.Error([("/course/pytest.ini", destination, str(full)),
                                ("/course/tests/test_x.py", destination + "2", str(full))])
    message = str(path_problem(copy_failed, "a path"))
    assert message == (f"{destination}: No space left on device (and 1 more file(s)): the disk of the temporary "
                       f"directory {temporary} is full (free some space there, or set TMPDIR to a directory "
                       "on another disk).")


def test_redlight_in_a_practice_dir_without_git_still_checks_and_changes_nothing(mini_course: Path,
                                                                                tmp_path: Path) -> None:
    """Before: with its `.git` gone, the dir lay in another repository whose `git apply` skipped every
    path and said "Applied". No patch is applied now; the check needs no git and reads the code as it is."""
    outer = tmp_path / "checkout"
    directory = made_practice(mini_course, "1", outer / "practice" / "p")
    subprocess.run(["git", "init", "-q", str(outer)], check=True)
    adder = directory / "tiny_pi" / "adder.py"
    adder.write_text("def add(a, b):\n    return a - b\n")
    shutil.rmtree(directory / ".git")
    checked = mini(mini_course, "redlight", "1", str(directory), "--check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith("Red light 1.R1 seen, as the lesson predicted")
    assert adder.read_text() == "def add(a, b):\n    return a - b\n"


def test_an_added_conftest_is_named_left_out_and_reset_file_removes_it(mini_course: Path, tmp_path: Path) -> None:
    """Before: the note said `course reset 01 DIR --file conftest.py`, and reset refused it when
    pasted: the chapter has no conftest.py "to restore it from". Now the verdict names an added
    file as left out and suggests no reset for it (there is no chapter version to take); typed
    anyway, `reset --file` saves the learner's file and removes it."""
    directory = made_practice(mini_course, "1", tmp_path / "p")
    added = "import pytest\n# mine\n"
    (directory / "conftest.py").write_text(added)
    tested = mini(mini_course, "test", "1", str(directory))
    assert "the verdict left out: conftest.py (the chapter has none)" in tested.stdout, tested.stdout
    assert "to take the chapter's versions" not in tested.stdout, tested.stdout
    typed = mini(mini_course, "reset", "1", str(directory), "--file", "conftest.py", input="y\n")
    assert typed.returncode == 0, typed.stdout + typed.stderr
    assert not (directory / "conftest.py").exists()
    saved = subprocess.run(["git", "-C", str(directory), "show", "course-saves:conftest.py"],
                           capture_output=True, text=True)
    assert saved.stdout == added, "the learner's conftest.py was saved before it was removed"
    assert "left out" not in mini(mini_course, "test", "1", str(directory)).stdout
