"""Exact verdicts: what `course test`, `checkpoint` and `verify` say is true, whatever the learner edits.

Each case breaks one promise on purpose, on the one-chapter fixture course
(`tiny_pi/adder.py`, tests `test_add_small` and `test_add_big`), and checks
the verdict the command gives, as a learner or an author sees it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from conftest import FIXTURES, course, mini
from hostile_helpers import CHAPTER

PATHS = pytest.mark.parametrize("warm", [False, True], ids=["fresh-host", "prestarted-host"])
UNSOLVED = "def add(a, b):\n    return 0\n"


def run_course(root: Path, *args: str, warm: bool = True) -> subprocess.CompletedProcess[str]:
    """`course ARGS` against `root`, its runs on a prestarted host (warm) or one its pool starts."""
    return mini(root, *args, env={"COURSE_WARM": "1" if warm else "0"})


@pytest.fixture
def unsolved(mini_course: Path, tmp_path: Path) -> Path:
    """A learner's dir whose add() is wrong: every honest verdict is red."""
    directory = tmp_path / "work"
    shutil.copytree(mini_course / CHAPTER / "target", directory)
    (directory / "tiny_pi/adder.py").write_text(UNSOLVED)
    return directory


def assert_cheat_fails(mini_course: Path, directory: Path, warm: bool = True) -> str:
    result = run_course(mini_course, "test", "1", str(directory), warm=warm)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 1, "a cheat turned the verdict green:\n" + result.stdout
    assert "Green" not in result.stdout
    return result.stdout



@PATHS
def test_emptied_test_bodies_do_not_make_a_learner_green(mini_course: Path, unsolved: Path, warm: bool) -> None:
    (unsolved / "tests/test_01_adder.py").write_text("def test_add_small(): pass\ndef test_add_big(): pass\n")
    out = assert_cheat_fails(mini_course, unsolved, warm)
    assert "the verdict used the chapter's: tests/test_01_adder.py" in out


@PATHS
def test_a_conftest_that_marks_every_test_passed_is_not_used(mini_course: Path, unsolved: Path, warm: bool) -> None:
    (unsolved / "tests/conftest.py").write_text(textwrap.dedent("""
        import pytest
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_makereport(item, call):
            outcome = yield
            report = outcome.get_result()
            report.outcome = "passed"
    """))
    out = assert_cheat_fails(mini_course, unsolved, warm)
    assert "tests/conftest.py" in out


@PATHS
def test_a_plugin_added_to_the_learners_pytest_ini_is_not_loaded(mini_course: Path, unsolved: Path, warm: bool) -> None:
    (unsolved / "passer.py").write_text("def pytest_collection_modifyitems(items):\n    items.clear()\n")
    ini = unsolved / "pytest.ini"
    ini.write_text(ini.read_text() + "addopts = -p passer\n")
    out = assert_cheat_fails(mini_course, unsolved, warm)
    assert "pytest.ini" in out


@PATHS
def test_a_fake_report_and_os_exit_is_a_crash(mini_course: Path, unsolved: Path, warm: bool, tmp_path: Path) -> None:
    (unsolved / "tiny_pi/adder.py").write_text(textwrap.dedent("""
        import os, sys
        def add(a, b):
            for argument in sys.argv:
                if argument.startswith("--junitxml="):
                    open(argument.split("=", 1)[1], "w").write("<testsuite tests='2'/>")
            os._exit(0)
    """))
    out = assert_cheat_fails(mini_course, unsolved, warm)
    assert "did a test call os._exit()" in out


@PATHS
@pytest.mark.parametrize("variable", ["FORCE_COLOR", "PY_COLORS"])
def test_colour_forced_by_the_environment_never_changes_a_verdict(mini_course: Path, variable: str, warm: bool) -> None:
    result = course("verify", env={"COURSE_ROOT": str(mini_course), variable: "1", "COURSE_WARM": str(int(warm)),
                                   "TERM": "xterm-256color", "COLUMNS": "311"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "The course holds" in result.stdout


@PATHS
def test_filterwarnings_error_in_the_chapter_config_keeps_a_solution_green(mini_course: Path, warm: bool,
                                                                            tmp_path: Path) -> None:
    for snapshot in ("parent", "target"):
        ini = mini_course / CHAPTER / snapshot / "pytest.ini"
        ini.write_text(ini.read_text() + "filterwarnings =\n    error\n")
    directory = tmp_path / "work"
    shutil.copytree(mini_course / CHAPTER / "target", directory)
    result = run_course(mini_course, "test", "1", str(directory), warm=warm)
    assert result.returncode == 0, result.stdout + result.stderr
    result = run_course(mini_course, "checkpoint", "1", warm=warm)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_file_under_tiny_pi_is_judged_as_written(mini_course: Path, unsolved: Path) -> None:
    """A package file the lesson never names is the learner's too: broken there, red in the verdict."""
    (unsolved / "tiny_pi/adder.py").write_text("from tiny_pi import START\n\ndef add(a, b):\n    return START + a + b\n")
    init = unsolved / "tiny_pi/__init__.py"
    init.write_text(init.read_text() + "START = 0\n")
    result = run_course(mini_course, "test", "1", str(unsolved))
    assert result.returncode == 0, result.stdout  # their helper in __init__.py is used
    assert "did not use" not in result.stdout
    init.write_text(init.read_text() + "raise RuntimeError('broken on purpose')\n")
    out = assert_cheat_fails(mini_course, unsolved)  # and so is their broken __init__.py
    assert "RuntimeError: broken on purpose" in out


def test_the_verdict_copy_holds_the_learners_package_as_written_and_nothing_else(
    mini_course: Path, unsolved: Path
) -> None:
    from course.catalog import load_catalog
    from course.verdict_copy import verdict_copy

    chapter = load_catalog(mini_course).resolve("1")
    (unsolved / "tiny_pi/__init__.py").unlink()  # deleted: the chapter's copy must not come back
    (unsolved / "tiny_pi/__pycache__").mkdir()
    (unsolved / "tiny_pi/__pycache__/adder.cpython-311.pyc").write_bytes(b"stale")
    (unsolved / "tiny_pi/data").mkdir()
    (unsolved / "tiny_pi/data/table.json").write_text("{}")
    os.mkfifo(unsolved / "tiny_pi/pipe.py")
    (unsolved / "tiny_pi/loop").symlink_to(unsolved / "tiny_pi", target_is_directory=True)
    (unsolved / "notes.py").write_text("scratch = 1\n")
    (unsolved / "tests/test_01_adder.py").write_text("def test_nothing(): pass\n")
    with verdict_copy(chapter, unsolved) as copy:
        files = sorted(path.relative_to(copy.directory).as_posix() for path in copy.directory.rglob("*")
                       if not path.is_dir())
        assert files == ["pytest.ini", "tests/test_01_adder.py", "tiny_pi/adder.py", "tiny_pi/data/table.json"]
        assert (copy.directory / "tiny_pi/adder.py").read_text() == UNSOLVED
        assert (copy.directory / "tiny_pi/loop").resolve() == (unsolved / "tiny_pi").resolve()  # read in place
        assert (copy.directory / "tests/test_01_adder.py").read_bytes() == (
            mini_course / CHAPTER / "parent/tests/test_01_adder.py").read_bytes()
        assert [(item.path, item.how) for item in copy.replaced] == [
            ("tests/test_01_adder.py", "changed"), ("tiny_pi/pipe.py", "unreadable")]
    assert (unsolved / "tiny_pi/adder.py").read_text() == UNSOLVED  # removing the copy removed only the link


def test_the_note_names_every_replaced_file_and_says_truly_what_was_used(mini_course: Path, unsolved: Path) -> None:
    (unsolved / "tests/test_01_adder.py").unlink()
    (unsolved / "tests/conftest.py").write_text("")
    (unsolved / "tests/data.txt").write_text("not python, still a test file\n")
    ini = unsolved / "pytest.ini"
    ini.write_text(ini.read_text() + "addopts = -p no:terminal\n")
    result = run_course(mini_course, "test", "1", str(unsolved), "--json")
    assert result.returncode == 1, result.stdout
    note = next(check for check in json.loads(result.stdout)["checks"] if check["kind"] == "note")
    assert note["replaced"] == [
        {"path": "pytest.ini", "how": "changed"},
        {"path": "tests/conftest.py", "how": "added"},
        {"path": "tests/data.txt", "how": "added"},
        {"path": "tests/test_01_adder.py", "how": "deleted"},
    ]
    assert note["actual"] == (
        "the verdict used the chapter's: pytest.ini (yours differs), tests/test_01_adder.py (missing from your dir); "
        "the verdict left out: tests/conftest.py (the chapter has none), tests/data.txt (the chapter has none); "
        f"to take the chapter's versions: course reset 01 {unsolved} --file pytest.ini (and the same for each file named)"
    )
    text = run_course(mini_course, "test", "1", str(unsolved)).stdout
    assert "[ok]   files of yours the verdict did not use - the verdict used the chapter's: pytest.ini" in text


def edit_toml(root: Path, old: str, new: str) -> None:
    path = root / CHAPTER / "chapter.toml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def checkpoint_line(root: Path, name: str) -> str:
    result = mini(root, "checkpoint", "1")
    assert result.returncode == 1, result.stdout + result.stderr
    lines = [line for line in result.stdout.splitlines() if name in line]
    assert lines and lines[0].lstrip().startswith("[FAIL]"), result.stdout
    return result.stdout


def test_more_passes_than_a_lab_expects_is_a_deviation(mini_course: Path) -> None:
    edit_toml(mini_course, 'select = "small"\nexpected_passed = 1', 'select = "small"\nexpected_passed = 0')
    out = checkpoint_line(mini_course, "lab 1.1")
    assert "expected: 0 passed" in out and "actual:   1/1 passed" in out


def test_a_skipped_test_never_counts_as_passed(mini_course: Path) -> None:
    test_file = mini_course / CHAPTER / "target/tests/test_01_adder.py"
    text = test_file.read_text()
    test_file.write_text("import pytest\n" + text.replace("def test_add_small(): ", "def test_add_small(): pytest.skip('later'); "))
    out = checkpoint_line(mini_course, "lab 1.1")
    assert "actual:   0/1 passed" in out


def test_a_selection_of_no_tests_is_never_green(mini_course: Path) -> None:
    edit_toml(mini_course, 'select = "small"\nexpected_passed = 1', 'select = "nothing_by_this_name"\nexpected_passed = 0')
    out = checkpoint_line(mini_course, "lab 1.1")
    assert "no tests: the selection matched none" in out


def test_lab_tests_that_never_reported_are_not_passed(mini_course: Path, tmp_path: Path) -> None:
    directory = tmp_path / "work"
    shutil.copytree(mini_course / CHAPTER / "target", directory)
    (directory / "tiny_pi/adder.py").write_text(textwrap.dedent("""
        import os
        def add(a, b):
            if a >= 10:
                os._exit(0)  # test_add_big ends the interpreter: test_add_small has passed by then
            return a + b
    """))
    result = run_course(mini_course, "test", "1", str(directory), "--json")
    assert result.returncode == 1
    checks = {check["name"]: check for check in json.loads(result.stdout)["checks"]}
    both = checks["lab 1.2 Both"]
    assert both["ok"] is False
    assert both["run"]["passed"] == 1 and both["run"]["not_run"] == 1, both


def test_the_first_red_lights_kind_is_checked_not_only_its_fragment(mini_course: Path) -> None:
    edit_toml(mini_course, 'kind = "collection-error"', 'kind = "failed"')
    out = checkpoint_line(mini_course, "first red light")
    assert "expected: failed showing" in out and "collection-error" in out


def test_verify_names_an_undeclared_change_of_a_teaching_file_between_chapters(tmp_path: Path) -> None:
    root = tmp_path / "chain"
    shutil.copytree(FIXTURES / "chain-course", root)
    adder = root / "checkpoints/02-multiplier/parent/tiny_pi/adder.py"
    adder.write_text(adder.read_text() + "\n# changed on the way into chapter 02\n")
    result = mini(root, "verify")
    assert result.returncode == 1
    assert ("tiny_pi/adder.py differs between 01-adder/target and 02-multiplier/parent, "
            "but chapter.toml does not declare it") in result.stdout


@pytest.mark.parametrize("spelling", ["01-nonsense", "1-adder-x", "adder2"])
def test_a_chapter_id_that_only_looks_right_is_refused_with_the_choices(mini_course: Path, spelling: str) -> None:
    result = mini(mini_course, "checkpoint", spelling)
    assert result.returncode == 2
    refusal = result.stderr.strip()
    assert refusal.startswith(f"course: no chapter {spelling!r}") and refusal.endswith(". Valid chapters: 01-adder")
    assert "\n" not in refusal, "one line, at most with a guess between"


def test_checkpoint_honours_the_chapters_time_limit(mini_course: Path) -> None:
    edit_toml(mini_course, 'first_step = "Write add."', 'first_step = "Write add."\ntime_limit = 2')
    test_file = mini_course / CHAPTER / "target/tests/test_01_adder.py"
    test_file.write_text("import time\n" + test_file.read_text().replace(
        "def test_add_big(): ", "def test_add_big(): time.sleep(60); "))
    result = mini(mini_course, "checkpoint", "1")
    assert result.returncode == 1
    assert "the tests did not finish in 2 s - a stream that never ends? (still running: " \
           "tests/test_01_adder.py::test_add_big)" in result.stdout


def test_verify_reuses_a_story_only_while_nothing_it_reads_changed(mini_course: Path, fresh_verify_cache: Path) -> None:
    first = mini(mini_course, "verify", "--json")
    assert first.returncode == 0, first.stdout + first.stderr
    assert [t["cached"] for t in json.loads(first.stdout)["times"]] == [False]
    lesson = mini_course / CHAPTER / "README.md"
    lesson.write_text(lesson.read_text() + "\nOne more sentence of the lesson.\n")
    second = mini(mini_course, "verify", "--json")
    assert [t["cached"] for t in json.loads(second.stdout)["times"]] == [True], "a lesson edit re-ran the story"
    adder = mini_course / CHAPTER / "target/tiny_pi/adder.py"
    adder.write_text(adder.read_text().replace("return a + b", "return a - b"))
    third = mini(mini_course, "verify", "--json")
    assert third.returncode == 1, "a changed target reused a stale verdict"
    assert [t["cached"] for t in json.loads(third.stdout)["times"]] == [False]
    again = mini(mini_course, "verify", "--json")
    assert [t["cached"] for t in json.loads(again.stdout)["times"]] == [False], \
        "a story that did not hold was stored: a flaky time-out would stay red without running again"
    adder.write_text(adder.read_text().replace("return a - b", "return a + b"))
    fresh = mini(mini_course, "verify", "--fresh", "--json")
    assert fresh.returncode == 0
    assert [t["cached"] for t in json.loads(fresh.stdout)["times"]] == [False]
    assert list(fresh_verify_cache.iterdir()), "nothing was stored outside checkpoints/"


def test_a_failure_names_the_learners_own_files_never_the_throw_away_copy(mini_course: Path, unsolved: Path) -> None:
    (unsolved / "tiny_pi/adder.py").write_text("def add(a, b):\n    raise ValueError('failed in ' + __file__)\n")
    result = run_course(mini_course, "test", "1", str(unsolved))
    assert result.returncode == 1
    assert f"failed in {unsolved / 'tiny_pi/adder.py'}" in result.stdout, result.stdout
    assert "course-verdict-" not in result.stdout


def test_a_failing_test_in_the_focused_file_is_a_deviation_even_when_the_passes_add_up(mini_course: Path) -> None:
    test_file = mini_course / CHAPTER / "target/tests/test_01_adder.py"
    test_file.write_text(test_file.read_text() + "def test_add_extra(): assert add(2, 2) == 5\n")
    out = checkpoint_line(mini_course, "focused tests pass on target")
    assert "expected: 2/2 passed" in out and "actual:   2/3 passed" in out


# The first run of the command kills its host at import of the focused file, parent's and target's alike.
BREAK_HOST_ONCE = """\
import os, pathlib, signal, time
if not pathlib.Path({mark!r}).exists():
    pathlib.Path({mark!r}).write_text("")
    os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(30)
"""
# The checks each run of `verify 1` answers for; the run that broke its host answers for its own alone.
RUN_CHECKS = [{"first-red-light"}, {"first-red-light-labs"}, {"lab", "focused"}, {"redlight"}]


def test_verify_judges_every_run_after_one_that_killed_its_host(mini_course: Path, tmp_path: Path) -> None:
    """One pool serves verify's runs one at a time (COURSE_JOBS=1): whichever run comes first kills
    its host, and every later run must still get its own verdict, on a host that is alive.
    (A host stopped by its test, the other way to break one, is test_runner.py's.)

    Before: the broken host went back into the pool, and the next run was sent to it."""
    breaker = BREAK_HOST_ONCE.format(mark=str(tmp_path / "broke-one"))
    for snapshot in ("parent", "target"):
        test_file = mini_course / CHAPTER / snapshot / "tests/test_01_adder.py"
        test_file.write_text(breaker + test_file.read_text())
    result = mini(mini_course, "verify", "1", "--json")
    assert result.returncode == 1, result.stdout + result.stderr
    assert (tmp_path / "broke-one").exists(), "no run broke its host: the test proves nothing"
    checks = [check for check in json.loads(result.stdout)["checks"] if check["kind"] in set().union(*RUN_CHECKS)]
    failed = {check["kind"] for check in checks if not check["ok"]}
    assert failed in RUN_CHECKS, "more than the run that broke its host went wrong:\n" + json.dumps(checks, indent=1)
    for check in checks:
        if not check["ok"]:
            assert "did a test kill the process that supervises it?" in check["actual"], check


def test_the_targets_run_of_every_chapters_tests_gets_the_sum_of_their_time_limits(tmp_path: Path, monkeypatch) -> None:
    """A late chapter's target runs every earlier chapter's files too: each file keeps its own chapter's budget.

    Before: that run had only the late chapter's own limit, so each new chapter
    made it longer while its limit stayed, and a loaded machine ran out of it.
    """
    from course import checks
    from tool_helpers import chain_course

    root = chain_course(tmp_path)
    for name, limit in (("01-adder", 7), ("02-multiplier", 11)):
        toml = root / "checkpoints" / name / "chapter.toml"
        toml.write_text(toml.read_text().replace("\nslug = ", f"\ntime_limit = {limit}\nslug = ", 1))
    limits: dict[tuple[str, ...], list[float]] = {}
    original = checks.run_spec

    def recording(chapter, directory, selection, *args, **kwargs):  # type: ignore[no-untyped-def]
        spec = original(chapter, directory, selection, *args, **kwargs)
        limits.setdefault(tuple(selection), []).append(spec.time_limit)
        return spec

    monkeypatch.setattr(checks, "run_spec", recording)
    result = mini(root, "checkpoint", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert limits[("tests/test_01_adder.py", "tests/test_02_multiplier.py")] == [7 + 11]
    assert set(limits[("tests/test_02_multiplier.py",)]) == {11}  # the parent and the red lights: its own
