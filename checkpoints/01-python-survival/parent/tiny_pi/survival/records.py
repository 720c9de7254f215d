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
    raise NotImplementedError("lab 1.4")


class Note:
    """One thing someone said: a role, a text that is not blank, and tags.

    Lab 1.4 makes this a frozen attrs record; the lesson's table gives the fields.
    """

    def __init__(self, role: str, text: str, tags: tuple[str, ...] = ()) -> None:
        raise NotImplementedError("lab 1.4")


def tagged(note: Note, tag: str) -> Note:
    """A copy of the note with one more tag; the note itself cannot change."""
    raise NotImplementedError("lab 1.4")
