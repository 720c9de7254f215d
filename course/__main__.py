"""`python -m course` is the same as the `course` command."""

from course.launch import main

main()
