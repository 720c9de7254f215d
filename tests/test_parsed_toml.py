"""The store of parsed chapter.toml files: faster, and never stale."""

import hashlib
import json
import tomllib

import pytest

from conftest import mini
from course.parsed_toml import parse_toml, store_dir


@pytest.fixture(autouse=True)
def own_store(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def entries():
    return sorted(store_dir().glob("*.json"))


def sealed(header: dict, body: str) -> str:
    """An entry as the store writes it: a header holding the data's own hash, then the data."""
    digest = hashlib.blake2b(body.encode("utf-8"), digest_size=16).hexdigest()
    return json.dumps({**header, "data": digest}) + "\n" + body


def test_a_second_read_of_the_same_text_comes_from_the_store(tmp_path):
    path = tmp_path / "chapter.toml"
    parse_toml('title = "one"\n', path)
    [entry] = entries()
    header = json.loads(entry.read_text(encoding="utf-8").partition("\n")[0])
    # What only the store could answer, sealed as the store seals it.
    entry.write_text(sealed(header, json.dumps({"title": "from the store"})), encoding="utf-8")

    assert parse_toml('title = "one"\n', path) == {"title": "from the store"}


@pytest.mark.parametrize("damage", [
    "data changed", "data cut short", "data not a table", "header lost", "header of another file", "empty",
    "old format with other data",
])
def test_a_damaged_entry_is_ignored_and_rewritten(tmp_path, damage):
    """Right hash, wrong data: the file is parsed again and the entry made whole.

    Before: the entry's data was trusted whenever the hash of the file's text
    matched, so a damaged entry was read as the checkout's chapter.toml and
    every command exited 2 blaming a file that was fine.
    """
    path = tmp_path / "chapter.toml"
    text = 'title = "one"\n[first]\nkind = "failed"\n'
    parse_toml(text, path)
    [entry] = entries()
    whole = entry.read_text(encoding="utf-8")
    header_line, _, body = whole.partition("\n")
    header = json.loads(header_line)
    entry.write_text({
        "data changed": header_line + "\n" + body.replace('"one"', '"two"'),
        "data cut short": header_line + "\n" + body[:-5],
        "data not a table": sealed(header, "[1, 2]"),
        "header lost": body,
        "header of another file": sealed({"content": "0" * 32}, body),
        "empty": "",
        "old format with other data": json.dumps({"content": header["content"], "data": {"title": "two"}}),
    }[damage], encoding="utf-8")

    assert parse_toml(text, path) == tomllib.loads(text)
    assert entry.read_text(encoding="utf-8") == whole, "the damaged entry was not rewritten"


def test_a_damaged_entry_of_a_chapter_is_not_blamed_on_its_chapter_toml(mini_course, tmp_path):
    """Through the CLI: the clean chapter.toml is read, whatever its entry in the store holds."""
    assert mini(mini_course, "list").returncode == 0
    damaged = 0
    for entry in entries():  # a key of the data renamed, the hash of the file's text left as it was
        text = entry.read_text(encoding="utf-8")
        damaged += '"title"' in text
        entry.write_text(text.replace('"title"', '"titel"'), encoding="utf-8")
    assert damaged
    result = mini(mini_course, "list")
    assert result.returncode == 0 and "Adder" in result.stdout, result.stderr


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
    blocked = tmp_path / "cache" / "tiny-pi-course" / "parsed-toml"  # where the store's folder would be
    blocked.parent.mkdir(parents=True)
    blocked.write_text("", encoding="utf-8")
    assert parse_toml('title = "one"\n', tmp_path / "chapter.toml") == {"title": "one"}
