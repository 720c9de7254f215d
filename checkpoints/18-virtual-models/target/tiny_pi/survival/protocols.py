"""Structural types and generic containers.

Chapter 03's Model and ModelStream are Protocols, chapter 06's Execute is
one too; chapter 02's EventStream[T, R] is a generic class like Box[T].
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Generic, Protocol, TypeVar, runtime_checkable

T = TypeVar("T")
U = TypeVar("U")


@runtime_checkable
class Speaker(Protocol):
    """Anything with a `name` and a `say` method fits, with no common base class."""

    name: str

    def say(self, text: str) -> str:
        """What this speaker makes of a text."""
        ...


def introduce(speakers: Iterable[Speaker]) -> list[str]:
    """Each speaker introduces itself in its own way."""
    return [speaker.say(f"I am {speaker.name}") for speaker in speakers]


class Box(Generic[T]):
    """One value of any type; Box[int] and Box[str] are the same class at run time."""

    def __init__(self, value: T) -> None:
        self._value = value

    def get(self) -> T:
        """The value, with the type it went in with."""
        return self._value

    def map(self, change: Callable[[T], U]) -> Box[U]:
        """A new box holding change(value); the type may change with it."""
        return Box(change(self._value))
