"""Is this Python able to run the chapters? The course's own dependencies, checked before a proof.

A chapter's tests import what the course depends on (httpx, hypothesis,
trio...), in the interpreter that runs `course`. Started from a Python that
lacks them, a proof would report dozens of failed checks whose cause is one
missing install; this check says so in one line first. The dependencies are
read from where they are declared: the installed package's metadata, else
the checkout's pyproject.toml, so they are written in one place.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path
from typing import NoReturn

from course.errors import CourseError

DISTRIBUTION = "tiny-pi-course"


class MissingDependencies(CourseError):
    """The Python running `course` lacks (or has too old) what the chapters import."""


def declared(root: Path, extra: str | None = None) -> list[str]:
    """The requirement strings of the course itself, or of one of its extras (`local-model`).

    An extra is read from the checkout's pyproject.toml when there is one: an
    editable install's metadata is as old as the last `pip install`, and an
    extra added since would look empty there, so satisfied.
    """
    import importlib.metadata  # here, not on top: `course test` imports this module but never calls it

    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():  # COURSE_ROOT names chapters elsewhere: the course's own checkout declares them
        pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    if extra is not None and pyproject.is_file():
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
        return list(project.get("optional-dependencies", {}).get(extra, []))
    try:
        requirements = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        if not pyproject.is_file():
            return []
        requirements = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"].get("dependencies", [])
    if extra is None:
        return [requirement for requirement in requirements if "extra ==" not in requirement]
    return [requirement.split(";")[0].strip() for requirement in requirements if _wanted_by(requirement, extra)]


def _wanted_by(text: str, extra: str) -> bool:
    """Whether the requirement TEXT (metadata's `name; extra == "x"` form) belongs to EXTRA."""
    from packaging.requirements import Requirement

    marker = Requirement(text).marker
    return marker is not None and "extra" in str(marker) and marker.evaluate({"extra": extra})


def problems(requirements: list[str]) -> list[str]:
    """One phrase per requirement this Python does not meet: 'httpx (not installed)', 'trio 0.22.2 (needs >=0.31)'."""
    import importlib.metadata

    from packaging.requirements import Requirement

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
        for extra in sorted(requirement.extras):  # `llama-cpp-python[server]` needs the server's packages too
            wanted = [r for r in importlib.metadata.requires(requirement.name) or [] if _wanted_by(r, extra)]
            found += problems([r.split(";")[0].strip() for r in wanted])
    return found


INSTALL_ADVICE = ("Install the course into it (`python -m pip install -e .` in the course checkout) "
                  "or run the `course` of the environment you installed it in.")


# The dependencies whose module is named otherwise than their distribution.
_DISTRIBUTION_OF = {"git": "gitpython", "attr": "attrs", "quickjs": "quickjs-ng"}


def missing_library(error: BaseException) -> str | None:
    """The one line for an import of a library this Python lacks (not a module of the course's own), else None."""
    top = (getattr(error, "name", None) or "course").partition(".")[0]
    if not isinstance(error, ModuleNotFoundError) or top == "course":
        return None
    name = _DISTRIBUTION_OF.get(top, top)
    return f"course: this Python lacks the course's own dependencies: {name} (not installed). {INSTALL_ADVICE}"


def end_without_library(error: ModuleNotFoundError) -> NoReturn:
    """Exit 2 with one line: this Python cannot even start the course (click, attrs... are missing)."""
    print(missing_library(error), file=sys.stderr)
    sys.exit(2)


def require_dependencies(root: Path) -> None:
    """Exit 2 with one line when this Python cannot run the chapters' tests."""
    try:
        found = problems(declared(root))
    except ImportError:  # packaging is missing: the environment is not the course's
        found = ["packaging (not installed)"]
    if found:
        raise MissingDependencies(
            f"this Python cannot run the chapters' tests: {', '.join(found)}. {INSTALL_ADVICE}")
