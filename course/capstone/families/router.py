"""Router (chapter 18): a virtual model's choice survives a reopen, and a failing model falls back.

Not written yet: chapter 18 (`--models models.toml --model auto`) is being
built. Its cases, once written: a fallback list where a drawn model fails
in a drawn way (429, 5xx, a usage-limit message, a dropped connection:
fall back; a 400: do not), two loopback servers, the session showing which
physical model answered each turn, and the router's state restored when
the session is reopened. Until then the family is listed and not examined.
"""

from __future__ import annotations

from course.capstone.records import Family

FAMILY = Family(
    name="router", chapter=18,
    invariant="a router's state survives a reopen, and a request on a failing model falls back to the next",
)
