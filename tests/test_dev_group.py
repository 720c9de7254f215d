"""`course dev`: the author's tools in one group, after the learner's commands, from anywhere.

"Anywhere" is tested two ways: from a directory outside the checkout (the
course found through the package, as with an editable install), and as a
regular install would lay it out (the chapters inside the package, no
checkout at all), where the tools that write chapter files must refuse.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import REPO, course, course_process, installed_layout, mini
from course.catalog import load_catalog
from course.cli import cli
from course.workspace import IGNORED_NAMES

AUTHOR_TOOLS = ["verify", "checkpoint", "depth", "cards", "target-diff", "carry", "scaffold", "fuzz", "bench", "floors"]


def listed_commands(help_text: str) -> list[str]:
    return re.findall(r"^  ([\w-]+)\s{2,}", help_text.split("Commands:")[1], re.M)


def test_dev_help_lists_every_tool_with_its_whole_first_sentence(tmp_path: Path) -> None:
    result = course("dev", "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert listed_commands(result.stdout) == AUTHOR_TOOLS
    flat = " ".join(result.stdout.split())
    assert "Carry your edit of CHAPTER_ID's target (or parent) forward through every later snapshot." in flat
    assert "..." not in result.stdout.split("Commands:")[1], "no summary is cut"
    runner = CliRunner()  # each tool's own help is click's rendering of it: asked in-process
    for name in AUTHOR_TOOLS:
        own = runner.invoke(cli, ["dev", name, "--help"], prog_name="course")
        assert own.exit_code == 0 and f"Usage: course dev {name}" in own.output, own.output


def test_dev_comes_after_the_learners_commands_in_course_help() -> None:
    listed = listed_commands(course("--help").stdout)
    assert listed[0] == "practice" and listed[-1] == "dev", listed
    assert listed.index("dev") > max(listed.index(name) for name in ("test", "watch", "hint", "diff", "status", "show"))


def test_an_unknown_tool_is_a_usage_error_naming_the_group(tmp_path: Path) -> None:
    result = course("dev", "lint", cwd=tmp_path)
    assert result.returncode == 2 and "No such command 'lint'" in result.stderr
    assert "Traceback" not in result.stderr


def test_author_tools_work_from_a_directory_outside_the_checkout(tmp_path: Path) -> None:
    """No COURSE_ROOT, cwd far from the repository: the course is the one the package belongs to."""
    cards = course_process("dev", "cards", "--check", cwd=tmp_path)
    assert cards.returncode == 0 and "every card is current" in cards.stdout, cards.stdout + cards.stderr
    chapter = load_catalog(REPO).resolve("02")
    diff = course_process("dev", "target-diff", "02", "--stat", cwd=tmp_path)
    assert diff.returncode == 0, diff.stderr
    for name in chapter.teaching_files:
        assert f"target/{name}" in diff.stdout, diff.stdout
    assert list(tmp_path.iterdir()) == [], "a read-only tool wrote into the directory it ran in"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The layout of a regular install: site/course with the chapters as course/checkpoints."""
    return installed_layout(tmp_path_factory.mktemp("site"))


def test_an_installed_course_runs_the_read_only_tools_and_refuses_the_writers(installed: Path, tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(installed)}
    cards = course_process("dev", "cards", "--check", cwd=tmp_path, env=env)
    assert cards.returncode == 0 and "every card is current" in cards.stdout, cards.stdout + cards.stderr
    diff = course_process("dev", "target-diff", "02", "--stat", cwd=tmp_path, env=env)
    assert diff.returncode == 0 and "file" in diff.stdout and "changed" in diff.stdout, diff.stdout + diff.stderr
    lessons = sorted((installed / "course" / "checkpoints").glob("*/README.md"))
    before = [path.read_bytes() for path in lessons]
    for args in (("cards",), ("carry", "02"), ("scaffold", "more", "--title", "More")):
        refused = course_process("dev", *args, cwd=tmp_path, env=env)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "this course is an installed copy" in refused.stderr and "COURSE_ROOT" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
    assert [path.read_bytes() for path in lessons] == before
    assert sorted(path.name for path in (installed / "course" / "checkpoints").iterdir()) == sorted(
        path.name for path in (REPO / "checkpoints").iterdir() if path.name not in IGNORED_NAMES
    ), "scaffold made no chapter"


def test_dev_verify_is_course_verify(mini_course: Path) -> None:
    grouped = mini(mini_course, "dev", "verify", "--json")
    assert grouped.returncode == 0, grouped.stdout + grouped.stderr
    report = json.loads(grouped.stdout)
    assert report["command"] == "verify" and report["ok"] is True
    assert report["chapters"] == ["01-adder"]


def test_dev_verify_prestarts_a_run_host_like_verify() -> None:
    from course.launch import runs_tests

    assert runs_tests(["dev", "verify"]) and runs_tests(["verify"]) and runs_tests(["dev", "checkpoint", "01"])
    assert not runs_tests(["dev", "cards"]) and not runs_tests(["dev"]) and not runs_tests([])
    assert not runs_tests(["test", "--help"]) and not runs_tests(["dev", "verify", "--help"])


def test_dev_floors_prints_what_ci_installs(tmp_path: Path) -> None:
    shim = subprocess.run([sys.executable, "-S", "-m", "tools.floors", "pyproject.toml"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    grouped = course("dev", "floors", str(REPO / "pyproject.toml"), cwd=tmp_path)
    assert shim.returncode == 0 and grouped.returncode == 0, shim.stderr + grouped.stderr
    assert grouped.stdout == shim.stdout and "click==" in grouped.stdout


def test_the_learners_commands_load_no_author_module() -> None:
    probe = "import sys, course.cli; print(sorted(m for m in sys.modules if m.startswith('course.dev.')))"
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["['course.dev.cli']"], "only the group's table is loaded, not the tools"
