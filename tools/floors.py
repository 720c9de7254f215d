"""`python -m tools.floors` is `course dev floors` (course/dev/floors.py), without click.

CI runs it with `python -S` before anything is installed, so this path
imports the standard library only.
"""

import sys

from course.dev.floors import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
