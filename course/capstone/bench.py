"""What a family's cases run with: the frozen code, a folder of their own, model servers, learner commands.

A case never imports the learner's code: it runs `python -m tiny_pi.agent`
(or `tiny_pi.eval`, `tiny_pi.session`, `tiny_pi.durable_view`) from the
frozen copy, or a course script that drives it (`script`: the router
family's, where the command line has no virtual model that keeps a state),
with an environment of its own (HOME is an empty folder, so no skill or
template of the person running the capstone slips in; no proxy, so
127.0.0.1 is reached directly; no crash hook unless a case sets it; an API
key the cases can look for), at most a few at a time, each under a time
limit.
"""

from __future__ import annotations

import contextlib
import secrets
import sys
from pathlib import Path
from typing import AsyncIterator, Mapping, Sequence

import trio

from course.capstone.model_server import Reply, ScriptedServer
from course.capstone.processes import MARK_VARIABLE, During, Finished, run_command
from course.run_env import run_environment

PROCESS_TIME_LIMIT = 60.0  # seconds for one learner command; a finished agent needs a few
API_KEY_VARIABLE = "TINY_PI_API_KEY"
KILL_VARIABLE = "TINY_PI_KILL_AT_COMMIT"  # chapter 19's crash hook: only the durable family sets it


class Bench:
    """One family's workplace in one capstone run."""

    def __init__(self, code: Path, scratch: Path, limiter: trio.CapacityLimiter, bytecode: Path,
                 time_limit: float = PROCESS_TIME_LIMIT) -> None:
        self.code = code
        self.scratch = scratch
        self.limiter = limiter
        self.bytecode = bytecode
        self.time_limit = time_limit
        self.api_key = "sk-capstone-" + secrets.token_hex(12)
        self.count = 0
        # Digits of this run alone: a word a case draws to find its processes by (in /proc) gets them,
        # since two runs of one seed (a test and its neighbour) may run at once, and one run's sweep
        # must not see, or kill, the other's processes.
        self.nonce = f"{secrets.randbelow(10**8):08d}"

    def own(self, word: str) -> str:
        """`word`, made this run's: the run's digits appended."""
        return word + self.nonce

    def folder(self, name: str = "case") -> Path:
        """A new empty folder for one case (or one part of it)."""
        self.count += 1
        path = self.scratch / f"{self.count:02d}-{name}"
        path.mkdir(parents=True)
        return path

    def environment(self, mark: str, home: Path) -> dict[str, str]:
        """The learner command's environment: the course's run environment, made the capstone's."""
        env = {name: value for name, value in run_environment().items()
               if "proxy" not in name.lower() and name != KILL_VARIABLE}
        env.update({
            "PYTHONPATH": str(self.code), "HOME": str(home), API_KEY_VARIABLE: self.api_key,
            "PYTHONPYCACHEPREFIX": str(self.bytecode), MARK_VARIABLE: mark,
        })
        return env

    async def run(
        self, module: str, args: Sequence[str], *, cwd: Path, stdin: bytes | None = None,
        during: During | None = None, marks: Sequence[str] = (), env: Mapping[str, str] | None = None,
    ) -> Finished:
        """`python -m MODULE ARGS...` from the frozen code, in `cwd`, at most `limiter` of them at once."""
        return await self.python(["-m", module, *args], cwd=cwd, stdin=stdin, during=during, marks=marks, env=env)

    async def script(self, path: Path, args: Sequence[str], *, cwd: Path) -> Finished:
        """`python -P PATH ARGS...`: a course script, with the frozen code importable (and not the course)."""
        return await self.python(["-P", str(path), *args], cwd=cwd)

    async def python(
        self, argv: Sequence[str], *, cwd: Path, stdin: bytes | None = None, during: During | None = None,
        marks: Sequence[str] = (), env: Mapping[str, str] | None = None,
    ) -> Finished:
        home = self.folder("home")
        environment = {**self.environment(secrets.token_hex(8), home), **(env or {})}
        async with self.limiter:
            return await run_command(
                [sys.executable, *argv], cwd=cwd, env=environment, output=home / "output",
                time_limit=self.time_limit, stdin=stdin, during=during, marks=marks,
            )

    @contextlib.asynccontextmanager
    async def model(self, reply: Reply) -> AsyncIterator[ScriptedServer]:
        """A scripted model server for the block's duration."""
        async with trio.open_nursery() as nursery:
            server = await ScriptedServer(reply).start(nursery)
            yield server
            nursery.cancel_scope.cancel()


def agent_args(server: ScriptedServer, root: Path, *extra: str) -> list[str]:
    """The common start of `python -m tiny_pi.agent`'s command line for a case."""
    return ["--base-url", server.base_url, "--model", "capstone", "--root", str(root), *extra]

