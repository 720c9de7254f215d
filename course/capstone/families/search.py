"""Search (chapter 15): a deferred tool is declared only once tool_search found it, and called only then.

The agent runs with `--tools ls --defer ...` (the deferred tools drawn). In
one case the model searches for one of them and then uses it: the first
request must not declare it, the request after the search must, and the
call must do its work. In another the model calls every deferred tool,
none of which it searched for, in one turn (a read of a file that exists,
a write, an edit of a file that exists): each call must be refused, its
work not done, so a gate that lets one tool through fails every run. In the last a
session that activated a tool is resumed: its first request must declare
that tool, and no other deferred one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attrs import frozen

from course.capstone.bench import Bench
from course.capstone.families.common import ending, write_files
from course.capstone.model_server import Answer, Call, answered, declared
from course.capstone.records import Family, each_case
from course.capstone.seeds import Draw

FOUND, GATE, REOPENED = "found", "gate", "reopened"
DEFERRABLE = ("read", "write", "edit")
CODES = {
    "E-SEARCH-EARLY": "a deferred tool was declared before any search found it",
    "E-SEARCH-UNDECLARED": "a tool that tool_search found was not declared in the next request",
    "E-SEARCH-CALL": "a call of a tool that tool_search declared did not do its work",
    "E-SEARCH-GATE": "a deferred tool the model called without searching for it ran",
    "E-SEARCH-REOPEN": "a resumed session forgot the tools its search had declared",
}


@frozen
class SearchCase:
    kind: str
    deferred: tuple[str, ...]
    wanted: str  # the deferred tool the case is about
    query: str
    ids: tuple[str, str]
    path: str
    text: str  # the secret the tool's call writes or reads
    prompt: str
    gated: tuple[tuple[str, str, str], ...] = ()  # GATE: (tool, path, call id) for each deferred tool
    old: str = ""  # GATE: the word an edit would replace


def cases(draw: Draw) -> list[SearchCase]:
    found = []
    for kind in (FOUND, GATE, REOPENED):
        deferred = tuple(draw.shuffled(DEFERRABLE)[: draw.integer(2, 3)])
        wanted = draw.choice([name for name in deferred if name != "edit"] if kind != REOPENED else deferred)
        ids = draw.call_ids(2 + len(deferred))
        gated = tuple((tool, f"{draw.word()}/{name}", call_id)
                      for tool, name, call_id in zip(deferred, draw.names(len(deferred)), ids[2:])) if kind == GATE else ()
        found.append(SearchCase(kind, deferred, wanted, f"{wanted} {draw.word()}", tuple(ids[:2]),
                                f"{draw.word()}/{draw.file_name()}", draw.token(), draw.words(6), gated, draw.word()))
    return found


def gate_call(case: SearchCase, tool: str, path: str, call_id: str) -> Call:
    """A call of a deferred tool nobody searched for: a read, a write or an edit, each of a file of its own."""
    if tool == "read":
        return Call.of(call_id, "read", {"path": path})
    if tool == "write":
        return Call.of(call_id, "write", {"path": path, "content": case.text})
    return Call.of(call_id, "edit", {"path": path, "old_text": case.old, "new_text": case.text})


def gate_files(case: SearchCase) -> dict[str, str]:
    """What the root holds before the gated calls: the files a read and an edit aim at."""
    return {path: f"{case.old} {case.text if tool == 'read' else ''}\n" for tool, path, _ in case.gated
            if tool != "write"}


def gate_opened(case: SearchCase, root: Path, requests: list[dict[str, Any]]) -> bool:
    """Whether a gated call did its work: the read's text reached the model, the write or the edit is on disk."""
    for tool, path, call_id in case.gated:
        target = root / path
        if tool == "read":
            result = answered(requests, call_id)
            if result is not None and case.text in result:
                return True
        elif tool == "write" and target.exists():
            return True
        elif tool == "edit" and target.read_text(encoding="utf-8") != f"{case.old} \n":
            return True
    return False


def tool_call(case: SearchCase) -> Call:
    if case.wanted == "read":
        return Call.of(case.ids[1], "read", {"path": case.path})
    return Call.of(case.ids[1], "write", {"path": case.path, "content": case.text})


def did_work(case: SearchCase, root: Path, requests: list[dict[str, Any]]) -> bool:
    if case.wanted == "read":
        result = answered(requests, case.ids[1])
        return result is not None and case.text in result
    target = root / case.path
    return target.is_file() and target.read_text(encoding="utf-8") == case.text


async def check(case: SearchCase, bench: Bench) -> list[str]:
    root, folder = bench.folder("root"), bench.folder("cwd")
    if case.wanted == "read":
        write_files(root, {case.path: f"{case.text}\n"})
    write_files(root, gate_files(case))
    search = Call.of(case.ids[0], "tool_search", {"query": case.query, "limit": 1})
    tools = ["--tools", "ls", "--defer", ",".join(case.deferred)]

    def reply(request: dict[str, Any], number: int) -> Answer:
        if case.kind == GATE:
            gated = [gate_call(case, *entry) for entry in case.gated]
            return Answer(calls=gated) if number == 0 else Answer(text="Done.")
        script = [Answer(calls=[search]), Answer(calls=[tool_call(case)])] if case.kind == FOUND else [Answer(calls=[search])]
        return script[number] if number < len(script) else Answer(text="Done.")

    session = ["--session", str(folder / "session.jsonl")] if case.kind == REOPENED else []
    async with bench.model(reply) as server:
        finished = await bench.run("tiny_pi.agent", [*bench.agent_args(server, root, *tools, *session), case.prompt],
                                   cwd=folder)
    codes = ending(finished)
    requests = server.requests
    if requests and set(case.deferred) & set(declared(requests[0])):
        codes.append("E-SEARCH-EARLY")
    if case.kind == FOUND:
        if len(requests) < 2 or case.wanted not in declared(requests[1]):
            codes.append("E-SEARCH-UNDECLARED")
        elif not did_work(case, root, requests):
            codes.append("E-SEARCH-CALL")
    elif case.kind == GATE:
        if gate_opened(case, root, requests):
            codes.append("E-SEARCH-GATE")
    else:
        codes += await reopened(case, bench, root, folder, [*tools, *session])
    return list(dict.fromkeys(codes))


async def reopened(case: SearchCase, bench: Bench, root: Path, folder: Path, flags: list[str]) -> list[str]:
    """The session resumed: its first request declares the tool found before, and no other deferred one."""
    async with bench.model(lambda request, number: Answer(text="Done.")) as server:
        finished = await bench.run("tiny_pi.agent", [*bench.agent_args(server, root, *flags), case.prompt], cwd=folder)
    codes = ending(finished)
    first = declared(server.requests[0]) if server.requests else []
    if case.wanted not in first:
        codes.append("E-SEARCH-REOPEN")
    if (set(case.deferred) - {case.wanted}) & set(first):
        codes.append("E-SEARCH-EARLY")
    return codes


FAMILY = Family(
    name="search", chapter=15,
    invariant="a deferred tool is declared, and callable, only after tool_search found it (also in a resumed session)",
    codes=CODES, cases=cases, examine=each_case(check),
)
