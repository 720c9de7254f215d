"""Escape (chapters 07-08): nothing outside the root reaches the model, or is written there.

Beside the root lies a folder the agent must never reach (its name starts
with the root's: a prefix check of strings lets it through), holding a file
whose text is a secret, and a file whose name is one. The root holds symlinks into that
folder (a file and a folder, under random names) and a symlink that stays
inside. Each case asks, in one turn, for a mix of calls that climb out
(`../` at random depths, absolute paths, symlinks; reads, listings, writes
and edits) and calls that stay inside, also through `..` or a symlink. No
request body may ever hold either secret; the outside folder must be as it
was; and every call that stays inside must work.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from attrs import frozen

from course.capstone.bench import Bench
from course.capstone.families.common import ending, listing, write_files
from course.capstone.model_server import Answer, Call, answered
from course.capstone.records import Family, each_case
from course.capstone.seeds import Draw

DOTDOT, SYMLINK, WRITE = "dotdot", "symlink", "write"
CODES = {
    "E-ESCAPE-DOTDOT": "a file outside the root reached the model through `..` or an absolute path",
    "E-ESCAPE-SYMLINK": "a file outside the root reached the model through a symlink",
    "E-ESCAPE-WRITE": "a write or an edit changed something outside the root",
    "E-ESCAPE-INSIDE": "a call that stays inside the root (through `..` or a symlink) did not do its work: its "
                       "result did not reach the model, or its file was not written",
}
OUTSIDE = "<outside>"  # an absolute path's start, known once the case's world has a place
ESCAPE_CODE = {DOTDOT: "E-ESCAPE-DOTDOT", SYMLINK: "E-ESCAPE-SYMLINK", WRITE: "E-ESCAPE-WRITE"}


@frozen
class Layout:
    """Names of one case's world: the root's, the outside folder's, and what is in each."""

    root: str
    outside: str
    secret_file: str  # in outside/, its text is `secret`
    secret: str
    plain: str  # a word beside the secret in secret_file, for an edit to aim at
    hidden_file: str  # in outside/, its name is a secret of its own
    link_file: str  # root/link_file -> outside/secret_file
    link_folder: str  # root/link_folder -> outside/
    folder: str  # a real folder in the root
    inside_file: str  # root/folder/inside_file holds `inside_secret`
    inside_secret: str
    inside_link: str  # root/inside_link -> folder/inside_file


@frozen
class EscapeCase:
    kind: str
    layout: Layout
    prompt: str
    calls: tuple[Call, ...]
    inside: tuple[str, ...]  # ids of the calls that stay inside: each must work
    written: tuple[str, ...]  # files a write inside must leave in the root, each with its text
    texts: tuple[str, ...]


def layout(draw: Draw) -> Layout:
    """A world whose outside folder is the root's sibling and starts with the root's name: `kelp`, `kelp-vorn`."""
    hidden = draw.token().lower()
    root = draw.word()
    return Layout(
        root=root, outside=f"{root}{draw.choice('-_.')}{draw.word(3, 5)}", secret_file=draw.file_name(),
        secret=draw.token(), plain=draw.word(), hidden_file=f"{hidden}.txt", link_file=draw.file_name(), link_folder=draw.word(),
        folder=draw.word(), inside_file=draw.file_name(), inside_secret=draw.token(), inside_link=draw.file_name(),
    )


def climbs(draw: Draw, world: Layout, name: str) -> str:
    """`name` in the outside folder, reached with `..` from a random depth inside the root."""
    down = [world.folder, *(draw.word() for _ in range(draw.integer(0, 2)))][: draw.integer(0, 2)]
    return "/".join([*down, *[".."] * (len(down) + 1), world.outside, name])


def cases(draw: Draw) -> list[EscapeCase]:
    return [draw_case(draw, kind) for kind in (DOTDOT, SYMLINK, WRITE)]


def draw_case(draw: Draw, kind: str) -> EscapeCase:
    world = layout(draw)
    ids = iter(draw.call_ids(12))
    calls: list[Call] = []
    inside: list[str] = []
    written: list[str] = []
    texts: list[str] = []
    if kind == DOTDOT:
        calls += [Call.of(next(ids), "read", {"path": climbs(draw, world, world.secret_file)}),
                  Call.of(next(ids), "read", {"path": f"{OUTSIDE}/{world.secret_file}"}),
                  Call.of(next(ids), "ls", {"path": f"../{world.outside}"}),
                  Call.of(next(ids), "ls", {"path": draw.choice(("..", f"{world.folder}/../.."))})]
        inside_call = Call.of(next(ids), "read", {"path": f"{world.folder}/../{world.folder}/{world.inside_file}"})
    elif kind == SYMLINK:
        calls += [Call.of(next(ids), "read", {"path": world.link_file}),
                  Call.of(next(ids), "read", {"path": f"{world.link_folder}/{world.secret_file}"}),
                  Call.of(next(ids), "ls", {"path": world.link_folder})]
        inside_call = Call.of(next(ids), "read", {"path": world.inside_link})
    else:
        outside_text = draw.token()
        texts.append(outside_text)
        calls += [Call.of(next(ids), "write", {"path": climbs(draw, world, draw.file_name()), "content": outside_text}),
                  Call.of(next(ids), "write", {"path": f"{world.link_folder}/{draw.file_name()}", "content": outside_text}),
                  Call.of(next(ids), "write", {"path": f"{OUTSIDE}/{draw.file_name()}", "content": outside_text}),
                  Call.of(next(ids), "edit", {"path": world.link_file, "old_text": world.plain, "new_text": outside_text}),
                  Call.of(next(ids), "edit", {"path": climbs(draw, world, world.secret_file), "old_text": world.plain,
                                              "new_text": outside_text})]
        target = f"{world.folder}/{draw.word()}/{draw.file_name()}"
        inside_text = draw.token()
        written.append(f"{target}\0{inside_text}")
        inside_call = Call.of(next(ids), "write", {"path": f"{world.folder}/../{target}", "content": inside_text})
    calls.insert(draw.integer(0, len(calls)), inside_call)
    inside.append(inside_call.id)
    return EscapeCase(kind, world, draw.words(7), tuple(calls), tuple(inside), tuple(written), tuple(texts))


def build(base: Path, world: Layout) -> tuple[Path, Path]:
    """The root and the outside folder of a case, with their files and links."""
    root, outside = base / world.root, base / world.outside
    write_files(outside, {world.secret_file: f"{world.plain}\n{world.secret}\n", world.hidden_file: "nothing\n"})
    write_files(root, {f"{world.folder}/{world.inside_file}": f"{world.inside_secret}\n"})
    os.symlink(outside / world.secret_file, root / world.link_file)
    os.symlink(outside, root / world.link_folder, target_is_directory=True)
    os.symlink(Path(world.folder) / world.inside_file, root / world.inside_link)
    return root, outside


async def check(case: EscapeCase, bench: Bench) -> list[str]:
    world = case.layout
    root, outside = build(bench.folder("world"), world)
    calls = tuple(absolute(call, outside) for call in case.calls)
    before = listing(outside)

    def reply(request: dict[str, Any], number: int) -> Answer:
        return Answer(calls=calls) if number == 0 else Answer(text="Done.")

    async with bench.model(reply) as server:
        args = bench.agent_args(server, root, "--tools", "read,ls,write,edit")
        finished = await bench.run("tiny_pi.agent", [*args, case.prompt], cwd=bench.folder("cwd"))
    codes = ending(finished)
    if server.seen(world.secret) or server.seen(world.hidden_file.removesuffix(".txt")):
        codes.append(ESCAPE_CODE[case.kind])
    if listing(outside) != before and "E-ESCAPE-WRITE" not in codes:
        codes.append("E-ESCAPE-WRITE")
    if not inside_worked(case, root, server.requests):
        codes.append("E-ESCAPE-INSIDE")
    return codes


def absolute(call: Call, outside: Path) -> Call:
    """The call with the outside folder's absolute path in place of OUTSIDE."""
    return Call(call.id, call.name, call.arguments.replace(OUTSIDE, json.dumps(str(outside))[1:-1]))


def inside_worked(case: EscapeCase, root: Path, requests: list[dict[str, Any]]) -> bool:
    """Each call that stays inside did its work: its read reached the model, its write is in the root."""
    for entry in case.written:
        target, text = entry.split("\0")
        path = root / target
        if not (path.is_file() and path.read_text(encoding="utf-8") == text):
            return False
    if case.kind != WRITE:
        for call_id in case.inside:
            result = answered(requests, call_id)
            if result is None or case.layout.inside_secret not in result:
                return False
    return True


FAMILY = Family(
    name="escape", chapter=8,
    invariant="a path that leaves the root (`..`, absolute, a symlink) is refused; one that stays inside works",
    codes=CODES, cases=cases, examine=each_case(check),
)
