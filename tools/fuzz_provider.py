"""`python -m tools.fuzz_provider` is `course dev fuzz` (course/dev/fuzz_provider.py)."""

from course.dev.fuzz_provider import main

if __name__ == "__main__":
    main()
