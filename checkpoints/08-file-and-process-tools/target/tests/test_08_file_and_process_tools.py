"""Focused tests of chapter 08: Tools that touch files and processes, safely.

Scaffolded by `course dev scaffold`. Replace the stub below with the chapter's
real tests, keep this file identical in parent/ and target/, then update
expected_passed, [[labs]] and [[redlights]] in chapter.toml.
"""

import tiny_pi.file_and_process_tools  # noqa: F401  (missing in parent/: the first red light)


def test_write_the_focused_tests():
    raise AssertionError(
        "TODO chapter 08: write the focused tests of tiny_pi/file_and_process_tools.py "
        "in tests/test_08_file_and_process_tools.py (parent/ and target/)"
    )
