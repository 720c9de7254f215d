"""Durable (chapter 19): killed at a drawn commit, a run resumes with nothing lost and no side effect twice.

The model asks for one `bash` call that appends a drawn token to a drawn
file (the side effect the capstone counts), then answers. Five cases, each
`python -m tiny_pi.agent ... --tools bash,read --durable run.db` killed and
started again:

- three times at a commit: the agent is killed with SIGKILL by chapter 19's
  hook, `TINY_PI_KILL_AT_COMMIT=N`, at a commit N drawn from those of the
  round trip (a partial, the intent, the result, the reply...): fourteen in
  the lesson's design, as these servers stream the call in three pieces.
  In every run one kill falls before any of the reply is saved (commits 1
  to 3: the prompt, the generation started, the first partial), one while
  it streams, once a partial is saved (4 to 8: a reply cut off mid-stream to
  recover), and one after it is settled (9 to 14: around the tool's run). An agent whose
  round trip has fewer commits finishes before N; then its whole run must
  be right, and a fresh run is killed at a commit drawn from its own;
- in the middle of the tools: the reply asks for two `bash` calls, which
  the agent runs side by side. The first appends a token of its own, says
  so in a file and waits (at most 5 s) while the agent lives; the second
  waits for that file, appends the case's token and kills the agent that
  runs it (`kill -9 $PPID`). Both calls have run, both tasks are running
  and neither result was committed: the restart must turn both back, and
  run neither again. (An agent that runs calls one after the other still
  finishes the first, after its wait.)
- a safe tool cut off after its intent: the model asks to `read` a drawn
  file instead, and the agent is killed at a commit after which the store
  holds that call's intent (its task in the `execute` phase) and no
  result. Found by looking: killed at the lesson's result commit, then one
  later or earlier until the store shows it. `read` is safe where it is
  stored and where it is registered, so the restart must run it again: the
  model must get the file's text, not an `interrupted` result.

The restart gets the prompt again only if the store holds no user entry
(a prompt not on disk was never taken). Then, read from run.db through
SQLite (chapter 19's `records` table) and the side-effect file: every entry
committed before the kill is still there, unchanged; each token is in the
file exactly once; every call of a reply that was sent has one result; no
task is left unfinished and the conversation ends in an answer; no request
carried a reply the crash cut off, and a reply cut off mid-stream was kept
as an aborted entry and its request asked again, with no reply in it. Then `python -m tiny_pi.durable_view`
must show the run to its answer, in every case (a viewer that crashes on
any entry fails), and in the in-tool case mark the calls as interrupted.
"""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path
from typing import Any

import attrs
from attrs import frozen

from course.capstone.bench import KILL_VARIABLE, Bench
from course.capstone.families.common import ending
from course.capstone.model_server import (
    Answer, Call, ScriptedServer, answered, calls_made, content_text, messages, results,
)
from course.capstone.processes import Finished
from course.capstone.records import Family, each_case
from course.capstone.seeds import Draw

AT_COMMIT, IN_TOOL, SAFE_REPLAY = "at-commit", "in-tool", "safe-replay"
KILLED = -signal.SIGKILL  # how a process killed by SIGKILL ends
# The commits of this round trip in chapter 19's design: the lesson's twelve, and two more partials
# (these servers stream the call in three pieces). An agent with fewer gets a second draw among its own.
ROUND_TRIP = 14
RESULT_COMMIT = 11  # of those, the one that stores the tool's result: killed there, the intent is the last commit
STORE = "run.db"
FAILED_REPLIES = ("aborted", "error")  # stop reasons of replies no later request may carry
RESTART_KILLED = "the exam kills only the first run: this kill is the agent's own (a tool run again?)"
CODES = {
    "E-DURABLE-NO-CRASH": "the agent was not killed at the drawn commit: its store does not call chapter 19's crash "
                          "hook (TINY_PI_KILL_AT_COMMIT) inside each commit",
    "E-DURABLE-NO-INTENT": "no commit left a tool call's intent stored without its result: a tool task commits its "
                           "intent (its checkpoint in the execute phase) before it runs, its result after",
    "E-DURABLE-LOST": "an entry committed before the crash was lost or changed by the restart",
    "E-DURABLE-RESENT": "a reply the crash cut off (or one that failed) was sent to the model in a later request, "
                        "or taken for the reply: a cut reply is kept aside and the same request asked again from "
                        "scratch",
    "E-DURABLE-CUT-DROPPED": "a reply cut off mid-stream (its partial committed) was not kept as an aborted entry "
                             "after the restart",
    "E-DURABLE-TWICE": "an unsafe tool's side effect happened twice: a call cut off by the crash ran again (its "
                       "intent committed after it ran, or not checked on restart)",
    "E-DURABLE-UNFINISHED": "after the restart a task was left unfinished (opening the store turns every running "
                            "task back to pending), or the conversation did not end in an answer",
    "E-DURABLE-SKIPPED": "a tool call that had not started before the crash never ran after the restart",
    "E-DURABLE-NOT-REPLAYED": "a safe tool (read) cut off after its intent was not run again after the restart: the "
                              "model got no result, or an interrupted one, instead of what the tool reads",
    "E-DURABLE-UNPAIRED": "a tool call of a reply sent to the model has no result, or more than one, in the store or "
                          "in a request (a round is asked about once all its calls have results)",
    "E-DURABLE-VIEW": "python -m tiny_pi.durable_view did not show the finished run, or did not mark the call cut off "
                      "in the middle as interrupted",
}


@frozen
class CrashCase:
    kind: str
    fraction: float  # AT_COMMIT: where the kill falls among the round trip's commits
    prompt: str
    effects: str  # the side-effect file's name
    token: str  # what the tool appends to it, once
    call_id: str
    asking: str  # the model's words with the call
    answer: str  # its final answer
    partner_token: str  # IN_TOOL: what the call running beside the killing one appends
    partner_id: str


# Where the kills fall, as fractions of the round trip's commits (1 + int(fraction * 14) is the commit):
# before any of the reply is saved (1-3), while it streams with a partial saved (4-8), after it is settled (9-14),
# in the tool, and (a safe tool's call) after the intent.
STRETCHES = ((AT_COMMIT, 0 / ROUND_TRIP, 3 / ROUND_TRIP), (AT_COMMIT, 3 / ROUND_TRIP, 8 / ROUND_TRIP),
             (AT_COMMIT, 8 / ROUND_TRIP, 1.0), (IN_TOOL, 0.0, 0.0), (SAFE_REPLAY, 0.0, 0.0))


def cases(draw: Draw) -> list[CrashCase]:
    found = []
    for kind, low, high in STRETCHES:
        call_id, partner_id = draw.call_ids(2)
        found.append(CrashCase(kind, low + draw.random.random() * (high - low), draw.words(6), draw.file_name(),
                               draw.token(), call_id, draw.words(4), draw.token(), draw.token(), partner_id))
    return found


def append(case: CrashCase, token: str) -> str:
    return f"printf '%s\\n' {token} >> '{case.effects}'"


# At most 5 s, 0.05 s at a time: a shell's wait for a condition, never for ever.
def waiting(condition: str) -> str:
    return f"i=0; while {condition} && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done"


def tool_calls(case: CrashCase) -> list[Call]:
    """The calls the model makes: `read` of the file holding the token (safe), or `bash` appending it; in
    the tools, two: one that waits while its agent lives, one that kills the agent once the other ran."""
    if case.kind == SAFE_REPLAY:
        return [Call.of(case.call_id, "read", {"path": case.effects})]
    if case.kind != IN_TOOL:
        return [Call.of(case.call_id, "bash", {"command": append(case, case.token)})]
    ran = f"'{case.effects}.ran'"
    lives = "[ $PPID -ne 1 ] && kill -0 $PPID 2>/dev/null"  # its agent: not yet gone (or, at start, adopted)
    beside = f"{append(case, case.partner_token)}; : > {ran}; {waiting(lives)}"
    killing = f"{waiting(f'[ ! -e {ran} ]')}; {append(case, case.token)}; kill -9 $PPID"
    return [Call.of(case.partner_id, "bash", {"command": beside}), Call.of(case.call_id, "bash", {"command": killing})]


def model(case: CrashCase) -> Any:
    """The model: the case's calls for the prompt, the answer once the tool results came back."""
    calls = tool_calls(case)

    def reply(request: dict[str, Any], number: int) -> Answer:
        said = messages(request)
        if said and said[-1].get("role") == "tool":
            return Answer(text=case.answer)
        return Answer(text=case.asking, calls=calls)

    return reply


@frozen
class Stored:
    """What another connection reads from a store: entries by id, the tasks, the last commit's number."""

    entries: dict[str, Any]
    tasks: list[Any]
    seq: int


def peek(path: Path) -> Stored:
    """The store as chapter 19's tables hold it (records, commits); empty when the file is no such store."""
    if not path.is_file():
        return Stored({}, [], 0)
    try:
        connection = sqlite3.connect(path)
        try:
            rows = connection.execute("SELECT collection, id, value FROM records ORDER BY rowid").fetchall()
            seq = connection.execute("SELECT max(seq) FROM commits").fetchone()[0] or 0
        finally:
            connection.close()
        entries = {record: json.loads(value) for collection, record, value in rows if collection == "entries"}
        tasks = [json.loads(value) for collection, _, value in rows if collection == "tasks"]
    except (sqlite3.Error, ValueError, TypeError):
        return Stored({}, [], 0)
    return Stored(entries, tasks, seq)


def durable_args(bench: Bench, server: ScriptedServer, root: Path) -> list[str]:
    return bench.agent_args(server, root, "--tools", "bash,read", "--durable", str(root / STORE))


def tool_tasks(stored: Stored) -> list[dict[str, Any]]:
    return [task for task in stored.tasks if isinstance(task, dict) and task.get("kind") == "tool"]


def where_cut(stored: Stored) -> int:
    """Where a killed run stopped, against a cut after a tool's intent: -1 before it, 0 there, 1 past it."""
    if any(message.get("role") == "toolResult" for message in said(stored)):
        return 1
    intents = [task for task in tool_tasks(stored) if (task.get("checkpoint") or {}).get("phase") == "execute"]
    return 0 if intents else -1


def drawn_commit(case: CrashCase, commits: int) -> int:
    return 1 + int(case.fraction * commits)


async def first_run(case: CrashCase, server: ScriptedServer, root: Path, bench: Bench, commits: int) -> Finished:
    """The run that is killed: by the hook, at the drawn one of `commits` commits, or by its own tool."""
    env = {KILL_VARIABLE: str(drawn_commit(case, commits))} if case.kind == AT_COMMIT else {}
    return await bench.run("tiny_pi.agent", [*durable_args(bench, server, root), case.prompt], cwd=root, env=env)


async def cut_after_intent(case: CrashCase, server: ScriptedServer, bench: Bench) -> tuple[Path, Finished] | None:
    """A first run killed with the call's intent stored and no result: at the lesson's result commit, then
    a commit later or earlier as the store says, or the first run that ended otherwise (for its codes);
    None if no commit leaves the intent stored alone."""
    commit, tried = RESULT_COMMIT, set()
    while commit >= 1 and commit not in tried:
        tried.add(commit)
        root = bench.folder("root")
        (root / case.effects).write_text(f"{case.token}\n", encoding="utf-8")
        killed = await bench.run("tiny_pi.agent", [*durable_args(bench, server, root), case.prompt], cwd=root,
                                 env={KILL_VARIABLE: str(commit)})
        stored = peek(root / STORE)
        if killed.status == 0 and stored.seq < commit:  # a round trip of fewer commits: done before the kill
            commit = stored.seq
            continue
        if killed.status != KILLED:  # not killed by the hook at all, or a crash: the codes say which
            return root, killed
        place = where_cut(stored)
        if place == 0:
            return root, killed
        commit -= place
    return None


async def check(case: CrashCase, bench: Bench) -> list[str]:
    async with bench.model(model(case)) as server:
        if case.kind == SAFE_REPLAY:
            cut = await cut_after_intent(case, server, bench)
            if cut is None:
                return ["E-DURABLE-NO-INTENT"]
            root, killed = cut
        else:
            root = bench.folder("root")
            killed = await first_run(case, server, root, bench, ROUND_TRIP)
        whole = peek(root / STORE)
        if case.kind == AT_COMMIT and killed.status == 0 and whole.seq < drawn_commit(case, ROUND_TRIP):
            # a round trip of fewer commits than the lesson's, done whole: kill again, at one of its own
            problems = effect_problems(root, case) + conversation_problems(whole)
            if problems:
                return problems
            root = bench.folder("root")
            killed = await first_run(case, server, root, bench, whole.seq)
        stored = peek(root / STORE)
        before, requests = stored.entries, len(server.requests)
        prompted = any(isinstance(entry, dict) and (entry.get("message") or {}).get("role") == "user"
                       for entry in before.values())
        again = await bench.run("tiny_pi.agent", durable_args(bench, server, root) + ([] if prompted else [case.prompt]),
                                cwd=root)
    after = peek(root / STORE)
    codes = crash_codes(case, killed) + ending(attrs.evolve(again, command=f"restarted {again.command}"),
                                               note=RESTART_KILLED if again.status == KILLED else "")
    if any(after.entries.get(key) != entry for key, entry in before.items()):
        codes.append("E-DURABLE-LOST")
    codes += effect_problems(root, case) + conversation_problems(after)
    if case.kind == SAFE_REPLAY and not replayed(case, server.requests[requests:]):
        codes.append("E-DURABLE-NOT-REPLAYED")
    later = server.requests[requests:]
    # a restart that asks nothing neither resends nor drops a cut reply: the unfinished task it leaves says more
    if any(resent(case, request) for request in later) or (
            later and cut_mid_stream(stored) and not asked_again(stored, later)):
        codes.append("E-DURABLE-RESENT")
    if any(unanswered(request) for request in later):
        codes.append("E-DURABLE-UNPAIRED")
    kept_aside = any(message.get("role") == "assistant" and message.get("stopReason") == "aborted"
                     for message in said(after))
    if later and cut_mid_stream(stored) and not kept_aside:
        codes.append("E-DURABLE-CUT-DROPPED")
    if not codes:
        codes += await viewed(case, root, bench)
    return list(dict.fromkeys(codes))


def resent(case: CrashCase, request: dict[str, Any]) -> bool:
    """A request that carries another reply than the one settled before the crash (a partial, to be continued),
    or that one twice: this conversation's only reply the model may see again is its calls', once."""
    replies = [message for message in messages(request) if message.get("role") == "assistant"]
    return len(replies) > 1 or any(not settled(case, reply) for reply in replies)


def unanswered(request: dict[str, Any]) -> bool:
    """A request that carries a reply's calls without one result each (a round asked about before it settled)."""
    answers = results(request)
    return sorted(calls_made(request)) != sorted(call_id for call_id in answers for _ in answers[call_id])


def settled(case: CrashCase, reply: dict[str, Any]) -> bool:
    """The model's whole reply as the agent sends it back: its words and each call, arguments complete."""
    wanted = {call.id: (call.name, json.loads(call.arguments)) for call in tool_calls(case)}
    sent = {}
    for call in reply.get("tool_calls") or []:
        if not isinstance(call, dict):
            return False
        function = call.get("function") or {}
        try:
            sent[call.get("id")] = (function.get("name"), json.loads(function.get("arguments") or ""))
        except (ValueError, TypeError):
            return False
    return content_text(reply.get("content")) == case.asking and sent == wanted


def asked_again(stored: Stored, later: list[dict[str, Any]]) -> bool:
    """The restart's first request is the cut one again: the replies settled before the crash, and no other."""
    settled_replies = [message for message in said(stored) if message.get("role") == "assistant"
                       and message.get("stopReason") not in FAILED_REPLIES]
    first = messages(later[0]) if later else []
    replies = [message for message in first if message.get("role") == "assistant"]
    return bool(first) and len(replies) == len(settled_replies) and first[-1].get("role") != "assistant"


def cut_mid_stream(stored: Stored) -> bool:
    """The store holds a generation cut off with its partial reply committed (chapter 19's `partial`)."""
    return any(isinstance(task, dict) and task.get("kind") == "generation"
               and task.get("status") not in ("completed", "failed")
               and (task.get("checkpoint") or {}).get("partial") is not None for task in stored.tasks)


def crash_codes(case: CrashCase, killed: Finished) -> list[str]:
    """The kill itself: by the hook at the drawn commit, or by the tool; nothing else may end the first run."""
    if killed.status == KILLED:
        return ["E-LEFT-RUNNING"] if killed.leftovers else []
    if case.kind != IN_TOOL and killed.status == 0:  # it finished: no commit called the hook
        return ["E-DURABLE-NO-CRASH"]
    return ending(killed, (KILLED,))


def effect_problems(root: Path, case: CrashCase) -> list[str]:
    """Each side effect happened once: twice is a call run again, never is a call dropped."""
    path = root / case.effects
    written = path.read_text(encoding="utf-8", errors="replace").split() if path.is_file() else []
    tokens = (case.token, case.partner_token) if case.kind == IN_TOOL else (case.token,)
    counts = [written.count(token) for token in tokens]
    return (["E-DURABLE-TWICE"] if max(counts) > 1 else []) + (["E-DURABLE-SKIPPED"] if min(counts) == 0 else [])


def said(stored: Stored) -> list[dict[str, Any]]:
    """The conversation's messages, in the order of their entries."""
    entries = sorted((entry for entry in stored.entries.values() if isinstance(entry, dict)),
                     key=lambda entry: entry.get("index", 0))
    return [message for message in (entry.get("message") for entry in entries) if isinstance(message, dict)]


def replayed(case: CrashCase, requests: list[dict[str, Any]]) -> bool:
    """After the restart, a request carried the read's result with the file's text: the safe call ran again."""
    return case.token in (answered(requests, case.call_id) or "")


def conversation_problems(stored: Stored) -> list[str]:
    """What is wrong with a store that should be finished: unfinished tasks, no answer, unpaired calls."""
    conversation = said(stored)
    problems = []
    done = all(isinstance(task, dict) and task.get("status") in ("completed", "failed") for task in stored.tasks)
    last = conversation[-1] if conversation else {}
    if not done or last.get("role") != "assistant" or last.get("stopReason") != "stop":
        problems.append("E-DURABLE-UNFINISHED")
    sent = [message for message in conversation if message.get("role") == "assistant"
            and message.get("stopReason") not in FAILED_REPLIES]
    calls = sorted(str(block.get("id")) for message in sent for block in message.get("content") or []
                   if isinstance(block, dict) and block.get("type") == "toolCall")
    results = sorted(str(message.get("toolCallId")) for message in conversation if message.get("role") == "toolResult")
    if calls != results:
        problems.append("E-DURABLE-UNPAIRED")
    return problems


async def viewed(case: CrashCase, root: Path, bench: Bench) -> list[str]:
    """The viewer shows the run to its answer, and a call cut off in the middle of its tool as interrupted."""
    shown = await bench.run("tiny_pi.durable_view", [str(root / STORE)], cwd=root)
    codes = ending(shown)
    cut_off_unmarked = case.kind == IN_TOOL and "(interrupted)" not in shown.stdout
    if shown.status != 0 or case.answer not in shown.stdout or cut_off_unmarked:
        codes.append("E-DURABLE-VIEW")
    return codes


FAMILY = Family(
    name="durable", chapter=19,
    invariant="an agent killed at any commit resumes with nothing lost and no side effect repeated",
    codes=CODES, cases=cases, examine=each_case(check),
)
