"""Errors in setup and teardown: counted as plain pytest counts them, and never green.

pytest reports a test in three phases (setup, call, teardown), and its summary
line counts reports, not tests: a test that passes and then fails in teardown
is "1 passed, 1 error", one that fails and then fails in teardown "1 failed,
1 error", one whose setup fails "1 error". The course's rule:

- the counts (`passed`, `failed`, `errors`, ... of `--json`'s run, and the "P/T
  passed" of each check) are pytest's;
- each test also has one verdict: passed only when all three phases passed;
  failed when its body failed; error when its setup or teardown failed and
  its body did not. A lab is green when exactly its expected count of tests
  has the verdict passed, so a pass with an error in teardown is not green;
- a check's line adds the rest of pytest's line ("2/2 passed, 2 errors in
  teardown") whenever a setup or teardown failed, since a test is then
  counted twice.

Here the fixture chapter's own test file reaches the learner's code in its
fixtures (`open()` in setup, `close()` in teardown, when tiny_pi/adder.py
defines them), so what the learner writes decides which phase fails. Every
row is judged by plain pytest in the practice dir, by `course test` (whole
chapter as --json, and --lab as text), and by one `course watch` session per
selection (the whole chapter as text); `course practice` and `course
checkpoint` read the same counts.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import trio

from conftest import mini
from course.catalog import load_catalog
from course.watch import WatchMode, WatchSession
from loop_helpers import practice

CHAPTER = Path("checkpoints/01-adder")
TEST_FILE = Path("tests/test_01_adder.py")
# The chapter's tests, in parent and target: two fixtures that call the learner's code if it is there.
PHASED_TESTS = '''\
import pytest
import tiny_pi.adder as adder


@pytest.fixture
def closed():
    yield
    getattr(adder, "close", lambda: None)()


@pytest.fixture
def opened(closed):
    getattr(adder, "open", lambda: None)()


def test_add_small(opened): assert adder.add(1, 2) == 3
def test_add_big(opened): assert adder.add(10, 20) == 30
'''
ADD = "def add(a, b):\n    return a + b\n"
WRONG_ADD = "def add(a, b):\n    return 0\n"
OPEN_FAILS = 'def open():\n    raise RuntimeError("opening failed")\n'
CLOSE_FAILS = 'def close():\n    raise RuntimeError("closing failed")\n'
# close() fails only after a sum over 10: test_add_big's teardown, not test_add_small's.
CLOSE_FAILS_AFTER_BIG = '''\
sums = []


def add(a, b):
    sums.append(a + b)
    return a + b


def close():
    if sums and sums[-1] > 10:
        raise RuntimeError("closing failed")
'''


def row(code: str, pytest_line: str, small: str, both: str, verdicts: tuple[tuple[str, str | None, list[str]], ...],
        small_green: bool = False) -> dict[str, Any]:
    """One learner's adder.py; pytest's summary line; lab 1.1's and lab 1.2's (= all tests') counts;
    each test's (verdict, call, errors) in --json."""
    return dict(code=code, pytest_line=pytest_line, small=small, both=both, verdicts=verdicts,
                small_green=small_green)


ROWS = {
    "setup error": row(
        ADD + OPEN_FAILS, "2 errors", "0/1 passed, 1 error in setup", "0/2 passed, 2 errors in setup",
        (("error", None, ["setup"]),) * 2),
    "passed, then a teardown error": row(
        ADD + CLOSE_FAILS, "2 passed, 2 errors", "1/1 passed, 1 error in teardown",
        "2/2 passed, 2 errors in teardown", (("error", "passed", ["teardown"]),) * 2),
    "failed, then a teardown error": row(
        WRONG_ADD + CLOSE_FAILS, "2 failed, 2 errors", "0/1 passed, 1 failed, 1 error in teardown",
        "0/2 passed, 2 failed, 2 errors in teardown", (("failed", "failed", ["teardown"]),) * 2),
    "setup and teardown errors": row(
        ADD + OPEN_FAILS + CLOSE_FAILS, "4 errors", "0/1 passed, 2 errors (1 in setup, 1 in teardown)",
        "0/2 passed, 4 errors (2 in setup, 2 in teardown)", (("error", None, ["setup", "teardown"]),) * 2),
    "one test's teardown error": row(
        CLOSE_FAILS_AFTER_BIG, "2 passed, 1 error", "1/1 passed", "2/2 passed, 1 error in teardown",
        (("passed", "passed", []), ("error", "passed", ["teardown"])), small_green=True),
}


def phased_course(root: Path) -> Path:
    for snapshot in ("parent", "target"):
        (root / CHAPTER / snapshot / TEST_FILE).write_text(PHASED_TESTS)
    return root


def plain_pytest_line(directory: Path) -> str:
    """pytest's own summary line for the focused file in DIR, without its time: "2 passed, 2 errors"."""
    env = {name: value for name, value in os.environ.items() if not name.startswith(("PYTEST_", "COURSE_"))}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--color=no",
                             str(TEST_FILE)], cwd=directory, env=env, capture_output=True, text=True, timeout=60)
    last = result.stdout.strip().splitlines()[-1]
    match = re.fullmatch(r"=* ?(.+?) in [\d.]+s.*", last)
    assert match, result.stdout
    return match.group(1)


def counts_of(line: str) -> dict[str, int]:
    """pytest's summary line as counts: {"passed": 2, "errors": 2}."""
    counts = {}
    for part in line.split(", "):
        number, word = part.split(" ", 1)
        counts[{"error": "errors"}.get(word, word)] = int(number)
    return counts


def actual(out: str, check: str) -> str:
    """The "actual" a checklist printed for CHECK (a failed check's own line, or an ok one's after " - ")."""
    lines = out.splitlines()
    for index, line in enumerate(lines):
        if line.strip() == f"[FAIL] {check}":
            return lines[index + 2].split("actual:", 1)[1].strip()
        if line.strip().startswith(f"[FAIL] {check} - "):  # watch's screen: one line per check
            return line.split(" - ", 1)[1].strip()
        if re.fullmatch(rf"\[ok\] +{re.escape(check)} - .*", line.strip()):
            return line.split(" - ", 1)[1].strip()
    raise AssertionError(f"no line for {check!r} in:\n{out}")


@pytest.mark.parametrize("case", ROWS.values(), ids=ROWS.keys())
def test_course_test_counts_setup_and_teardown_errors_as_plain_pytest(mini_course: Path, tmp_path: Path,
                                                                      case: dict[str, Any]) -> None:
    root = phased_course(mini_course)
    learner = practice(root, tmp_path / "p")
    (learner / "tiny_pi/adder.py").write_text(case["code"])
    assert plain_pytest_line(learner) == case["pytest_line"]

    as_json = mini(root, "test", "1", str(learner), "--json")
    assert as_json.returncode == 1, as_json.stdout + as_json.stderr
    document = json.loads(as_json.stdout)
    assert document["ok"] is False
    checks = {check["name"]: check for check in document["checks"]}
    assert checks["lab 1.1 Small"]["ok"] is case["small_green"]
    assert checks["lab 1.1 Small"]["actual"] == case["small"]
    assert [checks[name]["ok"] for name in ("lab 1.2 Both", "all focused tests")] == [False, False]
    assert checks["lab 1.2 Both"]["actual"] == checks["all focused tests"]["actual"] == case["both"]
    run = checks["all focused tests"]["run"]
    pytest_counts = counts_of(case["pytest_line"])
    for key in ("passed", "failed", "errors", "skipped", "xfailed", "xpassed", "not_run"):
        assert run[key] == pytest_counts.get(key, 0), (key, run)
    assert [(test["outcome"], test["call"], test["errors"]) for test in run["tests"]] == list(case["verdicts"])

    lab = mini(root, "test", "1", str(learner), "--lab", "1.2", "--tests")
    assert lab.returncode == 1 and "Green" not in lab.stdout, lab.stdout
    assert actual(lab.stdout, "lab 1.2 Both") == case["both"]
    for (verdict, call, errors), name in zip(case["verdicts"], ("test_add_small", "test_add_big")):
        phases = " and in ".join(errors)
        how = "" if not errors else f" ({call}, then an error in {phases})" if call else f" (an error in {phases})"
        assert f"[{'ok]  ' if verdict == 'passed' else verdict + ']'} {name}{how}" in lab.stdout, lab.stdout


def test_course_watch_counts_them_the_same_way(mini_course: Path, tmp_path: Path) -> None:
    """One watch session per selection, each row saved in turn: every screen says what `course test` says."""
    root = phased_course(mini_course)
    chapter = load_catalog(root).resolve("1")
    learner = practice(root, tmp_path / "p")
    adder = learner / "tiny_pi/adder.py"

    def source(directory: Path, **options: Any) -> AsyncIterator[set[tuple[int, str]]]:
        async def generate() -> AsyncIterator[set[tuple[int, str]]]:
            for index, case in enumerate(ROWS.values()):
                adder.write_text(case["code"])
                yield {(2, str(adder))} if index else set()  # the first: the watcher is live, a run

        return generate()

    for lab in (None, chapter.lab("1.2")):
        lines: list[str] = []
        session = WatchSession(chapter, lab, learner, once=False, echo=lines.append, source=source, debounce_ms=0)
        trio.run(session.run, WatchMode(False, "native"))
        starts = [index for index, line in enumerate(lines) if line.startswith("== run")]
        assert len(starts) == len(ROWS), lines
        for (name, case), start, end in zip(ROWS.items(), starts, [*starts[1:], len(lines)]):
            screen = "\n".join(lines[start:end])
            assert "Green" not in screen, (name, screen)
            assert actual(screen, "lab 1.2 Both") == case["both"], (name, screen)
            if lab is None:
                assert actual(screen, "lab 1.1 Small") == case["small"], (name, screen)
                assert actual(screen, "all focused tests") == case["both"], (name, screen)


def test_course_practice_and_checkpoint_read_pytests_counts(mini_course: Path, tmp_path: Path) -> None:
    """A chapter whose snapshots pass and then fail in teardown: the red light and the proof say so."""
    root = phased_course(mini_course)
    for snapshot in ("parent", "target"):
        (root / CHAPTER / snapshot / "tiny_pi/adder.py").write_text(ADD + CLOSE_FAILS)
    toml = root / CHAPTER / "chapter.toml"
    toml.write_text(toml.read_text().replace('kind = "collection-error"', 'kind = "failed"')
                    .replace("No module named 'tiny_pi.adder'", "closing failed"))

    made = mini(root, "practice", "1", str(tmp_path / "p"))
    assert made.returncode == 0, made.stdout + made.stderr
    # practice stops at the first lab that is not green: lab 1.1, one test passed and then errored
    assert "First red light, at lab 1.1: 1 passed, 1 error\n" in made.stdout, made.stdout
    assert plain_pytest_line(tmp_path / "p") == "2 passed, 2 errors"

    proof = mini(root, "checkpoint", "1")
    assert proof.returncode == 1, proof.stdout
    assert actual(proof.stdout, "parent shows the first red light") == "failed: 2 passed, 2 errors"
    assert re.search(r"\[ok\] +parent shows the first red light", proof.stdout), proof.stdout
    assert actual(proof.stdout, "lab 1.1 Small") == "1/1 passed, 1 error in teardown"
    assert actual(proof.stdout, "lab 1.2 Both") == "2/2 passed, 2 errors in teardown"
    assert actual(proof.stdout, "focused tests pass on target") == "2/2 passed, 2 errors in teardown"
