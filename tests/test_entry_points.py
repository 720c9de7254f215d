"""Through the public entry points: the kinds of bug a held-out audit slipped past the suite.

Each test drives `course` as a learner or author does (`course()` in this
process, or a real process where only a process shows it) and names the
behaviour it holds: the save-then-restore wiring of `course reset`, the
default answer of its confirmation, a DIR that leads into checkpoints/, the
text lines of `course status`, which of two practice dirs a command picks,
the exit status of every author tool that finds a problem, the keys of
chapter.toml that exclude each other, and red-light recognition after green
`--lab` runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO, course, made_practice, mini, tree_hash
from course.locate import shown
from loop_helpers import RIGHT, WRONG, practice, pty_session
from tool_helpers import chain_course, replace_once, tool

TOML = "checkpoints/01-adder/chapter.toml"
# The fixture chapter's red light 1.R1, made by hand: what its patch does to the target's add.
BROKEN_BY_HAND = "def add(a, b):\n    return a - b\n"


def branch_exists(directory: Path, name: str) -> bool:
    found = subprocess.run(["git", "-C", str(directory), "rev-parse", "--verify", "--quiet", f"refs/heads/{name}"],
                           capture_output=True)
    return found.returncode == 0


# course reset: the save, then the restore ------------------------------------------------

EDITED_DURING_RESET = "def add(a, b):\n    return b + a  # saved by the editor while reset ran\n"


def test_an_edit_made_between_the_save_and_the_restore_survives_the_reset(mini_course: Path, tmp_path: Path) -> None:
    """The edit lands the moment the save commit's branch moves (a git hook of the learner's
    repository), which is after the save and before any file is restored: reset must see the
    file is no longer what it saved, and leave it alone."""
    learner = practice(mini_course, tmp_path / "p")
    (learner / "tiny_pi/adder.py").write_text(WRONG)
    hook = learner / ".git/hooks/reference-transaction"
    hook.write_text(
        "#!/bin/sh\n"
        '[ "$1" = committed ] || exit 0\n'
        "grep -q refs/heads/course-saves || exit 0\n"
        f"cat > tiny_pi/adder.py <<'EOF'\n{EDITED_DURING_RESET}EOF\n"
    )
    hook.chmod(0o755)
    result = mini(mini_course, "reset", "1", str(learner), "--yes")
    assert (learner / "tiny_pi/adder.py").read_text() == EDITED_DURING_RESET, "the edit made after the save was lost"
    assert result.returncode == 2, result.stdout + result.stderr
    assert "tiny_pi/adder.py: it changed after your versions were saved" in result.stderr
    saved = subprocess.run(["git", "-C", str(learner), "show", "course-saves:tiny_pi/adder.py"],
                           capture_output=True, text=True, check=True).stdout
    assert saved == WRONG, "the save holds what was there when reset started"


# The confirmation: Enter means no --------------------------------------------------------


@pytest.mark.parametrize("where", ["pipe", "terminal"])
def test_enter_at_the_reset_prompt_means_no(mini_course: Path, tmp_path: Path, where: str) -> None:
    learner = practice(mini_course, tmp_path / "p")
    (learner / "tiny_pi/adder.py").write_text(WRONG)
    if where == "pipe":
        result = mini(mini_course, "reset", "1", str(learner), input="\n")
        status, printed = result.returncode, result.stdout + result.stderr
    else:
        status, printed = pty_session(mini_course, ["reset", "1", str(learner)], answers={b"Reset these files?": b"\r"})
    assert "[y/N]" in printed, "the prompt shows that no is the default"
    assert status == 1 and "Nothing was changed." in printed, printed
    assert (learner / "tiny_pi/adder.py").read_text() == WRONG
    assert not branch_exists(learner, "course-saves"), "nothing was saved either"


# A DIR that leads into checkpoints/ --------------------------------------------------------

LEARNER_COMMANDS = [
    ["test", "1"], ["watch", "1", "--once"], ["hint", "1", "--next"], ["diff", "1"],
    ["redlight", "1"], ["reset", "1", "--yes"],
]


def into_checkpoints(mini_course: Path, tmp_path: Path, how: str, below: str) -> str:
    """A DIR naming mini_course/checkpoints/BELOW, through a symbolic link or through `..`."""
    if how == "symlink":
        link = tmp_path / "looks-like-mine"
        link.symlink_to(mini_course / "checkpoints")
        return str(link / below)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    return str(elsewhere / ".." / mini_course.name / "checkpoints" / below)


@pytest.mark.parametrize("how", ["symlink", "dotdot"])
@pytest.mark.parametrize("command", LEARNER_COMMANDS, ids=lambda words: words[0])
def test_a_dir_that_leads_into_checkpoints_is_refused_and_nothing_is_written(
    mini_course: Path, tmp_path: Path, command: list[str], how: str
) -> None:
    directory = into_checkpoints(mini_course, tmp_path, how, "01-adder/target")
    before = tree_hash(mini_course / "checkpoints")
    result = mini(mini_course, *command[:2], directory, *command[2:])
    assert result.returncode == 2, result.stdout + result.stderr
    assert "inside checkpoints/" in result.stderr and "Traceback" not in result.stderr
    assert tree_hash(mini_course / "checkpoints") == before


@pytest.mark.parametrize("how", ["symlink", "dotdot"])
def test_practice_refuses_a_new_dir_that_lands_inside_checkpoints(mini_course: Path, tmp_path: Path, how: str) -> None:
    directory = into_checkpoints(mini_course, tmp_path, how, "01-adder/mine")
    before = tree_hash(mini_course / "checkpoints")
    result = mini(mini_course, "practice", "1", directory)
    assert result.returncode == 2 and "inside checkpoints/" in result.stderr, result.stdout + result.stderr
    assert tree_hash(mini_course / "checkpoints") == before
    assert not (mini_course / "checkpoints/01-adder/mine").exists()


# course status: the lines a learner reads --------------------------------------------------


def status_lines(root: Path, cwd: Path) -> tuple[list[str], dict]:
    env = {"COURSE_ROOT": str(root)}
    text = course("status", cwd=cwd, env=env)
    document = course("status", "--json", cwd=cwd, env=env)
    assert text.returncode == 0 and document.returncode == 0, text.stderr + document.stderr
    return text.stdout.splitlines(), json.loads(document.stdout)


def shown_from(path: Path, cwd: Path) -> str:
    """A path as `course` shows it when run in `cwd` (course.locate.shown)."""
    old = Path.cwd()
    os.chdir(cwd)
    try:
        return shown(path)
    finally:
        os.chdir(old)


def assert_lines_say_what_the_json_says(lines: list[str], document: dict, cwd: Path) -> None:
    """Each chapter's line, its "(also ...)" lines, the summary and the next step, against --json."""
    assert lines[0] == "Progress:"
    for chapter in document["chapters"]:
        line = next((line for line in lines if line.startswith(f"  {chapter['chapter']}  ")), None)
        assert line is not None, f"no line for {chapter['chapter']}: {lines}"
        words = line.split(None, 1)[1]
        assert words.startswith(chapter["verdict"]), (line, chapter["verdict"])
        if chapter["exists"]:
            assert line.endswith(f"  in {shown_from(Path(chapter['directory']), cwd)}"), line
            assert ("last test" in line) == (chapter["last_test"] is not None), line
        else:
            assert " in " not in words.removeprefix(chapter["verdict"]), line
        following = lines[lines.index(line) + 1:]
        also = []
        while following and following[0].strip().startswith("(also "):
            also.append(following.pop(0).strip().removeprefix("(also ").removesuffix(")"))
        assert also == [shown_from(Path(d), cwd) for d in chapter["other_directories"]], lines
    counts = f"{document['green']} green, {document['in_progress']} in progress, {document['not_started']} not started"
    assert lines[-2] == f"{counts}, of {len(document['chapters'])} chapters.", lines[-2]
    assert lines[-1] == f"Next: {document['next']}"


def test_the_status_lines_say_what_the_json_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chapter 1 green, with a second practice dir; chapter 2 red; chapter 3 not started, then red."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # the index of practice dirs: this test's own
    root = chain_course(tmp_path)
    cwd = tmp_path / "work"
    cwd.mkdir()
    env = {"COURSE_ROOT": str(root)}
    first = made_practice(root, "1", cwd / "adder-first")
    green = made_practice(root, "1", cwd / "adder-green")
    shutil.copyfile(root / "checkpoints/01-adder/target/tiny_pi/adder.py", green / "tiny_pi/adder.py")
    red = made_practice(root, "2", tmp_path / "multiplier")
    for directory, chapter, status in ((first, "1", 1), (green, "1", 0), (red, "2", 1)):
        result = course("test", chapter, str(directory), env=env)
        assert result.returncode == status, result.stdout + result.stderr

    lines, document = status_lines(root, cwd)
    assert [c["state"] for c in document["chapters"]] == ["green", "red", "not started"]
    assert document["chapters"][0]["other_directories"] == [str(first)]
    assert_lines_say_what_the_json_says(lines, document, cwd)
    # Counts that differ from each other, so a summary that mixes them up shows.
    third = made_practice(root, "3", cwd / "calculator")
    assert course("test", "3", str(third), env=env).returncode == 1
    lines, document = status_lines(root, cwd)
    assert (document["green"], document["in_progress"], document["not_started"]) == (1, 2, 0)
    assert_lines_say_what_the_json_says(lines, document, cwd)


# Two practice dirs of one chapter: which one a command means -------------------------------


def test_with_two_practice_dirs_a_command_picks_the_one_used_last_or_the_one_it_runs_in(
    mini_course: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # the index of practice dirs: this test's own
    env = {"COURSE_ROOT": str(mini_course)}
    one = made_practice(mini_course, "1", tmp_path / "one")
    two = made_practice(mini_course, "1", tmp_path / "two")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for used_last, other in ((two, one), (one, two)):
        assert course("test", "1", str(used_last), env=env).returncode == 1
        picked = course("test", "1", cwd=elsewhere, env=env)
        assert f"Testing {used_last}" in picked.stdout, picked.stdout + picked.stderr
        status = json.loads(course("status", "--json", cwd=elsewhere, env=env).stdout)["chapters"][0]
        assert (status["directory"], status["other_directories"]) == (str(used_last), [str(other)])
        # Inside the other dir (or below it), the dir it runs in wins over the one used last.
        inside = course("test", cwd=other / "tiny_pi", env=env)
        assert inside.stdout.startswith(f"Testing {shown_from(other, other / 'tiny_pi')} "), inside.stdout
        assert json.loads(course("status", "--json", cwd=other, env=env).stdout)["chapters"][0]["directory"] == str(other)


# The author's tools: a problem found is exit status 1 (or 2 for input they cannot use) -------


def _broken_target(root: Path) -> None:
    replace_once(root / "checkpoints/01-adder/target/tiny_pi/adder.py", "return a + b", "return a - b")


def _stale_card(root: Path) -> None:
    replace_once(root / "checkpoints/01-adder/README.md", "> Add two numbers.", "> Add two numbers, or three.")


def _long_lesson(root: Path) -> None:
    from course.dev.lessons import LESSON_LINE_LIMIT

    with (root / "checkpoints/01-adder/README.md").open("a") as lesson:
        lesson.write("\nMore words.\n" * LESSON_LINE_LIMIT)


def _conflicting_edit(root: Path) -> None:
    """target(01) and parent(02) change the same line differently: the carry cannot merge them."""
    replace_once(root / "checkpoints/01-adder/target/tiny_pi/adder.py", "return a + b", "return b + a")
    replace_once(root / "checkpoints/02-multiplier/parent/tiny_pi/adder.py", "return a + b", "return sum((a, b))")


def _nothing(root: Path) -> None:
    return None


# tool, its arguments, what to break first, the exit status, a fragment of what it says
AUTHOR_PROBLEMS = {
    "verify": (["verify", "1"], _broken_target, 1, "does NOT hold"),
    "checkpoint": (["checkpoint", "1"], _broken_target, 1, "does NOT hold"),
    "depth": (["depth", "1"], _long_lesson, 1, "too long"),
    "cards --check": (["cards", "--check"], _stale_card, 1, "stale cards: 01-adder"),
    "target-diff": (["target-diff", "1", "tiny_pi/nope.py"], _nothing, 2, "in neither snapshot"),
    "carry": (["carry", "1"], _conflicting_edit, 1, "carry stopped"),
    "scaffold": (["scaffold", "adder", "--title", "Adder again"], _nothing, 2, "scaffold:"),
    "floors": (["floors", "pyproject.toml"], _nothing, 2, "floors:"),
}


@pytest.mark.parametrize("problem", list(AUTHOR_PROBLEMS))
def test_every_author_tool_exits_non_zero_when_it_finds_a_problem(tmp_path: Path, problem: str) -> None:
    args, breaks, status, says = AUTHOR_PROBLEMS[problem]
    root = chain_course(tmp_path)
    (root / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["click"]\n')  # no floor
    if args[0] in ("verify", "checkpoint", "depth", "cards", "target-diff", "scaffold"):
        shutil.rmtree(root / "checkpoints/02-multiplier")  # one chapter is enough and quicker
        shutil.rmtree(root / "checkpoints/03-calculator")
    if breaks is not _nothing:  # the same tool on the course before the break finds nothing
        fine = course("dev", *args, cwd=root, env={"COURSE_ROOT": str(root)})
        assert fine.returncode == 0, fine.stdout + fine.stderr
        subprocess.run(["git", "-C", str(root), "commit", "-qam", "as the author left it"], capture_output=True)
    breaks(root)
    result = course("dev", *args, cwd=root, env={"COURSE_ROOT": str(root)})
    assert result.returncode == status, result.stdout + result.stderr
    assert says in result.stdout + result.stderr
    assert "Traceback" not in result.stderr


def test_fuzz_exits_1_when_the_provider_does_not_hold(tmp_path: Path) -> None:
    """The CLI's status, not only the report: a broken provider makes `course dev fuzz` exit 1."""
    from course.workspace import copy_snapshot

    target = next(iter(sorted((REPO / "checkpoints").glob("05-*/target"))), None)
    provider = None if target is None else target / "tiny_pi/providers/openai_compatible.py"
    if provider is None or "except Exception as error:" not in provider.read_text():
        pytest.skip("chapter 05's provider changed: update this mutant")
    broken = tmp_path / "broken"
    copy_snapshot(target, broken)
    replace_once(broken / "tiny_pi/providers/openai_compatible.py", "except Exception as error:",
                 "except ArithmeticError as error:")
    source = (broken / "tiny_pi/providers/openai_compatible.py").read_text()
    (broken / "tiny_pi/providers/openai_compatible.py").write_text(
        source.replace("except httpx.HTTPError as error:", "except ZeroDivisionError as error:"))
    result = course("dev", "fuzz", "--snapshot", str(broken), "--examples", "200", "--workers", "1", "--seed", "3")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "did NOT hold" in result.stdout


# chapter.toml: keys that exclude each other ------------------------------------------------


@pytest.mark.parametrize("command", [["list"], ["checkpoint", "1"], ["dev", "cards", "--check"]])
def test_a_lab_with_both_select_and_nodes_is_refused_in_one_line(mini_course: Path, command: list[str]) -> None:
    path = mini_course / TOML
    replace_once(path, 'select = "small"\n', 'select = "small"\nnodes = ["tests/test_01_adder.py::test_add_small"]\n')
    result = mini(mini_course, *command)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "key 'labs[0].select'" in result.stderr and "exactly one of 'select'" in result.stderr
    assert "Traceback" not in result.stderr


# Red lights after green --lab runs --------------------------------------------------------

def test_a_break_after_green_lab_runs_is_the_red_light(mini_course: Path, tmp_path: Path) -> None:
    """The lesson's order: all green, then a lab on its own, then the documented break."""
    learner = practice(mini_course, tmp_path / "p")
    (learner / "tiny_pi/adder.py").write_text(RIGHT)
    assert mini(mini_course, "test", "1", str(learner)).returncode == 0
    assert mini(mini_course, "test", "1", str(learner), "--lab", "1.1").returncode == 0
    (learner / "tiny_pi/adder.py").write_text(BROKEN_BY_HAND)
    broken = mini(mini_course, "test", "1", str(learner), "--json")
    assert broken.returncode == 1
    assert json.loads(broken.stdout)["redlight_seen"] == "1.R1", broken.stdout
    (learner / "tiny_pi/adder.py").write_text(RIGHT)
    restored = mini(mini_course, "test", "1", str(learner))
    assert "Red light 1.R1 done" in restored.stdout, restored.stdout


def test_a_break_after_a_green_whole_run_is_the_red_light(mini_course: Path, tmp_path: Path) -> None:
    """The same break with no lab run in between: recognised today, and it must stay so."""
    learner = practice(mini_course, tmp_path / "p")
    (learner / "tiny_pi/adder.py").write_text(RIGHT)
    assert mini(mini_course, "test", "1", str(learner)).returncode == 0
    (learner / "tiny_pi/adder.py").write_text(BROKEN_BY_HAND)
    broken = mini(mini_course, "test", "1", str(learner))
    assert broken.returncode == 1 and "That is red light 1.R1" in broken.stdout, broken.stdout
    (learner / "tiny_pi/adder.py").write_text(RIGHT)
    assert "Red light 1.R1 done" in mini(mini_course, "test", "1", str(learner)).stdout
