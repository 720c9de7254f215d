"""`python -m tools.target_diff` is `course dev target-diff` (course/dev/target_diff.py)."""

from course.dev.target_diff import main

if __name__ == "__main__":
    main()
