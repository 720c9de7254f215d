"""Redaction (chapter 14): the evaluation's shareable report holds counts and classes, no secret.

Tasks full of secrets: each one's name, its prompt, its workspace file's
name and text, its check's path and text (or command), the model's reply
or its error, and the API key in the environment. Every run has a task of
each ending, so a report that leaks on one path leaks every run: one the
model passes, one it fails by a `contains` check, one by a `command` check,
and one whose model call fails with an error that quotes a secret; drawn
into two cases of two tasks, each evaluated twice. `python -m tiny_pi.eval
TASKS ... --out DIR --json` must exit 0 when every task passed and 1
otherwise, and neither its stdout nor DIR/report.json may hold any secret,
while the report's counts say how many passed and failed. Without `--json`
(a line per task for the person at the terminal, who may see the secrets)
it must end the same way, and DIR/report.json must hold the same.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
from attrs import frozen

from course.capstone.bench import Bench
from course.capstone.families.common import ending, write_files
from course.capstone.model_server import Answer, Call, Failure, last_user_text, messages
from course.capstone.records import Family, each_case
from course.capstone.seeds import Draw

CODES = {
    "E-REDACT-LEAK": "a secret of a task (its name, prompt, files, checks, the model's words, the API key) "
                     "is in the shareable report",
    "E-REDACT-COUNTS": "the shareable report does not count the tasks that passed and failed as they did",
}


PASSES, FAILS_CONTAINS, FAILS_COMMAND, MODEL_ERROR = "passes", "fails-contains", "fails-command", "model-error"
ENDINGS = (PASSES, FAILS_CONTAINS, FAILS_COMMAND, MODEL_ERROR)  # one task of each in every run


@frozen
class Task:
    name: str
    prompt: str
    file_name: str
    file_text: str
    check_path: str
    check_text: str
    reply: str  # what the model writes when the task fails, or its error's message
    ending: str
    call_id: str

    @property
    def passes(self) -> bool:
        return self.ending == PASSES


@frozen
class RedactionCase:
    tasks: tuple[Task, ...]

    def secrets(self) -> list[str]:
        return [secret for task in self.tasks for secret in
                (task.name, task.prompt.split(" ")[0], task.file_name, task.file_text, task.check_path,
                 task.check_text, task.reply)]


def cases(draw: Draw) -> list[RedactionCase]:
    endings = draw.shuffled(ENDINGS)
    tasks = [
        Task(name=f"{draw.word()}-{draw.token().lower()}", prompt=f"{draw.token()} {draw.words(5)}",
             file_name=f"{draw.token()}.txt", file_text=draw.token(), check_path=f"{draw.token()}.md",
             check_text=draw.token(), reply=draw.token(), ending=ending, call_id=draw.call_id())
        for ending in endings
    ]
    return [RedactionCase(tuple(tasks[:2])), RedactionCase(tuple(tasks[2:]))]


def task_toml(task: Task) -> str:
    head = (f"prompt = {json.dumps(task.prompt)}\ntools = [\"read\", \"ls\", \"write\"]\nmax_turns = 4\n"
            f"time_limit = 60\n\n[[checks]]\n")
    if task.ending == FAILS_COMMAND:
        return head + f"command = {json.dumps(f'grep -q {task.check_text} {task.check_path}')}\n"
    return head + f"path = {json.dumps(task.check_path)}\ncontains = {json.dumps(task.check_text)}\n"


def reply_for(case: RedactionCase):
    def reply(request: dict[str, Any], number: int) -> Answer | Failure:
        first = next((message for message in messages(request) if message.get("role") == "user"), {})
        asked = str(first.get("content", "")) + last_user_text(request)
        task = next((task for task in case.tasks if task.prompt.split(" ")[0] in asked), None)
        if task is None:
            return Answer(text="I do not know this task.")
        if task.ending == MODEL_ERROR:
            return Failure(500, f"internal error near {task.reply}")
        if any(message.get("role") == "tool" for message in messages(request)):
            return Answer(text=f"Done: {task.reply}")
        content = task.check_text if task.passes else task.reply
        return Answer(calls=[Call.of(task.call_id, "write", {"path": task.check_path, "content": content})])

    return reply


async def check(case: RedactionCase, bench: Bench) -> list[str]:
    codes = await evaluated(case, bench, as_json=True) + await evaluated(case, bench, as_json=False)
    return list(dict.fromkeys(codes))


async def evaluated(case: RedactionCase, bench: Bench, as_json: bool) -> list[str]:
    """One evaluation of the case's tasks; with --json its stdout is shared too, and must hold the counts."""
    folder = bench.folder("eval")
    tasks, out = folder / "tasks", folder / "out"
    for task in case.tasks:
        write_files(tasks / task.name, {"task.toml": task_toml(task), f"workspace/{task.file_name}": task.file_text})
    async with bench.model(reply_for(case)) as server:
        args = [str(tasks), "--base-url", server.base_url, "--model", bench.model_id, "--out", str(out)]
        finished = await bench.run("tiny_pi.eval", [*args, "--json"] if as_json else args, cwd=folder)
    shown = attrs.evolve(finished, command=f"{finished.command} --json") if as_json else finished  # which run
    codes = ending(shown, (0,) if all(task.passes for task in case.tasks) else (1,))
    report = shared_report(out / "report.json")
    shared = finished.stdout + report if as_json else report
    if any(secret in shared for secret in [*case.secrets(), bench.api_key]):
        codes.append("E-REDACT-LEAK")
    if counts(report) != counts_of(case) or (as_json and counts(finished.stdout) != counts_of(case)):
        codes.append("E-REDACT-COUNTS")
    return codes


def counts_of(case: RedactionCase) -> tuple[int, int, int]:
    passed = sum(task.passes for task in case.tasks)
    return len(case.tasks), passed, len(case.tasks) - passed


def shared_report(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""


def counts(text: str) -> tuple[int, int, int] | None:
    """(tasks, passed, failed) from a report's summary; None when it is not one."""
    try:
        summary = json.loads(text)["summary"]
        return summary["tasks"], summary["passed"], summary["failed"]
    except (ValueError, KeyError, TypeError):
        return None


FAMILY = Family(
    name="redaction", chapter=14,
    invariant="python -m tiny_pi.eval's shareable report counts the tasks and holds none of their secrets",
    codes=CODES, cases=cases, examine=each_case(check),
)
