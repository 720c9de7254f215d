"""`python -m course` is the same as the `course` command."""

import sys

try:
    from course.cli import main
except KeyboardInterrupt:  # Ctrl-C while starting up: nothing was begun
    sys.exit(130)

main()
