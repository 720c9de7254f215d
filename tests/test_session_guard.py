"""The suite's own guard: a session in which anything wrote under checkpoints/ fails, in any test order."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).with_name("conftest.py")


def _session_with(pytester: pytest.Pytester, test_body: str) -> pytest.RunResult:
    """Run a one-test session under this suite's conftest, with a checkpoints/ of its own beside it."""
    (pytester.path / "checkpoints").mkdir()
    (pytester.path / "checkpoints" / "chapter.toml").write_text("number = 2\n")
    tests = pytester.path / "tests"
    tests.mkdir()
    shutil.copy(CONFTEST, tests / "conftest.py")
    (tests / "test_one.py").write_text(
        "from conftest import CHECKPOINTS\n\n"
        f"def test_one():\n    {test_body}\n"
    )
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", str(tests))


def test_a_write_under_checkpoints_fails_the_session_though_every_test_passed(pytester: pytest.Pytester) -> None:
    result = _session_with(pytester, "(CHECKPOINTS / 'chapter.toml').write_text('number = 3\\n')")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["FAILED: a command wrote under checkpoints/ during this session*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_a_session_that_only_reads_checkpoints_passes(pytester: pytest.Pytester) -> None:
    result = _session_with(pytester, "assert (CHECKPOINTS / 'chapter.toml').read_text()")
    assert result.ret == pytest.ExitCode.OK
    assert "wrote under checkpoints" not in result.stdout.str()


def test_a_test_that_hangs_fails_in_seconds_with_its_name_and_the_next_one_runs(pytester: pytest.Pytester) -> None:
    """The suite's own time limit (pyproject.toml, pytest-timeout), shortened here to 2 s.

    Its settings are copied from the suite's, so a change of method or a lost
    plugin shows here: the hanging test fails with its name, and the worker
    goes on to the next test instead of holding the run until CI's limit.
    """
    import tomllib

    settings = tomllib.loads((CONFTEST.parent.parent / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert int(settings["timeout"]) > 0 and settings["timeout_method"] == "signal"
    pytester.makeini(f"[pytest]\ntimeout = 2\ntimeout_method = {settings['timeout_method']}\n")
    pytester.makepyfile(test_hang="import time\n\ndef test_sleeps_forever():\n    time.sleep(600)\n\ndef test_after():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "xdist", "-n", "1", timeout=60)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*FAILED*test_sleeps_forever*Timeout*"])
    assert result.duration < 300, "the sleep was cut short, not waited out (generous: a busy machine starts xdist slowly)"
