"""Durable (chapter 19): killed at a drawn commit, a run resumes with no side effect done twice.

Not written yet: chapter 19 (`--durable run.db`, and the crash hook it
reads from the environment) is being built. Its cases, once written: the
agent killed with SIGKILL at a commit number drawn from the seed, reopened,
and then: no committed entry lost, no unsafe tool run twice (a side effect
the capstone can count), every call paired with one result, the
conversation finished. Until then the family is listed and not examined.
"""

from __future__ import annotations

from course.capstone.records import Family

FAMILY = Family(
    name="durable", chapter=19,
    invariant="an agent killed at any commit resumes with nothing lost and no side effect repeated",
)
