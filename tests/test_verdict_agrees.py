"""`course test` judges the learner's tiny_pi/ as written: for honest code it agrees with plain pytest.

For every chapter of the catalog, a learner's dir made from the chapter's
target is changed the ways a learner changes code outside the lesson's own
files, and the verdict of `course test --json` is compared, test by test, with
a lean plain pytest run of the same dir (plugin autoload and the cache off,
the chapter's focused files, `-rA` for every test's outcome):

- honest changes, all at once: a helper constant added to tiny_pi/__init__.py
  and a new module, both imported by every teaching file, and every module of
  an earlier chapter changed (a constant that the teaching files importing
  that module import too); all tests still pass;
- broken code: every earlier module raises on import (and where the focused
  tests import none of them, tiny_pi/__init__.py too).

The tests and config are the chapter's in both runs, so the two must agree
on every test. Each kind of change is made all at once, in a dir of its own,
so a chapter costs two pairs of runs (a third where the earlier modules are
not imported by the focused tests).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, course
from course.catalog import Chapter, load_catalog
from course.run_env import run_environment
from course.workspace import copy_snapshot

CHAPTERS = {chapter.nn: chapter for chapter in load_catalog(REPO).chapters}
# A chapter's tests run twice here (plain pytest, then `course test`), each within the chapter's own time
# limit and a minute: the suite's default timeout (120 s) is shorter than that for the late chapters, whose
# focused runs took over a minute each on CI's two busy cores.
BOTH_RUNS = [pytest.param(nn, marks=pytest.mark.timeout(2 * (chapter.time_limit + 60))) for nn, chapter in CHAPTERS.items()]
# pytest's -rA summary line: the outcome word, the node id, and for a failure " - " and the reason.
SUMMARY_LINE = re.compile(r"^(PASSED|FAILED|ERROR|XFAIL|XPASS|SKIPPED) (.+?)(?: - .*)?$")
PLAIN_OUTCOMES = {"PASSED": "passed", "FAILED": "failed", "ERROR": "error", "XFAIL": "xfailed",
                  "XPASS": "xpassed", "SKIPPED": "skipped"}
# When pytest reports one test twice (a failure, then an error at teardown), the worse one counts.
RANK = {"failed": 3, "error": 2}


def learner_dir(chapter: Chapter, directory: Path) -> Path:
    """A learner's dir holding the chapter's solution: its target."""
    copy_snapshot(chapter.target, directory)
    return directory


def package_modules(chapter: Chapter, directory: Path) -> list[str]:
    return sorted(path.relative_to(directory).as_posix() for path in (directory / "tiny_pi").rglob("*.py"))


def earlier_modules(chapter: Chapter, directory: Path) -> list[str]:
    """Modules of earlier chapters: not the chapter's teaching or starter files, not a package's __init__."""
    own = {*chapter.teaching_files, *chapter.starter_files}
    return [name for name in package_modules(chapter, directory)
            if name not in own and not name.endswith("__init__.py")]


def module_name(relative: str) -> str:
    return relative.removesuffix(".py").replace("/", ".")


def with_constant_first(text: str, line: str) -> str:
    """`text` with `line` as its first statement (after a __future__ import), so that an import cycle sees it."""
    future = re.search(r"^from __future__ import .*\n", text, flags=re.MULTILINE)
    at = future.end() if future else 0
    return text[:at] + line + "\n" + text[at:]


def make_honest_changes(chapter: Chapter, directory: Path) -> None:
    """A helper in __init__.py, a new module, changed earlier modules, all used by the teaching files.

    Every teaching file imports the helper and the new module, and each
    earlier module it already imports gets a constant that it imports too
    (a new import of an earlier module could make an import cycle).
    """
    package = directory / "tiny_pi"
    earlier = {module_name(name): name for name in earlier_modules(chapter, directory)}
    init = package / "__init__.py"
    init.write_text(init.read_text() + '\nHELPER_IN_INIT = "mine"\n')
    (package / "my_helpers.py").write_text('"""A module the lesson never asked for."""\n\nMY_HELPER = "mine"\n')
    for module, name in earlier.items():
        path = directory / name
        path.write_text(with_constant_first(path.read_text(), f'MY_CHANGE = "{module}"'))
    for name in (name for name in chapter.teaching_files if name.endswith(".py")):
        path = directory / name
        text = path.read_text()
        imports = ["from tiny_pi import HELPER_IN_INIT", "from tiny_pi.my_helpers import MY_HELPER"]
        used = re.findall(r"^(?:from|import) (tiny_pi[\w.]*)", text, flags=re.MULTILINE)
        imports += [f"from {module} import MY_CHANGE" for module in dict.fromkeys(used) if module in earlier]
        path.write_text(text + "\n" + "\n".join(f"{line}  # noqa: E402" for line in imports) + "\n")


def break_modules(directory: Path, names: list[str]) -> None:
    """Each module named raises on import, as a learner's half-finished edit does."""
    for name in names:
        path = directory / name
        path.write_text(path.read_text() + f'\nraise RuntimeError("{name} is broken")\n')


def course_outcomes(chapter: Chapter, directory: Path) -> dict[str, str]:
    """Every test's outcome in `course test NN DIR --json`."""
    result = course("test", chapter.nn, str(directory), "--json")
    assert result.returncode in (0, 1), result.stdout + result.stderr
    document = json.loads(result.stdout)
    focused = next(check for check in document["checks"] if check["kind"] == "focused")
    outcomes = {}
    for case in focused["run"]["tests"]:
        node = case["file"] + (f"::{case['name']}" if case["name"] else "")
        outcomes[node] = case["outcome"]
    return outcomes


def plain_outcomes(chapter: Chapter, directory: Path) -> tuple[dict[str, str], str]:
    """Every test's outcome in a lean plain pytest run of the focused files in DIR, and its output."""
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "--color=no",
               *[argument for plugin in chapter.pytest_plugins for argument in ("-p", plugin)],
               *chapter.focused_tests]
    result = subprocess.run(command, cwd=directory, env=run_environment(), capture_output=True, text=True,
                            timeout=chapter.time_limit + 60)
    output = result.stdout + result.stderr
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if "short test summary info" in line)
    outcomes: dict[str, str] = {}
    for line in lines[start + 1:]:
        match = SUMMARY_LINE.match(line)
        if match is None:
            continue
        word, node = match.groups()
        assert word != "SKIPPED", f"a skipped test cannot be matched by node id: {line}"
        outcome = PLAIN_OUTCOMES[word]
        # pytest names a test by its node id; the course keeps "::" inside a test's name as "."
        file, _, name = node.partition("::")
        node = file + (f"::{name.replace('::', '.')}" if name else "")
        if RANK.get(outcome, 0) >= RANK.get(outcomes.get(node, ""), 0):
            outcomes[node] = outcome
    return outcomes, output


def assert_agree(chapter: Chapter, directory: Path) -> dict[str, str]:
    plain, output = plain_outcomes(chapter, directory)
    judged = course_outcomes(chapter, directory)
    assert plain, "the plain run reported no test:\n" + output
    differ = {node: (plain.get(node), judged.get(node)) for node in plain.keys() | judged.keys()
              if plain.get(node) != judged.get(node)}
    assert differ == {}, (
        "plain pytest and course test disagree (node: (plain, course)):\n"
        + "\n".join(f"  {node}: {outcomes}" for node, outcomes in sorted(differ.items())) + "\n" + output[-3000:]
    )
    return plain


@pytest.mark.parametrize("nn", BOTH_RUNS)
def test_honest_changes_outside_the_lesson_are_judged_as_written(nn: str, tmp_path: Path) -> None:
    chapter = CHAPTERS[nn]
    directory = learner_dir(chapter, tmp_path / "work")
    make_honest_changes(chapter, directory)
    plain = assert_agree(chapter, directory)
    assert set(plain.values()) == {"passed"}, "the honest changes broke a test: " + json.dumps(plain, indent=1)
    assert len(plain) == chapter.expected_passed


@pytest.mark.parametrize("nn", BOTH_RUNS)
def test_a_broken_earlier_module_is_judged_as_written(nn: str, tmp_path: Path) -> None:
    chapter = CHAPTERS[nn]
    directory = learner_dir(chapter, tmp_path / "work")
    earlier = earlier_modules(chapter, directory)
    break_modules(directory, earlier)
    plain = assert_agree(chapter, directory) if earlier else {}
    if set(plain.values()) <= {"passed"}:  # the focused tests import no earlier module: break the package
        break_modules(directory, ["tiny_pi/__init__.py"])
        plain = assert_agree(chapter, directory)
    assert "passed" not in plain.values(), plain


# Starter files under tests/ (chapter 07's loopback server) are the chapter's, like every test file.
STARTER_TESTS = [(nn, name) for nn, chapter in CHAPTERS.items() for name in chapter.starter_files
                 if name.startswith("tests/")]


@pytest.mark.parametrize(("nn", "name"), STARTER_TESTS)
def test_an_edited_starter_file_under_tests_never_changes_the_verdict(nn: str, name: str, tmp_path: Path) -> None:
    """One appended line that would break the run if it were used: the verdict stays green and names the file."""
    chapter = CHAPTERS[nn]
    directory = learner_dir(chapter, tmp_path / "work")
    starter = directory / name
    starter.write_text(starter.read_text() + '\nraise RuntimeError("the learner edited this")\n')
    result = course("test", nn, str(directory), "--json")
    document = json.loads(result.stdout)
    assert result.returncode == 0, result.stdout + result.stderr
    checks = document["checks"]
    focused = next(check for check in checks if check["kind"] == "focused")
    assert focused["actual"] == f"{chapter.expected_passed}/{chapter.expected_passed} passed"
    note = next(check for check in checks if check["kind"] == "note")
    assert note["replaced"] == [{"path": name, "how": "changed"}]
    assert f"the verdict used the chapter's: {name} (yours differs)" in note["actual"]
