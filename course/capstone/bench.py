"""What a family's cases run with: the frozen code, a folder of their own, model servers, learner commands.

A case never imports the learner's code: it runs `python -m tiny_pi.agent`
(or `tiny_pi.eval`, `tiny_pi.session`, `tiny_pi.durable_view`) from the
frozen copy, or a course script that drives it (`script`: the router
family's, where the command line has no virtual model that keeps a state),
at most a few at a time, each under a time limit.

Nothing a command sees says "exam" (docs/classroom.md, "What the capstone
cannot tell you"): its folders are temporary ones under drawn words, the
model's name is drawn from the seed, the API key looks like any key, and
its environment is the caller's less the course's own settings (HOME is an
empty folder, so no skill or template of the person running the capstone
slips in; no proxy, so 127.0.0.1 is reached directly; no crash hook unless
a case sets it). What finds its processes again is a marker whose name is
drawn for the run and whose value for the command (course.capstone.processes).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
from pathlib import Path
from typing import AsyncIterator, Mapping, Sequence

import trio

from course.capstone.model_server import Reply, ScriptedServer
from course.capstone.processes import During, Finished, Marker, run_command
from course.run_env import DROPPED_ENV

PROCESS_TIME_LIMIT = 60.0  # seconds for one learner command; a finished agent needs a few
API_KEY_VARIABLE = "TINY_PI_API_KEY"
KILL_VARIABLE = "TINY_PI_KILL_AT_COMMIT"  # chapter 19's crash hook: only the durable family sets it
# The caller's variables a learner command does not get: the course's own, pytest's (a test's name),
# the shell's idea of where it is (not where the command runs), and the ones run_env drops.
OWN_PREFIXES = ("COURSE_", "PYTEST_", "XDIST_")
NOT_PASSED = frozenset({*DROPPED_ENV, KILL_VARIABLE, API_KEY_VARIABLE, "PWD", "OLDPWD", "_"})


def passed_on(name: str) -> bool:
    """Whether the caller's variable `name` reaches a learner command."""
    return name not in NOT_PASSED and not name.startswith(OWN_PREFIXES) and "proxy" not in name.lower()


def drawn_word() -> str:
    """A name that means nothing: `kelvor`, `tasq-i4u`."""
    word = "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(4 + secrets.randbelow(5)))
    if secrets.randbelow(3) == 0:
        word += "-" + "".join(secrets.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(3))
    return word


def fresh_name(parent: Path) -> Path:
    """A new empty folder in `parent` under a drawn name."""
    while True:
        path = parent / drawn_word()
        try:
            path.mkdir(parents=True)
        except FileExistsError:
            continue
        return path


class Bench:
    """One family's workplace in one capstone run."""

    def __init__(self, code: Path, scratch: Path, limiter: trio.CapacityLimiter, model: str, marker: Marker,
                 scripts: Mapping[str, Path], time_limit: float = PROCESS_TIME_LIMIT) -> None:
        self.code = code
        self.scripts = scripts  # the course scripts a case starts (mcp_fixture.py, ...), copied under drawn names
        self.scratch = scratch
        self.limiter = limiter
        self.model_id = model
        self.marker = marker
        self.time_limit = time_limit
        self.api_key = "sk-" + secrets.token_urlsafe(24)
        # Digits of this run alone: a word a case draws to find its processes by (in /proc) gets them,
        # since two runs of one seed (a test and its neighbour) may run at once, and one run's sweep
        # must not see, or kill, the other's processes.
        self.nonce = f"{secrets.randbelow(10**8):08d}"

    def own(self, word: str) -> str:
        """`word`, made this run's: the run's digits appended."""
        return word + self.nonce

    def folder(self, name: str = "case") -> Path:
        """A new empty folder for one case (or one part of it), under a drawn name (`name` says what for)."""
        return fresh_name(self.scratch)

    def environment(self, mark: str, home: Path) -> dict[str, str]:
        """The learner command's environment: the caller's, less the course's settings, and its marker."""
        env = {name: value for name, value in os.environ.items() if passed_on(name)}
        env.update({"PYTHONPATH": str(self.code), "HOME": str(home), API_KEY_VARIABLE: self.api_key,
                    self.marker.name: mark})
        return env

    def agent_args(self, server: ScriptedServer, root: Path, *extra: str) -> list[str]:
        """The common start of `python -m tiny_pi.agent`'s command line for a case."""
        return ["--base-url", server.base_url, "--model", self.model_id, "--root", str(root), *extra]

    async def run(
        self, module: str, args: Sequence[str], *, cwd: Path, stdin: bytes | None = None,
        during: During | None = None, marks: Sequence[str] = (), env: Mapping[str, str] | None = None,
    ) -> Finished:
        """`python -m MODULE ARGS...` from the frozen code, in `cwd`, at most `limiter` of them at once."""
        return await self.python(module, ["-m", module, *args], cwd=cwd, stdin=stdin, during=during, marks=marks,
                                 env=env)

    async def script(self, label: str, path: Path, args: Sequence[str], *, cwd: Path) -> Finished:
        """`python -P PATH ARGS...`: a course script, with the frozen code importable (and not the course);
        `label` names it in the report."""
        return await self.python(label, ["-P", str(path), *args], cwd=cwd)

    async def python(
        self, label: str, argv: Sequence[str], *, cwd: Path, stdin: bytes | None = None,
        during: During | None = None, marks: Sequence[str] = (), env: Mapping[str, str] | None = None,
    ) -> Finished:
        home = self.folder("home")
        mark = self.marker.value()
        environment = {**self.environment(mark, home), **(env or {})}
        async with self.limiter:
            return await run_command(
                label, [sys.executable, *argv], cwd=cwd, env=environment, output=home.parent / f".{home.name}",
                time_limit=self.time_limit, stdin=stdin, during=during, marks=[self.marker.needle(mark), *marks],
            )

    @contextlib.asynccontextmanager
    async def model(self, reply: Reply) -> AsyncIterator[ScriptedServer]:
        """A scripted model server for the block's duration."""
        async with trio.open_nursery() as nursery:
            server = await ScriptedServer(reply).start(nursery)
            yield server
            nursery.cancel_scope.cancel()
