"""Focused tests of chapter 16: Codemode: scripts that call tools in a sandbox.

Scaffolded by `course dev scaffold`. Replace the stub below with the chapter's
real tests, keep this file identical in parent/ and target/, then update
expected_passed, [[labs]] and [[redlights]] in chapter.toml.
"""

import tiny_pi.codemode_worker  # noqa: F401  (missing in parent/: the first red light)


def test_write_the_focused_tests():
    raise AssertionError(
        "TODO chapter 16: write the focused tests of tiny_pi/codemode_worker.py, tiny_pi/codemode.py, tiny_pi/tool_execution.py, tiny_pi/agent.py "
        "in tests/test_16_codemode.py (parent/ and target/)"
    )
