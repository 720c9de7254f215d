"""The chapter catalog: `checkpoints/NN-slug/chapter.toml` read into checked records.

chapter.toml is the one source of truth for a chapter; everything the CLI
prints, checks or generates comes from these records. Loading fails loudly
with a message that names the chapter, the key and the file, because an
author who gets a traceback instead has to guess which of five files is wrong.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any

import attrs
from attrs import field, frozen

from course.errors import ChapterError, UsageError

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

    kind: str = field(validator=attrs.validators.in_(RED_LIGHT_KINDS))
    fragments: tuple[str, ...] = field(converter=_tuple_of_str)
    explanation: str

    @fragments.validator
    def _check_fragments(self, attribute: attrs.Attribute, value: tuple[str, ...]) -> None:
        if not value:
            raise ValueError("needs at least one fragment: a red light must be recognisable")


@frozen
class Lab:
    """One step of a chapter: a pytest selection that must pass with a known count."""

    id: str
    title: str
    expected_passed: int
    select: str | None = None
    nodes: tuple[str, ...] = field(default=(), converter=_tuple_of_str)
    goal: str = ""
    hints: tuple[str, ...] = field(default=(), converter=_tuple_of_str)

    def selects(self, node_id: str) -> bool:
        """Whether the test `node_id` belongs to this lab (judged from its name alone).

        For `select`, as pytest's -k does for these plain words: a word matches
        when it is part of the test's name, ignoring case.
        """
        if self.select is not None:
            name = node_id.rpartition("::")[2].lower()
            return any(word.lower() in name for word in self.select.split(" or "))
        return any(node_id == node or node_id.startswith((node + "::", node + "[")) for node in self.nodes)

    def pytest_args(self) -> tuple[str, ...]:
        """Arguments that narrow a run of the focused tests to this lab."""
        if self.select is not None:
            return ("-k", self.select)
        return self.nodes


@frozen
class RedLight:
    """A red-light exercise: a patch that breaks target in one documented way."""

    id: str
    title: str
    patch: str
    test: str
    fragment: str
    learn: str


@frozen
class Chapter:
    """Everything the course knows about one chapter."""

    root: Path
    number: int
    slug: str
    title: str
    mode: str = field(validator=attrs.validators.in_(MODES))
    summary: str
    teaching_files: tuple[str, ...]
    focused_tests: tuple[str, ...]
    expected_passed: int
    first_step: str
    first_red_light: FirstRedLight
    labs: tuple[Lab, ...]
    redlights: tuple[RedLight, ...]
    starter_files: tuple[str, ...] = ()
    lesson_files: tuple[str, ...] = ()
    pytest_plugins: tuple[str, ...] = ()
    warm_imports: tuple[str, ...] = ()
    time_limit: float = DEFAULT_TIME_LIMIT
    memory_limit: float = DEFAULT_MEMORY_LIMIT

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
        raise UsageError(f"no chapter {chapter_id!r}. {self.choices()}")

    def choices(self) -> str:
        names = ", ".join(chapter.name for chapter in self.chapters) or "(none)"
        return f"Valid chapters: {names}"

    def earlier(self, chapter: Chapter) -> tuple[Chapter, ...]:
        return tuple(c for c in self.chapters if c.number < chapter.number)

    def previous(self, chapter: Chapter) -> Chapter | None:
        earlier = self.earlier(chapter)
        return earlier[-1] if earlier else None


# Loading -------------------------------------------------------------------

_TOP_KEYS = {
    "number": int,
    "slug": str,
    "title": str,
    "mode": str,
    "summary": str,
    "teaching_files": list,
    "focused_tests": list,
    "expected_passed": int,
    "first_step": str,
    "first_red_light": dict,
    "labs": list,
    "redlights": list,
    "starter_files": list,
    "lesson_files": list,
    "pytest_plugins": list,
    "warm_imports": list,
    "time_limit": (int, float),
    "memory_limit": (int, float),
}
_OPTIONAL_TOP = {"starter_files", "lesson_files", "pytest_plugins", "warm_imports", "time_limit", "memory_limit"}
_RED_LIGHT_KEYS = {"kind": str, "fragments": list, "explanation": str}
_LAB_KEYS = {
    "id": str,
    "title": str,
    "expected_passed": int,
    "select": str,
    "nodes": list,
    "goal": str,
    "hints": list,
}
_OPTIONAL_LAB = {"select", "nodes", "goal", "hints"}
_REDLIGHT_KEYS = {
    "id": str,
    "title": str,
    "patch": str,
    "test": str,
    "fragment": str,
    "learn": str,
}


class _Reader:
    """Checks one table of a chapter.toml and names the place of every problem."""

    def __init__(self, path: Path, where: str) -> None:
        self.path = path
        self.where = where

    def fail(self, key: str, problem: str) -> ChapterError:
        place = f"{self.where}.{key}" if self.where else key
        return ChapterError(f"{self.path}: key '{place}': {problem}")

    def table(
        self, data: dict[str, Any], schema: dict[str, Any], optional: set[str]
    ) -> dict[str, Any]:
        for key in data:
            if key not in schema:
                known = ", ".join(sorted(schema))
                raise self.fail(key, f"unknown key (known keys: {known})")
        for key, kind in schema.items():
            if key not in data:
                if key in optional:
                    continue
                raise self.fail(key, "missing")
            value = data[key]
            if isinstance(value, bool) or not isinstance(value, kind):
                raise self.fail(key, f"expected {_kind_name(kind)}, got {value!r}")
            if isinstance(value, list) and not all(isinstance(v, (str, dict)) for v in value):
                raise self.fail(key, f"expected a list of strings or tables, got {value!r}")
        return data


def _kind_name(kind: Any) -> str:
    names = {int: "an integer", str: "a string", list: "a list", dict: "a table"}
    if isinstance(kind, tuple):
        return "a number"
    return names.get(kind, str(kind))


def load_chapter(root: Path) -> Chapter:
    """Read and check one chapter directory."""
    path = root / CHAPTER_FILE
    match = DIR_PATTERN.match(root.name)
    if match is None:
        raise ChapterError(f"{root}: a chapter directory is named NN-slug, e.g. 03-message-ir")
    if not path.is_file():
        raise ChapterError(f"{path}: missing: every chapter directory needs a chapter.toml")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ChapterError(f"{path}: not valid TOML: {error}") from None
    top = _Reader(path, "")
    top.table(data, _TOP_KEYS, _OPTIONAL_TOP)
    for key in ("teaching_files", "focused_tests", "starter_files", "lesson_files", "pytest_plugins", "warm_imports"):
        if not all(isinstance(v, str) for v in data.get(key, [])):
            raise top.fail(key, "expected a list of strings")
    if data["number"] != int(match.group(1)):
        raise top.fail("number", f"is {data['number']} but the directory says {match.group(1)}")
    if data["slug"] != match.group(2):
        raise top.fail("slug", f"is {data['slug']!r} but the directory says {match.group(2)!r}")
    if data["mode"] not in MODES:
        raise top.fail("mode", f"must be one of {', '.join(MODES)}, got {data['mode']!r}")
    if not data["focused_tests"]:
        raise top.fail("focused_tests", "names no test file")
    for key in ("teaching_files", "focused_tests", "starter_files", "lesson_files"):
        for name in data.get(key, []):
            _check_relative(top, key, name)
    if data["expected_passed"] < 0:
        raise top.fail("expected_passed", f"must be 0 or more, got {data['expected_passed']}")
    if "time_limit" in data and not (0 < data["time_limit"] <= MAX_TIME_LIMIT):  # also false for nan
        raise top.fail("time_limit", f"must be a number of seconds above 0 and at most {MAX_TIME_LIMIT:g}, "
                       f"got {data['time_limit']!r}")
    if "memory_limit" in data and not (0 < data["memory_limit"] <= MAX_MEMORY_LIMIT):
        raise top.fail("memory_limit", f"must be a number of GiB above 0 and at most {MAX_MEMORY_LIMIT:g}, "
                       f"got {data['memory_limit']!r}")
    red = _Reader(path, "first_red_light").table(data["first_red_light"], _RED_LIGHT_KEYS, set())
    if red["kind"] not in RED_LIGHT_KINDS:
        raise _Reader(path, "first_red_light").fail(
            "kind", f"must be one of {', '.join(RED_LIGHT_KINDS)}, got {red['kind']!r}"
        )
    if not red["fragments"]:
        raise _Reader(path, "first_red_light").fail("fragments", "needs at least one fragment")
    labs = tuple(_load_lab(path, i, raw, data["number"], data["focused_tests"]) for i, raw in enumerate(data["labs"]))
    redlights = tuple(
        _load_redlight(path, i, raw, data["focused_tests"]) for i, raw in enumerate(data["redlights"])
    )
    _unique(path, "labs", [lab.id for lab in labs])
    _unique(path, "redlights", [r.id for r in redlights])
    chapter = Chapter(
        root=root,
        number=data["number"],
        slug=data["slug"],
        title=data["title"],
        mode=data["mode"],
        summary=data["summary"],
        teaching_files=tuple(data["teaching_files"]),
        focused_tests=tuple(data["focused_tests"]),
        expected_passed=data["expected_passed"],
        first_step=data["first_step"],
        first_red_light=FirstRedLight(**red),
        labs=labs,
        redlights=redlights,
        starter_files=tuple(data.get("starter_files", ())),
        lesson_files=tuple(data.get("lesson_files", ())),
        pytest_plugins=tuple(data.get("pytest_plugins", ())),
        warm_imports=tuple(data.get("warm_imports", ())),
        time_limit=float(data.get("time_limit", DEFAULT_TIME_LIMIT)),
        memory_limit=float(data.get("memory_limit", DEFAULT_MEMORY_LIMIT)),
    )
    _check_files(path, chapter)
    return chapter


def _load_lab(path: Path, index: int, raw: Any, number: int, focused: list[str]) -> Lab:
    reader = _Reader(path, f"labs[{index}]")
    if not isinstance(raw, dict):
        raise reader.fail("", "each lab is a [[labs]] table")
    reader.table(raw, _LAB_KEYS, _OPTIONAL_LAB)
    if not re.fullmatch(rf"{number}\.\d+", raw["id"]):
        raise reader.fail("id", f"must look like '{number}.1' (chapter.lab), got {raw['id']!r}")
    if ("select" in raw) == ("nodes" in raw):
        raise reader.fail("select", "a lab needs exactly one of 'select' (a -k expression) or 'nodes'")
    if "nodes" in raw and not raw["nodes"]:
        raise reader.fail("nodes", "is empty: a lab must select at least one test")
    if "select" in raw and not SELECT_PATTERN.match(raw["select"]):
        raise reader.fail("select", f"must be parts of test names joined by ' or ', like "
                          f"'text_projection or terminal', got {raw['select']!r}")
    if raw["expected_passed"] < 0:
        raise reader.fail("expected_passed", f"must be 0 or more, got {raw['expected_passed']}")
    for node in raw.get("nodes", []):
        if not isinstance(node, str) or node.split("::")[0] not in focused:
            raise reader.fail("nodes", f"{node!r} is not a test of a focused test file ({', '.join(focused)})")
    return Lab(**raw)


def _check_relative(reader: _Reader, key: str, name: str) -> None:
    """A file named in chapter.toml stays inside its snapshot (or chapter) and reads as a file.

    These names become paths the tools read and write (`course reset` restores
    teaching files into a learner's dir, `course diff` shows them) and
    arguments of pytest runs: an absolute path or `..` would reach outside,
    and a leading `-` would be read as an option.
    """
    pure = PurePosixPath(name)
    if (
        not name
        or pure.is_absolute()
        or ".." in pure.parts
        or "\\" in name
        or name.startswith("-")
        or pure.as_posix() != name
    ):
        raise reader.fail(
            key,
            f"{name!r} must be a plain relative path that stays inside (not absolute, no '..', "
            "no leading '-'), like 'tiny_pi/messages.py'",
        )


def _load_redlight(path: Path, index: int, raw: Any, focused: list[str]) -> RedLight:
    reader = _Reader(path, f"redlights[{index}]")
    if not isinstance(raw, dict):
        raise reader.fail("", "each red-light exercise is a [[redlights]] table")
    reader.table(raw, _REDLIGHT_KEYS, set())
    _check_relative(reader, "patch", raw["patch"])
    test_file = raw["test"].split("::")[0]
    if test_file not in focused:
        raise reader.fail("test", f"{raw['test']!r} is not in a focused test file ({', '.join(focused)})")
    return RedLight(**raw)


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
    ]
    for key, snapshot, names in checks:
        for name in names:
            if not (snapshot / name).is_file():
                raise ChapterError(f"{path}: key '{key}': {snapshot.name}/{name} does not exist")
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
    override = os.environ.get("COURSE_ROOT")
    if override:
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
