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
    "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX",
    "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_THEME", "PYTEST_THEME_MODE",
    "FORCE_COLOR", "PY_COLORS", "CLICOLOR_FORCE", "CLICOLOR", "NO_COLOR", "COLORTERM", "TERM",
    "COLUMNS", "LINES",
)
# ... and what every run gets instead, whatever the caller's terminal is.
FIXED_ENV = {
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    "PYTHONUNBUFFERED": "1",
    "NO_COLOR": "1",
    "TERM": "dumb",
    "COLUMNS": "80",
    "LINES": "24",
}


def run_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a test run: the caller's, minus what could leak in, plus FIXED_ENV.

    Bytecode goes to the course's own cache (PYTHONPYCACHEPREFIX), never into
    the directory a run judges: a plain `python -m pytest` in a learner's dir
    reuses compiled code, and so do runs, without writing a `__pycache__`
    anywhere the course promised to leave alone. The run host removes what a
    run compiled from its own directory once the run ends (course/runhost.py).
    """
    env = dict(os.environ if base is None else base)
    for name in DROPPED_ENV:
        env.pop(name, None)
    env.update(FIXED_ENV)
    env["PYTHONPYCACHEPREFIX"] = bytecode_cache(env)
    return env


def bytecode_cache(env: Mapping[str, str]) -> str:
    """The course's cache (cache_home, from `env`), bytecode."""
    return os.path.join(cache_home(env), "bytecode")


def cache_home(env: Mapping[str, str] = os.environ) -> str:
    """XDG_CACHE_HOME's (or ~/.cache's) tiny-pi-course: stored verdicts, parsed chapter.toml, run bytecode.

    Here, with the standard library only, because the run host's environment needs it
    before anything heavy is imported.
    """
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tiny-pi-course")
