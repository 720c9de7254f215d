"""The environment of every test run: the caller's, minus what could change a verdict.

An inherited PYTHONPATH or pytest option, a stray installed plugin, colour
and terminal settings (a colour code splits the text a red light is matched
against) are dropped or fixed. Only the standard library is imported here:
course/launch.py starts a run host with this environment before anything
heavy is imported.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# Variables that would let the caller's environment change a snapshot's results.
DROPPED_ENV = (
    "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONWARNINGS", "PYTHONDEVMODE",
    "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_THEME", "PYTEST_THEME_MODE",
    "FORCE_COLOR", "PY_COLORS", "CLICOLOR_FORCE", "CLICOLOR", "NO_COLOR", "COLORTERM", "TERM",
    "COLUMNS", "LINES",
)
# ... and what every run gets instead, whatever the caller's terminal is.
FIXED_ENV = {
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    "PYTHONUNBUFFERED": "1",
    "NO_COLOR": "1",
    "TERM": "dumb",
    "COLUMNS": "80",
    "LINES": "24",
}


def run_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a test run: the caller's, minus what could leak in, plus FIXED_ENV."""
    env = dict(os.environ if base is None else base)
    for name in DROPPED_ENV:
        env.pop(name, None)
    env.update(FIXED_ENV)
    return env
