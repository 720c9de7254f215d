"""A Ctrl-C is recognised however Python hands it over (in-process, no CLI started).

CI once saw a Ctrl-C land while `packaging` defined a class: Python 3.11
turned the KeyboardInterrupt raised in `__set_name__` into a RuntimeError,
and `course` printed a traceback instead of its one line.
"""

from __future__ import annotations

import sys

import pytest

from course.errors import CourseError, caused_by_interrupt


class _Interrupting:
    def __set_name__(self, owner: type, name: str) -> None:
        raise KeyboardInterrupt


def _wrapped_by_set_name() -> BaseException:
    try:

        class Victim:  # noqa: F841 - defining it is the point
            attribute = _Interrupting()

    except BaseException as error:  # noqa: BLE001 - the error itself is under test
        return error
    raise AssertionError("defining the class did not fail")


def test_an_interrupt_wrapped_by_class_creation_is_an_interrupt() -> None:
    error = _wrapped_by_set_name()
    if sys.version_info < (3, 12):  # 3.12 stopped wrapping; 3.11 is what CI met
        assert isinstance(error, RuntimeError)
    assert caused_by_interrupt(error)


def test_an_interrupt_inside_an_exception_group_is_an_interrupt() -> None:
    group = BaseExceptionGroup("tasks", [ValueError("other"), KeyboardInterrupt()])
    assert caused_by_interrupt(group)


@pytest.mark.parametrize(
    "error",
    [ValueError("x"), CourseError("no such chapter"), BaseExceptionGroup("tasks", [OSError("disk")])],
    ids=["value-error", "course-error", "group-without-interrupt"],
)
def test_other_errors_are_not_interrupts(error: BaseException) -> None:
    assert not caused_by_interrupt(error)


def test_an_error_that_refers_to_itself_ends_the_search() -> None:
    error = RuntimeError("loop")
    error.__context__ = error
    assert not caused_by_interrupt(error)
