"""The capstone's records: a family of cases, what a family found, and the whole run's report.

A family is one invariant a reviewer would check, with the chapter that
brings it, the codes its cases can report, and two functions: `cases`
draws the cases from a Draw (pure: the same seed draws equal cases) and
`examine` runs them on a Bench, giving each case's failure codes (none: it
passed). A family whose chapter is not written yet has neither.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Awaitable, Callable, Mapping, Sequence

import trio
from attrs import field, frozen, validators

from course.capstone.bench import Bench
from course.capstone.seeds import Draw

# Codes any family's case may report, besides its own.
COMMON_CODES = {
    "E-EXIT": "a learner command ended with another exit status than the case expects",
    "E-TIMEOUT": "a learner command did not finish within its time limit",
    "E-LEFT-RUNNING": "a process the agent started was still running after the agent exited",
}
# Codes of the run as a whole.
FROZEN_CHANGED = "E-FROZEN-CHANGED"
RUN_CODES = {FROZEN_CHANGED: "the frozen copy of the code changed while the cases ran: the run does not count"}

Codes = tuple[str, ...]
Examine = Callable[[Sequence[Any], Bench], Awaitable[Sequence[Codes]]]


CODE = re.compile(r"E-[A-Z]+(-[A-Z]+)*")


def _codes(family: Any, attribute: Any, codes: Mapping[str, str]) -> None:
    wrong = [code for code in codes if not CODE.fullmatch(code) or code in COMMON_CODES or code in RUN_CODES]
    if wrong:
        raise ValueError(f"family {family.name}: {wrong[0]!r} is no code of its own (E-WORD-WORD, not a common one)")


def _written_whole(family: Any, attribute: Any, examine: Any) -> None:
    if (family.cases is None) != (examine is None):
        raise ValueError(f"family {family.name}: cases and examine come together, or neither (not written yet)")


@frozen
class Family:
    """One invariant, examined by cases drawn afresh at every run."""

    name: str = field(validator=validators.matches_re(r"[a-z]+"))
    chapter: int = field(validator=validators.ge(7))  # chapter 07 brings `python -m tiny_pi.agent`
    invariant: str  # one sentence: what every case of the family checks
    codes: Mapping[str, str] = field(factory=dict, validator=_codes)  # its own codes and what each means
    cases: Callable[[Draw], Sequence[Any]] | None = None  # None: not written yet
    examine: Examine | None = field(default=None, validator=_written_whole)

    @property
    def written(self) -> bool:
        return self.cases is not None and self.examine is not None


@frozen
class FamilyResult:
    """What one family found: cases passed of all, the distinct codes of the failed ones; or why it was not examined."""

    name: str
    chapter: int
    passed: int = 0
    total: int = 0
    codes: Codes = ()
    not_examined: str | None = None

    @property
    def examined(self) -> bool:
        return self.not_examined is None

    @property
    def ok(self) -> bool:
        return self.examined and self.passed == self.total


@frozen
class CapstoneReport:
    """A whole run: the directory and chapter examined, the frozen code's hash, each family's result."""

    directory: Path
    chapter: str
    digest: str
    families: tuple[FamilyResult, ...]
    run_codes: Codes = ()
    duration: float = 0.0

    @property
    def examined(self) -> tuple[FamilyResult, ...]:
        return tuple(result for result in self.families if result.examined)

    @property
    def ok(self) -> bool:
        return not self.run_codes and all(result.ok for result in self.examined)


def outcome(case_codes: Sequence[Codes], family: Family) -> FamilyResult:
    """A family's result from its cases' codes, each code named once, in the order first found."""
    codes: list[str] = []
    for found in case_codes:
        codes += [code for code in found if code not in codes]
    passed = sum(1 for found in case_codes if not found)
    return FamilyResult(family.name, family.chapter, passed, len(case_codes), tuple(codes))


def each_case(check: Callable[[Any, Bench], Awaitable[Sequence[str]]]) -> Examine:
    """An `examine` that runs every case through `check`, side by side: the cases of a family are
    independent, and the bench's limiter bounds how many learner commands run at once."""

    async def examine(cases: Sequence[Any], bench: Bench) -> list[Codes]:
        found: list[Codes] = [()] * len(cases)

        async def one(index: int, case: Any) -> None:
            found[index] = tuple(await check(case, bench))

        async with trio.open_nursery() as nursery:
            for index, case in enumerate(cases):
                nursery.start_soon(one, index, case)
        return found

    return examine
