"""What a check found, as a record: the one shape every command prints and stores.

Kept apart from course/checks.py, which runs the checks: the commands that
only read results (status, list, hint) print these records without loading
the run machinery and trio.
"""

from __future__ import annotations

import attrs
from attrs import field, frozen

from course.results import RunResult
from course.verdict_copy import Replaced

# What a check is about; a lab check also names its lab in `Check.lab`.
KINDS = (
    "first-red-light", "first-red-light-labs", "lab", "focused", "earlier", "redlight", "lineage", "card", "readme",
    "copy-share", "messages", "hint-rungs", "lesson-length", "note", "test-labels",
    "predictions",
)


@frozen
class Check:
    """One line of a checklist: what was promised, what happened.

    `kind` and `lab` are data, so nothing has to parse them back out of `name`,
    which is for people.
    """

    chapter: str
    kind: str = field(validator=attrs.validators.in_(KINDS))
    name: str
    ok: bool
    expected: str
    actual: str
    detail: str = ""
    duration: float = 0.0
    run: RunResult | None = field(default=None, eq=False, repr=False)
    lab: str | None = None
    replaced: tuple[Replaced, ...] = ()  # files of the learner's the verdict did not use as they are

    def __attrs_post_init__(self) -> None:
        if (self.kind == "lab") != (self.lab is not None):
            raise ValueError(f"a check of kind {self.kind!r} {'needs' if self.kind == 'lab' else 'has no'} lab id")

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {
            "chapter": self.chapter,
            "kind": self.kind,
            "lab": self.lab,
            "name": self.name,
            "ok": self.ok,
            "expected": self.expected,
            "actual": self.actual,
            "duration": round(self.duration, 3),
        }
        if self.detail:
            data["detail"] = self.detail
        if self.replaced:
            data["replaced"] = [item.to_json() for item in self.replaced]
        if self.run is not None:
            data["run"] = self.run.to_json()
        return data


@frozen
class ChapterTime:
    """How long a chapter's story took in `verify`, or that its stored verdict was reused."""

    chapter: str
    seconds: float
    cached: bool
