"""The environment of every test run: the caller's, minus what could change a verdict.

An inherited PYTHONPATH or pytest option, a stray installed plugin, colour
and terminal settings (a colour code splits the text a red light is matched
against) are dropped or fixed. Only the standard library (and course/errors.py, which imports no more) is imported here:
course/launch.py starts a run host with this environment before anything
heavy is imported.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from course.errors import UsageError  # the standard library only, too

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
    return os.path.join(xdg_home(env, "XDG_CACHE_HOME", ".cache"), "tiny-pi-course")


def state_home(env: Mapping[str, str] = os.environ) -> str:
    """XDG_STATE_HOME's (or ~/.local/state's) tiny-pi-course: the index of practice dirs."""
    return os.path.join(xdg_home(env, "XDG_STATE_HOME", os.path.join(".local", "state")), "tiny-pi-course")


# Every directory the course takes from the environment is decided below, by one rule:
# a value is used only when it is an absolute path that is, or can become, a directory.
# An empty one means unset. Where a default exists (the XDG Base Directory specification
# says to ignore an empty or relative XDG_* value and use the default) it is used
# silently; a setting of the course's own that cannot be used is one line, exit 2,
# because ignoring it would put the course's files somewhere the user did not ask for.


class SettingError(UsageError):
    """An environment variable the course needs cannot be used and has no default (exit 2, one line)."""


def usable_directory(value: str | None) -> str | None:
    """VALUE when it is an absolute path whose nearest existing part is a directory, else None.

    A relative path would follow whatever directory a command happens to run in,
    and a path through a file (or a dangling link) can never hold a directory.
    """
    if not value or not os.path.isabs(value):
        return None
    probe = value
    while not os.path.lexists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    return value if os.path.isdir(probe) else None


def user_home(env: Mapping[str, str] = os.environ) -> str:
    """HOME when usable, else the home the password database gives this user.

    An empty or relative HOME is treated as unset, as Python does for an unset
    one; only a user with neither gets the one line.
    """
    home = usable_directory(env.get("HOME"))
    if home is None:
        try:
            import pwd

            home = usable_directory(pwd.getpwuid(os.getuid()).pw_dir)
        except (ImportError, KeyError):
            home = None
    if home is None:
        raise SettingError(
            f"HOME={env.get('HOME', '')!r} is not an absolute path to a directory and this user has no "
            "home directory in the password database: set HOME (or XDG_CACHE_HOME and XDG_STATE_HOME)")
    return home


def xdg_home(env: Mapping[str, str], name: str, default: str) -> str:
    """The XDG base directory NAME when usable, else `default` below the user's home."""
    return usable_directory(env.get(name)) or os.path.join(user_home(env), default)


def directory_setting(env: Mapping[str, str], name: str) -> str | None:
    """The course's own directory variable NAME (COURSE_CACHE): None when unset or empty.

    Relative, or through a file: SettingError, naming it.
    """
    value = env.get(name, "")
    if not value:
        return None
    if usable_directory(value) is None:
        raise SettingError(f"{name} must be an absolute path to a directory (or unset), not {value!r}")
    return value
