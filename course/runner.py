"""Running a snapshot's tests in isolation: the public names, gathered from small modules.

- course/runspec.py: RunSpec, the one value that describes a run;
- course/run_env.py: the environment of every run;
- course/runhost.py: the program that runs tests (a host: pytest imported, a forked child per run);
- course/hosts.py: starting hosts, early or just in time;
- course/runs.py: running a spec on a host, and the pool of hosts of one command;
- course/results.py: RunResult and TestCase, built from the host's report lines.
"""

from course.results import (
    COLLECTION_ERROR,
    CONFIG_ERROR,
    CRASHED,
    ERROR,
    FAILED,
    FAILING,
    MEMORY,
    NO_TESTS,
    NOT_RUN,
    PASSED,
    SKIPPED,
    TIMEOUT,
    RunResult,
    TestCase,
    pytest_counts,
    timeout_message,
)
from course.runs import RunPool
from course.run_env import run_environment
from course.runspec import RunSpec, Shown

__all__ = [
    "COLLECTION_ERROR", "CONFIG_ERROR", "CRASHED", "ERROR", "FAILED", "FAILING", "MEMORY", "NOT_RUN",
    "NO_TESTS", "PASSED", "SKIPPED", "TIMEOUT", "RunPool", "RunResult", "RunSpec", "Shown", "TestCase",
    "pytest_counts", "run_environment", "timeout_message",
]
