"""One task, phase by phase: prepare, execute, collect, judge, dispose, clean up.

Each phase has one job and fails in its own name. A failure of the harness
(the agent crashed, a file could not be collected, the transcript is broken,
the judge contradicts itself) is an InfrastructureError of that phase: the
task's result says `infrastructure`, never that the agent failed the task.

Evidence goes to OUT/NAME/: session.jsonl (the agent's session log),
agent.log (its stdout and stderr), workspace/ (the files as the agent left
them) and checks.json (each check's result). The agent works in a copy,
OUT/NAME/run/, with an empty OUT/NAME/user-root/ as its --user-root and
its HOME, so that no skill or prompt template of the evaluator's ~/.tiny_pi
changes the run; the phase clean up removes both, and the task directory
is only ever read. Nothing the agent started outlives its task: run_limited
ends it all when the agent exits or is killed, dispose ends whatever is
left, and a harness stopped by a signal still ends the task before it goes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import site
import stat
import sys
from pathlib import Path
from typing import Callable

import attrs
from attrs import frozen

import tiny_pi
from tiny_pi.eval.judge import CheckResult, contradiction, judge_checks
from tiny_pi.eval.process import Finished, end_descendants, kill_group, run_limited
from tiny_pi.eval.tasks import Task
from tiny_pi.eval.transcript_checks import transcript_problems
from tiny_pi.messages import AgentMessage, AssistantMessage
from tiny_pi.session_log import MessageEntry, SessionError, read_session

PASS, FAIL, INFRASTRUCTURE = "pass", "fail", "infrastructure"
COPY, SESSION, AGENT_LOG, WORKSPACE, CHECKS = "run", "session.jsonl", "agent.log", "workspace", "checks.json"
USER_ROOT = "user-root"  # the agent's --user-root: empty, so the run depends on the task alone
AGENT = (sys.executable, "-P", "-m", "tiny_pi.agent")  # -P: never import from the workspace
AGENT_STATUSES = (0, 1)  # how the agent ends by choice: the model stopped, or an error or the turn limit
# Kept from the evaluator's environment for the agent: the locale, the temporary directory, the
# API key, where bytecode goes (never what is imported) and how to reach a model server.
KEPT_VARIABLES = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TINY_PI_API_KEY", "SSL_CERT_FILE", "SSL_CERT_DIR",
                  "PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE")
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")  # in either case

Judge = Callable[[Task, Path], list[CheckResult]]


class InfrastructureError(Exception):
    """The harness failed in `phase`: `failure` is its class (shareable), `detail` says what (local)."""

    def __init__(self, phase: str, failure: str, detail: str) -> None:
        super().__init__(f"{phase}: {failure}: {detail}")
        self.phase = phase
        self.failure = failure
        self.detail = detail


@frozen
class Settings:
    """What every task's run shares: the model server, the model, the evidence root, the agent's command."""

    base_url: str
    model: str
    out: Path
    agent: tuple[str, ...] = AGENT


@frozen
class Collected:
    """What the collect phase took from a run: the transcript, its turns and tokens."""

    messages: tuple[AgentMessage, ...]
    turns: int
    tokens: int


@frozen
class TaskResult:
    """A task's verdict: its status, the failure's class and phase, a local detail, the counts."""

    name: str
    status: str  # PASS, FAIL or INFRASTRUCTURE
    failure: str | None = None  # "check-failed", "time-limit", or a class of the harness's failure
    phase: str | None = None  # the phase that failed, for INFRASTRUCTURE
    detail: str = ""  # which check failed and why, or what broke: local evidence, never shared
    checks: tuple[CheckResult, ...] = ()
    turns: int = 0
    tokens: int = 0


def run_task(task: Task, settings: Settings, judge: Judge = judge_checks) -> TaskResult:
    """Every phase of one task; dispose and clean up run whatever happened before them."""
    raise NotImplementedError("lab 14.3: run a task's phases")


def prepare(task: Task, evidence: Path) -> None:
    """A fresh evidence directory, a fresh copy of the task's workspace and an empty user root for the agent."""
    raise NotImplementedError("lab 14.3: prepare")


def execute(task: Task, settings: Settings, evidence: Path) -> Finished:
    """Run the agent as a subprocess on the copy, under the task's time limit."""
    raise NotImplementedError("lab 14.3: execute")


def agent_environment(home: Path) -> dict[str, str]:
    """The agent's environment, built: this tiny_pi on its path, `home` as HOME, a few of ours kept.

    Inherited, PYTHONPATH=. (or PATH=.:...) would let the workspace's own
    trio.py (or ls) replace what the agent imports (or runs). Only absolute
    PATH entries are kept; Python finds its own packages from sys.executable
    (a virtual environment) or PYTHONUSERBASE (pip --user), set here.
    """
    kept = {name: os.environ[name] for name in KEPT_VARIABLES if name in os.environ}
    kept.update({name: value for name, value in os.environ.items() if name.lower() in PROXY_VARIABLES})
    if not os.path.isabs(kept.get("PYTHONPYCACHEPREFIX", "/")):
        del kept["PYTHONPYCACHEPREFIX"]  # relative: bytecode would be written into the workspace
    path = [entry for entry in os.environ.get("PATH", os.defpath).split(os.pathsep) if os.path.isabs(entry)]
    source = str(Path(tiny_pi.__file__).resolve().parent.parent)
    return {
        **kept, "PATH": os.pathsep.join(path), "HOME": str(home), "PYTHONPATH": source,
        "PYTHONUSERBASE": site.getuserbase(), "PYTHONUNBUFFERED": "1",  # agent.log keeps all, even after a kill
    }


def refuse_crash(finished: Finished, session_file: Path) -> None:
    """An ending the agent did not choose (another status, a signal, no session written) is the harness's.

    What the agent printed is never the test: a model may quote a traceback,
    and a bash result holds one whenever a python command fails.
    """
    raise NotImplementedError("lab 14.5: tell a crash (run_task calls this only from lab 14.5 on)")


def collect(evidence: Path, finished: Finished) -> Collected:
    """Keep the final workspace, read the transcript back and check it (not after a kill)."""
    raise NotImplementedError("lab 14.3: collect")


def copy_workspace(source: Path, destination: Path) -> None:
    """Copy the files and links the agent left; anything else (a FIFO, a socket) is refused, not read."""
    raise NotImplementedError("lab 14.3: copy the final workspace")


def judged(task: Task, evidence: Path, judge: Judge) -> TaskResult:
    """Run the checks in the copy, refuse a self-contradicting answer, keep every result."""
    raise NotImplementedError("lab 14.3: judge")


def closed(result: TaskResult, finished: Finished | None, evidence: Path) -> TaskResult:
    """Dispose and clean up; their failure is reported unless an earlier phase's already is."""
    raise NotImplementedError("lab 14.3: dispose and clean up")


def end_task(finished: Finished | None, evidence: Path) -> None:
    """Dispose, then clean up the copy and the user root."""
    raise NotImplementedError("lab 14.3: end the task (in lab 14.3 only the clean up; dispose first from lab 14.4 on)")


def dispose(finished: Finished | None) -> None:
    """End whatever the task left running: the agent's process group, then every process below the harness."""
    raise NotImplementedError("lab 14.4: dispose (end_task calls this only from lab 14.4 on)")


def clean_up(scratch: Path) -> None:
    """Remove the agent's working copy or its user root: the evidence keeps the workspace as the agent left it."""
    raise NotImplementedError("lab 14.3: clean up")
