"""Every test runs with an empty home directory of its own.

From chapter 12 on, `python -m tiny_pi.agent` reads skills and prompt
templates from --user-root, by default ~/.tiny_pi. A skill kept in your real
home would add a section to the system prompt of every run a test starts
without --user-root, and change what the tests check: the requests sent,
chapter 11's token budgets, the JSON lines of chapter 13. So HOME points at
a fresh empty directory, in the test and, through os.environ, in every
process the test starts.
"""

import site

import pytest


@pytest.fixture(autouse=True)
def empty_home(tmp_path_factory, monkeypatch):
    """A fresh empty HOME for one test; packages installed with pip --user stay importable."""
    monkeypatch.setenv("PYTHONUSERBASE", site.getuserbase())  # found from HOME otherwise
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    return home
