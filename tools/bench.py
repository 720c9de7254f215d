"""`python -m tools.bench` is `course dev bench` (course/dev/bench.py)."""

from course.dev.bench import main

if __name__ == "__main__":
    main()
