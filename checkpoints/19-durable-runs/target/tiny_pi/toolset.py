"""Which tools an agent gets, chosen by name: what `--tools read,ls,write` turns into.

The default is the read-only pair of chapter 07. The tools that change
files, and above all `bash`, are turned on by a person who decides to
trust the model with them, one name at a time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from tiny_pi.bash_tool import DEFAULT_TIMEOUT, bash_tool
from tiny_pi.builtin_tools import ls_tool, read_tool
from tiny_pi.file_tools import edit_tool, write_tool
from tiny_pi.tools import Tool

TOOL_NAMES = ("read", "ls", "write", "edit", "bash")
DEFAULT_TOOLS = "read,ls"


def tool_names(spec: str) -> list[str]:
    """The names in `read,ls,bash`, each once, in the order given; refuse an unknown one."""
    names = list(dict.fromkeys(name.strip() for name in spec.split(",") if name.strip()))
    if not names:
        raise ValueError(f"name at least one tool (choose from {', '.join(TOOL_NAMES)})")
    for name in names:
        if name not in TOOL_NAMES:
            raise ValueError(f"unknown tool {name!r} (choose from {', '.join(TOOL_NAMES)})")
    return names


def chosen_tools(root: Path, names: Sequence[str], bash_timeout: float = DEFAULT_TIMEOUT) -> list[Tool]:
    """The tools called `names`, in that order, all confined to `root`."""
    makers: dict[str, Callable[[], Tool]] = {
        "read": lambda: read_tool(root),
        "ls": lambda: ls_tool(root),
        "write": lambda: write_tool(root),
        "edit": lambda: edit_tool(root),
        "bash": lambda: bash_tool(root, bash_timeout),
    }
    return [makers[name]() for name in tool_names(",".join(names))]
