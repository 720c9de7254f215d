"""The capstone's families, one module each, in the order of the chapters they need.

To add a family: write `families/NAME.py` with a module-level `FAMILY`
(course.capstone.records.Family: its name, the chapter it needs, the
invariant in one sentence, its codes, `cases` and `examine`), import it
below and add it to FAMILIES, and give it a seeded defect in
tests/test_capstone.py that its codes catch.
"""

from __future__ import annotations

from course.capstone.families import (
    codemode, compaction, durable, escape, leftovers, mcp, pairing, redaction, router, search, torn,
)
from course.capstone.records import Family

FAMILIES: tuple[Family, ...] = (
    pairing.FAMILY,
    escape.FAMILY,
    leftovers.FAMILY,
    torn.FAMILY,
    compaction.FAMILY,
    redaction.FAMILY,
    search.FAMILY,
    codemode.FAMILY,
    mcp.FAMILY,
    router.FAMILY,  # not written yet: chapter 18
    durable.FAMILY,  # not written yet: chapter 19
)
