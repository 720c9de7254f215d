"""`tiny_pi` is not installed: a practice dir's code runs from the dir itself, or with it on PYTHONPATH.

Chapter 07's lesson and every LEARNING.md say so and give the command; these
tests run what they state from a folder outside the practice dir.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from course.catalog import load_catalog
from course.workspace import check_practice_target, start_practice

LESSON = REPO / "checkpoints" / "07-agent-loop" / "README.md"
LESSON_URL = "http://127.0.0.1:8765/v1"


def shell(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """COMMAND as a learner's bash runs it, with this test's python first on PATH."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(["bash", "-c", command], cwd=cwd, env={**clean, "PATH": path, **env},
                          capture_output=True, text=True, timeout=60)


def lesson_lines() -> list[str]:
    """The two lines of chapter 07's lesson that run its agent from the demo folder."""
    lines = LESSON.read_text(encoding="utf-8").splitlines()
    start = lines.index("$ practice=$PWD && cd \"$demo\"")
    return [line.removeprefix("$ ") for line in lines[start : start + 2]]


def test_chapter_07s_agent_runs_from_the_demo_folder_as_its_lesson_states(tmp_path: Path) -> None:
    chapter = load_catalog(REPO).resolve("07")
    practice = tmp_path / "practice" / chapter.name
    shutil.copytree(chapter.target, practice, ignore=shutil.ignore_patterns("__pycache__"))  # labs all done
    demo = tmp_path / "demo"
    demo.mkdir()
    (demo / "README.md").write_text("# tiny-pi\nA small agent runtime.\n", encoding="utf-8")
    server = subprocess.Popen([sys.executable, "tests/loopback_server.py", "0"], cwd=practice,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().split(" at ")[1].split()[0]
        first, run = lesson_lines()
        assert first == 'practice=$PWD && cd "$demo"'
        assert run.startswith('PYTHONPATH="$practice" ') and LESSON_URL in run, run
        command = f"{first} && {run.replace(LESSON_URL, url)}"  # the lesson's line, on a free port
        finished = shell(command, practice, {"demo": str(demo)})
        assert finished.returncode == 0, finished.stdout + finished.stderr
        assert finished.stdout.splitlines() == [
            "I will read the README first.",
            '[tool] read {"path": "README.md"}',
            "[ok] read: # tiny-pi A small agent runtime.",
            "The project is called tiny-pi.",
        ], finished.stdout
        bare = run.replace(LESSON_URL, url).removeprefix('PYTHONPATH="$practice" ')
        without = shell(f"{first} && {bare}", practice, {"demo": str(demo)})
        assert without.returncode != 0
        assert "No module named 'tiny_pi'" in without.stderr, without.stderr
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.parametrize("nn", ["01"])
def test_learning_md_says_how_to_run_the_dirs_tiny_pi_from_another_folder(nn: str, tmp_path: Path) -> None:
    chapter = load_catalog(REPO).resolve(nn)
    directory = tmp_path / "my practice"
    start_practice(chapter, check_practice_target(directory, REPO), REPO)
    learning = (directory / "LEARNING.md").read_text(encoding="utf-8")
    prefix = f"PYTHONPATH={shlex.quote(str(directory.absolute()))} python -m tiny_pi.MODULE ..."
    assert f"`{prefix}`" in learning, learning
    assert "`No module named 'tiny_pi'`" in learning
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    stated = prefix.removesuffix(" -m tiny_pi.MODULE ...")
    finished = shell(f"{stated} -c 'import tiny_pi; print(tiny_pi.__file__)'", elsewhere, {})
    assert finished.returncode == 0, finished.stderr
    assert Path(finished.stdout.strip()) == directory / "tiny_pi" / "__init__.py"
    bare = shell("python -c 'import tiny_pi'", elsewhere, {})
    assert "No module named 'tiny_pi'" in bare.stderr, bare.stderr
