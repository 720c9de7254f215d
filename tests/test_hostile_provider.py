"""Hostile input, part 5: the chapter 05 provider under fuzzing (hypothesis, via `course dev fuzz`).

Every example is one HTTP exchange with hostile SSE bytes and chunk JSON;
the contract: exactly one terminal event, no exception out of iteration,
no hang, the API key never shown. Each run happens in fresh interpreters
whose cwd is a temporary copy of the target, never in this process (two
`tiny_pi` packages must not meet).

The suite runs SUITE_EXAMPLES examples (COURSE_FUZZ_EXAMPLES overrides);
the full 10,000 take one to three minutes on two cores and are run with
`course dev fuzz` (its default). The fuzzer itself is tested
too: two broken providers must be caught, or a green run would prove nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CHECKPOINTS
from course.run_env import run_environment
from course.workspace import copy_snapshot
from course.dev.fuzz_provider import WORKER, fuzz

SUITE_EXAMPLES = int(os.environ.get("COURSE_FUZZ_EXAMPLES", "600"))
TARGET = next(iter(sorted(CHECKPOINTS.glob("05-*/target"))), CHECKPOINTS / "05-provider/target")
PROVIDER = TARGET / "tiny_pi/providers/openai_compatible.py"

pytestmark = pytest.mark.skipif(not PROVIDER.is_file(), reason="chapter 05's target has no provider yet")


@pytest.mark.timeout(600)  # SUITE_EXAMPLES hostile exchanges, more with COURSE_FUZZ_EXAMPLES
def test_the_provider_holds_under_fuzzing() -> None:
    report = fuzz(TARGET, examples=SUITE_EXAMPLES, workers=2, seed=0)
    totals = report.totals()
    problems = [worker.problem for worker in report.workers if worker.problem]
    assert report.held, problems
    assert report.examples >= SUITE_EXAMPLES
    # The examples reach every ending, or the property would be vacuous for the missing one.
    assert totals.get("done", 0) > SUITE_EXAMPLES // 10, totals
    assert totals.get("error:error", 0) > SUITE_EXAMPLES // 10, totals
    assert totals.get("error:aborted", 0) > 0, totals
    print(f"\nprovider fuzz: {report.examples} examples, {totals}")


MUTANTS = {
    # what is broken: (file, [(old, new), ...], the property the worker's report must name)
    "the key is no longer scrubbed": (
        "tiny_pi/providers/chunks.py",
        [('message = message.replace(self._secret, "[redacted]")', "message = message")],
        "the API key leaked",
    ),
    "transport errors escape as exceptions": (
        "tiny_pi/providers/openai_compatible.py",
        [("except httpx.HTTPError as error:", "except ZeroDivisionError as error:"),
         ("except Exception as error:", "except ArithmeticError as error:")],
        "exception out of the stream",
    ),
}


@pytest.mark.parametrize("mutant", list(MUTANTS))
def test_the_fuzzer_catches_a_broken_provider(tmp_path: Path, mutant: str) -> None:
    path, edits, named = MUTANTS[mutant]
    broken = tmp_path / "broken"
    copy_snapshot(TARGET, broken)
    source = (broken / path).read_text()
    for old, new in edits:
        if old not in source:
            pytest.skip(f"the provider changed: {old!r} is no longer in {path}; update the mutant")
        source = source.replace(old, new)
    (broken / path).write_text(source)
    report = fuzz(broken, examples=400, workers=1, seed=3, shrink=False)
    assert not report.held
    assert named in report.workers[0].problem, report.workers[0].problem
    assert "sk-fuzz-" not in report.workers[0].problem.replace("sk-fuzz-<KEY PIECE>", ""), "the report masks the key"


CUT_PROBE = """
import os, sys
sys.path.insert(0, os.getcwd())
import fuzz_provider_worker as worker
for status, content_type, body in [
    (500, "text/plain", lambda n: "x" * n + worker.API_KEY + " is not valid"),
    (401, "application/json", lambda n: '{"error": ["' + "y" * n + worker.API_KEY + '"]}'),
]:
    for n in range(150, 200):
        worker.play({"status": status, "content_type": content_type, "reads": [body(n).encode()],
                     "failure": None, "abort_after": None})
print("held")
"""


def test_an_error_text_cut_to_length_never_keeps_a_piece_of_the_key(tmp_path: Path) -> None:
    copy = tmp_path / "target"
    copy_snapshot(TARGET, copy)
    shutil.copyfile(WORKER, copy / WORKER.name)
    result = subprocess.run([sys.executable, "-P", "-c", CUT_PROBE], cwd=copy, env=run_environment(),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "held" in result.stdout, result.stderr[-1500:]
