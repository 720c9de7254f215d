"""Pairing (chapter 07): every tool call the model makes is answered by exactly one result, its own.

The model asks for several calls at once, over two turns, with call ids of
varying shape. Every case holds a call of every kind, each on a path of
its own through chapter 06's contract, so an agent that loses the result
of one kind fails every case of every run, not one in four: reads of
files that exist (each result must carry that file's own text), a listing,
a read of a file that does not exist (the tool raises), a tool nobody
registered, arguments the tool's schema refuses, and arguments that are
not JSON at all; a few more calls of drawn kinds, all shuffled over the two
turns. The last request must carry one result per call id, none twice and
none for an id nobody called, and each read's result must hold its own
file's secret, not another's.
"""

from __future__ import annotations

import json
from typing import Any

from attrs import frozen

from course.capstone.bench import Bench
from course.capstone.families.common import ending, write_files
from course.capstone.model_server import Answer, Call, calls_made, results
from course.capstone.records import Family, each_case
from course.capstone.seeds import Draw

CODES = {
    "E-PAIR-MISSING": "a tool call had no result in the agent's last request to the model (or the agent sent none)",
    "E-PAIR-EXTRA": "a tool call got two results, or a result named a call nobody made",
    "E-PAIR-CONTENT": "a call's result did not carry what that call read (lost, or another call's)",
}


@frozen
class PairingCase:
    prompt: str
    files: dict[str, str]  # path -> text (each text holds a secret)
    turns: tuple[tuple[Call, ...], ...]
    expected: dict[str, str]  # call id -> the secret its result must carry
    interleave: bool
    kinds: tuple[str, ...]  # each call's kind, in call order


READ, LS, MISSING, UNKNOWN, SCHEMA, UNPARSED = "read", "ls", "missing", "unknown", "schema", "unparsed"
KINDS = (READ, LS, MISSING, UNKNOWN, SCHEMA, UNPARSED)  # every case has one of each


def draw_call(draw: Draw, kind: str, call_id: str, files: dict[str, str],
              secrets_of: dict[str, str]) -> tuple[Call, str | None]:
    """One call of `kind`, and the secret its result must carry (None: any result will do)."""
    if kind == READ:
        path = draw.choice(sorted(files))
        return Call.of(call_id, "read", {"path": path}), secrets_of[path]
    if kind == LS:
        path = draw.choice(sorted(files))
        folder, _, name = path.rpartition("/")
        return Call.of(call_id, "ls", {"path": folder or "."}), name
    if kind == MISSING:
        return Call.of(call_id, "read", {"path": f"{draw.word()}/{draw.file_name()}"}), None
    if kind == UNKNOWN:
        return Call.of(call_id, f"{draw.word()}_{draw.word()}", {"path": draw.file_name()}), None
    if kind == SCHEMA:
        return Call.of(call_id, "read", {draw.word(): draw.file_name()}), None
    cut = json.dumps({"path": draw.file_name()})  # arguments cut off mid-text: no JSON object
    return Call(call_id, draw.choice(("read", "ls")), cut[: draw.integer(1, len(cut) - 2)]), None


def cases(draw: Draw) -> list[PairingCase]:
    found = []
    for _ in range(3):
        names = draw.names(draw.integer(3, 5))
        folders = [draw.word() for _ in range(2)]
        paths = [f"{draw.choice(folders)}/{name}" if draw.chance(0.5) else name for name in names]
        secrets_of = {path: draw.token() for path in paths}
        files = {path: f"{draw.words(3)}\n{secrets_of[path]}\n{draw.words(4)}\n" for path in paths}
        kinds = draw.shuffled([*KINDS, *(draw.choice(KINDS) for _ in range(draw.integer(0, 2)))])
        ids = iter(draw.call_ids(len(kinds)))
        calls, expected = [], {}
        for kind in kinds:
            call, secret = draw_call(draw, kind, next(ids), files, secrets_of)
            calls.append(call)
            if secret is not None:
                expected[call.id] = secret
        cut = draw.integer(2, len(calls) - 2)  # two turns, each of two calls or more
        turns = (tuple(calls[:cut]), tuple(calls[cut:]))
        found.append(PairingCase(draw.words(6), files, turns, expected, draw.chance(0.5), tuple(kinds)))
    return found


async def check(case: PairingCase, bench: Bench) -> list[str]:
    root = bench.folder("root")
    write_files(root, case.files)

    def reply(request: dict[str, Any], number: int) -> Answer:
        if number < len(case.turns):
            return Answer(calls=case.turns[number], interleave=case.interleave)
        return Answer(text="Done.")

    async with bench.model(reply) as server:
        finished = await bench.run("tiny_pi.agent", [*bench.agent_args(server, root), case.prompt], cwd=bench.folder("cwd"))
    codes = ending(finished)
    last = server.requests[-1] if server.requests else {}
    return codes + pairing_codes(last, [call.id for turn in case.turns for call in turn], case.expected)


def pairing_codes(request: dict[str, Any], called: list[str], expected: dict[str, str]) -> list[str]:
    """The pairing codes of the last request: one result per call id, each with its own content."""
    found = results(request)
    codes = []
    if any(call_id not in found for call_id in called):
        codes.append("E-PAIR-MISSING")
    replayed = set(calls_made(request))
    if any(len(texts) > 1 or call_id not in replayed for call_id, texts in found.items()):
        codes.append("E-PAIR-EXTRA")
    if any(call_id in found and secret not in found[call_id][0] for call_id, secret in expected.items()):
        codes.append("E-PAIR-CONTENT")
    return codes


FAMILY = Family(
    name="pairing", chapter=7,
    invariant="a tool call always gets exactly one result, its own",
    codes=CODES, cases=cases, examine=each_case(check),
)
