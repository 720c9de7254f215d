"""What `course verify` tells an author who edited by hand what tools should have written:
a snapshot that drifted from its predecessor, a lesson card or red-light note edited by hand.

These checks read files only (checks.integrity_checks), so most tests ask them
in-process; the first runs `course verify` to show the author sees the same.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import mini
from course.cards import CARD_BEGIN, CARD_END, REDLIGHTS_BEGIN, REDLIGHTS_END
from course.catalog import load_catalog
from course.checks import integrity_checks
from tool_helpers import CHAIN_COURSE, real_course, tool


def copy_of_chain(tmp_path: Path) -> Path:
    root = tmp_path / "course"
    shutil.copytree(CHAIN_COURSE, root)
    return root


def failed_checks(result) -> dict[str, str]:  # type: ignore[no-untyped-def]
    document = json.loads(result.stdout)
    return {f"{c['chapter']} {c['kind']}": c["actual"] for c in document["checks"] if not c["ok"]}


def integrity_failures(root: Path, chapter_id: str) -> dict[str, str]:
    """The failed file-only checks `course verify CHAPTER` would report, by "chapter kind"."""
    catalog = load_catalog(root)
    checks = integrity_checks(catalog, catalog.resolve(chapter_id))
    return {f"{c.chapter} {c.kind}": c.actual for c in checks if not c.ok}


def drift(path: Path) -> None:
    path.write_text(path.read_text(encoding="utf-8") + "# drifted: edited here and nowhere else\n", encoding="utf-8")


def test_a_parent_that_drifts_from_the_previous_target_is_named(tmp_path: Path) -> None:
    root = copy_of_chain(tmp_path)
    drift(root / "checkpoints/02-multiplier/parent/tiny_pi/__init__.py")

    result = mini(root, "verify", "02", "--json")

    assert result.returncode == 1
    lineage = failed_checks(result)["02-multiplier lineage"]
    assert ("tiny_pi/__init__.py differs between 01-adder/target and 02-multiplier/parent, "
            "but chapter.toml does not declare it") in lineage
    human = mini(root, "verify", "02")
    assert "[FAIL] 02-multiplier: lineage" in human.stdout and "tiny_pi/__init__.py differs" in human.stdout


def test_a_card_edited_by_hand_is_reported_stale_until_regenerated(tmp_path: Path) -> None:
    root = copy_of_chain(tmp_path)
    lesson = root / "checkpoints/03-calculator/README.md"
    lesson.write_text(lesson.read_text().replace("2 focused tests pass", "3 focused tests pass"))

    assert integrity_failures(root, "03") == {
        "03-calculator card": "the lesson's card is stale: run `course dev cards` to regenerate it"
    }
    assert tool("cards", "--check", root=root).returncode == 1
    assert tool("cards", root=root).returncode == 0
    assert integrity_failures(root, "03") == {}


def test_a_red_light_note_edited_by_hand_or_missing_is_reported(tmp_path: Path) -> None:
    root = copy_of_chain(tmp_path)
    lesson = root / "checkpoints/03-calculator/README.md"
    text = lesson.read_text()
    lesson.write_text(text.replace("records nothing", "is fine too"))

    assert integrity_failures(root, "03") == {
        "03-calculator card": "the lesson's red-light note is stale: run `course dev cards` to regenerate it"
    }
    assert tool("cards", root=root).returncode == 0
    assert integrity_failures(root, "03") == {}
    lesson.write_text(text.replace(REDLIGHTS_BEGIN, "").replace(REDLIGHTS_END, ""))
    assert "has no red-light note markers" in integrity_failures(root, "03")["03-calculator card"]


def test_real_course_parent_04_drifting_from_target_03_is_named(tmp_path: Path) -> None:
    root, catalog = real_course(tmp_path, "03", "04")
    four = catalog.resolve("04")
    declared = set(four.focused_tests) | set(four.starter_files) | set(four.teaching_files) | set(four.lesson_files)
    name = next(
        path.relative_to(four.parent).as_posix()
        for path in sorted(four.parent.rglob("*.py"))
        if path.relative_to(four.parent).as_posix() not in declared and "__pycache__" not in path.parts
    )
    drift(four.parent / name)

    lineage = integrity_failures(root, "04")[f"{four.name} lineage"]
    assert f"{name} differs between 03-message-ir/target and {four.name}/parent" in lineage


def test_real_course_a_hand_edited_card_is_stale(tmp_path: Path) -> None:
    root, catalog = real_course(tmp_path, "03")
    three = catalog.resolve("03")
    text = three.lesson.read_text(encoding="utf-8")
    start, end = text.index(CARD_BEGIN), text.index(CARD_END)
    card = text[start:end]
    edited = card.replace(f"Checkpoint {three.nn}", f"Checkpoint {three.nn} (edited by hand)", 1)
    assert edited != card
    three.lesson.write_text(text[:start] + edited + text[end:], encoding="utf-8")

    assert "the lesson's card is stale" in integrity_failures(root, "03")[f"{three.name} card"]


def test_a_test_section_label_that_names_another_lab_is_reported(mini_course: Path) -> None:
    """`# Lab N.M` labels in a focused test file name the lab whose tests follow them."""
    labelled = ("from tiny_pi.adder import add\n# Lab 1.1: small numbers\ndef test_add_small(): assert add(1, 2) == 3\n"
                "# Lab 1.1: big numbers\ndef test_add_big(): assert add(10, 20) == 30\n# Lab 9.9: nothing\n")
    for snapshot in ("parent", "target"):  # the same file in both, as lineage wants
        (mini_course / f"checkpoints/01-adder/{snapshot}/tests/test_01_adder.py").write_text(labelled)
    failures = integrity_failures(mini_course, "01")
    assert set(failures) == {"01-adder test-labels"}, failures
    assert failures["01-adder test-labels"] == (
        "parent/tests/test_01_adder.py:4: label 'Lab 1.1' is followed by tests of lab 1.2: test_add_big; "
        "parent/tests/test_01_adder.py:6: label 'Lab 9.9' names no lab of chapter 01; "
        "target/tests/test_01_adder.py:4: label 'Lab 1.1' is followed by tests of lab 1.2: test_add_big; "
        "target/tests/test_01_adder.py:6: label 'Lab 9.9' names no lab of chapter 01")
    fixed = labelled.replace("# Lab 1.1: big", "# Lab 1.2: big").replace("# Lab 9.9: nothing\n", "")
    for snapshot in ("parent", "target"):
        (mini_course / f"checkpoints/01-adder/{snapshot}/tests/test_01_adder.py").write_text(fixed)
    assert integrity_failures(mini_course, "01") == {}


def test_real_course_test_section_labels_match_chapter_toml() -> None:
    """Chapter 07 once labelled its HTTP tests 7.4 and its built-in tool tests 7.5, the other way round."""
    from conftest import REPO
    from course.dev.section_labels import label_problems

    catalog = load_catalog(REPO)
    for chapter in catalog.chapters:
        assert label_problems(chapter) == [] and label_problems(chapter, chapter.parent) == [], chapter.name
