"""`course dev scaffold`: a new chapter after the last one that loads, keeps lineage, carries a
generated card, and starts red for the documented reason."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import mini, tree_hash
from course.cards import lesson_card, render_card
from course.catalog import load_catalog
from course.lineage import differing_files, lineage_problems
from tool_helpers import CHAIN_COURSE, real_course, tool


def copy_of_chain(tmp_path: Path) -> Path:
    root = tmp_path / "course"
    shutil.copytree(CHAIN_COURSE, root)
    return root


def test_help_says_what_the_placeholders_are(tmp_path: Path) -> None:
    result = tool("scaffold", "--help", root=tmp_path)
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    for words in ("--title", "--teaching-file", "redlight/todo.patch", "focused test stub",
                  "one lab selecting the stub test", "No module named"):
        assert words in text, words


def test_a_scaffolded_chapter_loads_keeps_lineage_and_starts_red(tmp_path: Path) -> None:
    root = copy_of_chain(tmp_path)

    result = tool("scaffold", "power", "--title", "Power: repeated multiplication", root=root)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "scaffolded" in result.stdout and "04-power" in result.stdout
    catalog = load_catalog(root)
    chapter = catalog.resolve("04")
    previous = catalog.resolve("03")
    assert (chapter.slug, chapter.title, chapter.mode) == ("power", "Power: repeated multiplication", "rebuild")
    assert chapter.teaching_files == ("tiny_pi/power.py",)
    assert chapter.focused_tests == ("tests/test_04_power.py",)
    assert differing_files(previous.target, chapter.parent) == ["tests/test_04_power.py"], (
        "parent = previous target + the focused test stub"
    )
    assert differing_files(chapter.parent, chapter.target) == ["tiny_pi/power.py"]
    assert lineage_problems(catalog, chapter) == []
    assert lesson_card(chapter.lesson.read_text()) == render_card(chapter)
    stub = (chapter.parent / "tests/test_04_power.py").read_text()
    assert "import tiny_pi.power" in stub and "TODO chapter 04: write the focused tests" in stub
    assert (chapter.root / "redlight/todo.patch").is_file()
    assert not [p for p in (root / "checkpoints").iterdir() if p.name.startswith(".")], "no staging left"

    verify = mini(root, "verify", "04", "--json")
    checks = {check["kind"]: check for check in json.loads(verify.stdout)["checks"]}
    assert verify.returncode == 1, "a scaffold is not a finished chapter"
    assert checks["first-red-light"]["ok"], checks["first-red-light"]
    assert checks["lineage"]["ok"] and checks["card"]["ok"]
    assert not checks["focused"]["ok"] and "0/1 passed" in checks["focused"]["actual"]
    assert "TODO chapter 04" in checks["focused"]["detail"], "the failure says what to write"
    assert checks["earlier"]["ok"], "earlier chapters' tests still pass on the scaffolded target"
    assert "does not apply" in checks["redlight"]["actual"]


def test_extending_an_existing_module_makes_the_stub_the_red_light(tmp_path: Path) -> None:
    root = copy_of_chain(tmp_path)

    result = tool("scaffold", "subtract", "--title", "Subtract", "--teaching-file", "tiny_pi/adder.py",
                  "--summary", "Take away.", root=root)

    assert result.returncode == 0, result.stderr
    chapter = load_catalog(root).resolve("subtract")
    assert chapter.summary == "Take away."
    assert chapter.first_red_light.kind == "failed"
    assert chapter.first_red_light.fragments == ("TODO chapter 04",)
    assert differing_files(chapter.parent, chapter.target) == [], "the teaching file is the previous one, untouched"
    verify = mini(root, "verify", "04", "--json")
    checks = {check["kind"]: check for check in json.loads(verify.stdout)["checks"]}
    assert checks["first-red-light"]["ok"] and checks["lineage"]["ok"]


def test_a_taken_or_invalid_slug_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    root = copy_of_chain(tmp_path)
    before = tree_hash(root)
    for slug, message in (("adder", "is taken by 01-adder"), ("Not_A_Slug", "is not a slug")):
        result = tool("scaffold", slug, "--title", "X", root=root)
        assert result.returncode == 2, result.stdout
        assert message in result.stderr and "Traceback" not in result.stderr
    result = tool("scaffold", "power", root=root)
    assert result.returncode == 2 and "--title" in result.stderr
    assert tree_hash(root) == before


def test_real_course_a_scaffolded_chapter_follows_the_last_one(tmp_path: Path) -> None:
    root, catalog = real_course(tmp_path, "02")
    last = catalog.chapters[-1]

    result = tool("scaffold", "scaffold-probe", "--title", "Probe", root=root)

    assert result.returncode == 0, result.stderr
    after = load_catalog(root)
    chapter = after.chapters[-1]
    assert chapter.number == last.number + 1 and chapter.slug == "scaffold-probe"
    assert differing_files(last.target, chapter.parent) == list(chapter.focused_tests)
    assert lineage_problems(after, chapter) == []
