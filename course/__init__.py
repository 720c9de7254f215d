"""The `course` tool: move between a chapter's parent and target and prove each step."""

import os

# GitPython refuses to be imported when git is missing. The course needs git only
# for practice dirs and red-light patches; `course --help`, `list` and `show` must
# work without it, and the commands that need it say so in one line
# (course.workspace.require_git).
os.environ.setdefault("GIT_PYTHON_REFRESH", "quiet")
