"""`course dev carry`: an edit to one snapshot reaches every later one by three-way merge, the
course still holds afterwards, and a conflict stops everything before a byte is written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import mini, tree_hash
from course.catalog import Catalog, load_catalog
from course.lineage import lineage_problems
from tool_helpers import CHAIN_COURSE, chain_course, real_course, replace_once, tool

ADDER_TITLE = '"""Adding numbers: the first thing the calculator can do."""'
ADDER_TITLE_EDITED = '"""Adding numbers: the first thing the calculator learns."""'


DEPTH_KINDS = {"copy-share", "messages", "hint-rungs", "lesson-length"}


def snap(root: Path, chapter: str, side: str) -> Path:
    return root / "checkpoints" / chapter / side


def leftovers(root: Path) -> list[Path]:
    """Staging files or directories a carry must never leave behind."""
    return [path for path in (root / "checkpoints").rglob("*") if ".carry" in path.name]


def test_help_says_what_happens_on_a_conflict(tmp_path: Path) -> None:
    result = tool("carry", "--help", root=tmp_path)
    assert result.returncode == 0
    for words in ("three-way merge", "--base", "--from", "--dry-run", "writes nothing at all"):
        assert words in " ".join(result.stdout.split()), words


def test_an_edit_reaches_every_later_snapshot_and_the_course_still_holds(tmp_path: Path) -> None:
    root = chain_course(tmp_path)
    replace_once(snap(root, "01-adder", "target") / "tiny_pi/adder.py", ADDER_TITLE, ADDER_TITLE_EDITED)

    result = tool("carry", "01", root=root)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "carrying 01-adder/target: tiny_pi/adder.py" in result.stdout
    assert "02-multiplier/parent: tiny_pi/adder.py (copied)" in result.stdout
    assert "02-multiplier/target: tiny_pi/adder.py (merged)" in result.stdout
    edited = (snap(root, "01-adder", "target") / "tiny_pi/adder.py").read_text()
    assert (snap(root, "02-multiplier", "parent") / "tiny_pi/adder.py").read_text() == edited
    merged = (snap(root, "02-multiplier", "target") / "tiny_pi/adder.py").read_text()
    assert merged.startswith(ADDER_TITLE_EDITED) and "def add_all(numbers):" in merged, (
        "the three-way merge keeps chapter 02's own addition to the file"
    )
    for side in ("parent", "target"):
        assert (snap(root, "03-calculator", side) / "tiny_pi/adder.py").read_text() == merged
    assert not leftovers(root)

    verify = mini(root, "verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr

    again = tool("carry", "01", root=root)
    assert again.returncode == 0
    assert again.stdout.count("already up to date") == 4, "a second carry finds nothing left to do"


def test_a_conflicting_edit_later_stops_the_carry_naming_the_file_and_nothing_is_written(tmp_path: Path) -> None:
    root = chain_course(tmp_path)
    replace_once(snap(root, "01-adder", "target") / "tiny_pi/adder.py", ADDER_TITLE, ADDER_TITLE_EDITED)
    replace_once(
        snap(root, "02-multiplier", "target") / "tiny_pi/adder.py",
        ADDER_TITLE,
        '"""Adding numbers, and adding many."""',
    )
    before = tree_hash(root / "checkpoints")

    result = tool("carry", "01", root=root)

    assert result.returncode == 1, result.stdout + result.stderr
    assert "conflict in tiny_pi/adder.py of 02-multiplier/target" in result.stderr
    assert "<<<<<<< 02-multiplier/target" in result.stderr
    assert ">>>>>>> carried from 02-multiplier/parent" in result.stderr
    assert "nothing was written" in result.stderr
    assert "Traceback" not in result.stderr
    assert tree_hash(root / "checkpoints") == before, "parent(02) merged cleanly but must not be written either"
    assert not leftovers(root)


def test_a_red_light_patch_whose_context_moved_is_rewritten(tmp_path: Path) -> None:
    root = chain_course(tmp_path)
    patch = root / "checkpoints/01-adder/redlight/minus.patch"
    old_patch = patch.read_text()
    replace_once(snap(root, "01-adder", "target") / "tiny_pi/adder.py", "def add(a, b):", "def add(a, b):  # two in, one out")

    result = tool("carry", "01", root=root)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "01-adder/redlight/minus.patch: rewritten to apply to the carried target" in result.stdout
    assert patch.read_text() != old_patch
    assert "-    return a + b\n+    return a - b\n" in patch.read_text()
    drifted = mini(root, "verify")
    assert drifted.returncode == 1 and "lab 1.1: the last hint rung: its code from 'def add(a, b):'" in drifted.stdout
    # The last hint rung shows add() whole, so the author edits it too; then the course holds.
    replace_once(root / "checkpoints/01-adder/chapter.toml", "def add(a, b):", "def add(a, b):  # two in, one out")
    verify = mini(root, "verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_a_red_light_patch_that_cannot_follow_stops_the_carry(tmp_path: Path) -> None:
    root = chain_course(tmp_path)
    replace_once(
        snap(root, "01-adder", "target") / "tiny_pi/adder.py",
        '"""The sum of two numbers."""',
        '"""The sum of two numbers, ints or floats."""',
    )
    before = tree_hash(root / "checkpoints")

    result = tool("carry", "01", root=root)

    assert result.returncode == 1
    assert "conflict in redlight/minus.patch of 01-adder: red-light 1.R1 no longer applies" in result.stderr
    assert tree_hash(root / "checkpoints") == before


def test_new_and_deleted_files_follow_where_the_old_version_remains(tmp_path: Path) -> None:
    root = chain_course(tmp_path)
    target = snap(root, "01-adder", "target")
    (target / "tiny_pi/constants.py").write_text("ZERO = 0\n")
    (target / "tiny_pi/__init__.py").unlink()

    result = tool("carry", "01", root=root)

    assert result.returncode == 0, result.stdout + result.stderr
    for chapter in ("02-multiplier", "03-calculator"):
        for side in ("parent", "target"):
            assert (snap(root, chapter, side) / "tiny_pi/constants.py").read_text() == "ZERO = 0\n"
            assert not (snap(root, chapter, side) / "tiny_pi/__init__.py").exists()
    assert "tiny_pi/__init__.py (deleted)" in result.stdout and "tiny_pi/constants.py (added)" in result.stdout


def test_a_deleted_file_that_a_later_chapter_changed_is_a_conflict(tmp_path: Path) -> None:
    root = chain_course(tmp_path)
    (snap(root, "01-adder", "target") / "tiny_pi/__init__.py").unlink()
    (snap(root, "03-calculator", "target") / "tiny_pi/__init__.py").write_text('"""Changed by chapter 03."""\n')
    before = tree_hash(root / "checkpoints")

    result = tool("carry", "01", root=root)

    assert result.returncode == 1
    assert "conflict in tiny_pi/__init__.py of 03-calculator/target" in result.stderr
    assert "deletes this file, but 03-calculator/target changed it" in result.stderr
    assert tree_hash(root / "checkpoints") == before


def test_a_parent_edit_reaches_its_own_target_and_the_later_chapters(tmp_path: Path) -> None:
    root = chain_course(tmp_path)
    test_file = "tests/test_02_multiplier.py"
    replace_once(snap(root, "02-multiplier", "parent") / test_file,
                 "assert multiply(4, 3) == 12", 'assert multiply(4, 3) == 12, "4 taken 3 times"')

    result = tool("carry", "02", "--from", "parent", root=root)

    assert result.returncode == 0, result.stdout + result.stderr
    for chapter, side in (("02-multiplier", "target"), ("03-calculator", "parent"), ("03-calculator", "target")):
        assert '"4 taken 3 times"' in (snap(root, chapter, side) / test_file).read_text()
    assert mini(root, "verify").returncode == 0


def test_base_snapshot_replaces_git_head_and_dry_run_writes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "no-git"
    shutil.copytree(CHAIN_COURSE, root)
    base = tmp_path / "base"
    shutil.copytree(snap(root, "01-adder", "target"), base)
    replace_once(snap(root, "01-adder", "target") / "tiny_pi/adder.py", ADDER_TITLE, ADDER_TITLE_EDITED)

    without_base = tool("carry", "01", root=root)
    assert without_base.returncode == 2
    assert "not a git repository" in without_base.stderr and "--base DIR" in without_base.stderr

    before = tree_hash(root / "checkpoints")
    dry = tool("carry", "01", "--base", str(base), "--dry-run", root=root)
    assert dry.returncode == 0 and "dry run: nothing was written." in dry.stdout
    assert "02-multiplier/target: tiny_pi/adder.py (merged)" in dry.stdout
    assert tree_hash(root / "checkpoints") == before

    result = tool("carry", "01", "--base", str(base), root=root)
    assert result.returncode == 0, result.stderr
    assert (snap(root, "03-calculator", "target") / "tiny_pi/adder.py").read_text().startswith(ADDER_TITLE_EDITED)


def test_nothing_to_carry_and_unknown_chapter(tmp_path: Path) -> None:
    root = chain_course(tmp_path)
    result = tool("carry", "02", root=root)
    assert result.returncode == 0 and "nothing to carry: 02-multiplier/target is the same as in git HEAD" in result.stdout
    result = tool("carry", "9", root=root)
    assert result.returncode == 2
    assert "Valid chapters: 01-adder, 02-multiplier, 03-calculator" in result.stderr


# The real course ------------------------------------------------------------------


def first_docstring_line(catalog: Catalog) -> tuple[str, str]:
    """A file whose first line (a docstring's) is the same in target(03), parent(04) and target(04).

    Prefers a file chapter 04 changes, so the carry into target(04) is a real
    three-way merge rather than a copy.
    """
    snapshots = (catalog.resolve("03").target, catalog.resolve("04").parent, catalog.resolve("04").target)
    candidates = []
    for path in sorted(snapshots[0].rglob("*.py")):
        name = path.relative_to(snapshots[0]).as_posix()
        if "__pycache__" in name or not all((s / name).is_file() for s in snapshots):
            continue
        firsts = {(s / name).read_text(encoding="utf-8").split("\n", 1)[0] for s in snapshots}
        if len(firsts) == 1 and next(iter(firsts)).startswith('"""'):
            changed_in_04 = (snapshots[0] / name).read_bytes() != (snapshots[2] / name).read_bytes()
            candidates.append((not changed_in_04, name, next(iter(firsts))))
    assert candidates, "no file starts with a docstring in target(03), parent(04) and target(04)"
    _, name, line = min(candidates)
    return name, line


def test_real_course_an_edit_to_target_03_is_carried_and_the_course_holds(tmp_path: Path) -> None:
    root, catalog = real_course(tmp_path, "03", "04")
    lineage_before = {c.name: set(lineage_problems(catalog, c)) for c in catalog.chapters}
    name, line = first_docstring_line(catalog)
    three, four = catalog.resolve("03"), catalog.resolve("04")
    edited_line = line.replace('"""', '"""(Carried forward.) ', 1)
    replace_once(three.target / name, line + "\n", edited_line + "\n")

    result = tool("carry", "03", root=root)

    assert result.returncode == 0, result.stdout + result.stderr
    for snapshot in (four.parent, four.target):
        assert (snapshot / name).read_text(encoding="utf-8").startswith(edited_line + "\n")
    verify = mini(root, "verify", "03", "04", "--json")
    document = json.loads(verify.stdout)
    # How deep a lesson is (copy share, stated messages, hint rungs, length) is the
    # author's work in progress, not the carry's: the carry must break nothing else.
    failed = [
        f"{c['chapter']}: {c['name']}: {c['actual']}"
        for c in document["checks"]
        if not c["ok"] and c["kind"] not in DEPTH_KINDS
    ]
    assert not failed, failed
    # Chapters after 04 may still be in the making: the carry must only add no lineage problem.
    carried = load_catalog(root)
    for chapter in carried.chapters[carried.chapters.index(carried.resolve("04")) + 1 :]:
        assert set(lineage_problems(carried, chapter)) <= lineage_before[chapter.name], chapter.name


def test_real_course_a_conflicting_edit_in_target_04_stops_the_carry(tmp_path: Path) -> None:
    root, catalog = real_course(tmp_path, "03", "04")
    name, line = first_docstring_line(catalog)
    three, four = catalog.resolve("03"), catalog.resolve("04")
    replace_once(three.target / name, line + "\n", line.replace('"""', '"""(Carried forward.) ', 1) + "\n")
    replace_once(four.target / name, line + "\n", line.replace('"""', '"""(Edited in 04.) ', 1) + "\n")
    before = tree_hash(root / "checkpoints")

    result = tool("carry", "03", root=root)

    assert result.returncode == 1, result.stdout + result.stderr
    assert f"conflict in {name} of {four.name}/target" in result.stderr
    assert tree_hash(root / "checkpoints") == before
    assert not leftovers(root)
