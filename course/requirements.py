"""Is this Python able to run the chapters? The course's own dependencies, checked before a proof.

A chapter's tests import what the course depends on (httpx, hypothesis,
trio...), in the interpreter that runs `course`. Started from a Python that
lacks them, a proof would report dozens of failed checks whose cause is one
missing install; this check says so in one line first. The dependencies are
read from where they are declared: the installed package's metadata, else
the checkout's pyproject.toml, so they are written in one place.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from course.errors import CourseError

DISTRIBUTION = "tiny-pi-course"


class MissingDependencies(CourseError):
    """The Python running `course` lacks (or has too old) what the chapters import."""


def declared(root: Path) -> list[str]:
    """The requirement strings of the course itself (no extras such as `test`)."""
    import importlib.metadata  # here, not on top: `course test` imports this module but never calls it

    try:
        requirements = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        pyproject = root / "pyproject.toml"
        if not pyproject.is_file():
            return []
        requirements = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"].get("dependencies", [])
    return [requirement for requirement in requirements if "extra ==" not in requirement]


def problems(requirements: list[str]) -> list[str]:
    """One phrase per requirement this Python does not meet: 'httpx (not installed)', 'trio 0.22.2 (needs >=0.31)'."""
    import importlib.metadata

    from packaging.requirements import Requirement  # pytest's own dependency

    found = []
    for text in requirements:
        requirement = Requirement(text)
        try:
            version = importlib.metadata.version(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{requirement.name} (not installed)")
            continue
        if not requirement.specifier.contains(version, prereleases=True):
            found.append(f"{requirement.name} {version} (needs {requirement.specifier})")
    return found


def require_dependencies(root: Path) -> None:
    """Exit 2 with one line when this Python cannot run the chapters' tests."""
    try:
        found = problems(declared(root))
    except ImportError:  # no packaging means no pytest: say that
        found = ["pytest (not installed)"]
    if found:
        raise MissingDependencies(
            f"this Python cannot run the chapters' tests: {', '.join(found)}. "
            "Install the course into it (`python -m pip install -e .` in the course checkout) "
            "or run the `course` of the environment you installed it in."
        )
