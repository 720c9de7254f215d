"""Compaction (chapter 11): no request is over the budget once the history outgrows it.

With `--context-window N --reserve-tokens R` (drawn), a conversation grows
prompt by prompt past N - R: in one case all in one run (prompts on
stdin), in the other in a session written by a first run and resumed by a
second with the small window. Each reply is shorter than R, so a
compaction that waits for N instead of N - R is caught. The capstone
estimates every request as chapter 11 does (characters / 4: the system
prompt, the tools as one JSON list, the messages' text and calls) and
reports that same estimate as the usage, so its count and the agent's
agree. Every request that offers tools must fit N - R; a request that
offers none is a summary call, and the summary it gets back must be what
the next request carries. Resumed, the session file must still hold every
original message, and the summary.

Two more cases put the context at the budget's very edge, where a rule
off by one token shows. After a first exchange, the capstone reports a
usage for the reply such that the reported input and output plus the
estimate of the next prompt (its characters / 4, rounded up: a prompt of
4k + 1 characters, so rounding down or to the nearest loses a token) is
exactly N - R in one case, which must be sent whole, and N - R + 1 in the
other, which must be compacted first. The first reply is long enough that
the newest prompt alone fits what a compaction keeps, so a summary is due.
"""

from __future__ import annotations

import json
from typing import Any

from attrs import frozen

from course.capstone.bench import Bench
from course.capstone.families.common import ending
from course.capstone.model_server import Answer, content_text, messages
from course.capstone.records import Family, each_case
from course.capstone.seeds import Draw

IN_ONE_RUN, RESUMED = "in-one-run", "resumed"
AT_THE_EDGE, ONE_OVER = "at-the-edge", "one-over"
CHARS_PER_TOKEN = 4
HEADINGS = ("Goal", "Constraints", "Done", "Decisions", "Changed files", "Open questions", "Next steps")
CODES = {
    "E-COMPACT-BUDGET": "a request over the context window minus the reserve reached the model",
    "E-COMPACT-SUMMARY": "the history outgrew the budget, but no summary took the old messages' place",
    "E-COMPACT-HISTORY": "after a compaction, the session file lost an original message or holds no summary",
    "E-COMPACT-EARLY": "a context of exactly the context window minus the reserve was compacted: only one over it is",
}


@frozen
class CompactionCase:
    kind: str
    window: int
    reserve: int
    prompts: tuple[str, ...]  # each holds a secret of its own
    answers: tuple[str, ...]  # each holds a secret of its own
    last_prompt: str  # the resumed run's prompt
    summary: str  # the secret every summary carries

    @property
    def budget(self) -> int:
        return self.window - self.reserve


@frozen
class EdgeCase:
    """A context that reaches the budget exactly (`over` 0) or by one token more (`over` 1) at its second prompt."""

    kind: str
    window: int
    reserve: int
    first_prompt: str
    answer: str  # the first reply: its estimate alone is over what a compaction keeps
    last_prompt: str  # 4k + 1 characters
    summary: str
    over: int

    @property
    def budget(self) -> int:
        return self.window - self.reserve

    def usage(self) -> tuple[int, int]:
        """What the first reply reports, input and output: with the last prompt's estimate, the budget plus `over`."""
        output = tokens(self.answer)
        return self.budget + self.over - output - tokens(self.last_prompt), output


def tokens(text: str) -> int:
    """Chapter 11's estimate of a text: characters / 4, rounded up."""
    return -(-len(text) // CHARS_PER_TOKEN)


def filler(draw: Draw, secret: str, tokens: int) -> str:
    """Words around `secret`, about `tokens` tokens long."""
    words = [secret]
    while sum(len(word) + 1 for word in words) < tokens * CHARS_PER_TOKEN:
        words.append(draw.word())
    return " ".join(words)


def cases(draw: Draw) -> list[CompactionCase]:
    found = []
    for kind in (IN_ONE_RUN, RESUMED):
        window = draw.integer(4000, 7000)
        reserve = draw.integer(window // 6 + 1, window // 4)
        budget = window - reserve
        answers: list[str] = []
        while sum(len(answer) for answer in answers) < 1.6 * budget * CHARS_PER_TOKEN:
            answers.append(filler(draw, draw.token(), draw.integer(budget // 12, budget // 8)))
        prompts = tuple(f"{draw.token()} {draw.words(6)}" for _ in answers)
        found.append(CompactionCase(kind, window, reserve, prompts, tuple(answers), draw.words(5), draw.token()))
    return found + [edge_case(draw, kind, over) for kind, over in ((AT_THE_EDGE, 0), (ONE_OVER, 1))]


def edge_case(draw: Draw, kind: str, over: int) -> EdgeCase:
    window = draw.integer(4000, 7000)
    reserve = draw.integer(window // 6 + 1, window // 4)
    answer = filler(draw, draw.token(), (window - reserve) * 6 // 10)
    last_prompt = f"{draw.token()} {draw.words(6)}"
    while len(last_prompt) % CHARS_PER_TOKEN != 1:
        last_prompt += draw.choice("abcdefghij")
    return EdgeCase(kind, window, reserve, f"{draw.token()} {draw.words(6)}", answer, last_prompt, draw.token(), over)


def estimate(request: dict[str, Any]) -> int:
    """Chapter 11's estimate of a request, in tokens: characters / 4, rounded up."""
    characters = 0
    for message in messages(request):
        characters += len(content_text(message.get("content")))
        for call in message.get("tool_calls") or []:
            function = call.get("function", {}) if isinstance(call, dict) else {}
            characters += len(str(function.get("name", ""))) + len(str(function.get("arguments", "")))
    tools = [tool.get("function", {}) for tool in request.get("tools") or [] if isinstance(tool, dict)]
    specs = [{"name": t.get("name"), "description": t.get("description"), "parameters": t.get("parameters")}
             for t in tools]
    characters += len(json.dumps(specs))
    return -(-characters // CHARS_PER_TOKEN)


def summary_text(secret: str) -> str:
    return "\n".join(f"## {heading}\n- {secret if heading == 'Goal' else 'none'}" for heading in HEADINGS)


class Script:
    """The model of one case: replies in order, a summary for a call that offers no tools."""

    def __init__(self, case: CompactionCase) -> None:
        self.case = case
        self.answers = iter(case.answers)

    def __call__(self, request: dict[str, Any], number: int) -> Answer:
        text = summary_text(self.case.summary) if not request.get("tools") else next(self.answers, "Done.")
        return Answer(text=text, prompt_tokens=estimate(request), completion_tokens=tokens(text))


class EdgeScript:
    """The model of an edge case: the long first reply with the usage that puts the context at the edge,
    a summary for a call that offers no tools, and a short answer."""

    def __init__(self, case: EdgeCase) -> None:
        self.case = case
        self.replied = False

    def __call__(self, request: dict[str, Any], number: int) -> Answer:
        if not request.get("tools"):
            return Answer(text=summary_text(self.case.summary))
        if self.replied:
            return Answer(text="Done.")
        self.replied = True
        prompt_tokens, completion_tokens = self.case.usage()
        return Answer(text=self.case.answer, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)


def budget_codes(case: CompactionCase, requests: list[dict[str, Any]]) -> list[str]:
    """Every request that offers tools fits the budget; after a summary call, the next one carries it."""
    codes = []
    tolerance = max(16, case.window // 100)  # rounding: the agent rounds each message up, this the whole
    normal = [request for request in requests if request.get("tools")]
    if any(estimate(request) > case.budget + tolerance for request in normal):
        codes.append("E-COMPACT-BUDGET")
    return codes + summary_codes(case.summary, requests)


def summary_codes(summary: str, requests: list[dict[str, Any]]) -> list[str]:
    """A summary call came, and the next request that offers tools carries its summary."""
    summarised = [index for index, request in enumerate(requests) if not request.get("tools")]
    after = [request for request in requests[summarised[0] + 1:] if request.get("tools")] if summarised else []
    return [] if after and summary.encode() in json.dumps(after[0]).encode() else ["E-COMPACT-SUMMARY"]


def limit_args(case: CompactionCase | EdgeCase) -> list[str]:
    return ["--context-window", str(case.window), "--reserve-tokens", str(case.reserve)]


async def check_edge(case: EdgeCase, bench: Bench) -> list[str]:
    """Two prompts in one run: the second finds the context at the budget, or one token over it."""
    root, folder = bench.folder("root"), bench.folder("cwd")
    limits = limit_args(case)
    stdin = f"{case.first_prompt}\n{case.last_prompt}\n".encode()
    async with bench.model(EdgeScript(case)) as server:
        finished = await bench.run("tiny_pi.agent", bench.agent_args(server, root, *limits), cwd=folder, stdin=stdin)
    codes = ending(finished)
    compacted = any(not request.get("tools") for request in server.requests)
    if case.over:  # not compacted: the second request went out one token over, by the usage the model reported
        return codes + ([] if compacted else ["E-COMPACT-BUDGET"]) + summary_codes(case.summary, server.requests)
    return codes + (["E-COMPACT-EARLY"] if compacted else [])


async def check(case: CompactionCase | EdgeCase, bench: Bench) -> list[str]:
    if isinstance(case, EdgeCase):
        return await check_edge(case, bench)
    root, folder = bench.folder("root"), bench.folder("cwd")
    limits = limit_args(case)
    stdin = "".join(f"{prompt}\n" for prompt in case.prompts).encode()
    script = Script(case)
    if case.kind == IN_ONE_RUN:
        async with bench.model(script) as server:
            finished = await bench.run("tiny_pi.agent", bench.agent_args(server, root, *limits), cwd=folder, stdin=stdin)
        return ending(finished) + budget_codes(case, server.requests)
    session = folder / "conversation.jsonl"
    async with bench.model(script) as first:
        started = await bench.run("tiny_pi.agent", bench.agent_args(first, root, "--session", str(session)),
                                  cwd=folder, stdin=stdin)
    async with bench.model(script) as server:
        args = bench.agent_args(server, root, "--session", str(session), *limits, case.last_prompt)
        finished = await bench.run("tiny_pi.agent", args, cwd=folder)
    codes = ending(started) + ending(finished) + budget_codes(case, server.requests)
    kept = session.read_text(encoding="utf-8", errors="replace") if session.is_file() else ""
    secrets = [text.split(" ", 1)[0] for text in (*case.prompts, *case.answers)] + [case.summary]
    if any(secret not in kept for secret in secrets):
        codes.append("E-COMPACT-HISTORY")
    return list(dict.fromkeys(codes))


FAMILY = Family(
    name="compaction", chapter=11,
    invariant="a history past --context-window minus --reserve-tokens is compacted: every request keeps the budget",
    codes=CODES, cases=cases, examine=each_case(check),
)
