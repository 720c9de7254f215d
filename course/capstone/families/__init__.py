"""The capstone's families, one module each, in the order of the chapters they need.

To add a family:

1. write `families/NAME.py` with a module-level `FAMILY = Family(...)` (course.capstone.records):
   its name, the chapter it needs, the invariant in one sentence, its codes (`E-...` and what
   each means), `cases(draw)` (pure: the same seed draws equal cases; everything random comes
   from the Draw) and `examine(cases, bench)` (one tuple of failure codes per case; `each_case`
   runs a per-case check side by side), running learner commands only through `bench.run`;
2. list it in FAMILIES below (chapter order);
3. add its codes to docs/course-capstone.schema.json (the `family` name and `code` enums) and
   a row to docs/classroom.md's table, and name it in the README's capstone section;
4. give it a seeded defect in tests/test_capstone.py (DEFECTS) that one of its codes catches.

The tests check steps 2-4 against each other: a family without a defect, a code the schema or
the Classroom page does not name, fails there.
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
    router.FAMILY,
    durable.FAMILY,
)
