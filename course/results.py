"""What one isolated run showed: test verdicts and an outcome, as typed data.

The records are built from the run host's report lines (course/runhost.py),
never from pytest's terminal summary, and rendered only by the commands. A
test that was collected but never reported did not pass; a skipped test
never counts as passed; a run that collected nothing is "no tests", never
green.
"""

from __future__ import annotations

import json
import signal
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

    @property
    def node_id(self) -> str:
        return f"{self.file}::{self.name.replace('.', '::')}" if self.name else self.file


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

    @property
    def passed(self) -> int:
        return sum(1 for case in self.tests if case.outcome == PASSED)

    @property
    def failed(self) -> int:
        return sum(1 for case in self.tests if case.outcome in FAILING)

    @property
    def skipped(self) -> int:
        return sum(1 for case in self.tests if case.outcome == SKIPPED)

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
        parts = [f"{self.passed} passed"]
        for count, word in ((self.failed, "failed"), (self.skipped, "skipped"), (self.not_run, "not run")):
            if count:
                parts.append(f"{count} {word}")
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
            "skipped": self.skipped,
            "not_run": self.not_run,
            "duration": round(self.duration, 3),
            "args": list(self.args),
            "running": self.running or None,
            "tests": [{"file": case.file, "name": case.name, "outcome": case.outcome} for case in self.tests],
        }


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
        self.outcomes: dict[str, str] = {}
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
        current = self.outcomes.get(node)
        if outcome == "failed":
            verdict = FAILED if when == "call" and current != ERROR else ERROR
            if xfail:
                verdict = FAILED  # a strict xfail that passed
            self.outcomes[node] = verdict if current not in FAILING else current
        elif outcome == "skipped" and current not in FAILING:
            self.outcomes[node] = XFAILED if xfail else SKIPPED
        elif outcome == "passed" and when == "call" and current is None:
            self.outcomes[node] = XPASSED if xfail else PASSED
        if node == self.running and when == "teardown":
            self.running = ""

    def cases(self) -> tuple[TestCase, ...]:
        cases = [_module_case(node, text) for node, text in self.collect_errors.items()]
        seen = set()
        for node in [*self.collected, *self.outcomes]:
            if node in seen:
                continue
            seen.add(node)
            file, _, name = node.partition("::")
            cases.append(
                TestCase(
                    file=file,
                    name=name.replace("::", "."),
                    outcome=self.outcomes.get(node, NOT_RUN),
                    message=printable(self.messages.get(node, "")),
                    details=printable(self.texts.get(node, "")),
                    line=self.lines.get(node),
                )
            )
        return tuple(cases)


def _module_case(node: str, text: str) -> TestCase:
    lines = [line[4:] for line in text.splitlines() if line.startswith("E   ")]
    return TestCase(file=node, name="", outcome=ERROR, message=printable(lines[-1] if lines else ""),
                    details=printable(text))


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

