"""Which tools an agent gets, chosen by name: what `--tools read,ls,write` turns into.

The default is the read-only pair of chapter 07. The tools that change
files, and above all `bash`, are turned on by a person who decides to
trust the model with them, one name at a time.

Starter file of chapter 08: lab 8.10 writes tool_names and chosen_tools.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from tiny_pi.bash_tool import DEFAULT_TIMEOUT
from tiny_pi.tools import Tool

TOOL_NAMES = ("read", "ls", "write", "edit", "bash")
DEFAULT_TOOLS = "read,ls"


def tool_names(spec: str) -> list[str]:
    """The names in `read,ls,bash`, each once, in the order given; refuse an unknown one."""
    raise NotImplementedError("lab 8.10: tool names from the command line")


def chosen_tools(root: Path, names: Sequence[str], bash_timeout: float = DEFAULT_TIMEOUT) -> list[Tool]:
    """The tools called `names`, in that order, all confined to `root`."""
    raise NotImplementedError("lab 8.10: the tools an agent gets")
