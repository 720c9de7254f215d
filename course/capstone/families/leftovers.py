"""Leftovers (chapters 08 and 13): nothing the agent started is running once it has exited.

In one case the model runs a bash command that leaves a process behind it
in the background, and the run then ends as usual; in another the process
left behind ignores SIGTERM, so only the SIGKILL that follows the grace
ends it; in the last the agent is stopped with SIGTERM while a bash
command is still running, and must end it (exit status 143, or death by
the signal). Each way, once the agent has exited, no process carrying the
run's mark may be left (every learner command of every family is swept
the same way).
"""

from __future__ import annotations

import signal
from typing import Any

import trio
from attrs import frozen

from course.capstone.bench import Bench
from course.capstone.families.common import ending
from course.capstone.model_server import Answer, Call, answered
from course.capstone.processes import POLL, marked
from course.capstone.records import Family, each_case
from course.capstone.seeds import Draw

BACKGROUND, STUBBORN, SIGNALLED = "background", "ignores-sigterm", "signalled"
CODES = {
    "E-LEFT-BACKGROUND": "a process a bash command left in the background outlived the agent's normal exit: the "
                         "command's whole process group is stopped once the command ends",
    "E-LEFT-SIGTERM-IGNORED": "a process that ignores SIGTERM outlived the agent: SIGKILL follows the grace",
    "E-LEFT-STOPPED": "a bash command still running when the agent was stopped with SIGTERM outlived the agent",
    "E-LEFT-NOT-RUN": "the bash command of the case never ran, so what it leaves could not be checked",
}
LEFT = {BACKGROUND: "E-LEFT-BACKGROUND", STUBBORN: "E-LEFT-SIGTERM-IGNORED", SIGNALLED: "E-LEFT-STOPPED"}
SIGTERM_ENDINGS = (128 + signal.SIGTERM, -signal.SIGTERM)


@frozen
class LeftoversCase:
    kind: str
    prompt: str
    call_id: str
    seconds: str  # how long the command's sleep lasts: the process's mark on its command line
    said: str  # what the command prints once its sleep is in the background


def cases(draw: Draw) -> list[LeftoversCase]:
    return [
        LeftoversCase(kind, draw.words(5), draw.call_id(), f"{draw.integer(3000, 9000)}.{draw.integer(1000, 9999)}",
                      draw.token())
        for kind in (BACKGROUND, STUBBORN, SIGNALLED)
    ]


def command(case: LeftoversCase, seconds: str) -> str:
    if case.kind == BACKGROUND:
        return f"sleep {seconds} >/dev/null 2>&1 &\necho {case.said}"
    if case.kind == STUBBORN:  # ignored before the fork, SIGTERM stays ignored in the child, and after its exec
        return f"trap '' TERM\nsleep {seconds} >/dev/null 2>&1 &\necho {case.said}"
    return f"echo {case.said}; sleep {seconds}"


async def check(case: LeftoversCase, bench: Bench) -> list[str]:
    root, seconds = bench.folder("root"), bench.own(case.seconds)  # more digits: still a number of seconds
    call = Call.of(case.call_id, "bash", {"command": command(case, seconds)})

    def reply(request: dict[str, Any], number: int) -> Answer:
        return Answer(calls=[call]) if number == 0 else Answer(text="Done.")

    seen: list[bool] = []

    async def stop_when_sleeping(process: trio.Process) -> None:
        """SIGTERM to the agent once its command's sleep runs (the wait ends with the agent, too)."""
        while not marked([seconds]):
            await trio.sleep(POLL)
        seen.append(True)
        process.send_signal(signal.SIGTERM)

    during = stop_when_sleeping if case.kind == SIGNALLED else None
    async with bench.model(reply) as server:
        args = bench.agent_args(server, root, "--tools", "read,ls,bash", case.prompt)
        finished = await bench.run("tiny_pi.agent", args, cwd=bench.folder("cwd"), during=during,
                                   marks=[seconds])
    left = [LEFT[case.kind]] if finished.leftovers else []  # when it was left: E-LEFT-RUNNING alone does not say
    if case.kind == SIGNALLED:
        codes = left + ending(finished, SIGTERM_ENDINGS)
        return codes if seen else [*codes, "E-LEFT-NOT-RUN"]
    codes = left + ending(finished)
    result = answered(server.requests, case.call_id)
    return codes if result is not None and case.said in result else [*codes, "E-LEFT-NOT-RUN"]


FAMILY = Family(
    name="leftovers", chapter=8,
    invariant="nothing the agent started runs on after it exits, whether it ended or was stopped",
    codes=CODES, cases=cases, examine=each_case(check),
)
