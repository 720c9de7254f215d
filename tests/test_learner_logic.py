"""The pure parts of the learner commands, in-process: digests, wrapping, the next-step rule, records."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO
from course.catalog import load_catalog
from course.checklist import Check
from course.failures import digest, error_lines, frames, readable_message
from course.failures import tests_by_lab as lab_groups  # not named test_*: pytest would collect it
from course.errors import UsageError
from course.locate import beside
from course.nextstep import next_step
from course.output import wrap
from course.progress import CheckVerdict, LastTest
from course.redlights import RedLightState
from course.requirements import declared, problems
from course.runner import RunResult
from course.runner import TestCase as Case

CHAPTER = load_catalog(FIXTURES / "mini-course").resolve("1")

# What pytest writes for a test whose trio nursery raised one AssertionError (Python's layout).
GROUP_DETAILS = """\
+ Exception Group Traceback (most recent call last):
  |   File "/home/me/p 02/tests/test_01_adder.py", line 97, in test_add_small
  |     trio.run(main)
  |   File "/home/me/venv/lib/python3.11/site-packages/trio/_core/_run.py", line 1117, in __aexit__
  |     raise combined_error_from_nursery
  | ExceptionGroup: Exceptions from Trio nursery (1 sub-exception)
  +-+---------------- 1 ----------------
    | Traceback (most recent call last):
    |   File "/home/me/p 02/tests/test_01_adder.py", line 91, in main
    |     assert seen == ["x"]
    |   File "/home/me/p 02/tiny_pi/older.py", line 12, in helper
    |     return []
    | AssertionError: assert [] == ['x']
    |   
    |   Right contains one more item: 'x'
    |   Use -v to get more diff
    +------------------------------------
"""
GROUP_MESSAGE = (
    "AssertionError(\"assert [] == ['x']\\n  \\n  Right contains one more item: 'x'\\n  Use -v to get more diff\")"
    " [single exception in ExceptionGroup]"
)

# pytest's own layout, a failure surfacing in the learner's teaching file.
PYTEST_DETAILS = """\
def test_add_small():
>       assert add(1, 2) == 3

tests/test_01_adder.py:2: 
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ 

    def add(a, b):
>       raise ValueError("no\\nway")
E       ValueError: no
E       way

tiny_pi/adder.py:2: ValueError"""


def _run(details: str, message: str) -> RunResult:
    case = Case(file="tests/test_01_adder.py", name="test_add_small", outcome="failed", message=message, details=details)
    return RunResult(outcome="failed", exit_code=1, tests=(case,), output="", duration=0.1, time_limit=30)


def test_a_single_exception_group_is_shown_as_its_exception_with_real_newlines() -> None:
    lines = digest(_run(GROUP_DETAILS, GROUP_MESSAGE), CHAPTER)
    assert lines[:3] == [
        "first failure: tests/test_01_adder.py::test_add_small",
        "tests/test_01_adder.py:91",
        '>   assert seen == ["x"]',
    ]
    assert "E   AssertionError: assert [] == ['x']" in lines and "E     Right contains one more item: 'x'" in lines
    assert not any("ExceptionGroup" in line or "\\n" in line or "Use -v" in line for line in lines)
    assert lines[-1] == ("the fix belongs in tiny_pi/adder.py (lab 1.1's teaching file); "
                         "it surfaced in tiny_pi/older.py:12, code of an earlier chapter")


def test_a_failure_outside_the_learners_code_points_at_its_labs_file_not_every_file() -> None:
    """Chapter 01 has five teaching files; a lab 1.2 test failing in the test itself names tasks.py alone."""
    survival = load_catalog(REPO).resolve("01")
    assert len(survival.teaching_files) == 5
    lab = survival.lab("1.2")
    test = next(name for name in _test_names(survival) if lab.selects(f"tests/test_01_survival.py::{name}"))
    details = f"def {test}():\n>       assert results == [1, 2]\nE       assert [2, 1] == [1, 2]\n\ntests/test_01_survival.py:9: AssertionError"
    case = Case(file="tests/test_01_survival.py", name=test, outcome="failed", message="assert", details=details)
    run = RunResult(outcome="failed", exit_code=1, tests=(case,), output="", duration=0.1, time_limit=30)
    assert digest(run, survival)[-1] == "the fix belongs in tiny_pi/survival/tasks.py (lab 1.2's teaching file)"
    unknown = Case(file="tests/test_01_survival.py", name="test_in_no_lab", outcome="failed", message="x", details=details)
    lines = digest(RunResult(outcome="failed", exit_code=1, tests=(unknown,), output="", duration=0.1, time_limit=30), survival)
    assert lines[-1].startswith("the fix belongs in tiny_pi/survival/streams.py, ") and "(this chapter's teaching files)" in lines[-1]


def _test_names(chapter) -> list[str]:
    source = (chapter.target / chapter.focused_tests[0]).read_text()
    return [line.split("(")[0].removeprefix("def ").removeprefix("async def ") for line in source.splitlines()
            if line.startswith(("def test_", "async def test_"))]


def test_pytests_layout_gives_the_test_line_and_the_line_in_the_teaching_file() -> None:
    found = frames(PYTEST_DETAILS)
    assert [(f.place, f.source) for f in found] == [
        ("tests/test_01_adder.py:2", "assert add(1, 2) == 3"),
        ("tiny_pi/adder.py:2", 'raise ValueError("no\\nway")'),
    ]
    lines = digest(_run(PYTEST_DETAILS, "ValueError: no"), CHAPTER)
    assert error_lines(PYTEST_DETAILS, "")[0] == "E       ValueError: no"
    assert lines[-1] == 'in your code: tiny_pi/adder.py:2: raise ValueError("no\\nway")'


def test_a_junit_message_is_read_with_real_newlines() -> None:
    assert readable_message(GROUP_MESSAGE).splitlines()[0] == "AssertionError: assert [] == ['x']"
    assert readable_message("plain text") == "plain text"


def test_wrapping_keeps_a_hanging_indent() -> None:
    line = "Next: make lab 2.1 green: `course test 02 --lab 2.1` (stuck? `course hint 02 --lab 2.1`) and more words here"
    pieces = wrap(line, 40)
    assert all(len(piece) <= 40 for piece in pieces) and len(pieces) > 2
    assert all(piece.startswith("      ") for piece in pieces[1:])
    checked = wrap("         expected: " + "word " * 20, 40)
    assert all(piece.startswith(" " * 19) for piece in checked[1:])
    assert wrap("short", 40) == ["short"]


def _last(lab: str | None, ok: bool, labs: dict[str, bool]) -> LastTest:
    checks = tuple(CheckVerdict("lab", lab_id, f"lab {lab_id} X", good) for lab_id, good in labs.items())
    return LastTest(chapter=CHAPTER.name, lab=lab, ok=ok, when="", checks=checks)


def test_one_next_step_rule_carries_the_dir_and_follows_the_red_light_exercise() -> None:
    none = RedLightState(CHAPTER.name, {})
    assert next_step(CHAPTER, None, none, ["my dir"]) == "run the focused tests: `course test 01 'my dir'`"
    red = next_step(CHAPTER, _last(None, False, {"1.1": True, "1.2": False}), none, ["my dir"], runner="watch")
    assert red == "make lab 1.2 green: `course watch 01 'my dir' --lab 1.2` (stuck? `course hint 01 'my dir' --lab 1.2`)"
    assert next_step(CHAPTER, _last("1.1", True, {"1.1": True}), none).startswith("lab 1.2 Both: `course test 01 --lab 1.2`")
    green = _last(None, True, {"1.1": True, "1.2": True})
    assert next_step(CHAPTER, green, none).startswith("the red-light exercise 1.R1 Minus")
    seen = RedLightState(CHAPTER.name, {"1.R1": "seen"}, ("1.R1",))
    broken = next_step(CHAPTER, _last(None, False, {"1.1": False, "1.2": False}), seen)
    assert broken.startswith("restore your code, then run `course test 01`: green again completes 1.R1")
    done = RedLightState(CHAPTER.name, {"1.R1": "done"})
    assert next_step(CHAPTER, green, done) == (
        "chapter 01 is done, the last chapter of the course (`course status` shows any left open)")


def test_the_red_light_step_offers_the_watch_for_a_break_by_hand_and_no_patch() -> None:
    green = _last(None, True, {"1.1": True, "1.2": True})
    step = next_step(CHAPTER, green, RedLightState(CHAPTER.name, {}))
    assert step == ("the red-light exercise 1.R1 Minus: `course redlight 01` says what to break by hand and watches "
                    "for the failure (or break it as the lesson says and run `course test 01` while it is broken)")
    assert "--revert" not in step and "patch" not in step, "a patch fits the target's lines, never the learner's"


def test_the_next_chapter_goes_beside_a_practice_dir_made_elsewhere(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "course" / "practice"
    home.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert beside(home / "01-adder", CHAPTER, home) == []
    assert beside(tmp_path / "mine" / "p1", CHAPTER, home) == [str(Path("mine") / CHAPTER.name)]
    green = _last(None, True, {"1.1": True, "1.2": True})
    done = RedLightState(CHAPTER.name, {"1.R1": "done"})
    step = next_step(CHAPTER, green, done, (), CHAPTER, "test", ["my place/01-adder"])
    assert step == "chapter 01 is done; on to chapter 01: `course practice 01 'my place/01-adder'`"


def test_a_lab_id_or_a_near_miss_where_a_chapter_goes_is_answered() -> None:
    catalog = load_catalog(FIXTURES / "mini-course")
    with pytest.raises(UsageError, match=r"no chapter '1\.2' \(1\.2 is a lab of chapter 01: `--lab 1\.2`\)"):
        catalog.resolve("1.2")
    with pytest.raises(UsageError, match=r"no chapter 'addr' \(did you mean 01-adder\?\)"):
        catalog.resolve("addr")
    with pytest.raises(UsageError, match=r"no chapter 'zzz'\. Valid chapters: 01-adder$"):
        catalog.resolve("zzz")


def test_a_check_carries_its_kind_and_lab_as_checked_fields() -> None:
    check = Check(chapter="01-adder", kind="lab", name="lab 1.1 Small", ok=True, expected="1", actual="1", lab="1.1")
    assert check.to_json()["lab"] == "1.1" and check.to_json()["kind"] == "lab"
    with pytest.raises(ValueError):
        Check(chapter="01-adder", kind="labs", name="x", ok=True, expected="", actual="")
    with pytest.raises(ValueError):
        Check(chapter="01-adder", kind="lab", name="lab 1.1 Small", ok=True, expected="", actual="")
    last = LastTest.from_checks(CHAPTER, None, [check])
    assert last.lab_ok(CHAPTER.labs[0]) is True and last.lab_ok(CHAPTER.labs[1]) is None


def test_the_installed_layout_reads_the_chapters_inside_the_package(tmp_path: Path) -> None:
    """A regular install puts checkpoints/ inside the package (pyproject's package-data)."""
    import tomllib

    config = tomllib.loads((FIXTURES.parent.parent / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"]["course.checkpoints"] == "checkpoints"
    assert "course.checkpoints" in config["packages"] and config["package-data"]["course.checkpoints"] == ["**/*"]


def test_a_red_light_is_recognised_only_after_green_or_when_applied(tmp_path: Path) -> None:
    from course import redlights

    broken = _run("E   assert -1 == 3\ntests/test_01_adder.py:2: AssertionError", "assert -1 == 3")
    still_writing = redlights.record(tmp_path, CHAPTER, broken, green=False, full=True, was_green=False)
    assert still_writing.seen is None, "code that was never green was not broken on purpose"
    after_green = redlights.record(tmp_path, CHAPTER, broken, green=False, full=True, was_green=True)
    assert after_green.seen is not None and after_green.seen.id == "1.R1"
    assert redlights.read(tmp_path, CHAPTER).states == {"1.R1": "seen"}
    restored = redlights.record(tmp_path, CHAPTER, None, green=True, full=True)
    assert [r.id for r in restored.done] == ["1.R1"] and restored.state.states == {"1.R1": "done"}
    other = _run("E   assert 2 == 3\ntests/test_01_adder.py:2: AssertionError", "assert 2 == 3")
    assert redlights.record(tmp_path, CHAPTER, other, green=False, full=True).seen is None, "another failure"


def test_tests_by_lab_keeps_one_lab_when_asked_about_one() -> None:
    cases = tuple(Case(file="tests/test_01_adder.py", name=name, outcome=outcome, message="", details="")
                  for name, outcome in (("test_add_small", "passed"), ("test_add_big", "failed"), ("test_other", "passed")))
    run = RunResult(outcome="failed", exit_code=1, tests=cases, output="", duration=0.1, time_limit=30)
    everything = lab_groups(run, CHAPTER)
    assert [title for title, _ in everything] == ["lab 1.1 Small", "lab 1.2 Both", "not in a lab"]
    assert lab_groups(run, CHAPTER, CHAPTER.lab("1.1")) == [("lab 1.1 Small", [("test_add_small", "passed")])]


def test_a_missing_library_is_named_as_an_install_problem_not_a_teaching_file() -> None:
    details = "tests/test_01_adder.py:1: in <module>\n    import httpx\nE   ModuleNotFoundError: No module named 'httpx'"
    case = Case(file="tests/test_01_adder.py", name="", outcome="failed", message="", details=details)
    run = RunResult(outcome="collection-error", exit_code=2, tests=(case,), output="", duration=0.1, time_limit=30)
    assert digest(run, CHAPTER)[-1] == ("hint: httpx is not installed in the Python that runs `course`; install the "
                                        "course into it (`python -m pip install -e .` in the course checkout)")


def test_requirements_this_python_does_not_meet_are_each_named() -> None:
    assert problems(["pytest>=1.0", "surely-not-a-real-distribution>=1", "pytest>=999"]) == [
        "surely-not-a-real-distribution (not installed)",
        f"pytest {importlib.metadata.version('pytest')} (needs >=999)",
    ]
    assert "trio>=0.31" in declared(REPO) and not any("extra ==" in r for r in declared(REPO))


@pytest.mark.parametrize("command", [["verify"], ["checkpoint", "01"], ["practice", "01", "never-made"]])
def test_proofs_refuse_a_python_without_the_courses_dependencies(command, monkeypatch, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from course import requirements
    from course.cli import cli

    monkeypatch.setenv("COURSE_ROOT", str(FIXTURES / "mini-course"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(requirements, "declared", lambda root: ["surely-not-a-real-distribution>=1"])
    result = CliRunner().invoke(cli, command)
    assert isinstance(result.exception, requirements.MissingDependencies)
    assert "surely-not-a-real-distribution (not installed)" in str(result.exception)
    assert not (tmp_path / "never-made").exists(), "refused before anything was made"


def test_course_test_lab_shows_the_first_failure_of_that_lab_not_of_another() -> None:
    """One run answers `--lab 1.1`; another lab's test that failed before it is not the one to show."""
    from course.output import result_lines
    from course.redlights import Update

    other = Case(file="tests/test_01_adder.py", name="test_add_big", outcome="failed", message="assert 0 == 30",
                 details="E   assert 0 == 30\ntests/test_01_adder.py:3: AssertionError")
    own = Case(file="tests/test_01_adder.py", name="test_add_small", outcome="failed", message="assert 0 == 3",
               details="E   assert 0 == 3\ntests/test_01_adder.py:2: AssertionError")
    run = RunResult(outcome="failed", exit_code=1, tests=(other, own), output="", duration=0.1, time_limit=30)
    lab = CHAPTER.lab("1.1")
    check = Check(chapter="01-adder", kind="lab", name="lab 1.1 Small", ok=False, expected="1 passed",
                  actual="0/1 passed", lab="1.1", run=run)
    update = Update(seen=None, done=(), state=RedLightState(CHAPTER.name, {}))
    lines = result_lines(CHAPTER, lab, [check], 0.1, update, "fix it", verbose_hint="course test --lab 1.1 -v")
    assert "  first failure: tests/test_01_adder.py::test_add_small" in lines
    assert "  E   assert 0 == 3" in lines and not any("test_add_big" in line or "0 == 30" in line for line in lines)
    assert digest(run, CHAPTER)[0] == "first failure: tests/test_01_adder.py::test_add_big", "no lab: the run's first"


def test_status_after_the_last_chapter_names_the_first_chapter_not_done_or_says_complete(tmp_path: Path) -> None:
    """Started at the last chapter and finished it: the earlier chapters are what is left."""
    import attrs

    from course.status import ChapterProgress, StatusReport

    last_chapter = attrs.evolve(CHAPTER, number=2, slug="last")
    green = LastTest(chapter=last_chapter.name, lab=None, ok=True, when="",
                     checks=tuple(CheckVerdict("lab", lab.id, lab.title, True) for lab in last_chapter.labs))
    done = RedLightState(last_chapter.name, {"1.R1": "done"})
    finished = ChapterProgress(last_chapter, tmp_path / "p2", True, green, done)
    first = ChapterProgress(CHAPTER, tmp_path / "p1", False, None)
    step = StatusReport((first, finished)).next_step()
    assert step == "`course practice 01`", step
    first_done = ChapterProgress(CHAPTER, tmp_path / "p1", True, attrs.evolve(green, chapter=CHAPTER.name),
                                 RedLightState(CHAPTER.name, {"1.R1": "done"}))
    assert StatusReport((first_done, finished)).next_step() == (
        "the course is complete: all 2 chapters are green, their red lights done")


# A live test whose child crashed: pytest quotes the child's output, its traceback last, in the
# assertion message, after a long terminal transcript; the child's frames are in a file of an
# earlier chapter (older.py) and in this chapter's teaching file (adder.py).
LIVE_DETAILS = "\n".join([
    "def test_add_small():",
    "        done = run_agent()",
    ">       assert done.returncode == 0, done.output",
    "E       AssertionError: welcome to the agent",
    *[f"E         > line {number} of what the terminal showed" for number in range(1, 31)],
    "E         Traceback (most recent call last):",
    'E           File "/home/me/p 13/tiny_pi/adder.py", line 7, in main',
    "E             check_stdin()",
    'E           File "/home/me/p 13/tiny_pi/older.py", line 3, in check_stdin',
    "E             raise RuntimeError('stdin is not a terminal')",
    "E         RuntimeError: stdin is not a terminal",
    "E       assert 1 == 0",
    "E        +  where 1 = CompletedProcess(args=[...], returncode=1).returncode",
    "",
    "tests/test_01_adder.py:3: AssertionError",
])


def test_a_live_tests_quoted_traceback_is_where_the_pointer_and_the_shown_end_come_from() -> None:
    """The child's traceback names the file; its error line is shown, not cut off after the transcript's start.

    Before: the pointer named the lab's teaching file whatever the child's
    traceback said, and the digest showed the first twelve lines of the quoted
    terminal text, so the child's RuntimeError was never on screen.
    """
    assert [(f.place, f.source) for f in frames(LIVE_DETAILS)] == [
        ("tests/test_01_adder.py:3", "assert done.returncode == 0, done.output"),
        ("tiny_pi/adder.py:7", "check_stdin()"),
        ("tiny_pi/older.py:3", "raise RuntimeError('stdin is not a terminal')"),
    ]
    lines = digest(_run(LIVE_DETAILS, "AssertionError: welcome"), CHAPTER)
    assert len(lines) <= 14, lines
    assert "E         RuntimeError: stdin is not a terminal" in lines, lines
    assert "E       AssertionError: welcome to the agent" in lines  # the start, then a line that says what is cut
    assert any(line.startswith("E   ... (") and "lines not shown; `course test -v` shows them all)" in line
               for line in lines), lines
    assert lines[-2:] == ["in your code: tiny_pi/adder.py:7: check_stdin()",
                          "  (it surfaced in tiny_pi/older.py:3, code of an earlier chapter)"]


def test_a_second_red_light_is_recognised_while_the_first_waits_for_its_green(tmp_path: Path) -> None:
    """1.R1 seen, restored and checked by a `--lab` run only, then 1.R2 broken: the run shows 1.R2.

    Before: the last whole-chapter run was red (1.R1), so 1.R2's failure was
    taken for unfinished work, and the learner was told to restore 1.R1.
    """
    import attrs
    from course import redlights

    first = CHAPTER.redlights[0]
    second = attrs.evolve(first, id="1.R2", fragment="assert 5 == 3")
    chapter = attrs.evolve(CHAPTER, redlights=(first, second))
    one = _run("E   assert -1 == 3\ntests/test_01_adder.py:2: AssertionError", "assert -1 == 3")
    two = _run("E   assert 5 == 3\ntests/test_01_adder.py:2: AssertionError", "assert 5 == 3")
    assert redlights.record(tmp_path, chapter, one, green=False, full=True, was_green=True).seen == first
    redlights.record(tmp_path, chapter, None, green=True, full=False)  # the restore, seen by a lab's run only
    assert redlights.record(tmp_path, chapter, two, green=False, full=True).seen == second
    state = redlights.read(tmp_path, chapter)
    assert state.states == {"1.R1": "seen", "1.R2": "seen"}
    red = LastTest(chapter.name, "/p", False, None, ())
    assert next_step(chapter, red, state).endswith("green again completes 1.R1 and 1.R2")
    restored = redlights.record(tmp_path, chapter, None, green=True, full=True)
    assert [r.id for r in restored.done] == ["1.R1", "1.R2"]
