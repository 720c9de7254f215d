"""MCP (chapter 17): a fixture server's tools, named by the rule, found, called, and the server gone at the end.

The capstone's own MCP server (the official SDK) lists tools under drawn
names, paged: two long ones that share their first 60-odd characters (so
their `mcp__SERVER__TOOL` names go over 64 and only the hash keeps them
apart; the first is exactly 65, the edge where hashing starts) and a short
one with `.` or `-` in it whose name is exactly 64 (the longest kept whole),
under a server name with one too. The agent gets it through `--mcp-config`, deferred: the model searches
with a word of their descriptions, and then calls two, a hashed name and
the short one (every run calls both kinds), directly in one case and from
a codemode script (`tools.NAME`) in the other. The request after the search
must declare them under exactly chapter 17's names (`_` for every other
character, and past 64 the first 55 characters, `_` and 8 hex digits of
the SHA-256 of `SERVER\\0TOOL`); each call's result must carry its tool's
answer; and the server must be gone once the agent has exited.

The model answers its first request once the server has done its imports
(it says so with a file), however long a busy machine makes that: the
agent's own wait for a server still connecting is bounded (ten seconds in
chapter 17), and the capstone examines the agent, not the machine's load.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any

import trio
from attrs import frozen

from course.capstone.bench import Bench
from course.capstone.families.common import ending
from course.capstone.model_server import Answer, Call, answered, declared
from course.capstone.processes import marked
from course.capstone.records import Family, each_case
from course.capstone.seeds import Draw

FIXTURE = "mcp_fixture.py"  # the course's MCP server, as the bench copied it
CALLED, SCRIPTED = "called", "scripted"
READY_POLL = 0.05
MAX_NAME, HASH_CHARS = 64, 8
NAME_CHARACTERS = "abcdefghijklmnopqrstuvwxyz0123456789_-"
CODES = {
    "E-MCP-NAME": "an MCP tool was not declared under chapter 17's name for it (mcp__SERVER__TOOL, hashed past 64)",
    "E-MCP-RESULT": "an MCP tool's call did not bring back what the server answered",
}


@frozen
class McpTool:
    name: str
    description: str
    answer: str


@frozen
class McpCase:
    kind: str
    server: str
    tools: tuple[McpTool, ...]
    page_size: int
    keyword: str
    called: tuple[int, int]  # the tools the model calls: one of the two long names, and the short one
    text: str
    ids: tuple[str, str, str]  # the search's, and each call's
    mark: str
    prompt: str


def expected_name(server: str, tool: str) -> str:
    """Chapter 17's rule for a tool's name in the agent (with nothing else of that name registered)."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", f"mcp__{server}__{tool}")
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:HASH_CHARS]
    return f"{name[:MAX_NAME - HASH_CHARS - 1]}_{digest}"


def cases(draw: Draw) -> list[McpCase]:
    found = []
    for kind in (CALLED, SCRIPTED):
        server = f"{draw.word(3, 6)}{draw.choice('.-')}{draw.word(3, 6)}"
        room = MAX_NAME - len(f"mcp__{server}__")  # the tool name's characters that a 64-character name holds
        first = draw.word(3, 5)
        shared = "".join(draw.choice(NAME_CHARACTERS) for _ in range(room + 1 - len(first)))
        start = f"{draw.word()}{draw.choice('.-')}"
        rest = room - len(start)
        names = [f"{shared}{first}", f"{shared}{draw.word(6, 8)}", f"{start}{draw.word(rest, rest)}"]
        keyword = draw.word(8, 10)
        listed = draw.shuffled(names)
        tools = tuple(McpTool(name, f"{draw.word()} {keyword} {draw.words(3)}", draw.token()) for name in listed)
        called = (listed.index(draw.choice(names[:2])), listed.index(names[2]))
        found.append(McpCase(kind, server, tools, draw.integer(1, 2), keyword, called, draw.token(),
                             tuple(draw.call_ids(3)), draw.token(), draw.words(6)))
    return found


def config(case: McpCase, folder: Path, mark: str, fixture: Path) -> Path:
    """The spec the fixture reads and the --mcp-config file that starts it (with `mark` on its command line)."""
    spec = folder / "spec.json"
    spec.write_text(json.dumps({"name": case.server, "page_size": case.page_size, "tools": [
        {"name": tool.name, "description": tool.description, "answer": tool.answer} for tool in case.tools]}))
    entry = {"command": sys.executable, "args": ["-P", str(fixture), str(spec), mark]}
    path = folder / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {case.server: entry}}))
    return path


async def server_ready(mark: str, folder: Path) -> None:
    """Until the fixture says its imports are done; at once when no process of it runs any more."""
    while not (folder / "spec.ready").exists() and marked([mark]):
        await trio.sleep(READY_POLL)


async def check(case: McpCase, bench: Bench) -> list[str]:
    folder, root, mark = bench.folder("cwd"), bench.folder("root"), bench.own(case.mark)
    names = [expected_name(case.server, tool.name) for tool in case.tools]
    search = Call.of(case.ids[0], "tool_search", {"query": case.keyword})
    calls = calls_of(case, names)

    async def reply(request: dict[str, Any], number: int) -> Answer:
        if number == 0:
            await server_ready(mark, folder)
            return Answer(calls=[search])
        return Answer(calls=calls) if number == 1 else Answer(text="Done.")

    async with bench.model(reply) as server:
        flags = ["--codemode"] if case.kind == SCRIPTED else []
        args = bench.agent_args(server, root, "--tools", "read,ls", *flags, "--mcp-config", str(config(case, folder, mark, bench.scripts[FIXTURE])),
                          case.prompt)
        finished = await bench.run("tiny_pi.agent", args, cwd=folder, marks=[mark])
    codes = ending(finished)
    if len(server.requests) < 2 or not set(names) <= set(declared(server.requests[1])):
        codes.append("E-MCP-NAME")
    results = [answered(server.requests, call.id) for call in calls]
    answers = [case.tools[index].answer for index in case.called]
    owed = zip(results, answers) if case.kind == CALLED else [(results[0], answer) for answer in answers]
    if any(result is None or answer not in result or case.text not in result for result, answer in owed):
        codes.append("E-MCP-RESULT")
    return codes


def calls_of(case: McpCase, names: list[str]) -> list[Call]:
    """CALLED: a call of each tool; SCRIPTED: one script that calls both and returns what each said."""
    if case.kind == CALLED:
        return [Call.of(call_id, names[index], {"text": case.text}) for call_id, index in zip(case.ids[1:], case.called)]
    first, second = (names[index] for index in case.called)
    text = json.dumps(case.text)
    code = (f"const one = await tools.{first}({{text: {text}}});\n"
            f"const two = await tools.{second}({{text: {text}}});\nreturn one.text + \" \" + two.text;")
    return [Call.of(case.ids[1], "codemode", {"code": code})]


FAMILY = Family(
    name="mcp", chapter=17,
    invariant="an MCP server's tools are named by chapter 17's rule, found, called (also from a script), "
              "and the server ends with the agent",
    codes=CODES, cases=cases, examine=each_case(check),
)
