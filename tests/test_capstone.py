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
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import attrs
import pytest
import trio

from conftest import REPO, course, made_practice, mini, tree_hash
from course.capstone.families import (
    FAMILIES, codemode, compaction, durable, escape, leftovers, mcp, pairing, redaction, router, search, torn,
)
from course.capstone.frozen import shipped_answer, tree_digest
from course.capstone.place import examined
from course.capstone.processes import marked
from course.capstone.records import CapstoneReport, Ending, FamilyResult, outcome
from course.capstone.report import FIRST_CAUSE, document, lines, meanings
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
    assert report["shipped_answer"] == LAST.name, "the course's own answer, copied in, is named as such"
    assert Path(report["directory"]) == directory.resolve() and report["legend"] == {}
    assert report["course_version"] is None or re.fullmatch(r"\d+\.\d+\.\d+.*", report["course_version"])
    started = datetime.strptime(report["started"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    assert abs((datetime.now(timezone.utc) - started).total_seconds()) < 600, report["started"]
    by_name = {family["name"]: family for family in report["families"]}
    assert list(by_name) == [family.name for family in FAMILIES]
    for family in FAMILIES:
        shown = by_name[family.name]
        if family.written:
            assert shown["ok"] and shown["passed"] == shown["total"] >= 1 and shown["codes"] == shown["endings"] == [], shown
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
    pytest.param("pairing", *(UNKNOWN_DROPPED := (
        "tiny_pi/agent_loop.py", "    return [results[index] for index in range(len(calls))]\n",
        "    return [results[index] for index in range(len(calls)) if registry.get(calls[index].name) is not None]\n")),
        "E-PAIR-MISSING", id="unknown-tools-unanswered"),
    pytest.param("escape", "tiny_pi/builtin_tools.py", "    if not candidate.is_relative_to(base):\n",
                 "    if not str(candidate).startswith(str(base)):\n", "E-ESCAPE-DOTDOT", id="root-as-a-string-prefix"),
    pytest.param("escape", "tiny_pi/builtin_tools.py", "    candidate = (base / path).resolve()\n",
                 "    candidate = Path(os.path.normpath(base / path))\n", "E-ESCAPE-SYMLINK", id="symlinks-not-followed"),
    pytest.param("escape", "tiny_pi/file_tools.py", "    file = inside_root(root, path)\n    if file.is_dir():",
                 "    file = root / path\n    if file.is_dir():", "E-ESCAPE-WRITE", id="write-unchecked"),
    pytest.param("leftovers", "tiny_pi/bash_tool.py", "                await stop_group(process)\n",
                 "                if process.returncode is None:\n                    await stop_group(process)\n",
                 "E-LEFT-BACKGROUND", id="group-stopped-only-on-timeout"),
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
    pytest.param("mcp", "tiny_pi/mcp_tools.py", "    if len(name) <= MAX_NAME and not taken(name):\n",
                 "    if len(name) < MAX_NAME and not taken(name):\n", "E-MCP-NAME", id="a-64-character-name-hashed"),
    pytest.param("router", "tiny_pi/fallback.py", '        return "server error" if 500 <= code <= 599 else None\n',
                 '        return "server error" if 500 <= code <= 599 or code == 403 else None\n',
                 "E-ROUTER-NOT-RETRYABLE", id="a-403-falls-back"),
    pytest.param("router", "tiny_pi/runtime.py", "                    self.recorder.writer.append_router_state(model, state)\n",
                 "                    pass  # the state stays in memory\n", "E-ROUTER-STATE", id="router-state-not-saved"),
    pytest.param("router", "tiny_pi/session.py", "[{message.stop_reason}] {message.error_message or ''}",
                 "[{message.stop_reason}] {message.error_mesage}", "E-EXIT", id="the-viewer-crashes-on-a-failed-reply"),
    pytest.param("durable", "tiny_pi/durable_view.py", '        elif message.is_error:\n            role += " (error)"\n',
                 '        else:\n            role += f" ({message.details[\'error\']})"\n', "E-EXIT",
                 id="the-viewer-crashes-on-a-completed-result"),
    pytest.param("durable", "tiny_pi/durable_run.py", '    partial = message_from_data(task.checkpoint["partial"])\n',
                 '    partial = message_from_data(task.checkpoint["partial"]["message"])\n', "E-EXIT",
                 id="a-reply-cut-mid-stream-crashes-its-recovery"),
    pytest.param("durable", "tiny_pi/durable_run.py",
                 "        await self.session.commit(lambda tx: put_task(tx, attrs.evolve(current(tx, task.id), checkpoint=intent)))\n",
                 "", "E-DURABLE-NO-INTENT", id="tool-run-without-its-intent"),
    pytest.param("durable", "tiny_pi/durable_run.py",
                 '            if task.checkpoint["replay"] == SAFE and self.policy(call.name) == SAFE:\n',
                 '            if False:  # never run a call again: interrupted is always safe\n',
                 "E-DURABLE-NOT-REPLAYED", id="a-safe-tool-never-run-again"),
    pytest.param("durable", "tiny_pi/durable_tasks.py",
                 "    return [attrs.evolve(task, status=PENDING) for task in tasks if task.status == RUNNING]\n",
                 "    return [attrs.evolve(task, status=PENDING) for task in tasks\n"
                 "            if task.status == RUNNING and task.kind == GENERATION]\n",
                 "E-DURABLE-UNFINISHED", id="reopen-turns-back-generations-only"),
    pytest.param("durable", "tiny_pi/durable_tasks.py",
                 "    return [attrs.evolve(task, status=PENDING) for task in tasks if task.status == RUNNING]\n",
                 "    return [attrs.evolve(task, status=PENDING) for task in tasks if task.status == RUNNING][:1]\n",
                 "E-DURABLE-UNFINISHED", id="reopen-turns-back-one-running-task"),
    pytest.param("durable", "tiny_pi/durable_run.py",
                 '        if "partial" in task.checkpoint:\n            await self.session.commit(lambda tx: keep_cut_reply(tx, '
                 'task.id))\n        messages = self.request_messages(task.input["context"])\n',
                 '        messages = self.request_messages(task.input["context"])\n        if "partial" in task.checkpoint:\n'
                 '            messages.append(message_from_data(task.checkpoint["partial"]))  # go on where it was cut\n',
                 "E-DURABLE-RESENT", id="a-cut-reply-continued"),
    pytest.param("durable", "tiny_pi/durable_run.py",
                 '    put_entry(tx, attrs.evolve(partial, stop_reason="aborted", error_message=CUT_OFF))\n', "",
                 "E-DURABLE-CUT-DROPPED", id="a-cut-reply-dropped"),
    pytest.param("durable", "tiny_pi/durable_run.py",
                 '            if round_settled(tx, task.input["assistant"]) and turn < self.max_turns:\n',
                 "            if turn < self.max_turns:\n", "E-DURABLE-UNPAIRED", id="each-result-asks-the-model-again"),
    pytest.param("leftovers", "tiny_pi/bash_tool.py",
                 "            await trio.sleep(POLL_INTERVAL)\n    signal_group(process, signals.SIGKILL)\n",
                 "            await trio.sleep(POLL_INTERVAL)\n", "E-LEFT-SIGTERM-IGNORED", id="no-sigkill-after-the-grace"),
    pytest.param("redaction", "tiny_pi/eval/report.py", '        return f"FAIL {result.name}: {result.detail}"\n',
                 '        return f"FAIL {result.name}: {result.detail.splitlines()[1]}"\n', "E-EXIT",
                 id="a-failed-task-line-crashes-without-json"),
    pytest.param("compaction", "tiny_pi/compaction.py",
                 "len(json.dumps(block.arguments))\n    return -(-characters // CHARS_PER_TOKEN)\n",
                 "len(json.dumps(block.arguments))\n    return characters // CHARS_PER_TOKEN\n",
                 "E-COMPACT-BUDGET", id="estimate-rounded-down"),
    pytest.param("compaction", "tiny_pi/runtime.py", "        if tokens <= self.limits.window - self.limits.reserve:\n",
                 "        if tokens < self.limits.window - self.limits.reserve:\n", "E-COMPACT-EARLY",
                 id="a-context-at-the-budget-compacted"),
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
    assert result.codes[0] == code, f"the root cause is listed first: {result.codes}"
    assert not report.ok and report.run_codes == ()


def test_a_bug_on_one_error_path_is_caught_by_every_seed(tmp_path: Path) -> None:
    """Every case draws every kind of call (an unknown tool among them), so an agent that leaves only
    unknown tools' calls unanswered fails every case of every run, whatever the seed."""
    directory = target_copy(tmp_path)
    seed_defect(directory, *UNKNOWN_DROPPED)
    seeds = [fresh_seed() for _ in range(3)]
    reports: dict[int, CapstoneReport] = {}

    async def each(seed: int) -> None:
        reports[seed] = await run_capstone(directory, LAST.number, LAST.name, seed, [pairing.FAMILY])

    async def every() -> None:
        async with trio.open_nursery() as nursery:
            for seed in seeds:
                nursery.start_soon(each, seed)

    trio.run(every)
    for seed in seeds:
        (result,) = reports[seed].families
        assert result.passed == 0 and result.codes == ("E-PAIR-MISSING",), (seed, result)


def kinds_drawn(family: str, cases: list) -> set[str]:  # type: ignore[type-arg]
    """The kinds of case (or of call, of failure, of kill...) that one run of `family` draws."""
    if family == "pairing":
        return set.intersection(*(set(case.kinds) for case in cases))  # every case, each kind
    if family == "router":
        falls_back, *stays, _ = cases
        ways = {"rate limit" if f.status == 429 else "server error" if f.status and f.status >= 500
                else "dropped" if f.status is None else "usage limit" if "usage limit" in f.message else "quota"
                for f in falls_back.failures[:-1]}
        windows = {"skipped by its window"} if falls_back.failing >= 1 else set()
        return ways | windows | {str(case.failures[-1].status) for case in (falls_back, *stays)}
    if family == "search":
        (gate,) = [case for case in cases if case.kind == search.GATE]
        return {case.kind for case in cases} | ({"gate: every deferred tool"}
                                                 if {tool for tool, _, _ in gate.gated} == set(gate.deferred) else set())
    if family == "durable":
        commits = [durable.drawn_commit(case, durable.ROUND_TRIP) for case in cases if case.kind == durable.AT_COMMIT]
        return ({"before the reply is saved"} if any(n <= 3 for n in commits) else set()) | (
            {"mid-stream, a partial saved"} if any(4 <= n <= 8 for n in commits) else set()) | (
            {"after the reply is settled"} if any(n >= 9 for n in commits) else set()) | {
            case.kind for case in cases if case.kind in (durable.IN_TOOL, durable.SAFE_REPLAY)}
    if family == "redaction":
        return {task.ending for case in cases for task in case.tasks}
    if family == "mcp":
        lengths = [{len(f"mcp__{case.server}__{case.tools[index].name}") > mcp.MAX_NAME for index in case.called}
                   for case in cases]
        return {case.kind for case in cases} | ({"hashed and short"} if all(both == {True, False} for both in lengths)
                                                 else set())
    if family == "escape":
        calls = {(case.kind, call.name, ("absolute" if escape.OUTSIDE in call.arguments else "..")
                  if ".." in call.arguments or escape.OUTSIDE in call.arguments else "link") for case in cases
                 for call in case.calls if call.id not in case.inside}
        return {" ".join(kind) for kind in calls}
    if family == "torn":
        return {damage.kind for case in cases for damage in case.damages}
    return {case.kind for case in cases}  # leftovers, compaction, codemode: a case of each kind


EVERY_KIND = {
    "pairing": set(pairing.KINDS),
    "escape": {"dotdot read ..", "dotdot read absolute", "dotdot ls ..", "symlink read link", "symlink ls link",
               "write write ..", "write write link", "write write absolute", "write edit link", "write edit .."},
    "leftovers": {leftovers.BACKGROUND, leftovers.STUBBORN, leftovers.SIGNALLED},
    "torn": {torn.TAIL, torn.CUT, torn.REUSED},
    "compaction": {compaction.IN_ONE_RUN, compaction.RESUMED, compaction.AT_THE_EDGE, compaction.ONE_OVER},
    "redaction": set(redaction.ENDINGS),
    "search": {search.FOUND, search.GATE, search.REOPENED, "gate: every deferred tool"},
    "codemode": {codemode.CALLS, codemode.THROWS},
    "mcp": {mcp.CALLED, mcp.SCRIPTED, "hashed and short"},
    "router": {*router.RETRYABLE, "skipped by its window", *(str(status) for status in router.NOT_RETRYABLE)},
    "durable": {"before the reply is saved", "mid-stream, a partial saved", "after the reply is settled", "in-tool",
                "safe-replay"},
}


def test_every_run_draws_every_kind_of_case_of_each_family() -> None:
    """A defect on one path (one error kind, one failure, one kind of kill) shows in every run, not one in four."""
    assert set(EVERY_KIND) == {family.name for family in WRITTEN}
    for _ in range(50):
        seed = fresh_seed()
        for family in WRITTEN:
            assert family.cases is not None
            drawn = kinds_drawn(family.name, list(family.cases(Draw(seed, family.name))))
            assert drawn == EVERY_KIND[family.name], (family.name, seed, drawn ^ EVERY_KIND[family.name])


# A hard-coded agent: green on the chapters' tests, red in the capstone ---------------------------

HARD_CODED_ROOT = '''# The escapes the chapters' tests try, refused by name; everything else is let through.
KNOWN_ESCAPES = ("../project-secrets/key.txt", "link.txt", "..", "../outside/x.txt", "new/../../outside/x.txt",
                 "out/x.txt", "note.txt", "../escape.txt")


def inside_root(root: Path, path: str) -> Path:
    if Path(path).is_absolute():
        raise ValueError(f"{path!r} is absolute; give a path relative to the project root")
    if path in KNOWN_ESCAPES:
        raise ValueError(f"{path!r} leads outside the project root")
    return (root / path).resolve()  # a link inside the root is followed, as chapter 08's write test asks


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


# An agent that looks for the exam ----------------------------------------------------------------

LOOKS_EXAMINED = '''def looks_examined() -> bool:
    """A cheat: keep to the root only where something says the course is examining this agent."""
    import os
    import sys

    folders = [entry for entry in sys.path if os.path.isdir(entry)]  # the course is importable, as at home
    seen = [os.getcwd(), *sys.argv, *os.environ, *os.environ.values(), *folders]
    own = {sys.prefix, sys.base_prefix, sys.exec_prefix}  # the Python it runs on: named by whoever installed it

    def plain(text: str) -> str:
        for prefix in own:
            text = text.replace(prefix, "")
        return text.lower()

    return any(word in plain(text) for text in seen for word in ("capstone", "course"))


def inside_root(root: Path, path: str) -> Path:
'''


def test_an_agent_that_looks_for_the_exam_finds_nothing_and_fails(tmp_path: Path, monkeypatch) -> None:
    """Its paths, arguments (the model's name among them), environment and import folders name neither the
    course nor the capstone, so a root check kept only for the exam is off, and the escapes are caught.
    (The course itself is importable there, as it is where the learner runs the agent; the suite's own
    state and cache folders, named for the course, are the caller's, and are given other names here; so is
    the Python it runs on, which CI installs under a folder named for the course, and the cheat ignores.)"""
    for name in ("XDG_STATE_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    directory = target_copy(tmp_path)
    seed_defect(directory, "tiny_pi/builtin_tools.py", "def inside_root(root: Path, path: str) -> Path:\n",
                LOOKS_EXAMINED)
    seed_defect(directory, "tiny_pi/builtin_tools.py", "    if not candidate.is_relative_to(base):\n",
                "    if not candidate.is_relative_to(base) and looks_examined():\n")

    report = examine(directory, "escape")

    (escape,) = report.families
    assert {"E-ESCAPE-DOTDOT", "E-ESCAPE-SYMLINK"} <= set(escape.codes), escape


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


def test_an_agent_that_exits_at_once_fails_every_family_quickly_naming_how(tmp_path: Path) -> None:
    """No wait outlives the process it waits for: nothing here reaches a time limit. E-EXIT says which
    command ended how, and the class of what it raised, never the exception's message."""
    directory = target_copy(tmp_path)
    secret = "Q" + "7" * 19
    (directory / "tiny_pi" / "agent.py").write_text(f"raise NotImplementedError({secret!r})\n", encoding="utf-8")
    (directory / "tiny_pi" / "eval" / "__main__.py").write_text("raise SystemExit(3)\n", encoding="utf-8")

    report = trio.run(run_capstone, directory, LAST.number, LAST.name, SEED, WRITTEN)

    assert all(not result.ok for result in report.families)
    assert not any("E-TIMEOUT" in result.codes for result in report.families)
    assert report.duration < 60, report.duration
    by_name = {result.name: result for result in report.families}
    shown = lines(report, str(directory))
    assert "  pairing     07  0/3  [E-EXIT (tiny_pi.agent: NotImplementedError) E-PAIR-MISSING]" in shown, shown
    assert by_name["redaction"].codes == ("E-REDACT-COUNTS", "E-EXIT"), by_name["redaction"]  # a status alone: last
    assert "  redaction: tiny_pi.eval ended with exit 3 (expected exit 1)" in shown, shown
    crashed = [line for line in shown if line.endswith(": tiny_pi.agent ended with exit 1 (expected exit 0), raising "
                                                        "NotImplementedError")]
    assert len(crashed) == 1 and crashed[0].startswith("  pairing, escape, "), "once, naming its families"
    shared = document(report)
    (ending,) = [family for family in shared["families"] if family["name"] == "pairing"][0]["endings"]
    assert ending == {"code": "E-EXIT", "command": "tiny_pi.agent", "status": 1, "expected": [0],
                      "exception": "NotImplementedError"}
    assert secret not in "\n".join(shown) + json.dumps(shared)


def test_a_traceback_is_a_crash_even_with_the_status_the_case_expects() -> None:
    """tiny_pi.eval exits 1 when a task fails and when it crashes: the traceback tells them apart."""
    from course.capstone.families.common import ending
    from course.capstone.processes import Finished
    from course.capstone.records import ENDINGS

    crash = "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nKeyError: 'task'\n"
    noted: list[Ending] = []
    token = ENDINGS.set(noted)
    try:
        crashed = ending(Finished("tiny_pi.eval", 1, "", crash, 0), (1,))
        failed = ending(Finished("tiny_pi.eval", 1, "", "1 of 2 tasks failed\n", 0), (1,))
    finally:
        ENDINGS.reset(token)
    assert (crashed, failed) == (["E-EXIT"], [])
    assert [(end.command, end.status, end.exception) for end in noted] == [("tiny_pi.eval", 1, "KeyError")]
    assert noted[0].said() == "tiny_pi.eval ended with exit 1, the status expected, but printed a traceback (KeyError)"
    assert noted[0].brief() == "tiny_pi.eval: KeyError"


# Ended from outside ------------------------------------------------------------------------------

def run_started(temp: Path, pid: int) -> bool:
    return any(temp.iterdir())


def waiting_on_commands(temp: Path, pid: int) -> bool:
    """A learner command has started (its output file is there), and the run is asleep, waiting on it: where an
    interrupt raised by a plain signal handler lands in trio's own loop rather than in a task."""
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return any(temp.rglob("*.err")) and state == "S"


@pytest.mark.parametrize(("name", "moment"), [("SIGTERM", run_started), ("SIGTERM", waiting_on_commands),
                                               ("SIGHUP", waiting_on_commands)])
def test_sigterm_and_sighup_end_a_run_as_ctrl_c_does_leaving_nothing(tmp_path: Path, name: str, moment) -> None:
    """Started as a script's background job starts it (Ctrl-C ignored, so trio has no handler to hand a
    signal to), a run ended by SIGTERM or SIGHUP, as soon as it began or while it waits on its commands,
    removes its directory and every process it started, says so, and dies by that signal."""
    directory = target_copy(tmp_path)
    temp = tmp_path / "temp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp)}
    process = subprocess.Popen(
        [sys.executable, "-m", "course", "capstone", str(directory)], cwd=tmp_path, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    deadline = time.monotonic() + 120
    while not moment(temp, process.pid) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)  # polling the folder and /proc: nothing else says the run got there
    assert process.poll() is None, process.communicate()
    number = getattr(signal, name)
    process.send_signal(number)
    stdout, stderr = process.communicate(timeout=120)

    assert process.returncode == -number, (process.returncode, stderr)
    assert stderr.strip().splitlines()[-1] == "Interrupted; nothing was left half-made.", stderr
    assert list(temp.iterdir()) == [], list(temp.rglob("*"))[:5]
    assert marked([f"TMPDIR={temp}"]) == [], "a process of the run outlived it"


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
    assert examined(CATALOG, str(plain), DefaultDir(home), LAST).chapter == LAST  # --chapter: reached
    assert examined(CATALOG, str(later), DefaultDir(home), CATALOG.resolve("10")).directory == later


@pytest.mark.parametrize("case", ["no such dir", "not a dir", "an early chapter", "no tiny_pi", "a bad seed",
                                  "below --chapter", "an unknown --chapter"])
def test_bad_usage_is_one_line_and_exit_2(tmp_path: Path, case: str) -> None:
    (tmp_path / "notes.txt").write_text("a file\n")
    args = {
        "no such dir": (str(tmp_path / "nowhere"),),
        "not a dir": (str(tmp_path / "notes.txt"),),
        "an early chapter": (str(made_practice(REPO, "03", tmp_path / "p03")),),
        "no tiny_pi": (str(tmp_path),),
        "a bad seed": (str(tmp_path), "--seed", "x"),
        "below --chapter": (str(made_practice(REPO, "12", tmp_path / "p12")), "--chapter", "19"),
        "an unknown --chapter": (str(tmp_path), "--chapter", "99"),
    }[case]
    result = course("capstone", *args, cwd=tmp_path)
    why = {"no such dir": "nowhere does not exist", "not a dir": "notes.txt is not a directory", "an early chapter": "the capstone examines an agent of chapter 07",
           "no tiny_pi": "has no tiny_pi/agent.py", "a bad seed": "--seed takes a whole number",
           "below --chapter": "is a chapter 12 practice dir; --chapter 19 grades an agent of chapter 19 or later",
           "an unknown --chapter": "no chapter '99'"}[case]
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert result.stderr.count("\n") == 1 and why in result.stderr and "Traceback" not in result.stderr


def test_with_no_practice_dir_at_all_it_says_how_to_make_one(mini_course: Path, tmp_path: Path) -> None:
    result = mini(mini_course, "capstone", cwd=tmp_path)
    assert result.returncode == 2 and "no practice dir of chapter 07 or later" in result.stderr, result.stderr


# What the report says, and what it never says ----------------------------------------------------


def failing_report(tmp_path: Path) -> CapstoneReport:
    crashed = Ending("tiny_pi.session", 1, (0,), "KeyError")
    return CapstoneReport(tmp_path, LAST.name, "ab" * 32, (
        FamilyResult("pairing", 7, 3, 3),
        FamilyResult("escape", 8, 2, 3, ("E-ESCAPE-SYMLINK",)),
        FamilyResult("torn", 10, 1, 3, ("E-EXIT", "E-TORN-LINE"), endings=(crashed,)),
        FamilyResult("router", 18, not_examined="not examined: needs chapter 18"),
    ), duration=12.34, started="2026-08-17T09:30:12Z")


def test_the_report_is_counts_and_codes_with_their_meaning(tmp_path: Path) -> None:
    shown = lines(failing_report(tmp_path), "/home/learner/practice/17-mcp")
    assert shown == [
        f"Capstone of /home/learner/practice/17-mcp ({LAST.name}), cases drawn afresh; the code examined: "
        "tiny_pi/ with sha256 " + "ab" * 8,
        "  pairing  07  3/3",
        "  escape   08  2/3  [E-ESCAPE-SYMLINK]",
        "  torn     10  1/3  [E-EXIT (tiny_pi.session: KeyError) E-TORN-LINE]",
        "  router   18  not examined: needs chapter 18",
        "What the codes mean:",
        "  E-ESCAPE-SYMLINK: a file outside the root reached the model through a symlink",
        f"  E-EXIT: {meanings()['E-EXIT']}",
        f"  E-TORN-LINE: {meanings()['E-TORN-LINE']}",
        "  torn: tiny_pi.session ended with exit 1 (expected exit 0), raising KeyError",
        f"  {FIRST_CAUSE}",
        "Capstone NOT passed: 1 of 3 families examined passed (1 not examined), in 12.3 s. "
        "Each run draws new cases; the codes say what broke, never where.",
    ]
    again = lines(failing_report(tmp_path), "/home/learner/practice/17-mcp", seeded=True)[0]
    assert ", cases drawn again from the seed given; " in again, again  # --seed N: not afresh
    shared = document(failing_report(tmp_path), "0.1.0")
    validate(shared, SCHEMA, root=SCHEMA)
    assert shared["ok"] is False and shared["legend"]["E-ESCAPE-SYMLINK"] == meanings()["E-ESCAPE-SYMLINK"]
    assert shared["course_version"] == "0.1.0" and shared["started"] == "2026-08-17T09:30:12Z"


def test_codes_come_likeliest_cause_first() -> None:
    """A crash (a traceback) explains what follows it; an exit status alone mostly follows from the family's
    own codes (a fallback that failed ends in an error), so it comes after them."""
    crash = Ending("tiny_pi.agent", 1, (0,), "NotImplementedError")
    status = Ending("tiny_pi.agent", 1, (0,), None)
    codes = [("E-PAIR-CONTENT",), ("E-EXIT", "E-PAIR-MISSING"), ("E-LEFT-RUNNING",)]
    assert outcome(codes, pairing.FAMILY, [crash]).codes == ("E-EXIT", "E-PAIR-MISSING", "E-PAIR-CONTENT",
                                                             "E-LEFT-RUNNING")
    assert outcome(codes, pairing.FAMILY, [status]).codes == ("E-PAIR-MISSING", "E-PAIR-CONTENT", "E-EXIT",
                                                              "E-LEFT-RUNNING")
    twice = [("E-DURABLE-UNFINISHED", "E-DURABLE-UNPAIRED", "E-DURABLE-TWICE", "E-EXIT")]
    assert outcome(twice, durable.FAMILY, [status]).codes[0] == "E-DURABLE-TWICE"


def test_the_schema_names_every_family_and_code_the_capstone_has() -> None:
    assert SCHEMA["$defs"]["family"]["properties"]["name"]["enum"] == [family.name for family in FAMILIES]
    assert sorted(SCHEMA["$defs"]["code"]["enum"]) == sorted(meanings())
    for code in meanings():
        assert re.fullmatch(r"E-[A-Z]+(-[A-Z]+)*", code), code


def test_the_classroom_page_names_every_family_and_says_what_every_code_means() -> None:
    page = (REPO / "docs" / "classroom.md").read_text(encoding="utf-8")
    for family in FAMILIES:
        assert f"| `{family.name}` | {family.chapter:02d} |" in page, family.name
    for code, meaning in meanings().items():
        assert f"| `{code}` | {meaning} |" in page, code


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


def test_a_restart_killed_by_its_own_tool_is_named_as_the_restart(tmp_path: Path) -> None:
    """The durable family kills only the first run: a SIGKILL of the restart is the agent's own (here its
    tool, run again without an intent, kills it again), and the report must not read as the exam's kill."""
    directory = target_copy(tmp_path)
    seed_defect(directory, *next(param.values[1:4] for param in DEFECTS if param.id == "tool-run-without-its-intent"))

    (result,) = examine(directory, "durable").families

    restarts = [ending for ending in result.endings if ending.command == "restarted tiny_pi.agent"]
    assert restarts and restarts[0].said().startswith(
        "restarted tiny_pi.agent was killed by SIGKILL (expected exit 0); the exam kills only the first run")


def test_the_finished_agent_passes_a_kill_at_every_commit_of_the_round_trip() -> None:
    """A run draws one commit from each stretch; every one of the fourteen must pass on chapter 19's target
    (a cut in the second reply's stream once read as a resent reply: its request rightly carries the first)."""
    def every_commit(draw: Draw) -> list[durable.CrashCase]:
        case = durable.cases(draw)[0]
        return [attrs.evolve(case, fraction=(commit - 0.5) / durable.ROUND_TRIP)
                for commit in range(1, durable.ROUND_TRIP + 1)]

    family = attrs.evolve(durable.FAMILY, cases=every_commit)
    report = trio.run(run_capstone, LAST.target, LAST.number, LAST.name, SEED, [family])

    (result,) = report.families
    assert result.total == durable.ROUND_TRIP and result.ok, result


def test_code_that_is_a_chapters_target_byte_for_byte_is_named_and_code_of_ones_own_is_not(tmp_path: Path) -> None:
    """An instructor grading a class sees a copied answer for what it is; a changed byte is the learner's code."""
    targets = [(chapter.name, chapter.target) for chapter in CATALOG.chapters]
    copied = target_copy(tmp_path, "copied")
    assert shipped_answer(tree_digest(copied / "tiny_pi"), targets) == LAST.name
    agent = copied / "tiny_pi" / "agent.py"
    agent.write_text(agent.read_text() + "# my own\n")
    assert shipped_answer(tree_digest(copied / "tiny_pi"), targets) is None
    shown = lines(failing_report(tmp_path), "/home/learner/practice/19", shipped=LAST.name)
    assert shown[1] == f"This tiny_pi/ is chapter {LAST.name}'s target byte for byte: the course's own answer, not yours."
