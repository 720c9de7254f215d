"""The store of parsed chapter.toml files: faster, and never stale."""

import json
import tomllib

import pytest

from course.parsed_toml import parse_toml, store_dir


@pytest.fixture(autouse=True)
def own_store(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def entries():
    return sorted(store_dir().glob("*.json"))


def test_a_second_read_of_the_same_text_comes_from_the_store(tmp_path):
    path = tmp_path / "chapter.toml"
    parse_toml('title = "one"\n', path)
    [entry] = entries()
    kept = json.loads(entry.read_text(encoding="utf-8"))
    kept["data"] = {"title": "from the store"}  # what only the store could answer
    entry.write_text(json.dumps(kept), encoding="utf-8")

    assert parse_toml('title = "one"\n', path) == {"title": "from the store"}


def test_an_edit_of_the_same_size_at_once_after_a_read_is_parsed_again(tmp_path):
    path = tmp_path / "chapter.toml"
    assert parse_toml('title = "one"\n', path) == {"title": "one"}
    assert parse_toml('title = "two"\n', path) == {"title": "two"}
    assert len(entries()) == 1  # one entry per file: the store does not grow with edits


def test_the_data_is_what_tomllib_reads(tmp_path):
    text = 'n = 3\nx = 2.5\nok = true\nnames = ["a", "b"]\n[table]\ninner = { deep = [1, 2.0] }\n'
    parse_toml(text, tmp_path / "chapter.toml")
    assert parse_toml(text, tmp_path / "chapter.toml") == tomllib.loads(text)


def test_a_file_with_a_date_is_parsed_every_time_and_nothing_is_kept(tmp_path):
    text = "when = 2026-12-01\n"
    assert parse_toml(text, tmp_path / "chapter.toml") == tomllib.loads(text)
    assert entries() == []


def test_invalid_toml_raises_as_tomllib_does_and_nothing_is_kept(tmp_path):
    with pytest.raises(tomllib.TOMLDecodeError):
        parse_toml("title = \n", tmp_path / "chapter.toml")
    assert entries() == []


def test_a_store_that_cannot_be_written_only_costs_time(tmp_path, monkeypatch):
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("", encoding="utf-8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    assert parse_toml('title = "one"\n', tmp_path / "chapter.toml") == {"title": "one"}
