"""Every environment variable the course reads, set to what no one meant: empty, relative, a file.

The rule (course/run_env.py): a directory is taken from the environment only
when it is an absolute path that is, or can become, a directory. An empty or
unusable XDG_* value is ignored and the default below the user's home used,
as the XDG Base Directory specification says; an unusable HOME is the home the
password database gives; a setting of the course's own that cannot be used
(COURSE_CACHE, COURSE_ROOT) is one line and exit 2. In every case nothing is
written in the directory the command runs in.

Before: a relative XDG_CACHE_HOME or XDG_STATE_HOME put the cache or the
index of practice dirs into `./<value>/tiny-pi-course` of whatever directory
the command ran in; one pointing at a file was used anyway (nothing cached,
nothing remembered); a relative or file COURSE_CACHE was used as a path.
"""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path

import pytest

from conftest import course, mini

KINDS = ["empty", "relative", "file", "below-a-file", "dangling-link"]


def bad_value(kind: str, tmp_path: Path) -> str:
    """A value of KIND for a variable that should name a directory."""
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory\n", encoding="utf-8")
    link = tmp_path / "dangling"
    if not link.is_symlink():
        link.symlink_to(tmp_path / "nowhere")
    return {"empty": "", "relative": "relative/dir", "file": str(a_file), "below-a-file": str(a_file / "sub"),
            "dangling-link": str(link)}[kind]


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    """The directory the command runs in: it must stay empty."""
    where = tmp_path / "cwd"
    where.mkdir()
    return where


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A HOME of the module's own, so the defaults below it are this test's (and bytecode is compiled once)."""
    return tmp_path_factory.mktemp("home")


def assert_untouched(cwd: Path, tmp_path: Path) -> None:
    assert sorted(p.relative_to(cwd).as_posix() for p in cwd.rglob("*")) == []
    assert (tmp_path / "a-file").read_text(encoding="utf-8") == "not a directory\n"
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("kind", KINDS)
def test_an_unusable_xdg_dir_is_ignored_and_the_default_used(mini_course: Path, tmp_path: Path, cwd: Path,
                                                            home: Path, kind: str) -> None:
    """`course practice` remembers the dir in the index (XDG_STATE_HOME) and runs the first red light,
    which reads chapter.toml through the parsed cache and compiles into the bytecode cache (XDG_CACHE_HOME)."""
    value = bad_value(kind, tmp_path)
    directory = tmp_path / "work"
    env = {"XDG_CACHE_HOME": value, "XDG_STATE_HOME": value, "HOME": str(home)}
    result = mini(mini_course, "practice", "1", str(directory), cwd=cwd, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert_untouched(cwd, tmp_path)
    index = json.loads((home / ".local/state/tiny-pi-course/practice-dirs.json").read_text(encoding="utf-8"))
    assert str(directory.resolve()) in [entry["dir"] for entry in index["dirs"]]
    cache = home / ".cache/tiny-pi-course"
    assert any((cache / "parsed-toml").glob("*.json")) and (cache / "bytecode").is_dir()
    listed = mini(mini_course, "list", cwd=cwd, env=env)  # and read back from the same default
    assert str(directory.resolve()) in listed.stdout, listed.stdout


@pytest.mark.parametrize("kind", KINDS)
def test_an_unusable_home_is_the_password_databases_home(mini_course: Path, tmp_path: Path, cwd: Path,
                                                         kind: str) -> None:
    """With XDG_CACHE_HOME unset the cache is below HOME; a HOME that cannot be one is not used.

    This writes into the real home's cache (the password database's home is
    the only default there is), so it removes exactly the entries it made.
    """
    real = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "tiny-pi-course" / "parsed-toml"
    before = set(real.glob("*.json")) if real.is_dir() else set()
    made = [p for p in (real.parent.parent, real.parent, real) if not p.exists()]
    try:
        result = mini(mini_course, "list", cwd=cwd, env={
            "HOME": bad_value(kind, tmp_path), "XDG_CACHE_HOME": None, "XDG_STATE_HOME": str(tmp_path / "state")})
        assert result.returncode == 0, result.stdout + result.stderr
        assert_untouched(cwd, tmp_path)
        assert set(real.glob("*.json")) - before, "the parsed chapter.toml went somewhere else"
    finally:
        for entry in set(real.glob("*.json")) - before:
            entry.unlink()
        for folder in reversed(made):
            folder.rmdir()


@pytest.mark.parametrize("kind", KINDS)
def test_an_unusable_course_cache_is_one_line_before_anything_runs(mini_course: Path, tmp_path: Path, cwd: Path,
                                                                   home: Path, kind: str) -> None:
    value = bad_value(kind, tmp_path)
    env = {"COURSE_CACHE": value, "HOME": str(home), "XDG_CACHE_HOME": None}
    result = mini(mini_course, "verify", "1", "--fresh", cwd=cwd, env=env)
    if kind == "empty":  # unset: the verdicts go to the user's cache
        assert result.returncode == 0, result.stdout + result.stderr
        assert list((home / ".cache/tiny-pi-course/verify").glob("*.json"))
    else:
        assert result.returncode == 2, result.stdout + result.stderr
        assert result.stderr == f"course: COURSE_CACHE must be an absolute path to a directory (or unset), not {value!r}\n"
        assert "[ok]" not in result.stdout and "[FAIL]" not in result.stdout, "it ran before it refused"
    assert_untouched(cwd, tmp_path)


@pytest.mark.parametrize("kind", [*KINDS, "not-a-course"])
def test_an_unusable_course_root_is_one_line(tmp_path: Path, cwd: Path, kind: str) -> None:
    value = bad_value("empty" if kind == "not-a-course" else kind, tmp_path)
    if kind == "not-a-course":
        value = str(tmp_path)
    result = course("list", cwd=cwd, env={"COURSE_ROOT": value})
    if kind == "empty":  # unset: the course this package belongs to
        assert result.returncode == 0 and "00-prologue" in result.stdout, result.stderr
    elif kind == "not-a-course":
        assert result.returncode == 2
        assert result.stderr == f"course: COURSE_ROOT={value!r} is not a course: it has no checkpoints/ directory\n"
    else:
        assert result.returncode == 2
        assert result.stderr == f"course: COURSE_ROOT must be an absolute path to a directory (or unset), not {value!r}\n"
    assert_untouched(cwd, tmp_path)
