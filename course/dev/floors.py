"""Print pip constraints that pin every dependency of pyproject.toml to its floor.

    course dev floors [PYPROJECT]          # pyproject.toml of the current dir by default
    python -S -m tools.floors [PYPROJECT]  # the same, before anything is installed (CI)

A floor (`>=X`) is a promise: "the course works with X". CI keeps that promise
honest by installing exactly those versions (`pip install -c FILE`) and running
a short smoke. The constraints are generated here, at CI time, rather than kept
in a second file, so a floor is written in one place only: pyproject.toml.

Every dependency (the main list and every optional extra) must name a floor;
one that does not is refused, because CI could not test its oldest version.
This runs before anything is installed, so it uses the standard library only.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

_REQUIREMENT = re.compile(
    r"""^\s*(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*
    (?:\[[^\]]*\])?\s*
    (?P<specifiers>[^;]*?)\s*
    (?:;.*)?$""",
    re.VERBOSE,
)


class FloorError(ValueError):
    """A dependency that CI cannot pin to a floor."""


def floor_of(requirement: str) -> tuple[str, str]:
    """(name, floor) of a requirement such as `httpx>=0.27` or `rich>=13.0,<16`."""
    match = _REQUIREMENT.match(requirement)
    if match is None:
        raise FloorError(f"cannot read the requirement {requirement!r}")
    floors = []
    for clause in filter(None, (part.strip() for part in match["specifiers"].split(","))):
        if clause.startswith(">=") and not clause.startswith(">=="):
            floors.append(clause[2:].strip())
        elif clause.startswith("=="):
            floors.append(clause[2:].strip())
    if len(floors) != 1 or not floors[0] or "*" in floors[0]:
        raise FloorError(
            f"{requirement!r} has no single floor (>=X or ==X); CI installs every dependency at its floor, "
            "so each needs one"
        )
    return match["name"], floors[0]


def dependencies(pyproject: dict) -> list[str]:
    """Every requirement of the project: the main list, then each optional extra's."""
    project = pyproject.get("project", {})
    found = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values():
        found.extend(extra)
    return found


def constraints(pyproject: dict) -> str:
    """The constraints file: one `name==floor` line per dependency, in pyproject's order."""
    pins = dict(floor_of(requirement) for requirement in dependencies(pyproject))
    return "".join(f"{name}=={floor}\n" for name, floor in pins.items())


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        print("usage: course dev floors [PYPROJECT]", file=sys.stderr)
        return 2
    path = Path(argv[0] if argv else "pyproject.toml")
    try:
        text = path.read_text(encoding="utf-8")
        sys.stdout.write(constraints(tomllib.loads(text)))
    except OSError as error:
        print(f"floors: cannot read {path}: {error.strerror or error}", file=sys.stderr)
        return 2
    except (tomllib.TOMLDecodeError, FloorError) as error:
        print(f"floors: {path}: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
