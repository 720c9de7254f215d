"""Learner commands as a learner runs them: from inside a practice dir, from a subdirectory of it,
and from the directory above, with a DIR that has a space in its name.

One fixture course and one practice dir serve the whole module (each CLI run starts a Python);
the tests that change the practice dir run in file order and put back what they change.
The course has two chapters (the fixture's 01-adder and a copy of it as 02-twice), so a
chapter id that does not match the dir can be typed.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shlex
import shutil
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import fcntl
import pytest

from conftest import FIXTURES, REPO, course, mini, tree_hash

ADDER = Path("checkpoints/01-adder/target/tiny_pi/adder.py")
WRONG = "def add(a, b):\n    return a * b\n"
NO_DOCSTRING = "def add(a, b):\n    return a + b\n"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("learner")
    root = base / "course"
    shutil.copytree(FIXTURES / "mini-course", root)
    twin = root / "checkpoints/02-twice"
    shutil.copytree(root / "checkpoints/01-adder", twin)
    toml = twin / "chapter.toml"
    text = toml.read_text().replace("number = 1", "number = 2").replace('slug = "adder"', 'slug = "twice"')
    toml.write_text(text.replace('"1.1"', '"2.1"').replace('"1.2"', '"2.2"').replace('"1.R1"', '"2.R1"'))
    lesson = root / "checkpoints/01-adder/README.md"
    lesson.write_text(lesson.read_text() + "".join(f"\nParagraph {i} of a long lesson.\n" for i in range(3000)))
    state = base / "state"
    world = {"base": base, "root": root, "state": state, "learner": base / "p 1"}
    made = run(world, "practice", "1", "p 1", cwd=base)
    assert made.returncode == 0, made.stdout + made.stderr
    return world


def env_of(world: dict[str, Path], **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    for name in UNSET:
        env.pop(name, None)
    env.update(COURSE_ROOT=str(world["root"]), XDG_STATE_HOME=str(world["state"]), **extra)
    return env


UNSET = ("NO_COLOR", "FORCE_COLOR", "PAGER", "LESS")  # the learner's own settings are tested on purpose


def run(world: dict[str, Path], *args: str, cwd: Path | None = None, **extra: str) -> subprocess.CompletedProcess[str]:
    """`course ARGS` in this process, in the world's course and state dir."""
    env: dict[str, str | None] = {name: None for name in UNSET}
    env.update(COURSE_ROOT=str(world["root"]), XDG_STATE_HOME=str(world["state"]), **extra)
    return course(*args, cwd=cwd or world["base"], env=env)


def run_process(world: dict[str, Path], *args: str, cwd: Path | None = None,
                **extra: str) -> subprocess.CompletedProcess[str]:
    """`python -m course ARGS` in a fresh interpreter (what PATH holds is read once, at start-up)."""
    return subprocess.run([sys.executable, "-m", "course", *args], cwd=cwd or world["base"], env=env_of(world, **extra),
                          capture_output=True, text=True, timeout=120)


def in_pty(world: dict[str, Path], *args: str, cwd: Path, columns: int = 100, rows: int = 40,
           answer: tuple[str, bytes] | None = None, **extra: str) -> tuple[str, list[tuple[float, str]], int]:
    """Run `course ARGS` on a pseudo-terminal: (all text, (seconds, chunk) as they came, exit status).

    `answer` = (prompt, bytes): type the bytes half a second after the prompt is on the screen,
    as a person would (a key sent in the same instant can reach Python before it waits for input).
    """
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    started = time.monotonic()
    def controlling_terminal() -> None:  # so that Ctrl-C typed on it reaches the command as SIGINT
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    process = subprocess.Popen([sys.executable, "-m", "course", *args], cwd=cwd,
                               env=env_of(world, TERM="xterm-256color", COLUMNS=str(columns), LINES=str(rows), **extra),
                               stdin=slave, stdout=slave, stderr=slave, close_fds=True,
                               preexec_fn=controlling_terminal)
    os.close(slave)
    chunks: list[tuple[float, str]] = []
    try:
        while time.monotonic() - started < 60:
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    break
                if not data:
                    break
                chunks.append((time.monotonic() - started, data.decode("utf-8", "replace")))
                if answer is not None and answer[0] in "".join(c for _, c in chunks):
                    time.sleep(0.5)
                    os.write(master, answer[1])
                    answer = None
            elif process.poll() is not None:
                break
    finally:
        os.close(master)
        if process.poll() is None:
            process.kill()
        code = process.wait()
    return "".join(c for _, c in chunks), chunks, code


def plain(screen: str) -> str:
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07", "", screen)
    return text.replace("\r\n", "\n").replace("\r", "\n")  # a redrawn progress line is a line of its own


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result.stderr


# 1. A practice dir knows its chapter -------------------------------------------------


def test_inside_a_practice_dir_or_below_it_no_chapter_id_is_needed(world: dict[str, Path]) -> None:
    learner = world["learner"]
    # In the dir itself in this process; below it as processes, as a learner types them there.
    for where, course_in in ((learner, run), (learner / "tiny_pi", run_process)):
        tested = course_in(world, "test", cwd=where)
        assert tested.returncode == 1, tested.stderr
        assert f"Testing {'.' if where == learner else learner} (chapter 01's focused tests):" in tested.stdout
        assert "could not import the tests in tests/test_01_adder.py" in tested.stdout
        assert "Lab 1.1 Small - hint 1 of" in course_in(world, "hint", cwd=where).stdout
        assert "not written yet" in course_in(world, "diff", cwd=where).stdout
        assert course_in(world, "show", cwd=where).stdout.startswith("# ")
        status = json.loads(course_in(world, "status", "--json", cwd=where).stdout)
        assert Path(status["chapters"][0]["directory"]) == learner
    (learner / ".course/hints.json").unlink()


def test_watch_needs_no_chapter_id_below_a_practice_dir(world: dict[str, Path]) -> None:
    from loop_helpers import LiveCourse

    adder = world["learner"] / "tiny_pi/adder.py"
    watch = LiveCourse(world["root"], "watch", "--once", "--poll", "--debounce", "50",
                       cwd=world["learner"] / "tiny_pi", XDG_STATE_HOME=str(world["state"]))
    try:
        watch.wait_for("Watching")
        adder.write_text(WRONG)
        screen = watch.wait_for("Next:")
        assert watch.process.wait(timeout=60) == 1
    finally:
        watch.stop()
        adder.unlink()
    assert screen[0].startswith("== run 1") and "saved tiny_pi/adder.py" in screen[0]
    assert "  first failure: tests/test_01_adder.py::test_add_small" in screen
    assert screen[-1] == "Next: make lab 1.1 green: `course watch 01 --lab 1.1` (stuck? `course hint 01 --lab 1.1`)"


def test_a_chapter_id_that_does_not_match_the_dir_is_refused_and_nothing_is_written(world: dict[str, Path]) -> None:
    learner = world["learner"]
    before = tree_hash(learner)
    for where in (learner, learner / "tiny_pi"):
        for command in ("test", "hint", "watch", "diff", "reset"):
            args = [command, "2"] + (["--yes"] if command == "reset" else []) + (["--once"] if command == "watch" else [])
            stderr = one_line_error(run(world, *args, cwd=where))
            assert f"is a chapter 01 practice dir; did you mean `course {command} 01`?" in stderr
    typed = one_line_error(run(world, "test", "02", "p 1"))
    assert "p 1 is a chapter 01 practice dir; did you mean `course test 01 'p 1'`?" in typed
    assert tree_hash(learner) == before, "a refused command wrote into the practice dir"


# 2. Every suggested command works when pasted ---------------------------------------------


def test_suggested_commands_carry_the_dir_quoted_and_work_when_pasted(world: dict[str, Path]) -> None:
    result = run(world, "test", "1", "p 1", "--lab", "1.1")
    assert "Testing p 1 (lab 1.1):" in result.stdout
    next_line = next(line for line in result.stdout.splitlines() if line.startswith("Next:"))
    assert "`course test 01 'p 1' --lab 1.1`" in next_line and "`course hint 01 'p 1' --lab 1.1`" in next_line
    for command in re.findall(r"`(course [^`]+)`", next_line):
        pasted = subprocess.run(["bash", "-c", command.replace("course", f"{sys.executable} -m course", 1)],
                                cwd=world["base"], env=env_of(world), capture_output=True, text=True, timeout=120)
        assert pasted.returncode in (0, 1), (command, pasted.stderr)
    missing = one_line_error(run(world, "test", "1", "no such dir"))
    assert "no such dir does not exist. Make it first: `course practice 01 'no such dir'`" in missing
    (world["learner"] / ".course/hints.json").unlink(missing_ok=True)


def test_the_target_diff_is_reachable_from_anywhere_behind_the_spoiler_guard(world: dict[str, Path]) -> None:
    for where in (world["base"], world["learner"] / "tiny_pi"):
        stat = run(world, "diff", "1", "--target", cwd=where)
        assert stat.returncode == 0, stat.stderr
        assert "tiny_pi/adder.py" in stat.stdout and "return a + b" not in stat.stdout
        assert "`course diff 01 --target --show`" in stat.stdout
    shown = run(world, "diff", "--target", "--show", cwd=world["learner"])
    assert "+    return a + b" in shown.stdout


# 3. One view of progress -------------------------------------------------------------------


def test_list_and_status_agree_on_dirs_made_anywhere_and_forget_removed_ones(world: dict[str, Path]) -> None:
    extra = world["base"] / "elsewhere" / "second"
    assert run(world, "practice", "1", str(extra)).returncode == 0
    status = json.loads(run(world, "status", "--json").stdout)
    chapter = status["chapters"][0]
    assert chapter["directory"] == str(extra) and chapter["other_directories"] == [str(world["learner"])]
    assert f"practice: {extra.relative_to(world['base'])} - last test: not tested yet" in run(world, "list").stdout
    shutil.rmtree(extra)
    status = json.loads(run(world, "status", "--json").stdout)
    assert status["chapters"][0]["directory"] == str(world["learner"]), "a removed dir drops out"
    assert "practice: p 1 - last test:" in run(world, "list").stdout
    index = json.loads((world["state"] / "tiny-pi-course/practice-dirs.json").read_text())
    assert [entry["dir"] for entry in index["dirs"]] == [str(world["learner"])]
    assert "checkpoints" not in str(world["state"])


# 5. Digests a learner can act on ----------------------------------------------------------


def test_the_digest_points_at_the_test_line_and_the_teaching_file_and_v_shows_pytest(world: dict[str, Path]) -> None:
    learner = world["learner"]
    (learner / "tiny_pi/adder.py").write_text(WRONG)
    result = run(world, "test", "--tests", cwd=learner / "tiny_pi")
    lines = result.stdout.splitlines()
    at = lines.index("  first failure: tests/test_01_adder.py::test_add_small")
    assert lines[at + 1].strip() == "tests/test_01_adder.py:2"
    assert lines[at + 2].strip() == ">   def test_add_small(): assert add(1, 2) == 3"
    assert lines[at + 3].strip() == "E   assert 2 == 3"
    assert "  the fix belongs in tiny_pi/adder.py (lab 1.1's teaching file)" in lines
    assert "  the whole pytest report: course test 01 -v" in lines
    assert "  lab 1.1 Small:" in lines and "    [failed] test_add_small" in lines
    assert "  lab 1.2 Both:" in lines and "    [failed] test_add_big" in lines
    verbose = run(world, "test", "-v", cwd=learner)
    assert "pytest's output:" in verbose.stdout and "FAILED tests/test_01_adder.py::test_add_small" in verbose.stdout


# 4 and 6. The red-light exercise in the loop; verdicts as data -----------------------------


def test_a_break_by_hand_after_green_is_recognised_though_a_lab_run_came_in_between(world: dict[str, Path]) -> None:
    """The lesson's own order: all green, one lab again, then the documented break."""
    learner = world["learner"]
    adder = learner / "tiny_pi/adder.py"
    shutil.copy(world["root"] / ADDER, adder)
    assert run(world, "test", cwd=learner).returncode == 0
    assert run(world, "test", "--lab", "1.1", cwd=learner).returncode == 0
    adder.write_text(adder.read_text().replace("a + b", "a - b"))
    broken = run(world, "test", cwd=learner)
    assert "That is red light 1.R1, as the lesson predicted: now restore your code." in broken.stdout, broken.stdout
    assert "Not yet" not in broken.stdout
    shutil.copy(world["root"] / ADDER, adder)
    assert run(world, "test", "--lab", "1.2", cwd=learner).returncode == 0, "a lab run is not the whole chapter"
    done = run(world, "test", cwd=learner)
    assert "Red light 1.R1 done: it failed as predicted, and your code is green again." in done.stdout
    (learner / ".course/redlights.json").unlink()


def test_the_red_light_exercise_is_recognised_recorded_and_completed(world: dict[str, Path]) -> None:
    learner = world["learner"]
    adder = learner / "tiny_pi/adder.py"
    adder.write_text(NO_DOCSTRING)  # green, in the learner's own lines: no patch of the target's would fit
    not_yet = run(world, "redlight", "--check", cwd=learner / "tiny_pi")
    assert not_yet.returncode == 1 and not_yet.stdout.startswith("Not broken yet: your code is green"), not_yet.stdout
    assert adder.read_text() == NO_DOCSTRING, "course redlight never changes the learner's code"

    shutil.copy(world["root"] / ADDER, adder)
    green = run(world, "test", "--json", cwd=learner)
    document = json.loads(green.stdout)
    assert green.returncode == 0 and "the red-light exercise 1.R1 Minus" in document["next"]
    saved = json.loads((learner / ".course/last-test.json").read_text())
    assert [(c["kind"], c["lab"]) for c in saved["checks"]] == [("lab", "1.1"), ("lab", "1.2"), ("focused", None)]
    assert json.loads(run(world, "status", "--json", cwd=learner).stdout)["next"] == document["next"], "one rule"

    adder.write_text(adder.read_text().replace("a + b", "a - b"))  # the break, by hand
    broken = run(world, "test", cwd=learner / "tiny_pi")
    assert broken.returncode == 1
    assert "That is red light 1.R1, as the lesson predicted: now restore your code." in broken.stdout
    assert "tests/test_01_adder.py::test_add_small failed showing 'assert -1 == 3'" in broken.stdout
    assert "Next: restore your code, then run `course test 01`: green again completes 1.R1" in broken.stdout
    assert "--revert" not in broken.stdout
    assert "Red on purpose (1.R1): 0/3 checks passed" in broken.stdout and "Not yet" not in broken.stdout
    assert json.loads((learner / ".course/redlights.json").read_text())["states"] == {"1.R1": "seen"}

    shutil.copy(world["root"] / ADDER, adder)
    done = run(world, "test", cwd=learner)
    assert done.returncode == 0
    assert "Red light 1.R1 done: it failed as predicted, and your code is green again." in done.stdout
    # The learner's dir is outside the course's practice/, so the next one goes beside it, pasted from here.
    beside = shlex.join(["course", "practice", "02", str(world["base"] / "02-twice")])
    assert f"Next: chapter 01 is done; on to chapter 02: `{beside}`" in done.stdout
    status = run(world, "status", cwd=learner).stdout
    assert "green (2/2 labs green), red lights 1/1" in status
    assert f"Next: `{beside}`" in status, "status and test agree on where chapter 02 goes"
    pasted = run(world, *shlex.split(beside)[1:], cwd=learner)
    assert pasted.returncode == 0 and (world["base"] / "02-twice/LEARNING.md").is_file(), pasted.stderr


# 8. course diff on a green dir --------------------------------------------------------------


def test_diff_says_when_only_docstrings_and_comments_differ(world: dict[str, Path]) -> None:
    adder = world["learner"] / "tiny_pi/adder.py"
    adder.write_text('def add(a, b):\n\n    # the sum\n    return a + b\n')
    result = run(world, "diff", cwd=world["learner"])
    assert result.returncode == 0, "green code written differently is a successful comparison, no deviation"
    assert "tiny_pi/adder.py: the same code as the target;" in result.stdout
    assert "only docstrings, comments and layout" in result.stdout
    adder.write_text(WRONG)
    assert "tiny_pi/adder.py: differs in code" in run(world, "diff", cwd=world["learner"]).stdout
    shutil.copy(world["root"] / ADDER, adder)


# 7. Conventions of a well-made CLI ----------------------------------------------------------


def test_version_bare_course_and_help_in_the_learners_order(world: dict[str, Path]) -> None:
    version = run_process(world, "--version")
    assert version.returncode == 0 and re.match(r"course \S+", version.stdout)
    bare = run_process(world)
    assert bare.returncode == 0 and bare.stderr == "" and "Usage: course" in bare.stdout
    listed = re.findall(r"^  (\w+)\s{2,}", bare.stdout.split("Commands:")[1], re.M)
    assert listed[:8] == ["practice", "test", "watch", "hint", "diff", "redlight", "reset", "status"]
    assert listed[-3:] == ["checkpoint", "verify", "dev"], "the author's commands come after the learner's"
    flat = " ".join(bare.stdout.split())
    assert "Copy a chapter's starting point into DIR (a git repo of its own) and show its first red light." in flat
    assert "..." not in bare.stdout.split("Commands:")[1].split("Chapter ids")[0], "no summary is cut"
    assert "3, 03, message-ir and 03-message-ir" in flat and "course test --lab 2.1" in flat


def test_completion_offers_chapter_ids_lab_ids_and_dirs(world: dict[str, Path]) -> None:
    def complete(line: str, cwd: Path) -> list[str]:
        words = line.split(" ")
        result = run_process(world, cwd=cwd, _COURSE_COMPLETE="bash_complete", COMP_WORDS=line, COMP_CWORD=str(len(words) - 1))
        assert result.returncode == 0, result.stderr
        return result.stdout.splitlines()

    assert "plain,01" in complete("course test ", world["base"]) and "plain,02" in complete("course test ", world["base"])
    assert complete("course test 01 ", world["base"]) == ["dir,"]
    assert complete("course test --lab ", world["learner"] / "tiny_pi") == ["plain,1.1", "plain,1.2"]
    assert complete("course hint 02 --lab ", world["base"]) == ["plain,2.1", "plain,2.2"]
    assert "plain,01" in complete("course verify ", world["base"])


def test_progress_line_on_a_terminal_only_and_output_wrapped_with_a_hanging_indent(world: dict[str, Path]) -> None:
    screen, chunks, code = in_pty(world, "test", cwd=world["learner"], columns=60)
    text = plain(screen)
    assert code in (0, 1) and "Running the focused tests" in text and "(limit 30 s)" in text
    first = next(seconds for seconds, chunk in chunks if "Running the focused tests" in plain(chunk))
    assert first < 3.0, f"the progress line appeared after {first:.2f} s"
    lines = [line for line in text.splitlines() if line.strip()]
    assert all(len(line) <= 60 for line in lines), [line for line in lines if len(line) > 60]
    at = next(i for i, line in enumerate(lines) if line.startswith("Next: "))
    assert lines[at + 1].startswith("      "), "a wrapped Next: line continues under its text"
    quiet, _, _ = in_pty(world, "test", "--json", cwd=world["learner"])
    assert "Running" not in plain(quiet)
    piped = run(world, "test", cwd=world["learner"])
    assert piped.stderr == "" and all(len(line) < 400 for line in piped.stdout.splitlines())


def test_show_pages_a_long_lesson_on_a_terminal(world: dict[str, Path]) -> None:
    screen, _, code = in_pty(world, "show", "1", cwd=world["base"], columns=80,
                             PAGER="sh -c 'echo PAGED-BY-PAGER; wc -l'")
    assert code == 0 and "PAGED-BY-PAGER" in screen
    unpaged, _, _ = in_pty(world, "show", "1", "--no-pager", cwd=world["base"], PAGER="sh -c 'echo PAGED-BY-PAGER'")
    assert "PAGED-BY-PAGER" not in unpaged and "Paragraph 2999" in plain(unpaged)


def test_a_closed_pipe_is_quiet_and_successful(world: dict[str, Path]) -> None:
    shell = subprocess.run(["bash", "-c", f"{sys.executable} -m course show 1 | head -1; echo status=${{PIPESTATUS[0]}}"],
                           cwd=world["base"], env=env_of(world), capture_output=True, text=True, timeout=60)
    assert "status=0" in shell.stdout and shell.stderr == "", shell.stderr


def test_ctrl_c_at_the_reset_prompt_exits_130_and_changes_nothing(world: dict[str, Path]) -> None:
    adder = world["learner"] / "tiny_pi/adder.py"
    adder.write_text(WRONG)
    screen, _, code = in_pty(world, "reset", cwd=world["learner"] / "tiny_pi", answer=("Reset these files?", b"\x03"))
    assert code == 130, plain(screen)
    assert "Interrupted" in screen and "Traceback" not in screen
    assert adder.read_text() == WRONG
    shutil.copy(world["root"] / ADDER, adder)


def test_the_same_chapter_named_twice_is_proved_once(world: dict[str, Path]) -> None:
    result = run(world, "verify", "1", "01", "adder", "--json")
    document = json.loads(result.stdout)
    assert document["chapters"] == ["01-adder"]
    assert sum(1 for check in document["checks"] if check["kind"] == "first-red-light") == 1


# 9. Prerequisites and paths --------------------------------------------------------------------


def test_without_git_help_list_and_show_work_and_the_rest_say_why(world: dict[str, Path], tmp_path: Path) -> None:
    no_git = {"PATH": str(tmp_path)}  # python is run by its full path; git is nowhere
    for args in (("--help",), ("list",), ("show", "1")):
        result = run_process(world, *args, **no_git)
        assert result.returncode == 0 and "Traceback" not in result.stderr, (args, result.stderr)
    # `course redlight` is not among them: it applies no patch, and runs the tests as `course test` does, without git.
    for args in (("practice", "1", str(tmp_path / "new")), ("reset", "--yes"), ("checkpoint", "1")):
        result = run_process(world, *args, cwd=world["learner"], **no_git)
        assert result.stderr == "course: git is not installed: practice dirs are git repositories\n", args
        assert result.returncode == 2


def test_a_practice_dir_inside_another_work_tree_is_refused_unless_nested(world: dict[str, Path]) -> None:
    inner = world["learner"] / "inner"
    refused = one_line_error(run(world, "practice", "1", str(inner)))
    assert "(another practice dir)" in refused and "--nested" in refused
    assert not inner.exists()
    made = run(world, "practice", "1", str(inner), "--nested")
    assert made.returncode == 0, made.stderr
    shutil.rmtree(inner)


def test_inside_the_course_repository_only_practice_is_a_place_for_practice_dirs(tmp_path: Path) -> None:
    root = tmp_path / "course"
    shutil.copytree(FIXTURES / "mini-course", root)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    world = {"base": root, "root": root, "state": tmp_path / "state"}
    refused = one_line_error(run(world, "practice", "1", "notes/work"))
    assert "(the course repository, outside practice/)" in refused and not (root / "notes").exists()
    made = run(world, "practice", "1")
    assert made.returncode == 0 and (root / "practice/01-adder/LEARNING.md").is_file(), made.stderr


def test_os_errors_on_a_learner_path_are_one_line_and_checkpoints_are_never_written(world: dict[str, Path]) -> None:
    base = world["base"]
    (base / "loop").symlink_to(base / "loop")
    bad_paths = ["x" * 300, "loop", "loop/deeper"]
    commands = ["test", "hint", "diff", "watch", "practice"]
    # Every command meets a bad path, and each bad path meets both places that check paths
    # (course.locate behind `test`, workspace.check_practice_target behind `practice`); the whole
    # grid would repeat the same checks at a command's cost each.
    pairs = [(command, bad_paths[index % len(bad_paths)]) for index, command in enumerate(commands)]
    pairs += [(command, bad) for command in ("test", "practice") for bad in bad_paths if (command, bad) not in pairs]
    for command, bad in pairs:
        stderr = one_line_error(run(world, command, "1", bad))
        assert re.search(r"File name too long|loop of symbolic links|Not a directory|does not exist", stderr), stderr
    snapshot = world["root"] / "checkpoints/01-adder/target"
    before = tree_hash(world["root"] / "checkpoints")
    for args in (("test", "1", str(snapshot)), ("hint", "1", str(snapshot)), ("watch", "1", str(snapshot), "--once")):
        assert "is inside checkpoints/" in one_line_error(run(world, *args))
    assert tree_hash(world["root"] / "checkpoints") == before


# 10. The README names every command and option -------------------------------------------------


def test_the_readme_lists_every_command_and_option_and_exit_130() -> None:
    from course.cli import cli

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme.split("## The commands", 1)[1].split("### Installing", 1)[0]
    assert "130" in table
    for name, command in cli.commands.items():
        assert f"`course {name}" in table, name
        for parameter in command.params:
            if getattr(parameter, "hidden", False):  # a retired option, kept only to say what to use instead
                continue
            for option in getattr(parameter, "opts", []):
                if option.startswith("-") and option not in ("-h", "--help"):
                    rows = [line for line in table.splitlines() if f"`course {name}" in line]
                    assert any(option in row for row in rows), f"{name} {option}"
    assert "_COURSE_COMPLETE=bash_source" in readme and "zsh_source" in readme and "fish_source" in readme


# 8. Installs the way learners install ----------------------------------------------------------


def test_an_installed_course_works_from_any_directory_and_an_editable_one_reads_the_checkout(tmp_path: Path) -> None:
    site = tmp_path / "site"
    shutil.copytree(REPO / "course", site / "course", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(FIXTURES / "mini-course/checkpoints", site / "course/checkpoints")  # what package-data ships
    elsewhere = tmp_path / "anywhere"
    elsewhere.mkdir()
    env = dict(os.environ, PYTHONPATH=str(site), XDG_STATE_HOME=str(tmp_path / "state"))
    env.pop("COURSE_ROOT", None)

    def installed(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "course", *args], cwd=elsewhere, env={**env, **extra},
                              capture_output=True, text=True, timeout=120)

    listed = installed("list")
    assert listed.returncode == 0 and "01-adder  Adder" in listed.stdout, listed.stderr
    made = installed("practice", "1")
    assert made.returncode == 0 and (elsewhere / "practice/01-adder/LEARNING.md").is_file(), made.stderr
    assert "practice: practice/01-adder" in installed("list").stdout
    override = installed("list", COURSE_ROOT=str(REPO))
    assert "01-adder" not in override.stdout and "02-event-stream" in override.stdout
    editable = subprocess.run([sys.executable, "-m", "course", "list"], cwd=elsewhere,
                              env={**env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120)
    assert "02-event-stream" in editable.stdout, "an editable install reads its checkout"


def test_a_lab_run_with_v_runs_only_that_labs_tests(mini_course: Path, tmp_path: Path) -> None:
    """`course test --lab 1.1 -v` prints pytest's whole output of lab 1.1's run, not of every lab's.

    Before: -v (and --json) dropped the lab's selection, so a learner asking
    about a two-test lab waited for the whole chapter (a trial learner's finding).
    """
    directory = tmp_path / "p"
    assert mini(mini_course, "practice", "1", str(directory)).returncode == 0
    (directory / "tiny_pi/adder.py").write_text("def add(a, b):\n    return 0\n")
    shown = mini(mini_course, "test", "--lab", "1.1", "-v", cwd=directory)
    assert "test_add_small" in shown.stdout and "test_add_big" not in shown.stdout, shown.stdout
    document = json.loads(mini(mini_course, "test", "--lab", "1.1", "--json", cwd=directory).stdout)
    assert [test["name"] for test in document["checks"][0]["run"]["tests"]] == ["test_add_small"]
