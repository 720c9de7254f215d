"""tools.floors: the constraints CI installs are exactly pyproject.toml's dependencies at their floors."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from conftest import REPO


def floors(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """`python -m tools.floors ARGS` with no site-packages (-S), as .ci/run calls it before anything is installed."""
    return subprocess.run(
        [sys.executable, "-S", "-m", "tools.floors", *args], cwd=cwd, capture_output=True, text=True, timeout=60
    )


def pins(text: str) -> dict[str, str]:
    lines = text.splitlines()
    assert all(line.count("==") == 1 for line in lines), text
    names = [line.split("==")[0] for line in lines]
    assert len(names) == len(set(names)), f"a dependency is pinned twice: {text}"
    return dict(line.split("==") for line in lines)  # type: ignore[misc]


def test_the_constraints_name_every_dependency_of_pyproject_at_its_floor() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        requirements.extend(extra)
    expected = {}
    for requirement in requirements:
        name, _, rest = requirement.partition(">=")
        assert rest, f"{requirement} has no floor: CI could not install its oldest version"
        expected[name.split("[")[0].strip()] = rest.split(",")[0].strip()  # a pin names no extra
    result = floors()
    assert result.returncode == 0, result.stderr
    assert pins(result.stdout) == expected
    assert {"pytest", "trio", "attrs", "click"} <= set(expected), "the course's own dependencies are all there"


def test_the_constraints_follow_an_edit_of_pyproject(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\nname = "x"\ndependencies = ["attrs>=23.2", "rich >= 13.0, <16", "trio[extra]>=0.30 ; python_version >= \'3.11\'"]\n'
        '[project.optional-dependencies]\ntest = ["pytest-timeout>=2.1"]\n'
    )
    result = floors(str(pyproject))
    assert result.returncode == 0, result.stderr
    assert pins(result.stdout) == {"attrs": "23.2", "rich": "13.0", "trio": "0.30", "pytest-timeout": "2.1"}


def test_a_dependency_without_a_floor_is_refused_in_one_line(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    for dependency in ("httpx", "httpx<1", "httpx>=0.27,>=0.28", "httpx==0.*"):
        pyproject.write_text(f'[project]\nname = "x"\ndependencies = ["attrs>=23.2", "{dependency}"]\n')
        result = floors(str(pyproject))
        assert result.returncode == 2, dependency
        assert result.stdout == ""
        assert len(result.stderr.splitlines()) == 1 and "has no single floor" in result.stderr, result.stderr
    missing = floors(str(tmp_path / "nope.toml"))
    assert missing.returncode == 2 and "cannot read" in missing.stderr and "Traceback" not in missing.stderr
    pyproject.write_text("[project\n")
    broken = floors(str(pyproject))
    assert broken.returncode == 2 and len(broken.stderr.splitlines()) == 1 and "Traceback" not in broken.stderr
