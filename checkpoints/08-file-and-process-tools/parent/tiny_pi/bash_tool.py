"""`bash`: run one shell command in the project root, and leave nothing of it running.

The command runs as `bash -c COMMAND` in a session of its own, so it and
every process it starts share one process group, which can be signalled as
a whole. Whatever way the command ends (it exits, its time is up, or the
run is aborted and trio cancels the tool), the group gets SIGTERM, then
SIGKILL after a short grace: a grandchild that ignores SIGTERM dies too.

A textual guardrail refuses, before anything runs, a command that names a
path outside the root. It catches mistakes, not intent: a shell can reach
any path in ways no text check sees (a variable, `cd` through a symlink,
a script). `bash` is never truly confined, which is why it is off by
default and a person turns it on.

Starter file of chapter 08: lab 8.5 writes the bash tool (the lesson
suggests OutputTail, refuse_outside_paths, command_words, leads_outside,
run_command, collect_output, stop_group, signal_group and command_report).
"""

from __future__ import annotations

from pathlib import Path

from tiny_pi.tools import Tool

DEFAULT_TIMEOUT = 30.0  # seconds, unless the call or --bash-timeout says otherwise
MAX_OUTPUT_CHARS = 30_000  # the last characters of the output, its cut note included
NOTE_CHARS = 100  # room kept for the cut note, which is always shorter
KILL_GRACE = 0.5  # seconds between SIGTERM and SIGKILL
POLL_INTERVAL = 0.02
HIDDEN_VARIABLES = ("TINY_PI_API_KEY",)  # the agent's key stays out of the model's commands
ALLOWED_OUTSIDE = ("/dev/null",)

BASH_PARAMETERS = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "a bash command; it runs in the project root"},
        "timeout": {"type": "number", "description": "seconds before it is killed"},
    },
    "required": ["command"],
    "additionalProperties": False,
}


class CommandFailed(Exception):
    """The command ran and exited with a status other than 0; the message holds its report."""


def bash_tool(root: Path, timeout: float = DEFAULT_TIMEOUT) -> Tool:
    """`bash {"command": ..., "timeout": ...}`: one command, `timeout` seconds at most."""
    raise NotImplementedError("lab 8.5: the bash tool")
