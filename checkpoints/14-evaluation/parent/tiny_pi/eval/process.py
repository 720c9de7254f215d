"""Running a command under a time limit, in a process group of its own.

The agent and a check's command may start children (a shell starts a
program, `bash` starts a server). Killing only the first process would
leave the rest running: at the limit the whole group is killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Mapping, Sequence

from attrs import frozen


@frozen
class Finished:
    """How a command ended: its exit status (None: killed at the time limit), its output, its group."""

    status: int | None
    output: str
    group: int


def run_limited(
    argv: Sequence[str], cwd: Path, time_limit: float, env: Mapping[str, str] | None = None
) -> Finished:
    """Run `argv` in `cwd` with no stdin; at `time_limit` seconds, kill its whole process group."""
    with subprocess.Popen(
        argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, start_new_session=True,  # the group's id is the child's pid
    ) as process:
        try:
            output, _ = process.communicate(timeout=time_limit)
            status: int | None = process.returncode
        except subprocess.TimeoutExpired:
            kill_group(process.pid)
            output, _ = process.communicate()
            status = None
    return Finished(status, output.decode("utf-8", errors="replace"), process.pid)


def kill_group(group: int) -> bool:
    """Kill every process left in `group`; False when none was left."""
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True
