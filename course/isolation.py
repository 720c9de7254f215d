"""The environment every test run gets, cold or warm: the caller's, minus what could leak in.

Kept apart from the runner, and free of trio, because the worker is started
(course/prestart.py) before the command has imported anything heavy.
"""

from __future__ import annotations

import os

# Variables that would let the caller's environment change a snapshot's results.
DROPPED_ENV = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTEST_ADDOPTS", "PYTEST_PLUGINS")


def isolated_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a test run: the caller's, minus what could leak in."""
    env = dict(os.environ if base is None else base)
    for name in DROPPED_ENV:
        env.pop(name, None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env
