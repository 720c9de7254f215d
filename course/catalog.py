"""The chapter catalog: `checkpoints/NN-slug/chapter.toml` read into checked records.

chapter.toml is the one source of truth for a chapter; everything the CLI
prints, checks or generates comes from these records. Loading fails loudly
with a message that names the chapter, the key and the file, because an
author who gets a traceback instead has to guess which of five files is wrong.

Each key is declared once, as a field of the record it fills (`key(...)` of
course.schema): type, default, doc line and single-value checks. The loader
below adds only the checks that relate keys to each other and to the disk.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from pathlib import Path
from typing import Any

from attrs import frozen

from course.errors import ChapterError, UsageError
from course.parsed_toml import parse_toml
from course.run_env import SettingError, directory_setting
from course.schema import key, read_table

CHAPTER_FILE = "chapter.toml"
DIR_PATTERN = re.compile(r"^(\d{2})-([a-z0-9]+(?:-[a-z0-9]+)*)$")
MODES = ("rebuild", "observe")
RED_LIGHT_KINDS = ("collection-error", "failed")
DEFAULT_TIME_LIMIT = 30.0
MAX_TIME_LIMIT = 3600.0
DEFAULT_MEMORY_LIMIT = 2.0  # GiB of address space per run
MAX_MEMORY_LIMIT = 64.0
# A lab's `select` is the subset of pytest's -k the course itself can judge from
# test names: words (parts of test names) joined by " or ".
SELECT_PATTERN = re.compile(r"^[A-Za-z0-9_]+( or [A-Za-z0-9_]+)*$")


def _tuple_of_str(value: Any) -> tuple[str, ...]:
    return tuple(value)


def chapter_nn(number: int) -> str:
    """The two-digit number every path and command uses: 3 -> "03"."""
    return f"{number:02d}"


def chapter_name(number: int, slug: str) -> str:
    """The directory name of a chapter: NN-slug."""
    return f"{chapter_nn(number)}-{slug}"


@frozen
class FirstRedLight:
    """What the focused tests must show on the parent, and why."""

    kind: str = key("What a run of the focused tests on parent ends in.", choices=RED_LIGHT_KINDS)
    fragments: tuple[str, ...] = key(
        "Texts that must all appear in that run's output.",
        converter=_tuple_of_str,
        nonempty="needs at least one fragment: a red light must be recognisable",
    )
    explanation: str = key("One sentence shown to the learner when the red light appears (in observe mode, "
                           "in the card, after what the practice dir shows first: that learner never runs parent).")


@frozen
class Lab:
    """One step of a chapter: a pytest selection that must pass with a known count."""

    id: str = key("The chapter's number, a dot and the lab's number, like `2.1`.")
    title: str = key("The lab's name in the lesson, the card and `course test --lab`.")
    expected_passed: int = key("Tests of the lab that pass on target.", at_least=0)
    select: str | None = key(
        'Parts of test names joined by " or ", like "queued or waiting" (the course judges them itself). '
        "A lab has exactly one of `select` and `nodes`.",
        default=None,
        pattern=SELECT_PATTERN,
        pattern_hint="parts of test names joined by ' or ', like 'text_projection or terminal'",
    )
    nodes: tuple[str, ...] = key(
        'Node ids of focused tests, like "tests/test_02_event_stream.py::test_x".',
        default=(),
        converter=_tuple_of_str,
    )
    goal: str = key("What passing this lab proves.", default="")
    hints: tuple[str, ...] = key(
        "The hint ladder, one rung per `course hint --next`: where to look, the signature, the idea, a sketch; the last rung holds the full code (see Lesson depth, below).",
        default=(),
        converter=_tuple_of_str,
    )

    def selects(self, node_id: str) -> bool:
        """Whether the test `node_id` belongs to this lab (judged from its name alone).

        For `select`, as pytest's -k does for these plain words: a word matches
        when it is part of the test's name, ignoring case.
        """
        if self.select is not None:
            base = node_id.partition("[")[0]  # a parameter id may hold "::" of its own
            name = (base.rpartition("::")[2] + node_id[len(base):]).lower()
            return any(word in name for word in self.select_words)
        return any(node_id == node or node_id.startswith((node + "::", node + "[")) for node in self.nodes)

    @property
    def select_words(self) -> tuple[str, ...]:
        """The words of `select`, lower-cased (none for a lab of `nodes`)."""
        return tuple(word.lower() for word in self.select.split(" or ")) if self.select is not None else ()

    def pytest_args(self) -> tuple[str, ...]:
        """Arguments that narrow a run of the focused tests to this lab."""
        if self.select is not None:
            return ("-k", self.select)
        return self.nodes


@frozen
class RedLight:
    """A red-light exercise: a break made by hand in the learner's code; its patch proves it on target."""

    id: str = key("The chapter's number, `.R` and the exercise's number, like `2.R1`.")
    title: str = key("The exercise's name in the lesson and the card.")
    patch: str = key(
        "A unified diff against target, relative to the chapter (applied with git apply -p1): the authors' "
        "proof, applied to a copy of target by `course checkpoint`, never to a practice dir.", relative_paths=True
    )
    test: str = key("The node id of the focused test the patch must make fail.")
    fragment: str = key("Text the failure output must show.")
    learn: str = key("What the learner should take away.")
    by_hand: str = key(
        "The break to make by hand, by behaviour and with names the lesson introduced; `course redlight` "
        "prints it and then watches the learner's saves for the failure (without it: the title and the lesson).",
        default="",
    )

    def by_hand_instruction(self) -> str:
        """What to break by hand: the chapter's words, or the lesson's section by its title."""
        if self.by_hand:
            return self.by_hand
        return f"{self.title}, as the lesson's red-light exercise {self.id} says."


@frozen
class Chapter:
    """Everything the course knows about one chapter."""

    root: Path
    number: int = key("The NN of the chapter's directory.")
    slug: str = key("The slug of the chapter's directory.")
    title: str = key("The chapter's title, as the lesson and `course list` show it.")
    mode: str = key(
        "rebuild: practice starts from parent; observe: practice exports target, with parent's starter files (blanks the learner fills in).",
        choices=MODES,
    )
    summary: str = key("One line shown by `course list`.")
    teaching_files: tuple[str, ...] = key(
        "What the learner writes, relative to a snapshot.", relative_paths=True
    )
    focused_tests: tuple[str, ...] = key(
        "The chapter's test files, relative to a snapshot.", relative_paths=True, nonempty="names no test file"
    )
    expected_passed: int = key("Passed tests of the focused file(s) on target.", at_least=0)
    first_step: str = key("What the learner does before looking at the target.")
    first_red_light: FirstRedLight = key("What the focused tests must show on parent, and why.")
    labs: tuple[Lab, ...] = key("The chapter's steps, in order.")
    redlights: tuple[RedLight, ...] = key("Exercises that break target in one documented way each.")
    starter_files: tuple[str, ...] = key(
        "Files parent adds or changes besides the focused tests (stubs the learner fills in).",
        default=(),
        relative_paths=True,
    )
    lesson_files: tuple[str, ...] = key(
        "Files target changes that the learner copies rather than writes.", default=(), relative_paths=True
    )
    left_behind: tuple[str, ...] = key(
        "Files of this chapter (teaching, starter or lesson files, focused tests) that stay with it when it is "
        "done: its target keeps them, no later snapshot holds them (the next parent drops them), and later "
        "chapters run none of the focused tests named here.",
        default=(),
        relative_paths=True,
    )
    pytest_plugins: tuple[str, ...] = key("pytest plugins a run loads with -p (plugin autoload is off).", default=())
    warm_imports: tuple[str, ...] = key(
        'Heavy libraries the tests import (like "hypothesis"): a run host imports them once instead of once per run '
        "(a speed hint only).",
        default=(),
    )
    time_limit: float = key(
        "Seconds per isolated run of the chapter's focused tests; the target's one run of every chapter's "
        "tests gets the sum of their limits.",
        default=DEFAULT_TIME_LIMIT, above=0, at_most=MAX_TIME_LIMIT, unit="seconds"
    )
    memory_limit: float = key(
        "GiB of memory per isolated test run.",
        default=DEFAULT_MEMORY_LIMIT,
        above=0,
        at_most=MAX_MEMORY_LIMIT,
        unit="GiB",
    )

    @property
    def nn(self) -> str:
        return chapter_nn(self.number)

    @property
    def name(self) -> str:
        return chapter_name(self.number, self.slug)

    @property
    def parent(self) -> Path:
        return self.root / "parent"

    @property
    def target(self) -> Path:
        return self.root / "target"

    @property
    def lesson(self) -> Path:
        return self.root / "README.md"

    @property
    def practice_start(self) -> Path:
        """The snapshot a learner's practice dir starts from."""
        return self.target if self.mode == "observe" else self.parent

    @property
    def practice_blanks(self) -> dict[str, Path]:
        """Files a practice dir takes from parent although it starts from target.

        An observe chapter's learner writes only its starter files (chapter 00's
        predictions): target holds them filled in, which proves the chapter,
        and a practice dir must start with parent's blank ones, not the answers.
        """
        if self.mode != "observe":
            return {}
        return {name: self.parent / name for name in self.starter_files}

    def lab(self, lab_id: str) -> Lab:
        for lab in self.labs:
            if lab.id == lab_id:
                return lab
        choices = ", ".join(lab.id for lab in self.labs)
        raise UsageError(f"chapter {self.name} has no lab {lab_id!r}; its labs are: {choices}")


@frozen
class Catalog:
    """All chapters of the course, in order."""

    root: Path
    chapters: tuple[Chapter, ...]

    def resolve(self, chapter_id: str) -> Chapter:
        """Find a chapter by `3`, `03`, `message-ir` or `03-message-ir`."""
        wanted = chapter_id.strip().lower()
        for chapter in self.chapters:
            spellings = {chapter.name, chapter.slug, chapter.nn, str(chapter.number)}
            if wanted in spellings:
                return chapter
        raise UsageError(f"no chapter {chapter_id!r}{self._guess(wanted)}. {self.choices()}")

    def _guess(self, wanted: str) -> str:
        """A lab id typed where a chapter goes, or a near miss of a chapter's name."""
        for chapter in self.chapters:
            if any(lab.id == wanted for lab in chapter.labs):
                return f" ({wanted} is a lab of chapter {chapter.nn}: `--lab {wanted}`)"
        names = {spelling: chapter for chapter in self.chapters for spelling in (chapter.name, chapter.slug)}
        close = difflib.get_close_matches(wanted, list(names), n=1, cutoff=0.75)
        return f" (did you mean {names[close[0]].name}?)" if close else ""

    def choices(self) -> str:
        names = ", ".join(chapter.name for chapter in self.chapters) or "(none)"
        return f"Valid chapters: {names}"

    def earlier(self, chapter: Chapter) -> tuple[Chapter, ...]:
        return tuple(c for c in self.chapters if c.number < chapter.number)

    def left_before(self, chapter: Chapter) -> dict[str, Chapter]:
        """Files that left the lineage before CHAPTER, each with the chapter that left it behind."""
        return {name: c for c in self.earlier(chapter) for name in c.left_behind}

    def previous(self, chapter: Chapter) -> Chapter | None:
        earlier = self.earlier(chapter)
        return earlier[-1] if earlier else None

    def following(self, chapter: Chapter) -> Chapter | None:
        """The chapter after this one, the one a learner goes on to (None after the last)."""
        later = [c for c in self.chapters if c.number > chapter.number]
        return later[0] if later else None


# Loading -------------------------------------------------------------------
# The keys, their types, defaults and single-value checks are the records' own
# (course.schema); what follows checks what relates keys to each other, to the
# chapter's directory and to the files on disk.


class _Reader:
    """Checks one table of a chapter.toml and names the place of every problem."""

    def __init__(self, path: Path, where: str) -> None:
        self.path = path
        self.where = where

    def fail(self, key: str, problem: str) -> ChapterError:
        place = f"{self.where}.{key}" if self.where and key else self.where or key
        return ChapterError(f"{self.path}: key '{place}': {problem}")

    def table(self, data: Any, record: type, shape: str) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise self.fail("", f"expected {shape}, got {data!r}")
        return read_table(data, record, self.fail)


def load_chapter(root: Path) -> Chapter:
    """Read and check one chapter directory."""
    path = root / CHAPTER_FILE
    match = DIR_PATTERN.match(root.name)
    if match is None:
        raise ChapterError(f"{root}: a chapter directory is named NN-slug, e.g. 03-message-ir")
    if not path.is_file():
        raise ChapterError(f"{path}: missing: every chapter directory needs a chapter.toml")
    try:
        data = parse_toml(path.read_text(encoding="utf-8"), path)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ChapterError(f"{path}: not valid TOML: {error}") from None
    top = _Reader(path, "")
    values = top.table(data, Chapter, "a table")
    if values["number"] != int(match.group(1)):
        raise top.fail("number", f"is {values['number']} but the directory says {match.group(1)}")
    if values["slug"] != match.group(2):
        raise top.fail("slug", f"is {values['slug']!r} but the directory says {match.group(2)!r}")
    red = _Reader(path, "first_red_light").table(values["first_red_light"], FirstRedLight, "a table")
    focused = values["focused_tests"]
    labs = tuple(_load_lab(path, i, raw, values["number"], focused) for i, raw in enumerate(values["labs"]))
    redlights = tuple(_load_redlight(path, i, raw, focused) for i, raw in enumerate(values["redlights"]))
    _unique(path, "labs", [lab.id for lab in labs])
    _unique(path, "redlights", [r.id for r in redlights])
    chapter = Chapter(
        root=root, **{**values, "first_red_light": FirstRedLight(**red), "labs": labs, "redlights": redlights}
    )
    _check_files(path, chapter)
    return chapter


def _load_lab(path: Path, index: int, raw: Any, number: int, focused: tuple[str, ...]) -> Lab:
    reader = _Reader(path, f"labs[{index}]")
    values = reader.table(raw, Lab, "a [[labs]] table")
    if not re.fullmatch(rf"{number}\.\d+", values["id"]):
        raise reader.fail("id", f"must look like '{number}.1' (chapter.lab), got {values['id']!r}")
    if ("select" in values) == ("nodes" in values):
        raise reader.fail("select", "a lab needs exactly one of 'select' (a -k expression) or 'nodes'")
    if "nodes" in values and not values["nodes"]:
        raise reader.fail("nodes", "is empty: a lab must select at least one test")
    for node in values.get("nodes", ()):
        if node.split("::")[0] not in focused:
            raise reader.fail("nodes", f"{node!r} is not a test of a focused test file ({', '.join(focused)})")
    return Lab(**values)


def _load_redlight(path: Path, index: int, raw: Any, focused: tuple[str, ...]) -> RedLight:
    reader = _Reader(path, f"redlights[{index}]")
    values = reader.table(raw, RedLight, "a [[redlights]] table")
    test_file = values["test"].split("::")[0]
    if test_file not in focused:
        raise reader.fail("test", f"{values['test']!r} is not in a focused test file ({', '.join(focused)})")
    return RedLight(**values)


def _unique(path: Path, key: str, ids: list[str]) -> None:
    seen = set()
    for item in ids:
        if item in seen:
            raise ChapterError(f"{path}: key '{key}': id {item!r} appears twice")
        seen.add(item)


def _check_files(path: Path, chapter: Chapter) -> None:
    """Every file chapter.toml names must exist where it says."""
    for snapshot in (chapter.parent, chapter.target):
        if not snapshot.is_dir():
            raise ChapterError(f"{path}: snapshot directory {snapshot.name}/ is missing")
        if not (snapshot / "pytest.ini").is_file():
            raise ChapterError(f"{path}: {snapshot.name}/pytest.ini is missing: a snapshot needs its own config")
    checks = [
        ("teaching_files", chapter.target, chapter.teaching_files),
        ("focused_tests", chapter.target, chapter.focused_tests),
        ("focused_tests", chapter.parent, chapter.focused_tests),
        ("starter_files", chapter.parent, chapter.starter_files),
        ("lesson_files", chapter.target, chapter.lesson_files),
        ("left_behind", chapter.target, chapter.left_behind),
    ]
    for key, snapshot, names in checks:
        for name in names:
            if not (snapshot / name).is_file():
                raise ChapterError(f"{path}: key '{key}': {snapshot.name}/{name} does not exist")
    owned = {*chapter.teaching_files, *chapter.starter_files, *chapter.lesson_files, *chapter.focused_tests}
    for name in chapter.left_behind:
        if name not in owned:
            raise ChapterError(
                f"{path}: key 'left_behind': {name} is not the chapter's own (teaching_files, starter_files, "
                "lesson_files or focused_tests): a chapter leaves behind only what it brought"
            )
    leaving = [name for name in chapter.focused_tests if name in chapter.left_behind]
    if leaving and len(leaving) != len(chapter.focused_tests):
        raise ChapterError(
            f"{path}: key 'left_behind': names some focused tests but not all ({', '.join(leaving)}): "
            "later chapters run all of a chapter's tests or none"
        )
    for index, redlight in enumerate(chapter.redlights):
        if not (chapter.root / redlight.patch).is_file():
            raise ChapterError(
                f"{path}: key 'redlights[{index}].patch': {redlight.patch} does not exist"
            )
    if not chapter.lesson.is_file():
        raise ChapterError(f"{path}: the lesson README.md is missing")
    try:
        chapter.lesson.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise ChapterError(
            f"{chapter.lesson}: the lesson is not UTF-8 text (byte {error.object[error.start]:#04x} "
            f"at offset {error.start})"
        ) from None


def load_catalog(root: Path) -> Catalog:
    """Read every chapter under `root/checkpoints`, in number order."""
    checkpoints = root / "checkpoints"
    if not checkpoints.is_dir():
        raise ChapterError(f"{checkpoints}: no checkpoints/ directory: is this the course repository?")
    chapters = []
    for entry in sorted(checkpoints.iterdir()):
        if entry.is_dir() and DIR_PATTERN.match(entry.name):
            chapters.append(load_chapter(entry))
    numbers = [chapter.number for chapter in chapters]
    if len(numbers) != len(set(numbers)):
        raise ChapterError(f"{checkpoints}: two chapter directories share a number: {numbers}")
    return Catalog(root=root, chapters=tuple(chapters))


def is_checkout(root: Path) -> bool:
    """A clone of the course repository (checkpoints/ beside the course package), not an installed copy."""
    return (root / "checkpoints").is_dir() and (root / "course").is_dir()


def is_packaged(root: Path) -> bool:
    """Whether `root` is the chapters shipped inside an installed package (no checkout to write in)."""
    return root.resolve() == Path(__file__).resolve().parent


def find_root(start: Path | None = None) -> Path:
    """The course the user means: COURSE_ROOT, else the checkout they are in, else this package's own.

    An editable install reads the checkout it was installed from. A regular
    install (`pip install .`, pipx, a wheel) carries the chapters inside the
    package as package data (course/checkpoints), so it works from any directory.
    """
    override = directory_setting(os.environ, "COURSE_ROOT")
    if override is not None:
        if not Path(override, "checkpoints").is_dir():
            raise SettingError(f"COURSE_ROOT={override!r} is not a course: it has no checkpoints/ directory")
        return Path(override).resolve()
    try:
        here = (start or Path.cwd()).resolve()
    except OSError:
        here = None
    for candidate in (here, *here.parents) if here is not None else ():
        if is_checkout(candidate):
            return candidate
    package = Path(__file__).resolve().parent
    if is_checkout(package.parent):
        return package.parent
    if (package / "checkpoints").is_dir():
        return package
    return package.parent
