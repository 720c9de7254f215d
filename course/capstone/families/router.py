"""Router (chapter 18): a failing model falls back once to the next, and a router's state survives a reopen.

The fallback cases run `python -m tiny_pi.agent --models models.toml
--model VIRTUAL --session FILE` over a fallback list of physical models
under drawn ids, each on a server of its own. Every kind of failure is in
every run, so an agent that mishandles one kind fails every run, not one in
four. In the first case a model with a context window too small for any
request comes first (a fallback skips it, and it must receive nothing),
then the model that fails, then one or two more; the prompts come on stdin,
one for each failure another model may answer (a 429, a 5xx, a usage limit
and a quota said in words whatever the status, a connection dropped
mid-reply), in a drawn order: for each, the failing model must be asked
once, the next one must answer it, once, and no model after it be asked,
and `python -m tiny_pi.session` must show which physical model gave each
reply. Its last prompt fails with what any model would have (a 400, a 401
or a 403, drawn), and two more cases fail with the other two: such a
failure is asked of no other model, and the run ends in its error (exit 1).

The state case needs a virtual model that keeps a state, which chapter 18's
command line does not offer (a fallback keeps none); a course script,
router_driver.py, builds it from the lesson's own names (a Rotation whose
Nth request goes to the Nth model of a drawn order) and runs it on a
session (one router_state entry per request: each changes the state),
then, side by side on two copies of that session, reopened, and reopened
at a branch, at the state a drawn earlier reply left. Every request must
reach the server its handed state says: the count goes on across the
reopen, and on the branch it goes on from that branch's state, not from the
end of the file. The order is drawn so that a lost state, or one read from
the end of the file, sends some prompt to another server.
"""

from __future__ import annotations

import json
import shutil
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Sequence

import trio
from attrs import frozen

from course.capstone.bench import Bench
from course.capstone.families.common import ending
from course.capstone.model_server import Answer, Failure, ScriptedServer, last_user_text
from course.capstone.records import Codes, Family, each_case
from course.capstone.seeds import Draw

DRIVER = "router_driver.py"  # the course script that builds a router from chapter 18's names, as the bench copied it
FALLS_BACK, STAYS = "falls-back", "stays"
CODES = {
    "E-ROUTER-FALLBACK": "a call that failed in a way another model may not (429, 5xx, a usage limit, a dropped "
                         "connection) was not answered by the next model of the fallback list",
    "E-ROUTER-RETRIED": "a model that failed was asked again for the same prompt, or a retry went further than once",
    "E-ROUTER-NOT-RETRYABLE": "a failure any model would have (400, 401, 403) was sent on to another model",
    "E-ROUTER-WINDOW": "a model whose context window is smaller than the request was sent it",
    "E-ROUTER-SHOWN": "the session (python -m tiny_pi.session) does not show which physical model gave each reply",
    "E-ROUTER-STATE": "a virtual model was not handed the state its last route left on the session's active branch "
                      "(in the same run, after a reopen, or at a branch), or a state was not written once per change",
}
SMALL_WINDOW = (1, 8)  # tokens: no request of a case is that small (its prompt alone is longer)


@frozen
class FallbackCase:
    kind: str  # FALLS_BACK: every failure another model may answer, then one it may not; STAYS: only that one
    virtual: str
    models: tuple[str, ...]  # the fallback list, in order
    windows: tuple[int | None, ...]  # each model's context_window (None: not given)
    failing: int  # the index of the model that fails; those before it are skipped by their window
    prompts: tuple[str, ...]  # one a line of stdin
    failures: tuple[Failure, ...]  # how the failing model fails each prompt
    answers: tuple[str, ...]  # what the next model answers to each prompt that falls back (all but the last)

    @property
    def retried(self) -> tuple[str, ...]:
        """The prompts whose failure another model may answer: all but the last."""
        return self.prompts[:-1]

    def failure_for(self, prompt: str) -> Failure:
        return self.failures[self.prompts.index(prompt)] if prompt in self.prompts else self.failures[0]

    def answer_for(self, prompt: str) -> str:
        return self.answers[self.retried.index(prompt)] if prompt in self.retried else "?"


@frozen
class StateCase:
    virtual: str
    models: tuple[str, ...]
    order: tuple[str, ...]  # request N of the virtual model goes to order[N % len(order)]
    runs: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]  # prompts: first, reopened, at the branch
    branch_at: int  # the branch starts after the state of the first run's request `branch_at` (from 1)

    def routed(self, start: int, prompts: Sequence[str]) -> dict[str, str]:
        """Where each prompt goes when the state handed to its first route counts `start` requests."""
        return {prompt: self.order[(start + number) % len(self.order)] for number, prompt in enumerate(prompts, 1)}

    def expected(self) -> list[dict[str, str]]:
        """For each run, which model each prompt must reach: the reopen and the branch each go on
        (on copies of the session after the first run) from the state their branch holds."""
        first, again, branch = self.runs
        return [self.routed(0, first), self.routed(len(first), again), self.routed(self.branch_at, branch)]

    def mistaken(self) -> list[dict[str, str]]:
        """What a lost state would route instead, or, at the branch, the state at the end of the file."""
        first, again, branch = self.runs
        return [self.routed(0, again), self.routed(0, branch), self.routed(len(first), branch)]

    def telling(self) -> bool:
        """Whether each mistake sends some prompt to another model than the one expected."""
        _, again, branch = self.expected()
        return all(wrong not in (again, branch) for wrong in self.mistaken())


RETRYABLE = ("rate limit", "server error", "usage limit", "quota", "dropped")  # each in every run
NOT_RETRYABLE = (400, 401, 403)  # a case each, every run


def retryable(draw: Draw, way: str) -> Failure:
    """A failure another model may answer, of kind `way`, with drawn words."""
    if way == "rate limit":
        return Failure(429, f"Rate limit reached: {draw.words(3)}")
    if way == "server error":
        return Failure(draw.choice((500, 502, 503, 504)), draw.words(4))
    if way in ("usage limit", "quota"):  # said in words, under a status that alone would say no
        words = "You have reached your usage limit" if way == "usage limit" else "Your quota is exhausted"
        return Failure(draw.choice((400, 402, 403)), f"{words} {draw.words(2)}")
    return Failure(None, draw.word())


def fallback_case(draw: Draw, kind: str, status: int = 0) -> FallbackCase:
    """FALLS_BACK: every retryable failure, one a prompt, behind a skipped model, then `status`; STAYS: `status`."""
    skipped = 1 if kind == FALLS_BACK else draw.integer(0, 1)
    after = draw.integer(1, 2)
    ids = distinct_words(draw, skipped + 1 + after + 1)
    virtual, models = ids[-1], tuple(ids[:-1])
    windows = tuple(draw.integer(*SMALL_WINDOW) if index < skipped else draw.choice((None, 200_000))
                    for index in range(len(models)))
    ways = draw.shuffled(RETRYABLE) if kind == FALLS_BACK else []
    failures = (*(retryable(draw, way) for way in ways), Failure(status, draw.words(5)))
    prompts = tuple(f"{word} {draw.words(5)}" for word in distinct_words(draw, len(failures), low=8))
    return FallbackCase(kind, virtual, models, windows, skipped, prompts, failures,
                        tuple(draw.token() for _ in ways))


def state_case(draw: Draw) -> StateCase:
    ids = distinct_words(draw, draw.integer(2, 3) + 1)
    virtual, models = ids[-1], tuple(ids[:-1])
    runs = (tuple(draw.words(5) for _ in range(draw.integer(2, 3))), (draw.words(5), draw.words(5)),
            (draw.words(5), draw.words(5)))
    branch_at = draw.integer(1, len(runs[0]) - 1)
    while True:  # an order under which every mistake routes some prompt elsewhere
        order = tuple(draw.choice(models) for _ in range(draw.integer(3, 5)))
        case = StateCase(virtual, models, order, runs, branch_at)
        if case.telling():
            return case


def distinct_words(draw: Draw, count: int, low: int = 3) -> list[str]:
    found: list[str] = []
    while len(found) < count:
        word = draw.word(low, max(low, 8))
        if word not in found:
            found.append(word)
    return found


def cases(draw: Draw) -> list[FallbackCase | StateCase]:
    first, *others = draw.shuffled(NOT_RETRYABLE)
    return [fallback_case(draw, FALLS_BACK, first), *(fallback_case(draw, STAYS, status) for status in others),
            state_case(draw)]


def models_toml(case: FallbackCase, servers: Sequence[ScriptedServer]) -> str:
    lines = []
    for model, window, server in zip(case.models, case.windows, servers):
        lines += [f"[models.{model}]", f'base_url = "{server.base_url}"']
        lines += [f"context_window = {window}"] if window is not None else []
    lines += [f"[models.{case.virtual}]", f"fallback = {json.dumps(list(case.models))}"]
    return "\n".join(lines) + "\n"


async def fallback(case: FallbackCase, bench: Bench) -> list[str]:
    folder, root = bench.folder("cwd"), bench.folder("root")
    session, config = folder / "session.jsonl", folder / "models.toml"

    def reply(index: int) -> Any:
        def answer(request: dict[str, Any], number: int) -> Answer | Failure:
            prompt = last_user_text(request)
            return case.failure_for(prompt) if index == case.failing else Answer(text=case.answer_for(prompt))
        return answer

    async with AsyncExitStack() as stack:
        servers = [await stack.enter_async_context(bench.model(reply(index))) for index in range(len(case.models))]
        config.write_text(models_toml(case, servers), encoding="utf-8")
        args = ["--models", str(config), "--model", case.virtual, "--root", str(root), "--tools", "read",
                "--session", str(session)]
        stdin = "".join(f"{prompt}\n" for prompt in case.prompts).encode()
        finished = await bench.run("tiny_pi.agent", args, cwd=folder, stdin=stdin)
    asked = [[last_user_text(request) for request in server.requests] for server in servers]
    next_model = case.failing + 1
    codes = ending(finished, (1,))  # each case's last prompt ends the run in its error
    if any(asked[:case.failing]):
        codes.append("E-ROUTER-WINDOW")
    if any(asked[case.failing].count(prompt) > 1 for prompt in case.prompts) or any(asked[next_model + 1:]):
        codes.append("E-ROUTER-RETRIED")
    if case.prompts[-1] in asked[next_model]:
        codes.append("E-ROUTER-NOT-RETRYABLE")
    if case.kind == STAYS:
        return codes
    answered = [prompt for prompt in asked[next_model] if prompt in case.retried]
    if answered != list(case.retried) or any(answer not in finished.stdout for answer in case.answers):
        codes.append("E-ROUTER-FALLBACK")
    else:
        codes += await shown_models(case, session, folder, bench)
    return codes


async def shown_models(case: FallbackCase, session: Path, folder: Path, bench: Bench) -> list[str]:
    """The session's tree names the model that failed and the one that answered, on their replies; the
    viewer's own ending counts too (a crash while showing a failed reply is an E-EXIT)."""
    shown = await bench.run("tiny_pi.session", [str(session)], cwd=folder)
    codes = ending(shown)
    failed, answered = case.models[case.failing], case.models[case.failing + 1]
    lines = shown.stdout.splitlines() if shown.status == 0 else []
    failures_shown = sum(f"assistant ({failed}):" in line and "[error]" in line for line in lines)
    answers_shown = all(any(f"assistant ({answered}): {answer}" in line for line in lines) for answer in case.answers)
    return codes if failures_shown >= len(case.retried) and answers_shown else [*codes, "E-ROUTER-SHOWN"]


async def reopened(case: StateCase, bench: Bench) -> list[str]:
    """The driver on one session, then side by side on two copies of it: reopened, and at a branch."""
    folder = bench.folder("cwd")
    sessions = [folder / "session.jsonl", folder / "session.jsonl", folder / "branch.jsonl"]

    def reply(model: str) -> Any:
        return lambda request, number: Answer(text=f"{model} answers.")

    async def drive(run: int, branch: str | None, found: list[str]) -> None:
        spec = folder / f"run-{run}.json"
        spec.write_text(json.dumps({
            "session": str(sessions[run]), "branch": branch, "virtual": case.virtual, "order": list(case.order),
            "models": {model: server.base_url for model, server in servers.items()}, "prompts": list(case.runs[run]),
        }), encoding="utf-8")
        found += ending(await bench.script(DRIVER, bench.scripts[DRIVER], [str(spec)], cwd=folder))
        reached = {prompt: [model for model, server in servers.items()
                            for request in server.requests if last_user_text(request) == prompt]
                   for prompt in case.runs[run]}
        if reached != {prompt: [model] for prompt, model in case.expected()[run].items()}:
            found.append("E-ROUTER-STATE")

    codes: list[str] = []
    async with AsyncExitStack() as stack:
        servers = {model: await stack.enter_async_context(bench.model(reply(model))) for model in case.models}
        await drive(0, None, codes)
        states = router_state_ids(sessions[0])
        if len(states) != len(case.runs[0]):  # each of its requests changed the state once
            codes.append("E-ROUTER-STATE")
        if codes:
            return list(dict.fromkeys(codes))
        shutil.copyfile(sessions[0], sessions[2])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drive, 1, None, codes)
            nursery.start_soon(drive, 2, states[case.branch_at - 1], codes)
    return list(dict.fromkeys(codes))


def router_state_ids(session: Path) -> list[str]:
    """The ids of the session's router_state entries, in file order (chapter 18's entry)."""
    found = []
    lines = session.read_text(encoding="utf-8").splitlines() if session.is_file() else []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("type") == "router_state" and isinstance(entry.get("id"), str):
            found.append(entry["id"])
    return found


async def check(case: FallbackCase | StateCase, bench: Bench) -> Codes:
    return tuple(await (fallback(case, bench) if isinstance(case, FallbackCase) else reopened(case, bench)))


FAMILY = Family(
    name="router", chapter=18,
    invariant="a request on a failing model falls back once to the next, and a router's state survives a reopen",
    codes=CODES, cases=cases, examine=each_case(check),
)
