"""`python -m tools.carry` is `course dev carry` (course/dev/carry.py)."""

from course.dev.carry import main

if __name__ == "__main__":
    main()
