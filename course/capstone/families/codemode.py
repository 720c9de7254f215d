"""Codemode (chapter 16): a script reaches deferred tools, and its calls stay inside its one result.

With `--codemode --tools ls --defer write`, the model sends one script. In
one case it writes a file through the deferred `write`, lists the folder
with `ls` and returns a secret: the file must be there, the codemode result
must carry the secret and the listing, and the next request must hold the
codemode call and its one result only (the nested calls never enter the
transcript). In the other the script throws an error with a secret
message: the result must carry it, and the run must go on to the model.
"""

from __future__ import annotations

import json
from typing import Any

from attrs import frozen

from course.capstone.bench import Bench
from course.capstone.families.common import ending
from course.capstone.model_server import Answer, Call, answered, calls_made, results
from course.capstone.records import Family, each_case
from course.capstone.seeds import Draw

CALLS, THROWS = "calls", "throws"
CODES = {
    "E-CODEMODE-CALL": "a script's tool calls did not do their work, or its value did not reach the model",
    "E-CODEMODE-NESTED": "a script's nested tool calls entered the transcript beside the codemode call",
    "E-CODEMODE-ERROR": "a script that threw did not end as one result that says so, with the run going on",
}


@frozen
class CodemodeCase:
    kind: str
    call_id: str
    folder: str
    file_name: str
    text: str
    secret: str
    names: tuple[str, str]  # the script's variable names
    prompt: str


def cases(draw: Draw) -> list[CodemodeCase]:
    return [CodemodeCase(kind, draw.call_id(), draw.word(), draw.file_name(), draw.token(), draw.token(),
                         (draw.word(), draw.word()), draw.words(6)) for kind in (CALLS, THROWS)]


def script(case: CodemodeCase) -> str:
    first, second = case.names
    path = f"{case.folder}/{case.file_name}"
    if case.kind == CALLS:
        return (f"const {first} = await tools.write({{path: {json.dumps(path)}, content: {json.dumps(case.text)}}});\n"
                f"const {second} = await tools.ls({{path: {json.dumps(case.folder)}}});\n"
                f"return {{said: {json.dumps(case.secret)}, listed: {second}.text}};")
    return (f"const {first} = await tools.ls({{}});\n"
            f"throw new Error({json.dumps(case.secret)} + {first}.text.length);")


async def check(case: CodemodeCase, bench: Bench) -> list[str]:
    root = bench.folder("root")
    call = Call.of(case.call_id, "codemode", {"code": script(case)})

    def reply(request: dict[str, Any], number: int) -> Answer:
        return Answer(calls=[call]) if number == 0 else Answer(text="Done.")

    async with bench.model(reply) as server:
        args = bench.agent_args(server, root, "--codemode", "--tools", "ls", "--defer", "write", case.prompt)
        finished = await bench.run("tiny_pi.agent", args, cwd=bench.folder("cwd"))
    codes = ending(finished)
    result = answered(server.requests, case.call_id)
    if case.kind == THROWS:
        if result is None or case.secret not in result or len(server.requests) < 2:
            codes.append("E-CODEMODE-ERROR")
        return codes
    written = root / case.folder / case.file_name
    if not (written.is_file() and written.read_text(encoding="utf-8") == case.text) or result is None \
            or case.secret not in result or case.file_name not in result:
        codes.append("E-CODEMODE-CALL")
    last = server.requests[-1] if server.requests else {}
    if len(server.requests) >= 2 and (calls_made(last) != [case.call_id] or list(results(last)) != [case.call_id]):
        codes.append("E-CODEMODE-NESTED")
    return codes


FAMILY = Family(
    name="codemode", chapter=16,
    invariant="a codemode script calls deferred tools and its calls live inside its one result; a throw is a result",
    codes=CODES, cases=cases, examine=each_case(check),
)
