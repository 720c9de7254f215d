"""Reading an evaluation task: TASKS/NAME/task.toml, checked before anything runs.

    prompt = "Write the project's name into NAME.txt."
    tools = ["read", "ls", "write"]   # default ["read", "ls"]; bash only when listed
    defer = ["edit"]                  # optional: found with tool_search first (chapter 15)
    codemode = true                   # optional: also offer codemode (chapter 16)
    mcp_config = "mcp.json"           # optional: MCP servers, a file beside task.toml (chapter 17)
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

from tiny_pi.mcp_tools import ConfigError, load_config
from tiny_pi.tool_search import deferred_names
from tiny_pi.toolset import DEFAULT_TOOLS, tool_names

TASK_FILE = "task.toml"
WORKSPACE = "workspace"
REPORT_FILE = "report.json"  # DIR/report.json, beside each task's DIR/NAME/: no task may be named so
DEFAULT_TIME_LIMIT = 120.0
TASK_KEYS = ("prompt", "tools", "defer", "codemode", "mcp_config", "max_turns", "time_limit", "checks")
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
    defer: tuple[str, ...] = ()  # the agent's --defer: reached through tool_search
    codemode: bool = False  # the agent's --codemode
    mcp_config: Path | None = None  # the agent's --mcp-config, checked as the agent checks it

    @property
    def workspace(self) -> Path:
        """The files the agent starts from (the copy starts empty when there is none)."""
        return self.directory / WORKSPACE


def load_tasks(root: Path) -> list[Task]:
    """Every task under `root`, by name; the first malformed one stops everything."""
    if not root.is_dir():
        raise TaskError(root, "TASKS", "not a directory")
    directories = sorted(path for path in root.iterdir() if path.is_dir())
    if not directories:
        raise TaskError(root, "TASKS", "no task directories")
    return [load_task(directory) for directory in directories]


def load_task(directory: Path) -> Task:
    """One task, from `directory`/task.toml, with every key checked."""
    if directory.name == REPORT_FILE:
        raise TaskError(directory, "name", f"{REPORT_FILE} is the report's name in DIR: rename the task")
    path = directory / TASK_FILE
    data = read_toml(path)
    for key in data:
        if key not in TASK_KEYS:
            raise TaskError(path, key, f"unknown key (known: {', '.join(TASK_KEYS)})")
    tools = task_tools(data, path)
    return Task(
        name=directory.name,
        directory=directory,
        prompt=text_value(data, "prompt", path),
        tools=tools,
        max_turns=whole_number(data, "max_turns", path),
        time_limit=time_limit(data, path),
        checks=task_checks(data, path),
        defer=task_defer(data, path, tools),
        codemode=flag(data, "codemode", path),
        mcp_config=task_mcp_config(data, directory, path),
    )


def read_toml(path: Path) -> dict[str, Any]:
    """The file as a table, or a TaskError: missing, unreadable or not TOML."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TaskError(path, "task.toml", "missing") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise TaskError(path, "task.toml", f"unreadable: {error}") from None


def text_value(data: dict[str, Any], key: str, path: Path) -> str:
    """A required string that is not blank."""
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        raise TaskError(path, key, f"must be a non-empty string, got {value!r}")
    if "\0" in value:
        raise TaskError(path, key, "must not contain a NUL character")
    return value


def task_tools(data: dict[str, Any], path: Path) -> tuple[str, ...]:
    """The tools the agent gets: read and ls unless the task lists others."""
    value = data.get("tools", DEFAULT_TOOLS.split(","))
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise TaskError(path, "tools", f"must be a list of tool names, got {value!r}")
    try:
        return tuple(tool_names(",".join(value)))
    except ValueError as error:
        raise TaskError(path, "tools", str(error)) from None


def task_defer(data: dict[str, Any], path: Path, tools: tuple[str, ...]) -> tuple[str, ...]:
    """The tools the agent finds with tool_search first: none unless the task lists them, never one of `tools`."""
    value = data.get("defer", [])
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise TaskError(path, "defer", f"must be a list of tool names, got {value!r}")
    if not value:
        return ()
    try:
        return tuple(deferred_names(",".join(value), tools))
    except ValueError as error:
        raise TaskError(path, "defer", str(error)) from None


def flag(data: dict[str, Any], key: str, path: Path) -> bool:
    """An optional true or false, false when absent."""
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise TaskError(path, key, f"must be true or false, got {value!r}")
    return value


def task_mcp_config(data: dict[str, Any], directory: Path, path: Path) -> Path | None:
    """The task's MCP config, a file inside its directory, read now: a bad one stops everything before a run."""
    value = data.get("mcp_config")
    if value is None:
        return None
    if not isinstance(value, str) or not value or "\0" in value:
        raise TaskError(path, "mcp_config", f"must be a file name beside task.toml, got {value!r}")
    if not inside_workspace(value):
        raise TaskError(path, "mcp_config", f"{value!r} is outside the task's directory")
    config = directory.resolve() / value
    try:
        load_config(config)
    except ConfigError as error:
        raise TaskError(path, "mcp_config", str(error)) from None
    return config


def whole_number(data: dict[str, Any], key: str, path: Path) -> int:
    """A required whole number of 1 or more (a bool is not one)."""
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise TaskError(path, key, f"must be a whole number of 1 or more, got {value!r}")
    return value


def time_limit(data: dict[str, Any], path: Path) -> float:
    """Seconds for the agent's run, above 0; every task has one."""
    value = data.get("time_limit", DEFAULT_TIME_LIMIT)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value <= 3600:
        raise TaskError(path, "time_limit", f"must be seconds above 0 and at most 3600, got {value!r}")
    return float(value)


def task_checks(data: dict[str, Any], path: Path) -> tuple[Check, ...]:
    """At least one [[checks]] table: a task that checks nothing would pass whatever the agent did."""
    tables = data.get("checks")
    if not isinstance(tables, list) or not tables:
        raise TaskError(path, "checks", "give at least one [[checks]] table")
    return tuple(check_from_table(table, f"checks[{number}]", path) for number, table in enumerate(tables, 1))


def check_from_table(table: Any, key: str, path: Path) -> Check:
    """`path` with `contains`, or `command`: exactly one of the two kinds."""
    if not isinstance(table, dict):
        raise TaskError(path, key, "must be a table")
    for name, value in table.items():
        if name not in CHECK_KEYS:
            raise TaskError(path, f"{key}.{name}", f"unknown key (known: {', '.join(CHECK_KEYS)})")
        if not isinstance(value, str) or not value:
            raise TaskError(path, f"{key}.{name}", f"must be a non-empty string, got {value!r}")
        if "\0" in value:
            raise TaskError(path, f"{key}.{name}", "must not contain a NUL character")
    if set(table) == {"command"}:
        return Check(command=table["command"])
    if set(table) != {"path", "contains"}:
        raise TaskError(path, key, "give either path and contains, or command")
    if not inside_workspace(table["path"]):
        raise TaskError(path, f"{key}.path", f"{table['path']!r} is outside the workspace")
    return Check(path=table["path"], contains=table["contains"])


def inside_workspace(relative: str) -> bool:
    """Whether a check's path stays in the workspace copy: relative, and never `..`."""
    pure = PurePosixPath(relative)
    return not pure.is_absolute() and ".." not in pure.parts and "\\" not in relative
