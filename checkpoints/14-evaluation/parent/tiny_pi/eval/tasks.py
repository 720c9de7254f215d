"""Reading an evaluation task: TASKS/NAME/task.toml, checked before anything runs.

    prompt = "Write the project's name into NAME.txt."
    tools = ["read", "ls", "write"]   # default ["read", "ls"]; bash only when listed
    max_turns = 6
    time_limit = 60                   # seconds for the agent's run; default 120

    [[checks]]
    path = "NAME.txt"                 # relative to the workspace copy
    contains = "tiny-pi"

    [[checks]]
    command = "grep -q tiny-pi NAME.txt"   # run in the workspace copy; must exit 0

TASKS/NAME/workspace/, if there is one, is copied fresh for every run. A
task that is not exactly this is malformed: TaskError names its file and key.
No text of a task may hold a NUL character (the operating system cannot
take one in an argument, a path or a command), and no task may be named
report.json (its evidence would take the report's place in DIR).
"""

from __future__ import annotations

import tomllib
from pathlib import Path, PurePosixPath
from typing import Any

from attrs import frozen

from tiny_pi.toolset import DEFAULT_TOOLS, tool_names

TASK_FILE = "task.toml"
WORKSPACE = "workspace"
REPORT_FILE = "report.json"  # DIR/report.json, beside each task's DIR/NAME/: no task may be named so
DEFAULT_TIME_LIMIT = 120.0
TASK_KEYS = ("prompt", "tools", "max_turns", "time_limit", "checks")
CHECK_KEYS = ("path", "contains", "command")


class TaskError(ValueError):
    """A malformed task: which file, which key, what is wrong."""

    def __init__(self, path: Path, key: str, reason: str) -> None:
        super().__init__(f"{path}: {key}: {reason}")
        self.path = path
        self.key = key
        self.reason = reason


@frozen
class Check:
    """One fact the final workspace must show: `path` holds `contains`, or `command` exits 0."""

    path: str | None = None
    contains: str | None = None
    command: str | None = None

    def describe(self) -> str:
        """The check as a person reads it, in a task's line and its evidence."""
        if self.command is not None:
            return f"command {self.command!r}"
        return f"{self.path} contains {self.contains!r}"


@frozen
class Task:
    """A task as checked: what the agent is asked, with which tools and limits, and how it is judged."""

    name: str
    directory: Path
    prompt: str
    tools: tuple[str, ...]
    max_turns: int
    time_limit: float
    checks: tuple[Check, ...]

    @property
    def workspace(self) -> Path:
        """The files the agent starts from (the copy starts empty when there is none)."""
        return self.directory / WORKSPACE


def load_tasks(root: Path) -> list[Task]:
    """Every task under `root`, by name; the first malformed one stops everything."""
    raise NotImplementedError("lab 14.1: load every task")


def load_task(directory: Path) -> Task:
    """One task, from `directory`/task.toml, with every key checked."""
    raise NotImplementedError("lab 14.1: read and check a task")


def read_toml(path: Path) -> dict[str, Any]:
    """The file as a table, or a TaskError: missing, unreadable or not TOML."""
    raise NotImplementedError("lab 14.1: read task.toml")


def text_value(data: dict[str, Any], key: str, path: Path) -> str:
    """A required string that is not blank."""
    raise NotImplementedError("lab 14.1: a required string")


def task_tools(data: dict[str, Any], path: Path) -> tuple[str, ...]:
    """The tools the agent gets: read and ls unless the task lists others."""
    raise NotImplementedError("lab 14.1: the task's tools")


def whole_number(data: dict[str, Any], key: str, path: Path) -> int:
    """A required whole number of 1 or more (a bool is not one)."""
    raise NotImplementedError("lab 14.1: a whole number")


def time_limit(data: dict[str, Any], path: Path) -> float:
    """Seconds for the agent's run, above 0; every task has one."""
    raise NotImplementedError("lab 14.1: the time limit")


def task_checks(data: dict[str, Any], path: Path) -> tuple[Check, ...]:
    """At least one [[checks]] table: a task that checks nothing would pass whatever the agent did."""
    raise NotImplementedError("lab 14.1: the checks")


def check_from_table(table: Any, key: str, path: Path) -> Check:
    """`path` with `contains`, or `command`: exactly one of the two kinds."""
    raise NotImplementedError("lab 14.1: one check")


def inside_workspace(relative: str) -> bool:
    """Whether a check's path stays in the workspace copy: relative, and never `..`."""
    raise NotImplementedError("lab 14.1: a path inside the workspace")
