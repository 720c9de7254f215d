"""`course practice` shows a rebuild chapter's first red light lab by lab, and stops early.

The rule: practice runs the labs in chapter.toml's order, each alone, and stops
at the first lab that fails once every documented fragment of the first red
light has shown (a run that cannot judge its lab, such as one whose tests
cannot be collected, stops it at once). It prints the labs it ran, the first
failure, and one line naming the labs not run yet, their test count and the
command that runs them all. `course test` without --lab still runs every lab,
and `course checkpoint` proves both: the whole documented red light, and the
one practice shows.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import REPO, course, mini
from course.catalog import load_catalog
from test_classroom import SCHEMA, validate

CATALOG = load_catalog(REPO)
CHAPTER = Path("checkpoints/01-adder")


def test_practice_stops_at_the_first_failing_lab_and_names_the_labs_that_wait(tmp_path: Path) -> None:
    chapter = CATALOG.resolve("10")
    directory = tmp_path / "p10"
    result = course("practice", "10", str(directory))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "First red light, at lab 10.1: 0 passed, 6 failed" in lines
    assert "  seen: NotImplementedError: lab 10.1" in lines
    assert "  [FAIL] lab 10.1 Reading a whole session: the newline commits a line" in lines
    assert "         actual:   0/6 passed" in lines
    assert any(line.startswith("  first failure: tests/test_10_session_log.py::test_read_") for line in lines)
    waiting = sum(lab.expected_passed for lab in chapter.labs[1:])
    assert waiting == 70
    assert (f"Not run yet: labs 10.2, 10.3, 10.4, 10.5, 10.6, 10.7 and 10.8, {waiting} tests; every lab at once: "
            f"course test 10 {directory}") in lines
    assert not any("lab 10.2 " in line for line in lines), "practice ran a lab after the first failing one"
    assert "This is the expected starting point." in lines

    # `course test` without --lab runs every lab of the chapter, and its document keeps to the schema.
    whole = course("test", "10", str(directory), "--json")
    document = json.loads(whole.stdout)
    validate(document, SCHEMA)
    assert whole.returncode == 1
    labs = [check for check in document["checks"] if check["kind"] == "lab"]
    assert [check["lab"] for check in labs] == [lab.id for lab in chapter.labs]
    focused = next(check for check in document["checks"] if check["kind"] == "focused")
    assert focused["actual"] == f"0/{chapter.expected_passed} passed"


def test_practice_runs_on_while_a_documented_fragment_has_not_shown(tmp_path: Path) -> None:
    """Chapter 08 documents the NotImplementedError of labs 8.1 and 8.2: practice stops at 8.2."""
    directory = tmp_path / "p08"
    result = course("practice", "08", str(directory))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "First red light, labs 8.1 to 8.2: 0 passed, 6 failed" in result.stdout  # both labs counted
    for fragment in ("NotImplementedError: lab 8.1", "NotImplementedError: lab 8.2"):
        assert f"  seen: {fragment}" in result.stdout
    assert "[FAIL] lab 8.1 " in result.stdout and "[FAIL] lab 8.2 " in result.stdout
    assert "first failure: tests/test_08_file_and_process_tools.py::test_read_" in result.stdout
    waiting = sum(lab.expected_passed for lab in CATALOG.resolve("08").labs[2:])
    assert f"Not run yet: labs 8.3, 8.4, 8.5, 8.6, 8.7, 8.8, 8.9, 8.10, 8.11 and 8.12, {waiting} tests;" in result.stdout
    assert "[FAIL] lab 8.3" not in result.stdout


def _green_first_lab(root: Path) -> None:
    """The fixture's parent passes lab 1.1 and fails lab 1.2; a third lab waits after them."""
    chapter = root / CHAPTER
    (chapter / "parent/tiny_pi/adder.py").write_text("def add(a, b):\n    return a + b if a < 10 else 0\n")
    toml = chapter / "chapter.toml"
    text = toml.read_text()
    text = text.replace('kind = "collection-error"\nfragments = ["No module named \'tiny_pi.adder\'"]',
                        'kind = "failed"\nfragments = ["assert 0 == 30"]')
    text = text.replace("[[redlights]]", '[[labs]]\nid = "1.3"\ntitle = "Big"\n'
                        'nodes = ["tests/test_01_adder.py::test_add_big"]\nexpected_passed = 1\n\n[[redlights]]', 1)
    toml.write_text(text)


def test_practice_shows_the_green_labs_before_the_first_failing_one(mini_course: Path, tmp_path: Path) -> None:
    _green_first_lab(mini_course)
    directory = tmp_path / "p"
    result = mini(mini_course, "practice", "1", str(directory))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "First red light, at lab 1.2: 1 passed, 1 failed" in lines
    assert "  [ok]   lab 1.1 Small - 1/1 passed" in lines and "  [FAIL] lab 1.2 Both" in lines
    assert "  first failure: tests/test_01_adder.py::test_add_big" in lines
    assert f"Not run yet: lab 1.3, 1 test; every lab at once: course test 01 {directory}" in lines

    proof = mini(mini_course, "checkpoint", "1", "--json")
    assert proof.returncode == 0, proof.stdout
    document = json.loads(proof.stdout)
    for check in document["checks"]:  # the checklist's items keep to the grading contract's shape
        validate(check, SCHEMA["$defs"]["check"])
    red = {check["kind"]: check for check in document["checks"] if check["kind"].startswith("first-red-light")}
    assert red["first-red-light"]["ok"] and red["first-red-light"]["actual"] == "failed: 1 passed, 1 failed"
    assert red["first-red-light-labs"]["ok"]
    assert red["first-red-light-labs"]["actual"] == "failed, stopped at 1.2: 1 passed, 1 failed; not run: 1.3"


def test_checkpoint_proves_the_whole_red_light_and_the_one_practice_shows(mini_course: Path, tmp_path: Path) -> None:
    """A fragment only a test of no lab shows: the whole run holds, practice's labs never show it."""
    _green_first_lab(mini_course)
    chapter = mini_course / CHAPTER
    for snapshot in ("parent", "target"):
        test_file = chapter / snapshot / "tests/test_01_adder.py"
        test_file.write_text(test_file.read_text() + "def test_extra(): assert add(1, 1) == 2, 'outside every lab'\n")
    (chapter / "parent/tiny_pi/adder.py").write_text("def add(a, b):\n    return 0 if (a, b) == (1, 1) else a + b\n")
    toml = chapter / "chapter.toml"
    toml.write_text(toml.read_text().replace('fragments = ["assert 0 == 30"]', 'fragments = ["outside every lab"]')
                    .replace("expected_passed = 2\n", "expected_passed = 3\n", 1))
    proof = mini(mini_course, "checkpoint", "1")
    assert proof.returncode == 1, proof.stdout
    assert "[ok]   parent shows the first red light" in proof.stdout
    assert "[FAIL] practice shows it lab by lab, up to the first failing lab" in proof.stdout
    assert "lacks 'outside every lab'" in proof.stdout
    practice = mini(mini_course, "practice", "1", str(tmp_path / "p"))
    assert practice.returncode == 1
    assert "  MISSING: outside every lab" in practice.stdout
    assert "This is NOT the documented starting point:" in practice.stdout


def test_learning_md_names_the_dir_that_was_made_and_the_lesson_card_both_ways(mini_course: Path, tmp_path: Path) -> None:
    directory = tmp_path / "my own dir"
    result = mini(mini_course, "practice", "1", str(directory))
    assert result.returncode == 0, result.stdout + result.stderr
    learning = (directory / "LEARNING.md").read_text(encoding="utf-8")
    assert f"> - **Practice dir:** this one, `{directory}` (made by `course practice 01`)" in learning
    assert "cd practice/01-adder" not in learning
    lesson = (mini_course / CHAPTER / "README.md").read_text(encoding="utf-8")
    assert ("> - **Practice dir:** `course practice 01` (then `cd practice/01-adder`), "
            "or `course practice 01 DIR` (then `cd DIR`)") in lesson
