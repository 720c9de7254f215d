"""The grading contract: `course test --json` against its schema, and the Classroom workflow run here.

docs/course-test.schema.json is what an instructor's grader may rely on;
docs/classroom/autograding.yml is the workflow docs/classroom.md ships. The
workflow's `run:` lines (and the Points step's command) run here, in order,
in a real practice dir, with the course laid out as a regular install lays
it out (the chapters inside the package). Only the install step itself is
not run (it would fetch the course and its dependencies): the test checks
that it is a plain pip install of the course spec the workflow names.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, installed_layout, made_practice
from course.catalog import load_catalog
from course.checklist import KINDS
from course import results

SCHEMA = json.loads((REPO / "docs" / "course-test.schema.json").read_text())
WORKFLOW = REPO / "docs" / "classroom" / "autograding.yml"


class Invalid(AssertionError):
    """A document the schema does not allow, with the path to the offending value."""


def validate(value: object, schema: dict, where: str = "$", root: dict | None = None) -> None:
    """The subset of JSON Schema the contract uses: type, const, enum, required, properties,
    additionalProperties, items, minItems, minimum, pattern and local $ref (jsonschema is no dependency).
    `root` holds the $defs a $ref names: course-test's schema unless another is given."""
    root = SCHEMA if root is None else root
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        return validate(value, root["$defs"][name], where, root)
    types = schema.get("type")
    if types is not None:
        allowed = [types] if isinstance(types, str) else types
        if not any(_is(value, kind) for kind in allowed):
            raise Invalid(f"{where}: {value!r} is not of type {types}")
    if "const" in schema and value != schema["const"]:
        raise Invalid(f"{where}: {value!r} is not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        raise Invalid(f"{where}: {value!r} is not one of {schema['enum']}")
    if "minimum" in schema and value < schema["minimum"]:  # type: ignore[operator]
        raise Invalid(f"{where}: {value!r} is below {schema['minimum']}")
    if "pattern" in schema and isinstance(value, str) and re.search(schema["pattern"], value) is None:
        raise Invalid(f"{where}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                raise Invalid(f"{where}: the key {key!r} is missing")
        properties = schema.get("properties", {})
        for key, item in value.items():
            if key in properties:
                validate(item, properties[key], f"{where}.{key}", root)
            elif isinstance(schema.get("additionalProperties"), dict):
                validate(item, schema["additionalProperties"], f"{where}.{key}", root)
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            raise Invalid(f"{where}: fewer than {schema['minItems']} items")
        for index, item in enumerate(value):
            validate(item, schema.get("items", {}), f"{where}[{index}]", root)
    return None


def _is(value: object, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    python = {"string": str, "boolean": bool, "object": dict, "array": list, "null": type(None)}[kind]
    return isinstance(value, python)


def workflow_steps(text: str) -> tuple[dict[str, str], list[str], list[str]]:
    """The workflow's env, its `run:` lines in order and the Points steps' commands (one per lab).

    A tiny reader for the one-line style the workflow keeps (PyYAML is no
    dependency); a workflow that leaves that style fails here, by name.
    """
    env_block = re.search(r"^env:\n((?:  .*\n)+)", text, re.M)
    assert env_block, "the workflow has no top-level env: block"
    env = {key: _unquote(value) for key, value in re.findall(r"^  ([A-Z_]+): (.+)$", env_block.group(1), re.M)}
    runs = [_unquote(line) for line in re.findall(r"^\s+run: (.+)$", text, re.M)]
    commands = re.findall(r"^\s+command: (.+)$", text, re.M)
    assert commands, "at least one Points step"
    assert not re.search(r"^\s+run: [|>]", text, re.M), "every run: is one line"
    return env, runs, commands


def _unquote(value: str) -> str:
    value = value.strip()
    return value[1:-1] if len(value) > 1 and value[0] == value[-1] and value[0] in "\"'" else value


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What `pip install COURSE_SPEC` leaves: site/course with the chapters inside, a `course` on PATH."""
    site = installed_layout(tmp_path_factory.mktemp("site"))
    bin_dir = site / "bin"
    bin_dir.mkdir()
    (bin_dir / "course").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m course "$@"\n')
    (bin_dir / "course").chmod(0o755)
    (bin_dir / "python").symlink_to(sys.executable)
    return site


def run_workflow(site: Path, directory: Path, tmp_path: Path, **override: str) -> list[subprocess.CompletedProcess[str]]:
    """Each step of the workflow in DIRECTORY as Actions runs it (bash -eo pipefail), until one fails;
    the Points steps (one per lab, then the capstone's) all run once the verdict is there, as the grader runs each."""
    env, runs, points = workflow_steps(WORKFLOW.read_text())
    install, *steps = runs
    assert install == 'python -m pip install "$COURSE_SPEC"' and env["COURSE_SPEC"].startswith("git+https://")
    full = {name: value for name, value in os.environ.items() if not name.startswith(("COURSE_", "PYTEST"))}
    full.update(env, **override)
    full.update(PATH=f"{site / 'bin'}{os.pathsep}{os.environ['PATH']}", PYTHONPATH=str(site),
                XDG_STATE_HOME=str(tmp_path / "state"), HOME=str(tmp_path / "home"))
    done = []
    for line in steps:
        done.append(_bash(line, directory, full))
        if done[-1].returncode != 0:
            return done
    return done + [_bash(line, directory, full) for line in points]


def _bash(line: str, directory: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", line], cwd=directory,
                          env=env, capture_output=True, text=True, timeout=300)


def points_of(steps: list[subprocess.CompletedProcess[str]], capstone: bool = False) -> int:
    """The score the reporter hands Classroom: each Points step's max-score when it passed (the labs',
    then the capstone's, whose max-score is 10 where CAPSTONE is "yes" and 0 elsewhere)."""
    text = WORKFLOW.read_text()
    scores = [int(score) for score in re.findall(r"^\s+max-score: (\d+)$", text, re.M)]
    assert re.search(r"^\s+max-score: \$\{\{ env.CAPSTONE == 'yes' && 10 \|\| 0 \}\}$", text, re.M)
    scores.append(10 if capstone else 0)
    return sum(score for score, step in zip(scores, steps, strict=True) if step.returncode == 0)


def lab_commands(commands: list[str]) -> list[str]:
    """The Points steps of the labs (the capstone's is the one that reads course-capstone.json)."""
    return [command for command in commands if "course-capstone.json" not in command]


def chapter_of_the_workflow() -> str:
    return workflow_steps(WORKFLOW.read_text())[0]["CHAPTER"]


def test_a_green_practice_dir_gets_a_valid_verdict_and_the_points(installed: Path, tmp_path: Path) -> None:
    chapter = load_catalog(REPO).resolve(chapter_of_the_workflow())
    directory = made_practice(REPO, chapter.nn, tmp_path / "learner")
    for name in chapter.teaching_files:
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(chapter.target / name, directory / name)
    verdict, capstone, *points = run_workflow(installed, directory, tmp_path)
    assert capstone.returncode == 0, capstone.stderr  # CAPSTONE is not yes: a step that does nothing
    assert verdict.returncode == 0, verdict.stderr
    document = json.loads((directory / "course-test.json").read_text())
    validate(document, SCHEMA)
    assert document["ok"] is True and document["chapter"] == chapter.name
    assert Path(document["directory"]) == directory.resolve()
    assert [check["lab"] for check in document["checks"] if check["kind"] == "lab"] == [lab.id for lab in chapter.labs]
    assert all(step.returncode == 0 for step in points), [step.stderr for step in points]
    assert points_of(points) == 10 * len(chapter.labs)
    assert not (directory / "course-capstone.json").exists(), "CAPSTONE is not yes: the capstone did not run"


def test_a_red_practice_dir_is_a_verdict_without_the_points(installed: Path, tmp_path: Path) -> None:
    """Exit 1 (not green) is a verdict: the verdict step passes, the Points step does not."""
    chapter = load_catalog(REPO).resolve(chapter_of_the_workflow())
    directory = made_practice(REPO, chapter.nn, tmp_path / "learner")
    verdict, capstone, *points = run_workflow(installed, directory, tmp_path)
    assert capstone.returncode == 0, capstone.stderr  # CAPSTONE is not yes: a step that does nothing
    assert verdict.returncode == 0, verdict.stderr
    document = json.loads((directory / "course-test.json").read_text())
    validate(document, SCHEMA)
    assert document["ok"] is False and document["passed_checks"] < document["total_checks"]
    assert [step.returncode for step in points] == [1] * len(chapter.labs) + [0]  # the capstone: 0 of 0
    assert points_of(points) == 0


def test_the_workflow_grades_exactly_the_labs_of_its_chapter() -> None:
    """One Points step per lab, in chapter.toml's order: a lab added or renamed fails here."""
    chapter = load_catalog(REPO).resolve(chapter_of_the_workflow())
    _, _, commands = workflow_steps(WORKFLOW.read_text())
    named = [re.search(r"c\['lab'\] == '([^']+)'", command).group(1) for command in lab_commands(commands)]  # type: ignore[union-attr]
    assert named == [lab.id for lab in chapter.labs]
    assert commands[-1] not in lab_commands(commands), "the capstone's Points step comes last"
    text = WORKFLOW.read_text()
    assert re.findall(r"^\s+max-score: (\d+)$", text, re.M) == ["10"] * len(chapter.labs)
    ids = re.findall(r"^\s+id: (lab\d+|capstone)$", text, re.M)
    assert ids[-1] == "capstone" and len(ids) == len(chapter.labs) + 1
    assert re.search(r"^\s+runners: (.+)$", text, re.M).group(1) == ",".join(ids)  # type: ignore[union-attr]
    for step in ids:
        assert f'{step.upper()}_RESULTS: "${{{{steps.{step}.outputs.result}}}}"' in text


def test_a_half_finished_practice_dir_gets_the_points_of_its_green_labs(installed: Path, tmp_path: Path) -> None:
    """Chapter 03 with every teaching file written but the starter's transcript.py: labs 3.1 and
    3.2 are green, lab 3.3 is not, so the grade is 20 of 30, not all or nothing."""
    chapter = load_catalog(REPO).resolve(chapter_of_the_workflow())
    directory = made_practice(REPO, chapter.nn, tmp_path / "learner")
    for name in chapter.teaching_files:
        if name != "tiny_pi/messages/transcript.py":
            (directory / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(chapter.target / name, directory / name)
    verdict, capstone, *points = run_workflow(installed, directory, tmp_path)
    assert capstone.returncode == 0, capstone.stderr  # CAPSTONE is not yes: a step that does nothing
    assert verdict.returncode == 0, verdict.stderr
    document = json.loads((directory / "course-test.json").read_text())
    validate(document, SCHEMA)
    assert document["ok"] is False
    assert [(check["lab"], check["ok"]) for check in document["checks"] if check["kind"] == "lab"] == \
        [("3.1", True), ("3.2", True), ("3.3", False)]
    assert [step.returncode for step in points] == [0, 0, 1, 0]
    assert points_of(points) == 20


def test_a_wrong_chapter_stops_the_grading_instead_of_scoring_zero(installed: Path, tmp_path: Path) -> None:
    """Exit 2 (usage or input error) is no verdict: the workflow fails at the verdict step."""
    chapter = load_catalog(REPO).resolve(chapter_of_the_workflow())
    other = next(c for c in load_catalog(REPO).chapters if c.name != chapter.name)
    directory = made_practice(REPO, chapter.nn, tmp_path / "learner")
    steps = run_workflow(installed, directory, tmp_path, CHAPTER=other.nn)
    assert len(steps) == 1 and steps[0].returncode != 0, "the steps after the verdict did not run"
    assert f"is a chapter {chapter.nn} practice dir" in steps[0].stderr, steps[0].stderr
    assert (directory / "course-test.json").read_text() == ""


def test_the_schema_names_every_kind_and_outcome_the_course_has() -> None:
    assert SCHEMA["$defs"]["check"]["properties"]["kind"]["enum"] == list(KINDS)
    outcomes = {results.PASSED, results.FAILED, results.COLLECTION_ERROR, results.CONFIG_ERROR, results.NO_TESTS,
                results.TIMEOUT, results.MEMORY, results.CRASHED}
    assert set(SCHEMA["$defs"]["run"]["properties"]["outcome"]["enum"]) == outcomes
    from course.output import SCHEMA_VERSION

    assert SCHEMA["properties"]["schema_version"]["const"] == SCHEMA_VERSION


@pytest.mark.parametrize("breakage", ["missing key", "wrong type", "unknown kind", "unknown outcome", "old version"])
def test_the_validator_rejects_what_the_schema_forbids(breakage: str) -> None:
    """The checks above mean something only if this validator can say no."""
    check = {"chapter": "01-x", "kind": "lab", "lab": "1.1", "name": "lab 1.1", "ok": True, "expected": "1 passed",
             "actual": "1/1 passed", "duration": 0.1,
             "run": {"outcome": "passed", "exit_code": 0, "passed": 1, "failed": 0, "skipped": 0, "not_run": 0,
                     "duration": 0.1, "args": [], "running": None}}
    document = {"schema_version": 1, "command": "test", "ok": True, "passed_checks": 1, "total_checks": 1,
                "duration": 0.2, "chapter": "01-x", "directory": "/d", "next": "", "redlight_seen": None,
                "redlights_done": [], "redlights": {"1.R1": "done"}, "checks": [check], "predictions": []}
    validate(document, SCHEMA)
    if breakage == "missing key":
        del document["next"]
    elif breakage == "wrong type":
        document["ok"] = "yes"
    elif breakage == "unknown kind":
        check["kind"] = "exam"
    elif breakage == "unknown outcome":
        check["run"]["outcome"] = "green"  # type: ignore[index]
    else:
        document["schema_version"] = 0
    with pytest.raises(Invalid):
        validate(document, SCHEMA)


def test_chapter_00s_predictions_are_in_the_document_one_by_one(tmp_path: Path) -> None:
    """An instructor reads which predictions a learner got right without parsing the lines for people."""
    from conftest import course

    directory = made_practice(REPO, "00", tmp_path / "p00")
    written = (REPO / "checkpoints" / "00-prologue" / "target" / "predictions.toml").read_text(encoding="utf-8")
    wrong = written.replace("turns = 2 ", "turns = 3 ")
    assert wrong != written
    (directory / "predictions.toml").write_text(wrong, encoding="utf-8")

    done = course("test", "00", str(directory), "--json")

    document = json.loads(done.stdout)
    validate(document, SCHEMA)
    guesses = {guess["key"]: guess for guess in document["predictions"]}
    assert list(guesses) == ["turns", "tools_start_after", "second_call_roles", "readme_answers",
                             "no_files_crashes", "no_files_is_error", "no_files_second_turn"]
    assert guesses["turns"]["right"] is False and guesses["turns"]["outcome"] == "failed"
    assert guesses["turns"]["message"].startswith("prediction turns:")
    assert all(guess["right"] and guess["message"] == "" for key, guess in guesses.items() if key != "turns")
    assert done.returncode == 1 and document["ok"] is False
