"""`python -m tools.scaffold` is `course dev scaffold` (course/dev/scaffold.py)."""

from course.dev.scaffold import main

if __name__ == "__main__":
    main()
