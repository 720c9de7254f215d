"""Torn (chapter 10): a session file with a line it cannot trust is refused, naming that line.

The agent first writes a real session (a few prompts, one conversation, its
own format). Each case then damages one copy of it, at a random line: the
last line torn mid-write (no newline), a line in the middle cut short, or a
line that reuses an earlier entry's id. `python -m tiny_pi.agent --session`
must refuse it (exit 2, `PATH:LINE:` on stderr) before any request, and
`python -m tiny_pi.session` must name the same line; neither may change the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
from attrs import frozen

from course.capstone.bench import Bench
from course.capstone.families.common import ending
from course.capstone.model_server import Answer
from course.capstone.records import Codes, Family
from course.capstone.seeds import Draw

TAIL, CUT, REUSED = "tail", "cut", "reused"
CODES = {
    "E-TORN-NO-SESSION": "the agent wrote no session file to damage (the run with --session failed)",
    "E-TORN-ACCEPTED": "a damaged session was used (or shown) instead of refused",
    "E-TORN-LINE": "the refusal did not say PATH:LINE: with the damaged line's number (the header is line 1)",
    "E-TORN-CHANGED": "refusing a damaged session changed the file",
    "E-TORN-SENT": "a request reached the model before the damaged session was refused",
}
MIN_LINES = 4


@frozen
class Damage:
    kind: str
    file_name: str
    fraction: float  # where the damaged line is, as a share of the lines it may be
    prompt: str


@frozen
class TornCase:
    prompts: tuple[str, ...]
    answers: tuple[str, ...]
    damages: tuple[Damage, ...]


def cases(draw: Draw) -> list[TornCase]:
    count = draw.integer(2, 4)
    damages = tuple(Damage(kind, f"{draw.word()}.jsonl", draw.random.random(), draw.words(4))
                    for kind in (TAIL, CUT, REUSED))
    return [TornCase(tuple(draw.words(5) for _ in range(count)), tuple(draw.words(8) for _ in range(count)), damages)]


def damaged(lines: list[bytes], damage: Damage) -> tuple[bytes, int]:
    """The file's bytes with one line damaged, and that line's number (the header is line 1)."""
    if damage.kind == TAIL:
        last = lines[-1].rstrip(b"\n")
        return b"".join(lines[:-1]) + last[: max(1, len(last) // 2)], len(lines)
    if damage.kind == REUSED:
        reused = reuse_id(lines, damage.fraction)
        if reused is not None:
            return reused
    number = 2 + int(damage.fraction * (len(lines) - 1))
    line = lines[number - 1].rstrip(b"\n")
    changed = [*lines[: number - 1], line[: len(line) // 2] + b"\n", *lines[number:]]
    return b"".join(changed), number


def reuse_id(lines: list[bytes], fraction: float) -> tuple[bytes, int] | None:
    """Line k given the id of an earlier entry j (2 <= j < k); None when the entries have no ids to reuse."""
    entries = []
    for line in lines:
        try:
            entries.append(json.loads(line))
        except ValueError:
            return None
    with_ids = [number for number, entry in enumerate(entries, 1)
                if number >= 2 and isinstance(entry, dict) and isinstance(entry.get("id"), str)]
    if len(with_ids) < 2:
        return None
    number = with_ids[1 + int(fraction * (len(with_ids) - 1))]
    earlier = entries[with_ids[int(fraction * (with_ids.index(number)))] - 1]["id"]
    entry = {**entries[number - 1], "id": earlier}
    changed = [*lines[: number - 1], json.dumps(entry).encode() + b"\n", *lines[number:]]
    return b"".join(changed), number


async def examine(found: list[TornCase], bench: Bench) -> list[Codes]:
    (case,) = found
    folder = bench.folder("session")
    session = folder / "whole.jsonl"
    answers = iter(case.answers)

    def reply(request: dict[str, Any], number: int) -> Answer:
        return Answer(text=next(answers, "Done."))

    async with bench.model(reply) as server:
        args = bench.agent_args(server, bench.folder("root"), "--session", str(session))
        stdin = "".join(f"{prompt}\n" for prompt in case.prompts).encode()
        finished = await bench.run("tiny_pi.agent", args, cwd=folder, stdin=stdin)
    lines = session.read_bytes().splitlines(keepends=True) if session.is_file() else []
    setup = ending(finished)  # an agent that crashed here is named, beside what it could not make
    if setup or len(lines) < MIN_LINES or not lines[-1].endswith(b"\n"):
        return [(*setup, "E-TORN-NO-SESSION")] * len(case.damages)
    found: list[Codes] = [()] * len(case.damages)

    async def one(index: int, damage: Damage) -> None:
        found[index] = tuple(await refused(damage, lines, folder, bench))

    async with trio.open_nursery() as nursery:
        for index, damage in enumerate(case.damages):
            nursery.start_soon(one, index, damage)
    return found


async def refused(damage: Damage, lines: list[bytes], folder: Path, bench: Bench) -> list[str]:
    """Both commands on one damaged copy: each refuses, names the line, leaves the file as it was."""
    data, number = damaged(lines, damage)
    path = folder / damage.file_name
    path.write_bytes(data)
    where = f"{path}:{number}:"

    def reply(request: dict[str, Any], count: int) -> Answer:
        return Answer(text="This session should not have been resumed.")

    async with bench.model(reply) as server:
        args = bench.agent_args(server, bench.folder("root"), "--session", str(path), damage.prompt)
        agent = await bench.run("tiny_pi.agent", args, cwd=folder)
    viewer = await bench.run("tiny_pi.session", [str(path)], cwd=folder)
    codes = ending(agent, (2,)) + ending(viewer, (0, 2) if damage.kind == TAIL else (2,))
    if agent.status in (0, 1) or (viewer.status == 0 and damage.kind != TAIL):
        codes.append("E-TORN-ACCEPTED")
    if where not in agent.stderr or where not in viewer.stderr:
        codes.append("E-TORN-LINE")
    if path.read_bytes() != data:
        codes.append("E-TORN-CHANGED")
    if server.requests:
        codes.append("E-TORN-SENT")
    return [code for code in dict.fromkeys(codes) if not (code == "E-EXIT" and "E-TORN-ACCEPTED" in codes)]


FAMILY = Family(
    name="torn", chapter=10,
    invariant="a session line that is not whole is refused with its line number, and nothing is sent",
    codes=CODES, cases=cases, examine=examine,
)
