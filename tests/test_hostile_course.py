"""Hostile input, part 4: the course itself is damaged. Every command answers with one paragraph
that names the file and the key, exit 2, no traceback; a red-light patch can never write outside
its throw-away copy.

tests/test_catalog.py covers the common breakages (unknown or missing key,
wrong type, bad TOML, lab ids, a missing file or patch, a missing parent);
tests/test_cli_mini.py a patch that no longer applies. These are the ones
that used to slip through: values that are valid TOML but hostile (NaN,
negative counts, paths leading out, options in disguise), text that is not
UTF-8, a missing target, and patches that try to write outside.
"""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

import pytest

from conftest import mini, tree_hash
from course.catalog import load_catalog
from course.errors import ChapterError

CHAPTER = Path("checkpoints/01-adder")
TOML = CHAPTER / "chapter.toml"


def one_paragraph(result, *fragments: str) -> str:
    """The promise for a damaged course: exit 2, nothing on stdout, one line on stderr."""
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    message = result.stderr.strip()
    assert message.startswith("course: ") and "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, message
    return message


def edit_toml(root: Path, old: str, new: str) -> Path:
    path = root / TOML
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))
    return path


HOSTILE_VALUES = [
    # (old text, new text, key named, what the message says)
    ('first_step = "Write add."', 'first_step = "Write add."\ntime_limit = nan', "time_limit", "above 0"),
    ('first_step = "Write add."', 'first_step = "Write add."\ntime_limit = inf', "time_limit", "at most 3600"),
    ('first_step = "Write add."', 'first_step = "Write add."\ntime_limit = -1', "time_limit", "got -1"),
    ('first_step = "Write add."', 'first_step = "Write add."\ntime_limit = 0', "time_limit", "above 0"),
    ("expected_passed = 2\nfirst_step", "expected_passed = -2\nfirst_step", "expected_passed", "0 or more"),
    ('select = "small"\nexpected_passed = 1', 'select = "small"\nexpected_passed = -1', "labs[0].expected_passed", "0 or more"),
    ('["tiny_pi/adder.py"]', '["/etc/passwd"]', "teaching_files", "plain relative path"),
    ('["tiny_pi/adder.py"]', '["../../../../etc/passwd"]', "teaching_files", "no '..'"),
    ('focused_tests = ["tests/test_01_adder.py"]', 'focused_tests = ["--junitxml=/tmp/x.xml"]', "focused_tests", "no leading '-'"),
    ("redlight/minus.patch", "../../../../tmp/evil.patch", "redlights[0].patch", "plain relative path"),
    ('"tests/test_01_adder.py::test_add_big"', '"--rootdir=/"', "labs[1].nodes", "not a test of a focused test file"),
]


@pytest.mark.parametrize("old,new,key,says", HOSTILE_VALUES, ids=[f"{v[2]}={v[1].split('=')[-1][:20]}" for v in HOSTILE_VALUES])
def test_valid_toml_with_hostile_values_is_refused_naming_file_and_key(
    mini_course: Path, old: str, new: str, key: str, says: str
) -> None:
    """NaN or a negative time limit used to end `course checkpoint` in a trio traceback; an
    absolute teaching file made `course diff` show /etc/passwd; an option as a test file reached
    pytest's command line. Every command loads the catalog first, so refusing there refuses
    everywhere; the next test shows how the refusal reaches the learner."""
    path = edit_toml(mini_course, old, new)
    with pytest.raises(ChapterError) as caught:
        load_catalog(mini_course)
    message = str(caught.value)
    assert "\n" not in message, message
    for fragment in (str(path), f"key '{key}'", says):
        assert fragment in message, message


def test_a_hostile_value_reaches_the_learner_as_one_paragraph(mini_course: Path) -> None:
    old, new, key, says = HOSTILE_VALUES[0]
    path = edit_toml(mini_course, old, new)
    one_paragraph(mini(mini_course, "checkpoint", "1"), str(path), f"key '{key}'", says)


def test_a_chapter_toml_that_is_not_utf8(mini_course: Path) -> None:
    path = mini_course / TOML
    path.write_bytes(path.read_bytes() + b"\n# \xff\xfe\n")
    one_paragraph(mini(mini_course, "list"), str(path), "not valid TOML", "utf-8")


def test_a_chapter_toml_that_is_a_directory(mini_course: Path) -> None:
    path = mini_course / TOML
    path.unlink()
    path.mkdir()
    one_paragraph(mini(mini_course, "list"), str(path), "missing")


def test_a_lesson_that_is_not_utf8(mini_course: Path) -> None:
    """`course show` used to end in a UnicodeDecodeError traceback."""
    lesson = mini_course / CHAPTER / "README.md"
    lesson.write_bytes(lesson.read_bytes() + b"\n\xff oops\n")
    for command in (("show", "1"), ("checkpoint", "1"), ("verify",)):
        one_paragraph(mini(mini_course, *command), str(lesson), "not UTF-8")


def test_a_missing_target_snapshot_or_its_config_is_named(mini_course: Path, tmp_path: Path) -> None:
    shutil.rmtree(mini_course / CHAPTER / "target/tiny_pi")
    (mini_course / CHAPTER / "target/pytest.ini").unlink()
    one_paragraph(mini(mini_course, "checkpoint", "1"), "target/pytest.ini is missing")
    shutil.rmtree(mini_course / CHAPTER / "target")
    one_paragraph(mini(mini_course, "checkpoint", "1"), "snapshot directory target/ is missing")
    one_paragraph(mini(mini_course, "practice", "1", str(tmp_path / "work")), "target/ is missing")
    assert not (tmp_path / "work").exists()


def test_a_missing_parent_makes_practice_refuse_and_make_nothing(mini_course: Path, tmp_path: Path) -> None:
    shutil.rmtree(mini_course / CHAPTER / "parent")
    one_paragraph(mini(mini_course, "practice", "1", str(tmp_path / "work")), "snapshot directory parent/ is missing")
    assert list(tmp_path.iterdir()) == [mini_course]


PATCHES = {
    "not a patch at all": ("these words are not a diff\n", "No valid patches in input"),
    "a path that climbs out": (
        "diff --git a/../../{name} b/../../{name}\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/../../{name}\n@@ -0,0 +1 @@\n+escaped\n",
        "invalid path",
    ),
    "a file beyond a symbolic link": (
        "diff --git a/link b/link\nnew file mode 120000\n--- /dev/null\n+++ b/link\n@@ -0,0 +1 @@\n"
        "+{outside}\n\\ No newline at end of file\n"
        "diff --git a/link/{name} b/link/{name}\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/link/{name}\n@@ -0,0 +1 @@\n+escaped\n",
        "beyond a symbolic link",
    ),
}


@pytest.mark.parametrize("kind", list(PATCHES))
def test_a_hostile_red_light_patch_is_named_and_writes_nothing_outside(
    mini_course: Path, tmp_path: Path, kind: str
) -> None:
    """git apply runs in the throw-away copy and refuses what would leave it; the check names the patch."""
    name = f"escaped-{secrets.token_hex(4)}.txt"
    outside = tmp_path / "outside"
    outside.mkdir()
    text, says = PATCHES[kind]
    patch = mini_course / CHAPTER / "redlight/minus.patch"
    patch.write_text(text.format(name=name, outside=outside))
    before = tree_hash(mini_course / "checkpoints")
    result = mini(mini_course, "checkpoint", "1")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"{patch}: the red-light patch does not apply to target" in result.stdout
    assert says in result.stdout
    assert list(outside.iterdir()) == []
    assert not list(Path("/tmp").glob(name)) and not list(tmp_path.rglob(name))
    assert tree_hash(mini_course / "checkpoints") == before
