"""The pytest plugins the course loads into runs: found without the course, and invisible in reports."""

from __future__ import annotations

import ast
import importlib.util
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import trio
import trio._core._run
from _pytest._code import source as pytest_source

from course.catalog import Lab, find_root, load_catalog
from course.run_plugins import DIRECTORY, LAB_SORTER, STATEMENT_CACHE
from course.runner import PASSED, RunPool, isolated_env


def _load_plugin(name: str):
    """Import a run plugin by file, without putting its directory on this process's path."""
    spec = importlib.util.spec_from_file_location(f"_course_test_{name}", DIRECTORY / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


statement_cache = _load_plugin(STATEMENT_CACHE)
StatementLines = statement_cache.StatementLines
statement_bounds = statement_cache.statement_bounds
statement_starts = statement_cache.statement_starts

TRICKY = textwrap.dedent('''
    import functools

    @functools.cache
    @staticmethod
    def decorated(x):
        return x


    class Holder:
        """Doc."""

        @property
        def value(self):
            try:
                first = 1
            except ValueError as error:
                raise RuntimeError(
                    "multi-line"
                ) from error
            else:
                first = 2
            finally:
                first = 3
            return first

    def groups():
        try:
            pass
        except* TypeError:
            pass
        finally:
            pass

    async def waits():
        async with something() as thing:
            for item in thing:
                if item:
                    continue
                else:
                    break
            else:
                pass
        while True:
            match item:
                case {"a": 1}:
                    return [
                        1,
                        2,
                    ]
                case _:
                    pass
''')


def _agree_with_pytest(text: str, step: int = 1) -> None:
    tree = ast.parse(text)
    lines = StatementLines(statement_starts(tree))
    for lineno in range(0, len(text.splitlines()), step):
        expected = pytest_source.get_statement_startend2(lineno, tree)
        assert statement_bounds(lineno, lines) == expected, lineno
        assert statement_bounds(lineno, tree) == expected, lineno


def test_statement_bounds_agree_with_pytest_on_every_line_of_tricky_code() -> None:
    _agree_with_pytest(TRICKY)


def test_statement_bounds_agree_with_pytest_on_real_files() -> None:
    provider = find_root() / "checkpoints" / "05-provider" / "target" / "tests" / "test_05_provider.py"
    _agree_with_pytest(provider.read_text(encoding="utf-8"), step=23)
    _agree_with_pytest(Path(trio._core._run.__file__).read_text(encoding="utf-8"), step=151)


def test_the_plugin_patches_this_pytest() -> None:
    """If pytest's internals moved, the plugin would silently do nothing: say so here instead."""
    probe = textwrap.dedent(f"""
        import {STATEMENT_CACHE} as statement_cache
        from _pytest._code import code, source
        assert statement_cache.install()
        assert source.get_statement_startend2 is statement_cache.statement_bounds
        assert code.getstatementrange_ast.course_cached
    """)
    env = {**isolated_env(), "PYTHONPATH": str(DIRECTORY)}
    result = subprocess.run([sys.executable, "-P", "-c", probe], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


_VARIES = re.compile(r"0x[0-9a-f]+|127\.0\.0\.1:\d+| in \d+\.\d+s")


def test_reports_are_exactly_what_plain_pytest_prints(tmp_path: Path) -> None:
    """Chapter 05's parent fails 55 tests with long tracebacks: every line must be pytest's own."""
    chapter = load_catalog(find_root()).resolve("05")
    copy = tmp_path / "parent"
    shutil.copytree(chapter.parent, copy)

    def start(*plugin: str) -> subprocess.Popen[str]:
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *plugin, *chapter.focused_tests]
        env = {**isolated_env(), "PYTHONPATH": str(DIRECTORY)}
        return subprocess.Popen(command, cwd=copy, env=env, stdout=subprocess.PIPE, text=True)

    plain_run, cached_run = start(), start("-p", STATEMENT_CACHE)  # side by side: half the wait
    plain, cached = (_VARIES.sub("<varies>", run.communicate(timeout=120)[0]) for run in (plain_run, cached_run))
    assert "NotImplementedError: lab 5.1" in plain and " 55 failed" in plain
    assert cached == plain


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_a_run_judging_labs_never_imports_the_course_nor_shadows_learner_modules(tmp_path: Path, warm: bool) -> None:
    """The plugins are found by names of their own: the learner's code cannot reach the tool
    that judges it, and the learner's modules, whatever they are called, stay the learner's."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    for name in ("statement_cache", "lab_sorter", "course_labs"):  # names a learner might well use
        (tmp_path / f"{name}.py").write_text(f"WHO = {name!r}\n")
    (tmp_path / "tests" / "test_x.py").write_text(textwrap.dedent(f"""
        import sys
        import course_labs, lab_sorter, statement_cache
        def test_no_course_module_was_imported():
            assert not [m for m in sys.modules if m == "course" or m.startswith("course.")]
        def test_the_plugins_are_loaded():
            assert {{"{LAB_SORTER}", "{STATEMENT_CACHE}"}} <= set(sys.modules)
        def test_the_learners_modules_are_their_own():
            assert (statement_cache.WHO, lab_sorter.WHO, course_labs.WHO) == (
                "statement_cache", "lab_sorter", "course_labs")
    """))
    lab = Lab(id="1.1", title="t", expected_passed=3, select="test_")

    async def main():
        async with RunPool(warm=warm) as pool:
            assert (pool.worker is not None) == warm
            return await pool.run(tmp_path, ("tests/test_x.py",), labs=[lab], lab_files=("tests/test_x.py",))

    result = trio.run(main)
    assert result.outcome == PASSED, result.output
    assert result.lab_counts == {"1.1": (3, 0)}
