"""What one isolated run showed: test verdicts and an outcome, as typed data.

The records are built from the run host's report lines (course/runhost.py),
never from pytest's terminal summary, and rendered only by the commands. A
test that was collected but never reported did not pass; a skipped test
never counts as passed; a run that collected nothing is "no tests", never
green.

pytest reports a test in up to three phases (setup, call, teardown) and its
summary line counts reports, not tests: a test that passes and then fails in
teardown is "1 passed, 1 error", one whose fixture fails in both setup and
teardown "2 errors". The counts here are pytest's (`passed`, `failed`,
`errors`, ...: each test's `call`, plus one error per failed setup or
teardown), and each test also has one verdict, its `outcome`: passed only
when every phase passed; failed when its body failed, whatever else did;
error when its setup or teardown failed and its body did not. Only a passed
verdict counts towards green.
"""

from __future__ import annotations

import json
import signal
from typing import Iterable

from attrs import frozen

from course.safe_text import printable

# Outcomes of one run.
PASSED = "passed"
FAILED = "failed"
COLLECTION_ERROR = "collection-error"
CONFIG_ERROR = "config-error"
NO_TESTS = "no-tests"
TIMEOUT = "timeout"
MEMORY = "memory"
CRASHED = "crashed"

# Outcomes of one test.
ERROR = "error"  # a failure outside the test body (setup, teardown, collection)
SKIPPED = "skipped"
XFAILED = "xfailed"
XPASSED = "xpassed"
NOT_RUN = "not-run"  # collected, but the run ended before it reported
FAILING = (FAILED, ERROR)

_PYTEST_EXITS = {0: PASSED, 1: FAILED, 2: COLLECTION_ERROR, 5: NO_TESTS}


@frozen
class TestCase:
    """One test's verdict; `name` is empty for a module that could not be collected."""

    __test__ = False  # not a pytest test class, whatever its name says

    file: str
    name: str
    outcome: str
    message: str = ""
    details: str = ""
    line: int | None = None  # where pytest located the test (0-based, as pytest reports it)
    # What pytest counts for the test itself (passed, failed, skipped, xfailed, xpassed); "" when it
    # never got that far (its setup failed, or the run ended first).
    call: str = ""
    # The phases pytest reports as an error ("setup", "teardown"; "collect" for a module), in order.
    errors: tuple[str, ...] = ()

    @property
    def node_id(self) -> str:
        return f"{self.file}::{_swap_outside_params(self.name, '.', '::')}" if self.name else self.file

    def phases(self) -> str:
        """How the phases went, when one besides the body failed: "passed, then an error in teardown"."""
        if not self.errors or not self.name:
            return ""
        where = " and in ".join(self.errors)
        return f"{self.call}, then an error in {where}" if self.call else f"an error in {where}"


@frozen
class RunResult:
    """What one isolated pytest run showed."""

    outcome: str
    exit_code: int | None
    tests: tuple[TestCase, ...]
    output: str
    duration: float
    time_limit: float
    args: tuple[str, ...] = ()
    reported: bool = True  # pytest reached the end of its session
    running: str = ""  # the test that was running when the run was stopped
    memory_limit: float = 0.0

    # The counts of pytest's summary line: a test is counted once for its body, and once more
    # for each of its setup and teardown that failed (an error).

    @property
    def passed(self) -> int:
        return sum(1 for case in self.tests if case.call == PASSED)

    @property
    def failed(self) -> int:
        return sum(1 for case in self.tests if case.call == FAILED)

    @property
    def errors(self) -> int:
        return sum(len(case.errors) for case in self.tests)

    @property
    def skipped(self) -> int:
        return sum(1 for case in self.tests if case.call == SKIPPED)

    @property
    def xfailed(self) -> int:
        return sum(1 for case in self.tests if case.call == XFAILED)

    @property
    def xpassed(self) -> int:
        return sum(1 for case in self.tests if case.call == XPASSED)

    @property
    def not_run(self) -> int:
        return sum(1 for case in self.tests if case.outcome == NOT_RUN)

    def passed_in(self, test_file: str) -> int:
        return sum(1 for case in self.tests if case.file == test_file and case.outcome == PASSED)

    def failed_in(self, test_file: str) -> int:
        return sum(1 for case in self.tests if case.file == test_file and case.outcome in FAILING)

    def case(self, node_id: str) -> TestCase | None:
        for case in self.tests:
            if case.node_id == node_id:
                return case
        return None

    def summary(self) -> str:
        if self.outcome == TIMEOUT:
            return timeout_message(self.time_limit, self.running)
        if self.outcome == MEMORY:
            return memory_message(self.memory_limit)
        if self.outcome == CONFIG_ERROR:
            return "pytest could not start: its configuration or a conftest.py failed to load"
        if self.outcome == COLLECTION_ERROR and not self.passed:
            return "error during collection: the tests could not be imported"
        if self.outcome == NO_TESTS:
            return "no tests ran: the selection matched no test"
        parts = [f"{self.passed} passed", *pytest_counts(self.tests, with_collection=False)]
        not_run = self.not_run
        if not_run:
            parts.append(f"{not_run} not run")
        if self.outcome == COLLECTION_ERROR:
            parts.append("error during collection")
        if self.outcome == CRASHED:
            return "; ".join([", ".join(parts), self.crash_reason()]) if self.tests else self.crash_reason()
        return ", ".join(parts)

    def crash_reason(self) -> str:
        """Why pytest gave no verdict of its own, in words a learner can act on."""
        code = self.exit_code
        if code is None:
            return "the run ended without an exit status - did a test kill the process that supervises it?"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"pytest was killed by {name} before it could report (a crash in a test, or a test killing its own process?)"
        if code == 4:
            return "pytest could not run the selection: " + (usage_error(self.output) or "see its output")
        if not self.reported:
            return (
                f"pytest ended with status {code} before it finished its session - "
                "did a test call os._exit() or otherwise end the interpreter?"
            )
        return f"pytest exited with status {code}"

    def to_json(self) -> dict[str, object]:
        return {
            "outcome": self.outcome,
            "exit_code": self.exit_code,
            "passed": self.passed,
            "failed": self.failed,
            "errors": self.errors,
            "skipped": self.skipped,
            "xfailed": self.xfailed,
            "xpassed": self.xpassed,
            "not_run": self.not_run,
            "duration": round(self.duration, 3),
            "args": list(self.args),
            "running": self.running or None,
            "tests": [{"file": case.file, "name": case.name, "outcome": case.outcome, "call": case.call or None,
                       "errors": list(case.errors)} for case in self.tests],
        }


def pytest_counts(cases: Iterable[TestCase], with_collection: bool = True) -> list[str]:
    """What pytest's summary line adds to "N passed" for these tests: "1 failed", "2 errors", ...

    An error in setup or teardown is counted besides the test's own outcome,
    as pytest counts it; `with_collection` counts modules that could not be
    collected too (a run's summary says "error during collection" instead).
    """
    cases = list(cases)
    parts = []
    for word in (FAILED, SKIPPED, XFAILED, XPASSED):
        count = sum(1 for case in cases if case.call == word)
        if count:
            parts.append(f"{count} {word}")
    errors = sum(len(case.errors) for case in cases if with_collection or case.name)
    if errors:
        parts.append(f"{errors} error" + ("s" if errors != 1 else ""))
    return parts


def timeout_message(limit: float, running: str = "") -> str:
    message = f"the tests did not finish in {limit:g} s - a stream that never ends?"
    return f"{message} (still running: {running})" if running else message


def memory_message(limit: float) -> str:
    return f"the tests used more than {limit:g} GiB of memory"


def usage_error(output: str) -> str:
    for line in output.splitlines():
        if line.startswith("ERROR:"):
            return line.strip()
    return ""


# From the host's report lines to a result --------------------------------------------


class Reports:
    """Accumulates the run host's report lines (see course/runhost.py) into test verdicts."""

    def __init__(self) -> None:
        self.collected: list[str] = []
        self.reported: list[str] = []  # every test with a report, in the order of its first
        self.calls: dict[str, str] = {}
        self.errors: dict[str, list[str]] = {}
        self.texts: dict[str, str] = {}
        self.messages: dict[str, str] = {}
        self.lines: dict[str, int] = {}
        self.collect_errors: dict[str, str] = {}
        self.running = ""
        self.finish: int | None = None
        self.memory_error = False

    def feed(self, line: bytes) -> None:
        try:
            fact = json.loads(line)
        except ValueError:
            return  # not the reporter's (a test wrote to its file descriptor): ignored
        if not isinstance(fact, dict):
            return
        if "collected" in fact and isinstance(fact["collected"], list):
            self.collected = [str(node) for node in fact["collected"]]
        elif "start" in fact:
            self.running = str(fact["start"])
        elif "report" in fact:
            self._report(fact)
        elif "exception" in fact:
            self.messages.setdefault(str(fact["exception"]), str(fact.get("message", "")))
            self.memory_error = self.memory_error or bool(fact.get("memory"))
        elif "collect_error" in fact:
            self.collect_errors[str(fact["collect_error"])] = str(fact.get("text", ""))
        elif "finish" in fact and isinstance(fact["finish"], int):
            self.finish = fact["finish"]
            self.running = ""

    def _report(self, fact: dict) -> None:
        node = str(fact["report"])
        outcome, when, xfail = fact.get("outcome"), fact.get("when"), bool(fact.get("xfail"))
        if isinstance(fact.get("line"), int):
            self.lines.setdefault(node, fact["line"])
        if fact.get("text"):
            self.texts.setdefault(node, str(fact["text"]))
        if node not in self.calls and node not in self.errors:
            self.reported.append(node)
        if when == "call" or (when == "setup" and outcome == "skipped"):
            # What pytest counts for the test itself; a skip (or an xfail) at setup counts as its body's.
            self.calls[node] = _counted(outcome, xfail)
        elif outcome == "failed":
            self.errors.setdefault(node, []).append(str(when))
        if node == self.running and when == "teardown":
            self.running = ""

    def outcome(self, node: str) -> str:
        """The test's verdict: passed only when every phase passed (see the module's docstring)."""
        call, errors = self.calls.get(node, ""), self.errors.get(node)
        if call == FAILED:
            return FAILED
        if errors:
            return ERROR
        return call or NOT_RUN

    def cases(self) -> tuple[TestCase, ...]:
        cases = [_module_case(node, text) for node, text in self.collect_errors.items()]
        seen = set()
        for node in [*self.collected, *self.reported]:
            if node in seen:
                continue
            seen.add(node)
            file, _, name = node.partition("::")
            cases.append(
                TestCase(
                    file=file,
                    name=_swap_outside_params(name, "::", "."),
                    outcome=self.outcome(node),
                    message=printable(self.messages.get(node, "")),
                    details=printable(self.texts.get(node, "")),
                    line=self.lines.get(node),
                    call=self.calls.get(node, ""),
                    errors=tuple(self.errors.get(node, ())),
                )
            )
        return tuple(cases)


def _swap_outside_params(name: str, old: str, new: str) -> str:
    """`Class::test[id]` <-> `Class.test[id]`: the parameter id is pytest's text and stays as it is
    (an id like `"jsonrpc": "2.0"` has dots of its own)."""
    base, bracket, params = name.partition("[")
    return base.replace(old, new) + bracket + params


def _counted(outcome: object, xfail: bool) -> str:
    """pytest's word for a report of the test itself (a strict xfail that passed is reported failed)."""
    if outcome == "failed":
        return FAILED
    if outcome == "skipped":
        return XFAILED if xfail else SKIPPED
    return XPASSED if xfail else PASSED


def _module_case(node: str, text: str) -> TestCase:
    lines = [line[4:] for line in text.splitlines() if line.startswith("E   ")]
    return TestCase(file=node, name="", outcome=ERROR, message=printable(lines[-1] if lines else ""),
                    details=printable(text), errors=("collect",))


def outcome_of(exit_code: int | None, timed_out: bool, reports: Reports) -> str:
    """The run's outcome: how it ended, and what pytest said if it got to say anything."""
    if timed_out:
        return TIMEOUT
    if reports.memory_error:
        return MEMORY
    if reports.finish is None:
        return CONFIG_ERROR if exit_code == 4 and not reports.collected and not reports.collect_errors else CRASHED
    if exit_code != reports.finish:
        return CRASHED  # pytest said one thing, the process ended another way
    if exit_code in (2, 4) and reports.collect_errors:
        return COLLECTION_ERROR
    return _PYTEST_EXITS.get(exit_code, CRASHED) if exit_code is not None else CRASHED

