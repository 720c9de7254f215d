"""`python -m tools.depth` is `course dev depth` (course/dev/depth.py)."""

from course.dev.depth import main

if __name__ == "__main__":
    main()
