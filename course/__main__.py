"""`python -m course` is the same as the `course` command."""

from course.cli import main

main()
