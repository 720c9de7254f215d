"""Focused tests of chapter 12: Resources and extensions: what the agent knows, and code it trusts.

Scaffolded by `course dev scaffold`. Replace the stub below with the chapter's
real tests, keep this file identical in parent/ and target/, then update
expected_passed, [[labs]] and [[redlights]] in chapter.toml.
"""

import tiny_pi.resources  # noqa: F401  (missing in parent/: the first red light)


def test_write_the_focused_tests():
    raise AssertionError(
        "TODO chapter 12: write the focused tests of tiny_pi/resources.py, tiny_pi/extensions.py, tiny_pi/tools.py, tiny_pi/tool_execution.py, tiny_pi/agent_loop.py, tiny_pi/agent.py "
        "in tests/test_12_resources_and_extensions.py (parent/ and target/)"
    )
