"""chapter.toml's schema is declared once, on the records; loader, docs and scaffold follow it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import FIXTURES, REPO
from course.cards import KEYS_BEGIN, KEYS_END, between, render_key_tables
from tool_helpers import CHAIN_COURSE, tool


def test_the_key_tables_of_checkpoints_readme_are_current() -> None:
    text = (REPO / "checkpoints/README.md").read_text(encoding="utf-8")
    assert between(text, KEYS_BEGIN, KEYS_END) == render_key_tables(), (
        "checkpoints/README.md's key tables are stale: run `course dev cards`"
    )


def test_tools_cards_reports_and_rewrites_stale_key_tables(tmp_path: Path) -> None:
    root = tmp_path / "course"
    shutil.copytree(CHAIN_COURSE, root)
    readme = root / "checkpoints/README.md"
    readme.write_text(f"# Layout\n\n{KEYS_BEGIN}\n| `colour` | a hand-written row |\n{KEYS_END}\n\nMore text.\n")
    check = tool("cards", "--check", root=root)
    assert check.returncode == 1 and "checkpoints/README.md" in check.stdout, check.stdout + check.stderr
    assert tool("cards", root=root).returncode == 0
    text = readme.read_text()
    assert between(text, KEYS_BEGIN, KEYS_END) == render_key_tables()
    assert text.startswith("# Layout\n") and text.endswith("\n\nMore text.\n")
    assert tool("cards", "--check", root=root).returncode == 0


NEW_KEY = '    colour: str = key("The colour of the chapter\'s card.", default="red", choices=("red", "blue"))\n'

PROBE = r'''
import json, sys
from pathlib import Path
from course.catalog import load_chapter
from course.cards import render_key_tables
from course.errors import ChapterError
from course.dev.scaffold import Plan, render_chapter_toml

chapter_dir = Path(sys.argv[1])
toml = chapter_dir / "chapter.toml"
original = toml.read_text()
seen = {}
seen["default"] = load_chapter(chapter_dir).colour
toml.write_text('colour = "blue"\n' + original)
seen["read"] = load_chapter(chapter_dir).colour
for name, value in (("wrong_type", "3"), ("wrong_value", '"green"')):
    toml.write_text(f"colour = {value}\n" + original)
    try:
        load_chapter(chapter_dir)
        seen[name] = None
    except ChapterError as error:
        seen[name] = str(error)
seen["docs"] = render_key_tables()
seen["scaffold"] = render_chapter_toml(Plan(2, "more", "More", "m", "rebuild", ("tiny_pi/more.py",), None))
print(json.dumps(seen))
'''


def test_a_key_added_in_one_place_reaches_loader_docs_and_scaffold(tmp_path: Path) -> None:
    """The one edit: a field in the Chapter record. Nothing else of the tool is touched."""
    copy = tmp_path / "tool"
    shutil.copytree(REPO / "course", copy / "course", ignore=shutil.ignore_patterns("__pycache__"))
    catalog = copy / "course/catalog.py"
    text = catalog.read_text()
    anchor = "    memory_limit: float = key("
    assert text.count(anchor) == 1
    catalog.write_text(text.replace(anchor, NEW_KEY + anchor))
    chapter = tmp_path / "01-adder"
    shutil.copytree(FIXTURES / "mini-course/checkpoints/01-adder", chapter)

    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(chapter)], cwd=copy, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["default"] == "red" and seen["read"] == "blue"
    assert "key 'colour': expected a string, got 3" in seen["wrong_type"]
    assert "key 'colour': must be one of red, blue, got 'green'" in seen["wrong_value"]
    assert "| `colour` | string: `red` or `blue` | `\"red\"` | The colour of the chapter's card. |" in seen["docs"]
    assert 'colour = "red"\n' in seen["scaffold"]


def test_what_scaffold_writes_is_what_the_loader_reads() -> None:
    import tomllib

    from course.catalog import Chapter
    from course.schema import keys, read_table
    from course.dev.scaffold import Plan, render_chapter_toml

    data = tomllib.loads(render_chapter_toml(Plan(7, "x", "X", "s", "rebuild", ("tiny_pi/x.py",), None)))
    values = read_table(data, Chapter, lambda key, problem: AssertionError(f"{key}: {problem}"))
    assert set(data) == {info.name for info in keys(Chapter)}, "scaffold writes every key, defaults included"
    assert values["time_limit"] == 30.0 and values["memory_limit"] == 2.0
