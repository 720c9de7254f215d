"""The lesson-depth checks: copy share, each lab's give-away (code printed or narrated),
unstated message texts, last hint rungs, length.

Each check is shown failing on a crafted chapter (a copy of the mini course),
and passing once the crafted defect is gone.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import mini
from course.catalog import load_catalog
from course.dev.dictation import chapter_depths, file_statements, passages
from course.dev.lessons import (
    copy_share,
    lesson_length,
    messages_in_tests,
    new_code_lines,
    rung_problems,
    unstated_messages,
)

CHAPTER = Path("checkpoints/01-adder")
FULL_CODE = '```python\n# file: tiny_pi/adder.py\ndef add(a, b):\n    """Add."""\n    return a + b\n```\n'


def chapter(root: Path):
    return load_catalog(root).resolve("01")


def append(path: Path, text: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")


def set_last_rung(root: Path, lab: str, rung: str) -> None:
    """Replace the last hint of `lab` in the mini course's chapter.toml with `rung`."""
    toml = root / CHAPTER / "chapter.toml"
    text = toml.read_text(encoding="utf-8")
    start = text.index(f'id = "{lab}"')
    hints = text.index("hints = [", start)
    end = text.index("]\n", hints) + 1
    body = text[hints + len("hints = [") : end - 1]
    rungs = json.loads("[" + body.strip().rstrip(",") + "]")
    rungs[-1] = rung
    toml.write_text(text[:hints] + "hints = " + json.dumps(rungs) + text[end:], encoding="utf-8")


# The copy share --------------------------------------------------------------------------


def test_new_code_lines_leave_out_what_the_parent_had_and_what_is_not_code() -> None:
    parent = 'def old():\n    return 1\n'
    target = '"""Module docstring,\nover two lines."""\n\n# a comment\ndef old():\n    return 1\n\n\ndef new():\n    """Say why."""\n    return 2  # inline comments stay code\n'
    assert new_code_lines(parent, target) == ["def new():", "return 2  # inline comments stay code"]


def test_a_lesson_that_prints_the_code_has_a_full_copy_share(mini_course: Path) -> None:
    assert copy_share(chapter(mini_course)).share == 0.0
    append(mini_course / CHAPTER / "README.md", "\n" + FULL_CODE)
    share = copy_share(chapter(mini_course))
    assert (share.copied, share.total, share.percent) == (2, 2, 100.0), "the docstring is not counted"


def test_one_lesson_line_accounts_for_one_target_line_only(mini_course: Path) -> None:
    adder = mini_course / CHAPTER / "target/tiny_pi/adder.py"
    append(adder, "\n\ndef twice(a):\n    return a + b\n")
    append(mini_course / CHAPTER / "README.md", "\n```python\n# not-run: a sketch\nreturn a + b\n```\n")
    share = copy_share(chapter(mini_course))
    assert (share.copied, share.total) == (1, 4)


# The give-away: a lab's statements the lesson prints or narrates -------------------------

SAVE = '''

def save(path, text):
    """Write a new file whose bytes are on disk before this returns."""
    with open(path, "xb") as file:
        file.write(text.encode("utf-8"))
        file.flush()
        os.fsync(file.fileno())
    directory = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
'''
SAVE_RUNG = "The whole of save.\n# file: tiny_pi/adder.py" + SAVE.rstrip()
# Step by step in prose, as a lesson should not: every call, the mode, the order.
DICTATED = """
To save, open the path with mode `"xb"`, write the text encoded as UTF-8, then call
`file.flush()` and `os.fsync(file.fileno())`. Then open the directory with `os.O_RDONLY`,
fsync it too, and close it.
"""
# The same function as a contract: what it promises, what it refuses, which test shows it.
CONTRACT = """
`save(path, text)` makes a new file and returns only once its bytes and its name are on
the disk: a crash after it returns loses nothing. A path that exists is refused with
`FileExistsError` (`test_save_never_overwrites`).
"""


def with_save(root: Path) -> None:
    """Lab 1.1's code becomes `save`, a function of seven steps, shown whole on its last rung."""
    adder = root / CHAPTER / "target/tiny_pi/adder.py"
    adder.write_text("import os\n" + adder.read_text(encoding="utf-8") + SAVE, encoding="utf-8")
    set_last_rung(root, "1.1", SAVE_RUNG)


def lab_1_1(root: Path):
    return next(depth for depth in chapter_depths(chapter(root)) if depth.lab == "1.1")


def test_a_lesson_that_dictates_a_function_in_prose_gives_it_away(mini_course: Path) -> None:
    with_save(mini_course)
    assert lab_1_1(mini_course).share == 0.0
    append(mini_course / CHAPTER / "README.md", DICTATED)

    depth = lab_1_1(mini_course)

    assert depth.total == 7, "try: names nothing; the docstring is no statement"
    assert depth.over and depth.percent >= 70, depth
    assert depth.worst.startswith("save() (")
    paragraph = len((mini_course / CHAPTER / "README.md").read_text(encoding="utf-8").split("\n")) - 3
    assert {given.how for given in depth.given} == {f"narrated at lesson line {paragraph}"}


def test_a_lesson_that_states_only_the_contract_gives_nothing_away(mini_course: Path) -> None:
    with_save(mini_course)
    append(mini_course / CHAPTER / "README.md", CONTRACT)
    depth = lab_1_1(mini_course)
    assert (depth.total, depth.given) == (7, ())


def test_numbered_steps_are_one_passage_even_with_blank_lines_between_them(mini_course: Path) -> None:
    with_save(mini_course)
    steps = "\n1. Open the path with `\"xb\"`.\n\n2. `file.write` the text, `encode`d.\n\n3. `flush`, then `os.fsync`.\n"
    append(mini_course / CHAPTER / "README.md", steps)
    assert lab_1_1(mini_course).over


def test_one_call_named_in_a_passage_is_a_mention_not_a_dictation(mini_course: Path) -> None:
    with_save(mini_course)
    append(mini_course / CHAPTER / "README.md", "\n`save` ends with `os.fsync` of the directory.\n")
    assert lab_1_1(mini_course).given == ()


def test_a_lesson_that_prints_the_body_gives_it_away_as_printed(mini_course: Path) -> None:
    with_save(mini_course)
    append(mini_course / CHAPTER / "README.md", "\n```python\n# not-run: the body\n" + SAVE + "```\n")
    depth = lab_1_1(mini_course)
    assert depth.percent == 100.0 and {given.how for given in depth.given} == {"printed"}


def test_a_statements_cues_are_what_it_names_not_its_locals_receivers_raises_or_the_interface() -> None:
    source = (
        "import os\n\n"
        "def f(path, data):\n"
        "    total = len(data)\n"
        "    os.fsync(path.fileno())\n"
        "    self.runtime.steer(total)\n"
        "    if total > LIMIT:\n"
        "        raise SizeError(f\"too big: {total}\")\n"
        "    x: list[str] = []\n"
        "    return total\n"
    )
    found = {s.text: (s.cues, s.calls) for s in file_statements("m.py", source, "", set(range(1, 12)), frozenset({"too big: 3"}))}
    assert found == {
        "os.fsync(path.fileno())": ({"fsync", "fileno"}, {"fsync", "fileno"}),
        "self.runtime.steer(total)": ({"steer"}, {"steer"}),
        "if total > LIMIT:": ({"LIMIT"}, set()),
    }, "total = len(data), raise SizeError(...), x: list[str] = [] and return total name nothing"


def test_passages_are_paragraphs_lists_and_sketches_without_their_signatures() -> None:
    text = (
        "One paragraph with `a.b()`\nover two lines.\n\n"
        "- a list\n\n- that goes on\n\n"
        "```python\n# not-run: a sketch\ndef helper(x): ...   # calls `flush`\nbody_line()\n```\n\n"
        "```python\nprint('a runnable example is no passage')\n```\n"
    )
    found = passages(text)
    assert [p.line for p in found] == [1, 4, 9]
    assert found[0].code == "a.b()"
    assert "helper" not in found[2].code and "flush" in found[2].code and "body_line" in found[2].code


def test_depth_dictated_lists_each_narrated_statement_and_where(mini_course: Path) -> None:
    with_save(mini_course)
    append(mini_course / CHAPTER / "README.md", DICTATED)
    result = mini(mini_course, "dev", "depth", "01", "--dictated")
    assert result.returncode == 1, result.stdout
    assert "lab 1.1: given away" in result.stdout and "over the goal" in result.stdout
    assert "tiny_pi/adder.py:" in result.stdout and "save(): narrated at lesson line" in result.stdout
    assert "file.flush()" in result.stdout


# Message texts the tests check ---------------------------------------------------------

CRAFTED_TESTS = '''
import pytest
from tiny_pi.adder import add

TABLE = {"text": (("a", 1), "numbers only, got str"), "none": ((None, 1), "numbers only, got None")}

def test_raises():
    with pytest.raises(TypeError, match=r"add\\(\\) takes numbers"):
        add("a", 1)

def test_contains(error):
    assert "too big" in str(error)

def test_equals(result):
    assert result.error_message == "overflow at 2**63"

def test_echo(make):
    result = make(error_message="socket reset")
    assert result.error_message == "socket reset"

def test_not_a_message(request):
    assert str(request.url) == "http://example.test/"

@pytest.mark.parametrize("case", sorted(TABLE))
def test_table(case):
    arguments, expected = TABLE[case]
    with pytest.raises(TypeError) as raised:
        add(*arguments)
    assert expected in str(raised.value)
'''


def test_every_kind_of_message_check_is_found_and_echoes_are_not() -> None:
    found = {(message.how, message.text) for message in messages_in_tests(CRAFTED_TESTS, "t.py")}
    assert found == {
        ("matches", r"add\(\) takes numbers"),
        ("contains", "too big"),
        ("equals", "overflow at 2**63"),
        ("contains", "numbers only, got str"),
        ("contains", "numbers only, got None"),
    }


def test_unstated_messages_are_listed_until_the_lesson_or_a_hint_states_them(mini_course: Path) -> None:
    (mini_course / CHAPTER / "target/tests/test_01_adder.py").write_text(CRAFTED_TESTS)
    assert {m.text for m in unstated_messages(chapter(mini_course))} == {
        r"add\(\) takes numbers",
        "too big",
        "overflow at 2**63",
        "numbers only, got str",
        "numbers only, got None",
    }
    append(
        mini_course / CHAPTER / "README.md",
        "\nIt raises `add() takes numbers` and, when too\nbig, `overflow at 2**63`: too big.\n"
        "- `numbers only, got str`\n",
    )
    set_last_rung(mini_course, "1.2", "numbers only, got None\n# file: tiny_pi/adder.py\ndef add(a, b):\n    \"\"\"Add.\"\"\"\n    return a + b")
    assert unstated_messages(chapter(mini_course)) == [], "line breaks in the lesson do not hide a text"


# The last hint rung --------------------------------------------------------------------


def test_the_mini_course_rungs_hold_their_code(mini_course: Path) -> None:
    assert rung_problems(chapter(mini_course)) == []


@pytest.mark.parametrize(
    ("rung", "problem"),
    [
        ("def add(a, b):\n    return a + b", "lab 1.1: the last hint rung shows no code"),
        ("# file: tiny_pi/adder.py\ndef add(a, b):\n    return b + a", "does not match tiny_pi/adder.py in the target"),
        ("# file: tiny_pi/adder.py\ndef add(a, b):\n    \"\"\"Add.\"\"\"", "shows only part of add() of tiny_pi/adder.py"),
        ("# file: tiny_pi/gone.py\ndef add(a, b):", "shows tiny_pi/gone.py, which is not in the target"),
    ],
)
def test_a_last_rung_without_the_whole_target_code_is_a_problem(mini_course: Path, rung: str, problem: str) -> None:
    set_last_rung(mini_course, "1.1", rung)
    problems = rung_problems(chapter(mini_course))
    assert len(problems) == 1 and problem in problems[0], problems


def test_a_rung_may_elide_between_whole_functions_in_file_order(mini_course: Path) -> None:
    append(mini_course / CHAPTER / "target/tiny_pi/adder.py", "\n\ndef sub(a, b):\n    return a - b\n")
    both = "# file: tiny_pi/adder.py\ndef add(a, b):\n    \"\"\"Add.\"\"\"\n    return a + b\n# ...\ndef sub(a, b):\n    return a - b"
    set_last_rung(mini_course, "1.1", both)
    assert rung_problems(chapter(mini_course)) == []
    swapped = "# file: tiny_pi/adder.py\ndef sub(a, b):\n    return a - b\n# ...\ndef add(a, b):\n    \"\"\"Add.\"\"\"\n    return a + b"
    set_last_rung(mini_course, "1.1", swapped)
    assert any("from 'def add(a, b):' does not match" in p for p in rung_problems(chapter(mini_course)))


# In course verify ------------------------------------------------------------------------


def test_verify_fails_a_crafted_shallow_lesson_and_names_each_measure(mini_course: Path) -> None:
    lesson = mini_course / CHAPTER / "README.md"
    append(lesson, "\n" + FULL_CODE + "\n" * 900)
    set_last_rung(mini_course, "1.2", "If 1.1 is green, so is this.")
    append(mini_course / CHAPTER / "target/tests/test_01_adder.py", "def test_add_message():\n    error = ValueError(add(1, 2))\n    assert str(error) == 'never stated anywhere'\n")
    assert lesson_length(chapter(mini_course)) > 900

    result = mini(mini_course, "verify", "--json")

    assert result.returncode == 1
    checks = {check["kind"]: check for check in json.loads(result.stdout)["checks"]}
    assert not checks["copy-share"]["ok"] and "copy share 100.0 % (2 of 2 new lines)" in checks["copy-share"]["actual"]
    assert not checks["lesson-length"]["ok"] and "lines" in checks["lesson-length"]["actual"]
    assert not checks["hint-rungs"]["ok"] and "lab 1.2: the last hint rung shows no code" in checks["hint-rungs"]["actual"]
    assert not checks["messages"]["ok"] and "'never stated anywhere'" in checks["messages"]["detail"]


def test_verify_names_the_lab_over_the_give_away_limit_its_share_and_worst_function(mini_course: Path) -> None:
    with_save(mini_course)
    append(mini_course / CHAPTER / "README.md", DICTATED)
    checks = {check["kind"]: check for check in json.loads(mini(mini_course, "verify", "--json").stdout)["checks"]}
    share = checks["copy-share"]
    assert not share["ok"]
    assert share["actual"].startswith("lab 1.1 gives away ") and "(worst save() (" in share["actual"]
    assert "lab 1.2" not in share["actual"], "1.2's last rung shows add, which the lesson does not narrate"
