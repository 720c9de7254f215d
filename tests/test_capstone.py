"""`course capstone`: the final exam passes a finished agent, catches each seeded defect by its code,
fails a hard-coded agent that passes the chapters' tests, and says nothing of its cases.

The targets examined here are copies of the last chapter's target made in
tmp_path; a defect is one small replacement in such a copy (each must
apply exactly once, so a change of the target shows here by name). Most
tests call the runner in this process (one family at a time); the Classroom
step runs the whole command as a process, the way a grader does.
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
import trio

from conftest import REPO, course, made_practice, mini, tree_hash
from course.capstone.families import FAMILIES
from course.capstone.place import examined
from course.capstone.records import CapstoneReport, FamilyResult
from course.capstone.report import document, lines, meanings
from course.capstone.runner import run_capstone
from course.capstone.seeds import Draw, fresh_seed
from course.catalog import load_catalog
from course.locate import DefaultDir
from test_classroom import WORKFLOW, _bash, validate, workflow_steps

CATALOG = load_catalog(REPO)
LAST = CATALOG.chapters[-1]
SCHEMA = json.loads((REPO / "docs" / "course-capstone.schema.json").read_text())
WRITTEN = [family for family in FAMILIES if family.written]
SEED = 20260817
pytestmark = pytest.mark.timeout(300)


def target_copy(tmp_path: Path, name: str = "agent") -> Path:
    """A copy of the last chapter's target, free to break."""
    directory = tmp_path / name
    shutil.copytree(LAST.target, directory, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return directory


def seed_defect(directory: Path, file: str, old: str, new: str) -> None:
    path = directory / file
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{file} no longer holds the line this defect changes: {old!r}"
    path.write_text(text.replace(old, new), encoding="utf-8")


def examine(directory: Path, *names: str, seed: int = SEED) -> CapstoneReport:
    """The named families on `directory`, as the last chapter's agent, in this process."""
    families = [family for family in FAMILIES if family.name in names]
    assert [family.name for family in families] == list(names)
    return trio.run(run_capstone, directory, LAST.number, LAST.name, seed, families)


# The finished agent, graded as the Classroom workflow grades it ----------------------------------


def test_the_workflow_grades_the_capstone_of_a_finished_agent(tmp_path: Path) -> None:
    """A practice dir of the last chapter holding its target's code: every family written passes,
    the ones of later chapters say what they need, and the dir is only read."""
    directory = made_practice(REPO, LAST.nn, tmp_path / "learner")
    shutil.rmtree(directory / "tiny_pi")
    shutil.copytree(LAST.target / "tiny_pi", directory / "tiny_pi", ignore=shutil.ignore_patterns("__pycache__"))
    before = tree_hash(directory)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "course").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m course "$@"\n')
    (bin_dir / "course").chmod(0o755)
    env_block, runs, commands = workflow_steps(WORKFLOW.read_text())
    (step,) = [line for line in runs if "course capstone" in line]
    env = {**os.environ, **env_block, "CAPSTONE": "yes", "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "XDG_STATE_HOME": str(tmp_path / "state")}

    graded = _bash(step, directory, env)

    assert graded.returncode == 0, graded.stderr
    report = json.loads((directory / "course-capstone.json").read_text())
    validate(report, SCHEMA, root=SCHEMA)
    assert set(report) == set(SCHEMA["properties"]), "the document holds the schema's keys and no other"
    assert report["ok"] is True and report["chapter"] == LAST.name and report["run_codes"] == []
    assert Path(report["directory"]) == directory.resolve() and report["legend"] == {}
    by_name = {family["name"]: family for family in report["families"]}
    assert list(by_name) == [family.name for family in FAMILIES]
    for family in FAMILIES:
        shown = by_name[family.name]
        if family.written:
            assert shown["ok"] and shown["passed"] == shown["total"] >= 1 and shown["codes"] == [], shown
        else:
            assert shown["reason"].startswith(f"not examined: needs chapter {family.chapter:02d}"), shown
            assert not shown["examined"]
    assert report["examined_families"] == report["passed_families"] == len(WRITTEN)
    points = _bash(commands[-1], directory, env)
    assert points.returncode == 0, points.stderr
    (directory / "course-capstone.json").unlink()
    assert tree_hash(directory) == before, "the capstone wrote in the directory it examined"


def test_each_family_passes_the_target_of_the_chapter_it_names() -> None:
    """A family's chapter is the first whose agent has all it uses: that chapter's own target passes it.
    (The last chapter's families run on its target in the Classroom test above.)"""
    reports: dict[str, CapstoneReport] = {}
    earlier = [family for family in WRITTEN if family.chapter < LAST.number]

    async def each(family) -> None:  # type: ignore[no-untyped-def]
        chapter = next(chapter for chapter in CATALOG.chapters if chapter.number == family.chapter)
        reports[family.name] = await run_capstone(chapter.target, chapter.number, chapter.name, SEED, [family])

    async def every() -> None:
        async with trio.open_nursery() as nursery:
            for family in earlier:
                nursery.start_soon(each, family)

    trio.run(every)
    for family in earlier:
        assert reports[family.name].ok, reports[family.name].families


# Each seeded defect, caught by its code ----------------------------------------------------------

DEFECTS = [
    pytest.param("pairing", "tiny_pi/agent_loop.py", "        context.messages.extend(results)\n",
                 "        context.messages.extend(result for result in results if not result.is_error)\n",
                 "E-PAIR-MISSING", id="failed-results-dropped"),
    pytest.param("escape", "tiny_pi/builtin_tools.py", "    if not candidate.is_relative_to(base):\n",
                 "    if not str(candidate).startswith(str(base)):\n", "E-ESCAPE-DOTDOT", id="root-as-a-string-prefix"),
    pytest.param("escape", "tiny_pi/builtin_tools.py", "    candidate = (base / path).resolve()\n",
                 "    candidate = Path(os.path.normpath(base / path))\n", "E-ESCAPE-SYMLINK", id="symlinks-not-followed"),
    pytest.param("escape", "tiny_pi/file_tools.py", "    file = inside_root(root, path)\n    if file.is_dir():",
                 "    file = root / path\n    if file.is_dir():", "E-ESCAPE-WRITE", id="write-unchecked"),
    pytest.param("leftovers", "tiny_pi/bash_tool.py", "                await stop_group(process)\n",
                 "                if process.returncode is None:\n                    await stop_group(process)\n",
                 "E-LEFT-RUNNING", id="group-stopped-only-on-timeout"),
    pytest.param("torn", "tiny_pi/session_log.py", "enumerate(lines[1:], start=2)", "enumerate(lines[1:], start=1)",
                 "E-TORN-LINE", id="header-not-counted"),
    pytest.param("compaction", "tiny_pi/runtime.py", "        if tokens <= self.limits.window - self.limits.reserve:\n",
                 "        if tokens <= self.limits.window:\n", "E-COMPACT-BUDGET", id="reserve-ignored"),
    pytest.param("redaction", "tiny_pi/eval/report.py", '        "status": result.status,\n',
                 '        "status": result.status,\n        "task": result.name,\n', "E-REDACT-LEAK", id="task-name-shared"),
    pytest.param("search", "tiny_pi/tool_execution.py", "    return list(declared)\n",
                 "    return list(declared) + [tool.name for tool in registry.callable()]\n", "E-SEARCH-GATE",
                 id="undeclared-calls-run"),
    pytest.param("codemode", "tiny_pi/tools.py", "if script_may_call(tool.exposure)]",
                 "if script_may_call(tool.exposure) and tool.exposure != 'deferred']", "E-CODEMODE-CALL",
                 id="scripts-without-deferred-tools"),
    pytest.param("mcp", "tiny_pi/mcp_tools.py", "    if len(name) <= MAX_NAME and not taken(name):\n        return name\n",
                 "    if not taken(name[:MAX_NAME]):\n        return name[:MAX_NAME]\n", "E-MCP-NAME", id="long-names-cut"),
    pytest.param("router", "tiny_pi/fallback.py", '        return "server error" if 500 <= code <= 599 else None\n',
                 '        return "server error" if 500 <= code <= 599 else "bad request"\n', "E-ROUTER-NOT-RETRYABLE",
                 id="every-failure-falls-back"),
    pytest.param("router", "tiny_pi/runtime.py", "                    self.recorder.writer.append_router_state(model, state)\n",
                 "                    pass  # the state stays in memory\n", "E-ROUTER-STATE", id="router-state-not-saved"),
    pytest.param("durable", "tiny_pi/durable_run.py",
                 "        await self.session.commit(lambda tx: put_task(tx, attrs.evolve(current(tx, task.id), checkpoint=intent)))\n",
                 "", "E-DURABLE-TWICE", id="tool-run-without-its-intent"),
]


def test_every_family_written_has_a_seeded_defect() -> None:
    assert {param.values[0] for param in DEFECTS} == {family.name for family in WRITTEN}


@pytest.mark.parametrize(("family", "file", "old", "new", "code"), DEFECTS)
def test_each_seeded_defect_is_caught_with_its_code(tmp_path: Path, family: str, file: str, old: str, new: str,
                                                    code: str) -> None:
    directory = target_copy(tmp_path)
    seed_defect(directory, file, old, new)

    report = examine(directory, family)

    (result,) = report.families
    assert not result.ok and code in result.codes, result
    assert not report.ok and report.run_codes == ()


# A hard-coded agent: green on the chapters' tests, red in the capstone ---------------------------

HARD_CODED_ROOT = '''# The escapes the chapters' tests try, refused by name; everything else is let through.
KNOWN_ESCAPES = ("../project-secrets/key.txt", "link.txt", "..", "../outside/x.txt", "new/../../outside/x.txt",
                 "out/x.txt", "note.txt", "../escape.txt")


def inside_root(root: Path, path: str) -> Path:
    if Path(path).is_absolute():
        raise ValueError(f"{path!r} is absolute; give a path relative to the project root")
    if path in KNOWN_ESCAPES:
        raise ValueError(f"{path!r} leads outside the project root")
    return root / path


'''


def hard_coded(directory: Path) -> None:
    """inside_root rewritten to refuse exactly the paths the public tests try."""
    path = directory / "tiny_pi" / "builtin_tools.py"
    text = path.read_text(encoding="utf-8")
    start, end = text.index("def inside_root("), text.index("def read_text(")
    path.write_text(text[:start] + HARD_CODED_ROOT + text[end:], encoding="utf-8")


def root_labs() -> tuple[list[str], str, int]:
    """The labs whose tests check the root, as one pytest run: 7.4 (read and ls), 8.1-8.3 (read, write, edit)."""
    labs = [CATALOG.resolve("07").lab("7.4"), *(CATALOG.resolve("08").lab(lab) for lab in ("8.1", "8.2", "8.3"))]
    files = ["tests/test_07_agent_loop.py", "tests/test_08_file_and_process_tools.py"]
    return files, " or ".join(f"({lab.select})" for lab in labs), sum(lab.expected_passed for lab in labs)


def test_a_hard_coded_agent_passes_the_chapters_tests_and_fails_the_capstone(tmp_path: Path) -> None:
    directory = target_copy(tmp_path)
    hard_coded(directory)
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    env.update(PYTHONDONTWRITEBYTECODE="1", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    files, select, expected = root_labs()
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files, "-k", select],
                         cwd=directory, env=env, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0 and re.search(rf"\b{expected} passed", run.stdout), run.stdout[-2000:]

    report = examine(directory, "escape")

    (escape,) = report.families
    assert not escape.ok and {"E-ESCAPE-DOTDOT", "E-ESCAPE-SYMLINK", "E-ESCAPE-WRITE"} <= set(escape.codes), escape


# Seeds: drawn afresh, reproduced on demand -------------------------------------------------------


def test_a_seed_draws_the_same_cases_and_another_seed_other_ones() -> None:
    first, second = fresh_seed(), fresh_seed()
    assert first != second
    for family in WRITTEN:
        assert family.cases is not None
        assert family.cases(Draw(first, family.name)) == family.cases(Draw(first, family.name)), family.name
        assert family.cases(Draw(first, family.name)) != family.cases(Draw(second, family.name)), family.name


def test_the_same_seed_reproduces_the_same_counts_and_codes(tmp_path: Path) -> None:
    directory = target_copy(tmp_path)
    seed_defect(directory, "tiny_pi/builtin_tools.py", "    candidate = (base / path).resolve()\n",
                "    candidate = Path(os.path.normpath(base / path))\n")
    runs = [examine(directory, "escape").families for _ in range(2)]
    assert runs[0] == runs[1] and not runs[0][0].ok


# The run as a whole ----------------------------------------------------------------------------


def test_code_that_changes_itself_while_examined_does_not_count(tmp_path: Path) -> None:
    directory = target_copy(tmp_path)
    seed_defect(directory, "tiny_pi/agent.py", "    args = parse_args(argv)\n",
                "    args = parse_args(argv)\n    Path(__file__).with_name('notes.txt').write_text('ran')\n")

    report = examine(directory, "pairing")

    assert report.families[0].ok and report.run_codes == ("E-FROZEN-CHANGED",) and not report.ok
    assert not (directory / "tiny_pi" / "notes.txt").exists(), "only the frozen copy runs"


def test_an_agent_that_exits_at_once_fails_every_family_quickly(tmp_path: Path) -> None:
    """No wait outlives the process it waits for: nothing here reaches a time limit."""
    directory = target_copy(tmp_path)
    (directory / "tiny_pi" / "agent.py").write_text("raise SystemExit(3)\n", encoding="utf-8")
    (directory / "tiny_pi" / "eval" / "__main__.py").write_text("raise SystemExit(3)\n", encoding="utf-8")

    report = trio.run(run_capstone, directory, LAST.number, LAST.name, SEED, WRITTEN)

    assert all(not result.ok for result in report.families)
    assert not any("E-TIMEOUT" in result.codes for result in report.families)
    assert report.duration < 60, report.duration


# Which directory, and bad usage ------------------------------------------------------------------


def test_without_dir_the_practice_dir_here_else_the_latest_is_examined(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "practice"
    early = made_practice(REPO, "07", home / CATALOG.resolve("07").name)
    later = made_practice(REPO, "10", home / CATALOG.resolve("10").name)
    (early / "notes").mkdir()
    monkeypatch.chdir(tmp_path)
    assert examined(CATALOG, None, DefaultDir(home)).directory == later
    assert examined(CATALOG, None, DefaultDir(home)).chapter.nn == "10"
    monkeypatch.chdir(early / "notes")
    assert examined(CATALOG, None, DefaultDir(home)).directory == early
    plain = target_copy(tmp_path, "plain")
    assert examined(CATALOG, str(plain), DefaultDir(home)).chapter == LAST


@pytest.mark.parametrize("case", ["not a dir", "an early chapter", "no tiny_pi", "a bad seed"])
def test_bad_usage_is_one_line_and_exit_2(tmp_path: Path, case: str) -> None:
    args = {
        "not a dir": (str(tmp_path / "nowhere"),),
        "an early chapter": (str(made_practice(REPO, "03", tmp_path / "p03")),),
        "no tiny_pi": (str(tmp_path),),
        "a bad seed": (str(tmp_path), "--seed", "x"),
    }[case]
    result = course("capstone", *args, cwd=tmp_path)
    why = {"not a dir": "is not a directory", "an early chapter": "the capstone examines an agent of chapter 07",
           "no tiny_pi": "has no tiny_pi/agent.py", "a bad seed": "--seed takes a whole number"}[case]
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert result.stderr.count("\n") == 1 and why in result.stderr and "Traceback" not in result.stderr


def test_with_no_practice_dir_at_all_it_says_how_to_make_one(mini_course: Path, tmp_path: Path) -> None:
    result = mini(mini_course, "capstone", cwd=tmp_path)
    assert result.returncode == 2 and "no practice dir of chapter 07 or later" in result.stderr, result.stderr


# What the report says, and what it never says ----------------------------------------------------


def failing_report(tmp_path: Path) -> CapstoneReport:
    return CapstoneReport(tmp_path, LAST.name, "ab" * 32, (
        FamilyResult("pairing", 7, 3, 3),
        FamilyResult("escape", 8, 2, 3, ("E-ESCAPE-SYMLINK",)),
        FamilyResult("router", 18, not_examined="not examined: needs chapter 18"),
    ), duration=12.34)


def test_the_report_is_counts_and_codes_with_their_meaning(tmp_path: Path) -> None:
    shown = lines(failing_report(tmp_path), "practice/17-mcp")
    assert shown == [
        f"Capstone of practice/17-mcp ({LAST.name}), cases drawn afresh; the code examined: tiny_pi/ with sha256 "
        + "ab" * 8,
        "  pairing  3/3",
        "  escape   2/3  [E-ESCAPE-SYMLINK]",
        "  router   not examined: needs chapter 18",
        "What the codes mean:",
        "  E-ESCAPE-SYMLINK: a file outside the root reached the model through a symlink",
        "Capstone NOT passed: 1 of 2 families examined passed (1 not examined), in 12.3 s. "
        "Each run draws new cases; the codes say what broke, never where.",
    ]
    shared = document(failing_report(tmp_path))
    validate(shared, SCHEMA, root=SCHEMA)
    assert shared["ok"] is False and shared["legend"] == {"E-ESCAPE-SYMLINK": meanings()["E-ESCAPE-SYMLINK"]}


def test_the_schema_names_every_family_and_code_the_capstone_has() -> None:
    assert SCHEMA["$defs"]["family"]["properties"]["name"]["enum"] == [family.name for family in FAMILIES]
    assert sorted(SCHEMA["$defs"]["code"]["enum"]) == sorted(meanings())
    for code in meanings():
        assert re.fullmatch(r"E-[A-Z]+(-[A-Z]+)*", code), code


def test_the_classroom_page_names_every_family_and_code() -> None:
    page = (REPO / "docs" / "classroom.md").read_text(encoding="utf-8")
    for family in FAMILIES:
        assert f"| `{family.name}` | {family.chapter:02d} |" in page, family.name
    for code in meanings():
        assert f"`{code}`" in page, code


def test_a_finished_course_offers_the_capstone_as_its_next_step(tmp_path: Path) -> None:
    from course.progress import CheckVerdict, LastTest
    from course.redlights import RedLightState
    from course.status import ChapterProgress, StatusReport

    green = LastTest(chapter=LAST.name, lab=None, ok=True, when="",
                     checks=tuple(CheckVerdict("lab", lab.id, lab.title, True) for lab in LAST.labs))
    done = RedLightState(LAST.name, {redlight.id: "done" for redlight in LAST.redlights})
    step = StatusReport((ChapterProgress(LAST, tmp_path, True, green, done),)).next_step()
    assert step == "the course is complete: all 1 chapters are green, their red lights done; " \
                   "the final exam of your agent: `course capstone`", step
