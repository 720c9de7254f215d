"""A pytest plugin that sorts one run's tests into the chapter's labs.

Running every lab's selection in a process of its own repeats collection and
imports once per lab; a chapter with five labs paid six runs for what one
run shows. This plugin, loaded with `-p _course_lab_sorter` only when labs are
asked for, applies pytest's own `-k` matching (the same code `-k` uses) to
every collected test and writes which tests belong to which lab, with each
test's outcome, to a JSON file. It imports nothing of the course.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

_LABS = "--course-labs"
_OUT = "--course-labs-out"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("course")
    group.addoption(_LABS, default=None, help="JSON file: lab id -> {select: expr, files: [...]} or {nodes: [...]}")
    group.addoption(_OUT, default=None, help="where to write lab members and outcomes")


class _Recorder:
    def __init__(self, labs: dict[str, dict[str, Any]], out: str) -> None:
        self.labs = labs
        self.out = out
        self.members: dict[str, list[str]] = {lab: [] for lab in labs}
        self.outcomes: dict[str, str] = {}

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        from _pytest.mark import KeywordMatcher
        from _pytest.mark.expression import Expression

        for lab, selection in self.labs.items():
            if "select" in selection:
                # `-k` narrows the focused files only, exactly as a lab's own run does.
                focused = [i for i in items if any(_within(i.nodeid, f) for f in selection["files"])]
                expression = Expression.compile(selection["select"])
                chosen = [i for i in focused if expression.evaluate(KeywordMatcher.from_item(i))]
            else:
                nodes = selection["nodes"]
                chosen = [i for i in items if any(_within(i.nodeid, node) for node in nodes)]
            self.members[lab] = [item.nodeid for item in chosen]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self.outcomes[report.nodeid] = "failed"
        elif report.skipped and report.nodeid not in self.outcomes:
            self.outcomes[report.nodeid] = "skipped"
        elif report.when == "call" and report.passed:
            self.outcomes.setdefault(report.nodeid, "passed")

    def pytest_sessionfinish(self) -> None:
        with open(self.out, "w", encoding="utf-8") as handle:
            json.dump({"members": self.members, "outcomes": self.outcomes}, handle)


def _within(nodeid: str, node: str) -> bool:
    return nodeid == node or nodeid.startswith(node + "::") or nodeid.startswith(node + "[")


def pytest_configure(config: pytest.Config) -> None:
    labs_file = config.getoption(_LABS)
    out = config.getoption(_OUT)
    if labs_file and out:
        with open(labs_file, encoding="utf-8") as handle:
            labs = json.load(handle)
        config.pluginmanager.register(_Recorder(labs, out), "course-lab-recorder")
