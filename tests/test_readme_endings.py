"""The README's endings, each as a learner meets it: "Exit status everywhere" and "What a verdict means".

Every promise here had no test of its own: a closed pipe after a proof or a
green run, `checkpoint` and `verify` ended by Ctrl-C, `kill` or a closed
terminal, `course watch` stopped while it waits for a save, `course
local-model` stopped while it serves (a stand-in server, so no extra is
needed), a terminal closed at `course reset`'s question, a first red light
that is not the documented one, `course redlight`'s refusals, a Python
without the course's own libraries, and every kind of learner file a verdict
names.
Each signal is sent once the process shows it is where the test wants it
(a run under way, a line printed): never after a fixed sleep.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, course, made_practice, mini
from hostile_helpers import CHAPTER, alive, runs_started, set_time_limit, wait_until_gone, work_dir
from loop_helpers import LiveCourse, course_env, local_model_stand_in

INTERRUPTED = "Interrupted; nothing was left half-made."
SLOW_ADD = "import time\n\ndef add(a, b):\n    time.sleep(30)\n    return a + b\n"


def piped_into_head(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`course ARGS | head -1` in bash, with `course`'s own exit status printed after it."""
    line = shlex.join([sys.executable, "-m", "course", *args])
    return subprocess.run(["bash", "-c", f"{line} | head -1 >/dev/null; echo status=${{PIPESTATUS[0]}}"],
                          cwd=REPO, env=course_env(root), capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", ["verify", "test"])
def test_a_closed_pipe_after_a_proof_or_a_green_run_ends_quietly_with_0(
        mini_course: Path, tmp_path: Path, command: str) -> None:
    """`course verify | head -1`: the reader is gone before the checklist is printed.

    Before: click's own main() caught the EPIPE first and exited 1, so a green
    `course test 01 DIR | head -1` (its "Testing DIR" line comes before the run) said 1,
    and so did `course checkpoint 01 | head -1`."""
    args = {"verify": ["verify"], "test": ["test", "1", str(work_dir(mini_course, tmp_path / "green"))]}[command]
    result = piped_into_head(mini_course, *args)
    assert result.stdout == "status=0\n" and result.stderr == "", result


@pytest.mark.parametrize("command, ending, status", [
    ("checkpoint", signal.SIGINT, 130), ("checkpoint", signal.SIGHUP, -signal.SIGHUP),
    ("verify", signal.SIGTERM, -signal.SIGTERM)], ids=["checkpoint-SIGINT-130", "checkpoint-SIGHUP-129",
                                                      "verify-SIGTERM-143"])
def test_a_proof_ended_by_a_signal_ends_its_runs_and_exits_by_it(
        mini_course: Path, tmp_path: Path, command: str, ending: signal.Signals, status: int) -> None:
    """The author's commands end as the learner's do: 130 for Ctrl-C, and by its own signal for
    `kill` and a closed terminal (a shell shows 143 and 129); no run and no throw-away copy is left."""
    set_time_limit(mini_course, 60)
    (mini_course / CHAPTER / "target/tiny_pi/adder.py").write_text(SLOW_ADD)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    args = ["checkpoint", "1"] if command == "checkpoint" else ["verify", "--fresh"]
    process = subprocess.Popen([sys.executable, "-m", "course", *args], cwd=REPO,
                               env=course_env(mini_course, TMPDIR=str(scratch)),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not runs_started(str(mini_course)):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the runs never started"
            time.sleep(0.02)
        process.send_signal(ending)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == status, stdout + stderr
    assert INTERRUPTED in stderr and "Traceback" not in stderr, stderr
    assert "story holds" not in stdout and "The course holds" not in stdout
    assert list(scratch.glob("course-verdict-*")) == []
    assert wait_until_gone(str(mini_course)) == []


@pytest.mark.parametrize("ending, status", [(signal.SIGINT, 0), (signal.SIGHUP, -signal.SIGHUP)],
                         ids=["SIGINT-0", "SIGHUP-129"])
def test_watch_waiting_for_a_save_stops_on_ctrl_c_with_0_and_names_the_signal(
        mini_course: Path, tmp_path: Path, ending: signal.Signals, status: int) -> None:
    """Between runs, the state `course watch` spends most of its time in (`kill` there: test_watch.py).
    A closed terminal still ends it by SIGHUP (129), and the last line names SIGHUP.

    Before: the SIGHUP was handed on as Ctrl-C, and watch said "Stopped watching (SIGINT)"."""
    directory = made_practice(mini_course, "1", tmp_path / "p")
    watch = LiveCourse(mini_course, "watch", "1", str(directory), "--poll")
    try:
        watch.wait_for("Watching")
    finally:
        code = watch.stop(ending)
    assert code == status, watch.text()
    assert watch.lines[-1] == f"Stopped watching ({ending.name}) after 1 run(s).", watch.text()
    assert "Traceback" not in watch.text() and wait_until_gone(str(mini_course)) == []


@pytest.fixture
def stand_in(tmp_path: Path) -> Path:
    """A folder that, on sys.path, makes the local-model extra look installed (loop_helpers says how)."""
    return local_model_stand_in(tmp_path / "stand-in")


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("ending, status", [(signal.SIGINT, 0), (signal.SIGTERM, -signal.SIGTERM)],
                         ids=["SIGINT-0", "SIGTERM-143"])
def test_local_model_stops_its_server_on_ctrl_c_with_0_and_on_kill_by_the_signal(
        stand_in: Path, tmp_path: Path, ending: signal.Signals, status: int) -> None:
    """The README: `course local-model` serves until Ctrl-C and exits 0 then; `kill` ends it as any command."""
    pid_file = tmp_path / "server.pid"
    served = LiveCourse(REPO, "local-model", "--port", str(free_port()), cwd=tmp_path, PYTHONUNBUFFERED="1",
                        PYTHONPATH=os.pathsep.join([str(stand_in), str(REPO)]), STAND_IN_PID=str(pid_file),
                        XDG_CACHE_HOME=str(tmp_path / "cache"))
    try:
        served.wait_for("(a stand-in)")
    finally:
        code = served.stop(ending)
    assert code == status, served.text()
    assert "tiny_pi flags: --base-url http://127.0.0.1:" in served.lines[0]
    assert served.lines[-2:] == ["stand-in: stopped by Ctrl-C", "Stopped the local model server."], served.text()
    assert not alive(int(pid_file.read_text())), "the server outlived the command"


def test_a_ctrl_c_while_the_server_starts_still_stops_the_server(
        stand_in: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C the moment the server's process exists, before Popen has returned it.

    Before: the KeyboardInterrupt left Popen with the server started and nobody to
    stop it; the command exited 130 saying nothing was left half-made, and the
    server kept the port."""
    pid_file = tmp_path / "server.pid"
    started: list[subprocess.Popen[bytes]] = []
    real_popen = subprocess.Popen

    def interrupted_popen(*args, **kwargs):
        child = real_popen(*args, **kwargs)
        started.append(child)
        signal.raise_signal(signal.SIGINT)  # lands inside Popen, after the fork
        return child

    monkeypatch.syspath_prepend(str(stand_in))
    monkeypatch.setattr(subprocess, "Popen", interrupted_popen)
    try:
        result = course("local-model", "--port", str(free_port()),
                        env={"PYTHONPATH": os.pathsep.join([str(stand_in), str(REPO)]), "STAND_IN_PID": str(pid_file),
                             "XDG_CACHE_HOME": str(tmp_path / "cache")})
    finally:
        for child in started:
            if child.poll() is None:
                child.kill()
                child.wait()
                pytest.fail("the server was left running")
    assert result.returncode == 0, result
    assert result.stdout.splitlines()[-1] == "Stopped the local model server."


# Prerequisites ----------------------------------------------------------------------------------


@pytest.mark.parametrize("args", [["practice", "01", "never-made"], ["list"]], ids=["practice", "list"])
def test_a_python_without_the_courses_own_libraries_is_one_line_and_exit_2(tmp_path: Path, args: list[str]) -> None:
    """`python -S` leaves out site-packages: click, attrs and trio are missing, as in a Python the course
    was never installed into. Before: a ModuleNotFoundError traceback from `import click`."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("COURSE_ROOT", None)
    result = subprocess.run([sys.executable, "-S", "-m", "course", *args], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result
    assert result.stdout == "" and len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("course: this Python lacks the course's own dependencies: click (not installed)")
    assert "python -m pip install -e ." in result.stderr
    assert not (tmp_path / "never-made").exists()


def test_a_library_only_one_command_imports_is_named_in_one_line_too(mini_course: Path, tmp_path: Path) -> None:
    """`course reset` is the first to import GitPython; without it, one line and exit 2, nothing changed.
    Before: a ModuleNotFoundError traceback from `import git`."""
    directory = made_practice(mini_course, "1", tmp_path / "p")
    adder = directory / "tiny_pi/adder.py"
    adder.write_text("def add(a, b):\n    return 0\n")
    without_git = ("import sys\nsys.modules['git'] = None  # what `import git` meets in a Python without GitPython\n"
                   "sys.argv = ['course', *sys.argv[1:]]\nfrom course.launch import main\nmain()\n")
    result = subprocess.run([sys.executable, "-c", without_git, "reset", "1", str(directory), "--yes"], cwd=tmp_path,
                            env=course_env(mini_course), capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result
    assert result.stderr.startswith("course: this Python lacks the course's own dependencies: gitpython (not installed)")
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert adder.read_text() == "def add(a, b):\n    return 0\n"


def test_a_course_root_without_pyproject_still_has_the_courses_dependencies_checked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """COURSE_ROOT naming chapters elsewhere, `course` run from a checkout it was not installed from:
    the dependencies come from that checkout's pyproject.toml. Before: none were found, none were checked,
    and `course practice` ended in a traceback from `import git`."""
    import importlib.metadata

    from course import requirements

    real_version = importlib.metadata.version

    def without_course_and_gitpython(name: str) -> str:
        if name.lower() == "gitpython":
            raise importlib.metadata.PackageNotFoundError(name)
        return real_version(name)

    def not_installed(name: str) -> list[str]:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "requires", not_installed)
    monkeypatch.setattr(importlib.metadata, "version", without_course_and_gitpython)
    root = tmp_path / "chapters"
    (root / "checkpoints").mkdir(parents=True)
    assert "gitpython>=3.1.40" in requirements.declared(root)
    with pytest.raises(requirements.MissingDependencies, match=r"gitpython \(not installed\)"):
        requirements.require_dependencies(root)


# Verdicts ---------------------------------------------------------------------------------------


def test_a_first_red_light_that_is_not_the_documented_one_is_exit_1_and_the_dir_is_still_made(
        mini_course: Path, tmp_path: Path) -> None:
    """`course practice` shows the first red light; one that differs from the lesson's is a deviation (1)."""
    target = mini_course / CHAPTER / "target/tiny_pi/adder.py"
    (mini_course / CHAPTER / "parent/tiny_pi/adder.py").write_text(target.read_text())
    result = mini(mini_course, "practice", "1", str(tmp_path / "p"))
    assert result.returncode == 1, result
    assert "This is NOT the documented starting point" in result.stdout
    assert (tmp_path / "p/LEARNING.md").is_file(), "the dir is made whatever its first run shows"


def test_every_kind_of_file_the_verdict_does_not_use_is_named_and_none_changes_it(
        mini_course: Path, tmp_path: Path) -> None:
    """A green dir with one file of every kind the README lists: a test changed, the config deleted,
    each top-level config file added, a test file added, and a file of tiny_pi/ that cannot be read
    (a named pipe). The verdict stays green and names each, in the checklist and in --json.

    Before: without its pytest.ini the dir was no practice dir at all, and every command refused it
    (`course reset --file pytest.ini` too, so the reset the verdict suggests could not bring it back)."""
    directory = made_practice(mini_course, "1", tmp_path / "work")
    shutil.copy(mini_course / CHAPTER / "target/tiny_pi/adder.py", directory / "tiny_pi/adder.py")
    (directory / "tests/test_01_adder.py").write_text("def test_nothing():\n    pass\n")
    (directory / "pytest.ini").unlink()
    for name in ("pyproject.toml", "tox.ini", "setup.cfg", "conftest.py"):
        (directory / name).write_text("# mine\n")
    (directory / "tests/test_mine.py").write_text("def test_mine():\n    assert False\n")
    os.mkfifo(directory / "tiny_pi/pipe.py")
    result = mini(mini_course, "test", "1", str(directory), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    note = next(check for check in json.loads(result.stdout)["checks"] if check["kind"] == "note")
    assert note["replaced"] == [
        {"path": "conftest.py", "how": "added"},
        {"path": "pyproject.toml", "how": "added"},
        {"path": "pytest.ini", "how": "deleted"},
        {"path": "setup.cfg", "how": "added"},
        {"path": "tests/test_01_adder.py", "how": "changed"},
        {"path": "tests/test_mine.py", "how": "added"},
        {"path": "tox.ini", "how": "added"},
        {"path": "tiny_pi/pipe.py", "how": "unreadable"},
    ]
    text = mini(mini_course, "test", "1", str(directory))
    assert text.returncode == 0 and "Green: " in text.stdout, text.stdout
    line = next(line for line in text.stdout.splitlines() if "files of yours the verdict did not use" in line)
    for named in ("pytest.ini (missing from your dir)", "tests/test_01_adder.py (yours differs)",
                  "tox.ini (the chapter has none)", "tiny_pi/pipe.py (not a regular file, or unreadable)"):
        assert named in line, line
    restored = mini(mini_course, "reset", "1", str(directory), "--file", "pytest.ini", "--yes")
    assert restored.returncode == 0 and (directory / "pytest.ini").is_file(), restored.stdout + restored.stderr


def test_redlight_refuses_an_unknown_exercise_and_the_retired_revert(
        mini_course: Path, tmp_path: Path) -> None:
    """Exit 2 and one line each; neither changes the learner's code."""
    directory = made_practice(mini_course, "1", tmp_path / "p")
    adder = directory / "tiny_pi/adder.py"
    shutil.copy(mini_course / CHAPTER / "target/tiny_pi/adder.py", adder)
    before = adder.read_bytes()
    unknown = mini(mini_course, "redlight", "1", str(directory), "--id", "9.R9")
    assert unknown.returncode == 2 and unknown.stderr == (
        "course: chapter 01-adder has no red-light exercise '9.R9'; its exercises are: 1.R1\n"), unknown
    revert = mini(mini_course, "redlight", "1", str(directory), "--revert")
    assert revert.returncode == 2 and len(revert.stderr.splitlines()) == 1, revert
    assert revert.stderr.startswith("course: course redlight no longer changes your code"), revert.stderr
    assert "put your lines back by hand" in revert.stderr
    assert adder.read_bytes() == before


def test_a_terminal_closed_at_the_reset_prompt_ends_by_sighup_and_changes_nothing(
        mini_course: Path, tmp_path: Path) -> None:
    """The learner's question is open when the terminal goes (Ctrl-C there: test_learner_cmds.py)."""
    directory = made_practice(mini_course, "1", tmp_path / "p")
    adder = directory / "tiny_pi/adder.py"
    adder.write_text("def add(a, b):\n    return 0\n")
    process = subprocess.Popen([sys.executable, "-m", "course", "reset", "1", str(directory)], cwd=REPO,
                               env=course_env(mini_course), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        shown = b""
        while not shown.endswith(b"Reset these files? [y/N]: "):
            byte = os.read(process.stdout.fileno(), 1)  # type: ignore[union-attr]
            assert byte, f"reset ended before it asked: {shown!r}"
            shown += byte
        process.send_signal(signal.SIGHUP)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == -signal.SIGHUP, stderr
    assert stderr.decode().strip() == INTERRUPTED
    assert adder.read_text() == "def add(a, b):\n    return 0\n"
    branches = subprocess.run(["git", "-C", str(directory), "branch", "--list", "course-saves"],
                              capture_output=True, text=True, check=True).stdout
    assert branches == "", "nothing was saved: the learner never answered"
