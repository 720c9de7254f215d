"""Structural types and generic containers.

Chapter 03's Model and ModelStream are Protocols, chapter 06's Execute is
one too; chapter 02's EventStream[T, R] is a generic class like Box[T].
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Generic, Protocol, TypeVar, runtime_checkable

T = TypeVar("T")
U = TypeVar("U")


class Speaker:
    """Anything with a `name` and a `say` method fits, with no common base class.

    Lab 1.5 makes this a run-time checkable Protocol; until then nothing fits.
    """


def introduce(speakers: Iterable[Speaker]) -> list[str]:
    """Each speaker introduces itself in its own way."""
    raise NotImplementedError("lab 1.5")


class Box(Generic[T]):
    """One value of any type; Box[int] and Box[str] are the same class at run time."""

    def __init__(self, value: T) -> None:
        raise NotImplementedError("lab 1.5")

    def get(self) -> T:
        """The value, with the type it went in with."""
        raise NotImplementedError("lab 1.5")

    def map(self, change: Callable[[T], U]) -> Box[U]:
        """A new box holding change(value); the type may change with it."""
        raise NotImplementedError("lab 1.5")
