"""Frozen attrs records: values that are checked once and never change.

Chapter 03's messages and content blocks are records like Note; chapter 05
builds a message step by step with attrs.evolve instead of mutating it.
"""

from __future__ import annotations

import attrs
from attrs import field, frozen
from attrs.validators import deep_iterable, in_, instance_of

ROLES = ("user", "assistant")


def not_blank(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    """A validator: attrs calls it with the record, the field and the value."""
    if not value.strip():
        raise ValueError(f"{attribute.name} must not be blank")


@frozen
class Note:
    """One thing someone said: a role, a text that is not blank, and tags."""

    role: str = field(validator=in_(ROLES))
    text: str = field(validator=[instance_of(str), not_blank])
    tags: tuple[str, ...] = field(default=(), validator=deep_iterable(instance_of(str), instance_of(tuple)))


def tagged(note: Note, tag: str) -> Note:
    """A copy of the note with one more tag; the note itself cannot change."""
    return attrs.evolve(note, tags=(*note.tags, tag))
