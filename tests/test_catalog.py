"""chapter.toml is read into checked records; a damaged one gives one clear paragraph."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import REPO, mini
from course.catalog import load_catalog
from course.errors import ChapterError, UsageError

TOML = Path("checkpoints/01-adder/chapter.toml")


def test_real_catalog_loads_with_chapters_in_order() -> None:
    catalog = load_catalog(REPO)
    numbers = [chapter.number for chapter in catalog.chapters]
    assert numbers == list(range(len(numbers)))  # from the prologue, 00, with no gap


def test_previous_and_following_walk_the_chapters_in_order() -> None:
    catalog = load_catalog(REPO)
    first, second, *_, last = catalog.chapters
    assert catalog.following(first) is second and catalog.previous(second) is first
    assert catalog.previous(first) is None and catalog.following(last) is None


@pytest.mark.parametrize("spelling", ["1", "01", "adder", "01-adder", " 01-ADDER "])
def test_every_spelling_of_a_chapter_id_resolves(mini_course: Path, spelling: str) -> None:
    assert load_catalog(mini_course).resolve(spelling).name == "01-adder"


def test_unknown_chapter_lists_valid_ones(mini_course: Path) -> None:
    with pytest.raises(UsageError, match="Valid chapters: 01-adder"):
        load_catalog(mini_course).resolve("abc")


BROKEN = [
    # (what to do to chapter.toml, fragments the error must contain)
    (lambda t: t.replace('mode = "rebuild"', 'mode = "rebuild"\ncolour = "red"'), ["key 'colour'", "unknown key"]),
    (lambda t: t.replace('summary = "Add two numbers."\n', ""), ["key 'summary'", "missing"]),
    (lambda t: t.replace('expected_passed = 2\nfirst_step', 'expected_passed = "two"\nfirst_step'), ["key 'expected_passed'", "integer"]),
    (lambda t: t.replace('select = "small"\n', ""), ["key 'labs[0].select'", "exactly one"]),
    (lambda t: t.replace('id = "1.1"', 'id = "2.1"'), ["key 'labs[0].id'", "'1.1'"]),
    (lambda t: t.replace('["tiny_pi/adder.py"]', '["tiny_pi/missing.py"]'), ["key 'teaching_files'", "target/tiny_pi/missing.py does not exist"]),
    (lambda t: t.replace("redlight/minus.patch", "redlight/gone.patch"), ["key 'redlights[0].patch'", "gone.patch does not exist"]),
    (lambda t: t.replace('kind = "collection-error"', 'kind = "red"'), ["key 'first_red_light.kind'"]),
    (lambda t: t.replace("[first_red_light]", "[first_red_light"), ["not valid TOML"]),
    (lambda t: t.replace("number = 1", "number = 3"), ["key 'number'", "directory says 01"]),
    (lambda t: t.replace('mode = "rebuild"', 'mode = "rebuild"\ntime_limit = 0'), ["key 'time_limit'", "above 0 and at most 3600"]),
    (lambda t: t.replace('mode = "rebuild"', 'mode = "rebuild"\ntime_limit = nan'), ["key 'time_limit'", "seconds above 0"]),
    (lambda t: t.replace('mode = "rebuild"', 'mode = "rebuild"\nmemory_limit = 65'), ["key 'memory_limit'", "GiB above 0 and at most 64"]),
    (lambda t: t.replace('mode = "rebuild"', 'mode = "rebuild"\nmemory_limit = true'), ["key 'memory_limit'", "expected a number"]),
    (lambda t: t.replace('select = "small"', 'select = "small and not big"'), ["key 'labs[0].select'", "joined by ' or '"]),
    (lambda t: t.replace('["tiny_pi/adder.py"]', '["../adder.py"]'), ["key 'teaching_files'", "plain relative path"]),
    (lambda t: t.replace('["tests/test_01_adder.py"]', "[]"), ["key 'focused_tests'", "names no test file"]),
    (lambda t: t.replace("fragments = [\"No module named 'tiny_pi.adder'\"]", "fragments = []"), ["key 'first_red_light.fragments'", "at least one fragment"]),
    (lambda t: t.replace('expected_passed = 2\nfirst_step', 'expected_passed = -1\nfirst_step'), ["key 'expected_passed'", "0 or more"]),
    (lambda t: t.replace('mode = "rebuild"', 'mode = "replay"'), ["key 'mode'", "must be one of rebuild, observe"]),
    (lambda t: t.replace('["tiny_pi/adder.py"]', '"tiny_pi/adder.py"'), ["key 'teaching_files'", "expected a list of strings"]),
]


@pytest.mark.parametrize("break_it,fragments", BROKEN)
def test_broken_chapter_toml_names_file_and_key(mini_course: Path, break_it, fragments: list[str]) -> None:
    path = mini_course / TOML
    path.write_text(break_it(path.read_text()))
    with pytest.raises(ChapterError) as caught:
        load_catalog(mini_course)
    message = str(caught.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message


def test_broken_chapter_toml_through_the_cli_is_a_paragraph_not_a_traceback(mini_course: Path) -> None:
    path = mini_course / TOML
    path.write_text(path.read_text().replace('mode = "rebuild"', 'mode = "rebuild"\ncolour = "red"'))
    result = mini(mini_course, "list")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "chapter.toml: key 'colour': unknown key" in result.stderr
    assert result.stdout == ""


def test_missing_snapshot_is_named(mini_course: Path) -> None:
    import shutil

    shutil.rmtree(mini_course / "checkpoints/01-adder/parent")
    result = mini(mini_course, "checkpoint", "1")
    assert result.returncode == 2
    assert "snapshot directory parent/ is missing" in result.stderr


def test_records_made_in_code_get_the_same_checks_as_chapter_toml() -> None:
    from course.catalog import Lab

    with pytest.raises(ValueError, match="select: must be parts of test names"):
        Lab(id="1.1", title="t", expected_passed=1, select="a and b")
    with pytest.raises(ValueError, match="expected_passed: must be 0 or more"):
        Lab(id="1.1", title="t", expected_passed=-1, select="a")
    assert Lab(id="1.1", title="t", expected_passed=1, nodes=["tests/t.py::x"]).nodes == ("tests/t.py::x",)
