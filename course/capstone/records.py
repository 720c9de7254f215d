"""The capstone's records: a family of cases, what a family found, and the whole run's report.

A family is one invariant a reviewer would check, with the chapter that
brings it, the codes its cases can report, and two functions: `cases`
draws the cases from a Draw (pure: the same seed draws equal cases) and
`examine` runs them on a Bench, giving each case's failure codes (none: it
passed). A family whose chapter is not written yet has neither.

One cause often shows as several codes (an agent that crashes also loses
its results), so a family's codes are reported likeliest cause first, and
a command that ended badly is named with how it ended (its command and its
exception's class, never a case).
"""

from __future__ import annotations

import re
import signal
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Awaitable, Callable, Mapping, Sequence

import attrs
import trio
from attrs import field, frozen, validators

from course.capstone.bench import Bench
from course.capstone.seeds import Draw

# Codes any family's case may report, besides its own.
COMMON_CODES = {
    "E-TIMEOUT": "a learner command did not finish within its time limit",
    "E-EXIT": "a learner command ended with another exit status than the case expects, or with a traceback "
              "whatever its status (which command, how it ended and the class of its exception are shown "
              "beside the code)",
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
    # Its own codes and what each means, likeliest cause first: a report lists them in this order.
    codes: Mapping[str, str] = field(factory=dict, validator=_codes)
    cases: Callable[[Draw], Sequence[Any]] | None = None  # None: not written yet
    examine: Examine | None = field(default=None, validator=_written_whole)

    @property
    def written(self) -> bool:
        return self.cases is not None and self.examine is not None

    def precedence(self, crashed: bool) -> tuple[str, ...]:
        """Its codes in the order a report lists them, likeliest cause first: a command that crashed (a
        traceback) or hung explains most else; one that only ended with another status than expected
        mostly follows from what its own codes say (a fallback that failed ends in an error)."""
        if crashed:
            return ("E-TIMEOUT", "E-EXIT", *self.codes, "E-LEFT-RUNNING")
        return ("E-TIMEOUT", *self.codes, "E-EXIT", "E-LEFT-RUNNING")


@frozen
class Ending:
    """A learner command that ended otherwise than its case expected: which, how, and what it raised."""

    command: str  # the module (`tiny_pi.agent`) or a course script's label
    status: int | None  # None: stopped at its time limit
    expected: tuple[int, ...] = field(converter=tuple)
    exception: str | None  # the class a traceback on its stderr ended with; never its message
    note: str = ""  # what the family knows of this ending that its words alone would not say

    @property
    def code(self) -> str:
        return "E-TIMEOUT" if self.status is None else "E-EXIT"

    def brief(self) -> str:
        """`tiny_pi.agent: NotImplementedError`, `tiny_pi.eval: exit 0`, `tiny_pi.agent: time limit`."""
        if self.status is None:
            return f"{self.command}: time limit"
        return f"{self.command}: {self.exception}" if self.exception else f"{self.command}: {how(self.status)}"

    def said(self) -> str:
        """The whole ending in words: `tiny_pi.agent ended with exit 1 (expected 0), raising NotImplementedError`."""
        if self.status is None:
            return f"{self.command} was stopped at its time limit"
        ended = f"was {how(self.status)}" if self.status < 0 else f"ended with {how(self.status)}"
        if self.status in self.expected:  # noted for its traceback alone
            return f"{self.command} {ended}, the status expected, but printed a traceback ({self.exception})"
        expected = " or ".join(how(status) for status in self.expected)
        raising = f", raising {self.exception}" if self.exception else ""
        noted = f"; {self.note}" if self.note else ""
        return f"{self.command} {ended} (expected {expected}){raising}{noted}"


def how(status: int) -> str:
    """An exit status as a person reads it: `exit 1`, `killed by SIGKILL`."""
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exit {status}"


# The endings noted while one family's cases run (course.capstone.families.common.ending adds to it).
ENDINGS: ContextVar[list[Ending]] = ContextVar("ENDINGS")


def note_ending(ending: Ending) -> None:
    """Keep `ending` for the family whose cases run now (outside a family's run: nowhere)."""
    noted = ENDINGS.get(None)
    if noted is not None:
        noted.append(ending)


@frozen
class FamilyResult:
    """What one family found: cases passed of all, the distinct codes of the failed ones; or why it was not examined."""

    name: str
    chapter: int
    passed: int = 0
    total: int = 0
    codes: Codes = ()
    not_examined: str | None = None
    endings: tuple[Ending, ...] = ()  # the commands behind its E-EXIT and E-TIMEOUT, each once

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
    started: str = ""  # when the run began, ISO 8601 in UTC (`2026-08-17T09:30:12Z`)

    @property
    def examined(self) -> tuple[FamilyResult, ...]:
        return tuple(result for result in self.families if result.examined)

    def timed(self, started: str, duration: float) -> CapstoneReport:
        return attrs.evolve(self, started=started, duration=duration)

    @property
    def ok(self) -> bool:
        return not self.run_codes and all(result.ok for result in self.examined)


def outcome(case_codes: Sequence[Codes], family: Family, endings: Sequence[Ending] = ()) -> FamilyResult:
    """A family's result from its cases' codes, each code named once, likeliest cause first, with the
    commands behind the E-EXIT and E-TIMEOUT it reports."""
    found = {code for codes in case_codes for code in codes}
    shown = tuple(dict.fromkeys(ending for ending in endings if ending.code in found))
    order = family.precedence(crashed=any(ending.exception for ending in shown))
    codes = sorted(found, key=lambda code: order.index(code) if code in order else len(order))
    passed = sum(1 for codes in case_codes if not codes)
    return FamilyResult(family.name, family.chapter, passed, len(case_codes), tuple(codes), endings=shown)


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
