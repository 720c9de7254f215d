"""`python -m tools.cards` is `course dev cards` (course/dev/cards.py)."""

from course.dev.cards import main

if __name__ == "__main__":
    main()
