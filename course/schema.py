"""chapter.toml's schema, declared once, on the records the keys fill.

A key of chapter.toml is a field of a record in course.catalog made with
`key(...)`: its name, its type (the field's annotation), its default and the
line of documentation an author reads are all in that one declaration, and
so is every check of its value alone. Everything else is derived from it:

- the loader's checks (`read_table`: unknown and missing keys, types, values),
- the attrs validators of the records (the same checks, for records made in code),
- the key tables of checkpoints/README.md (`markdown_tables`, written by `course dev cards`),
- the chapter.toml that `course dev scaffold` writes (`toml_document`).

Adding a key is one edit: a field in the record. Checks that relate two
keys, or a key and the files on disk, stay in the loader.
"""

from __future__ import annotations

import functools
import json
import math
import re
import typing
from pathlib import PurePosixPath
from typing import Any, Callable, Mapping

import attrs
from attrs import frozen

_METADATA = "course.schema"


@frozen
class Key:
    """What the schema says about one key besides its name, type and default."""

    doc: str
    choices: tuple[str, ...] = ()
    above: float | None = None
    at_most: float | None = None
    unit: str = ""
    at_least: int | None = None
    nonempty: str = ""
    pattern: re.Pattern[str] | None = None
    pattern_hint: str = ""
    relative_paths: bool = False

    def problem(self, value: Any) -> str | None:
        """What is wrong with `value` (of the right type), or None."""
        if self.choices and value not in self.choices:
            return f"must be one of {', '.join(self.choices)}, got {value!r}"
        if self.above is not None or self.at_most is not None:
            low = -math.inf if self.above is None else self.above
            high = math.inf if self.at_most is None else self.at_most
            if not (low < value <= high):  # also true for nan
                unit = f" of {self.unit}" if self.unit else ""
                return f"must be a number{unit} above {low:g} and at most {high:g}, got {value!r}"
        if self.at_least is not None and value < self.at_least:
            return f"must be {self.at_least} or more, got {value!r}"
        if self.nonempty and not value:
            return self.nonempty
        if self.pattern is not None and not self.pattern.match(value):
            return f"must be {self.pattern_hint}, got {value!r}"
        if self.relative_paths:
            for name in (value,) if isinstance(value, str) else value:
                if not plain_relative(name):
                    return (
                        f"{name!r} must be a plain relative path that stays inside (not absolute, no '..', "
                        "no leading '-'), like 'tiny_pi/messages.py'"
                    )
        return None


def plain_relative(name: str) -> bool:
    """A file name in chapter.toml stays inside its snapshot (or chapter) and reads as a file.

    These names become paths the tools read and write (`course reset`
    restores teaching files into a learner's dir) and arguments of pytest
    runs: an absolute path or `..` would reach outside, and a leading `-`
    would be read as an option.
    """
    pure = PurePosixPath(name)
    return bool(name) and not (
        pure.is_absolute() or ".." in pure.parts or "\\" in name or name.startswith("-") or pure.as_posix() != name
    )


def key(doc: str, *, default: Any = attrs.NOTHING, converter: Callable[[Any], Any] | None = None, **checks: Any) -> Any:
    """A record field that is a chapter.toml key: `doc` is what the README's key table says of it."""
    spec = Key(doc, **checks)

    def validate(instance: Any, attribute: attrs.Attribute, value: Any) -> None:
        if value is None and attribute.default is None:
            return
        problem = spec.problem(value)
        if problem is not None:
            raise ValueError(f"{attribute.name}: {problem}")

    return attrs.field(default=default, converter=converter, validator=validate, metadata={_METADATA: spec})


# Kinds of value a key holds, as TOML has them.
INTEGER = "integer"
NUMBER = "number"
STRING = "string"
STRINGS = "list of strings"
TABLE = "table"
TABLES = "list of tables"


@frozen
class KeyInfo:
    """One key of a record, resolved: its kind from the annotation, its default from the field."""

    name: str
    kind: str
    default: Any
    spec: Key
    record: type | None  # the record of a table, or of each table in a list

    @property
    def required(self) -> bool:
        return self.default is attrs.NOTHING


def _kind(annotation: Any) -> tuple[str, type | None]:
    if annotation is int:
        return INTEGER, None
    if annotation is float:
        return NUMBER, None
    if annotation is str or annotation == (str | None):
        return STRING, None
    if attrs.has(annotation):
        return TABLE, annotation
    if typing.get_origin(annotation) is tuple:
        item = typing.get_args(annotation)[0]
        if item is str:
            return STRINGS, None
        if attrs.has(item):
            return TABLES, item
    raise TypeError(f"no chapter.toml kind for the annotation {annotation!r}")


@functools.cache
def keys(record: type) -> tuple[KeyInfo, ...]:
    """The chapter.toml keys of `record`, in the order it declares them."""
    hints = typing.get_type_hints(record)
    found = []
    for field in attrs.fields(record):
        spec = field.metadata.get(_METADATA)
        if spec is not None:
            kind, nested = _kind(hints[field.name])
            found.append(KeyInfo(field.name, kind, field.default, spec, nested))
    return tuple(found)


# Reading ---------------------------------------------------------------------

_KIND_PHRASE = {
    INTEGER: "an integer",
    NUMBER: "a number",
    STRING: "a string",
    STRINGS: "a list of strings",
    TABLE: "a table",
    TABLES: "a list of tables",
}


def _has_kind(value: Any, kind: str) -> bool:
    if isinstance(value, bool):
        return False
    if kind == INTEGER:
        return isinstance(value, int)
    if kind == NUMBER:
        return isinstance(value, (int, float))
    if kind == STRING:
        return isinstance(value, str)
    if kind == STRINGS:
        return isinstance(value, list) and all(isinstance(item, str) for item in value)
    if kind == TABLE:
        return isinstance(value, dict)
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def read_table(data: Mapping[str, Any], record: type, fail: Callable[[str, str], Exception]) -> dict[str, Any]:
    """Check one table of chapter.toml against `record`'s keys; returns its values, ready for the record.

    Lists of strings become tuples and numbers floats; tables stay as read,
    for the caller to read with their own record. Keys left out keep the
    record's default. `fail(key, problem)` makes the exception raised.
    """
    infos = keys(record)
    known = {info.name for info in infos}
    for name in data:
        if name not in known:
            raise fail(name, f"unknown key (known keys: {', '.join(sorted(known))})")
    values: dict[str, Any] = {}
    for info in infos:
        if info.name not in data:
            if info.required:
                raise fail(info.name, "missing")
            continue
        value = data[info.name]
        if not _has_kind(value, info.kind):
            raise fail(info.name, f"expected {_KIND_PHRASE[info.kind]}, got {value!r}")
        problem = info.spec.problem(value)
        if problem is not None:
            raise fail(info.name, problem)
        if info.kind == STRINGS:
            value = tuple(value)
        elif info.kind == NUMBER:
            value = float(value)
        values[info.name] = value
    return values


# Writing ---------------------------------------------------------------------


def toml_value(value: Any) -> str:
    """`value` as TOML: strings as basic strings (JSON's escapes are valid TOML)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")


def _placeholder(info: KeyInfo) -> Any:
    return {INTEGER: 0, NUMBER: 1, STRING: f"TODO: {info.spec.doc}", STRINGS: []}[info.kind]


def _table_lines(
    record: type, values: Mapping[str, Any], comments: Mapping[str, str], prefix: str
) -> tuple[list[str], list[tuple[KeyInfo, Any]]]:
    lines, tables = [], []
    for info in keys(record):
        if info.kind in (TABLE, TABLES):
            tables.append((info, values.get(info.name)))
            continue
        comment = comments.get(prefix + info.name, "")
        if info.name in values:
            value = values[info.name]
        elif info.required:
            value, comment = _placeholder(info), comment or f"TODO: {info.spec.doc}"
        elif info.default is None:
            continue
        else:
            value = info.default
        line = f"{info.name} = {toml_value(value)}"
        lines.append(f"{line}   # {comment}" if comment else line)
    return lines, tables


def toml_document(record: type, values: Mapping[str, Any], comments: Mapping[str, str] | None = None) -> str:
    """A chapter.toml for `record` with `values`; every other key with its default, or a TODO.

    Optional keys are written with their defaults so an author sees every
    setting there is; a required key without a value gets a placeholder of
    its type and a TODO comment. `comments` maps "key" or "table.key" to a
    comment for that line.
    """
    comments = comments or {}
    lines, tables = _table_lines(record, values, comments, "")
    for info, value in tables:
        entries = [value] if info.kind == TABLE else list(value or [{}])
        header = f"[{info.name}]" if info.kind == TABLE else f"[[{info.name}]]"
        for entry in entries:
            assert info.record is not None
            inner, _ = _table_lines(info.record, entry or {}, comments, info.name + ".")
            lines += ["", header, *inner]
    return "\n".join(lines) + "\n"


def _default_text(info: KeyInfo) -> str:
    if info.required:
        return "required"
    if info.default is None:
        return "optional"
    return f"`{toml_value(info.default)}`"


def _type_text(info: KeyInfo) -> str:
    spec, text = info.spec, info.kind
    if spec.choices:
        text += ": " + " or ".join(f"`{choice}`" for choice in spec.choices)
    if spec.above is not None or spec.at_most is not None:
        bounds = [f"above {spec.above:g}" if spec.above is not None else "", f"at most {spec.at_most:g}" if spec.at_most is not None else ""]
        text += ", " + " and ".join(filter(None, bounds)) + (f" {spec.unit}" if spec.unit else "")
    if spec.at_least is not None:
        text += f", {spec.at_least} or more"
    if spec.nonempty:
        text += ", not empty"
    if spec.relative_paths:
        text += ", relative paths"
    return text


def markdown_tables(record: type, title: str = "Top level") -> str:
    """The README's key tables: one for `record`, then one per table it holds."""
    sections = [(title, record)]
    for info in keys(record):
        if info.record is not None:
            sections.append((f"[{info.name}]" if info.kind == TABLE else f"[[{info.name}]]", info.record))
    parts = []
    for heading, table in sections:
        rows = [f"**{heading}**", "", "| Key | Type | Default | Meaning |", "| --- | --- | --- | --- |"]
        for info in keys(table):
            doc = info.spec.doc.replace("|", "\\|")
            rows.append(f"| `{info.name}` | {_type_text(info)} | {_default_text(info)} | {doc} |")
        parts.append("\n".join(rows))
    return "\n\n".join(parts) + "\n"
