"""`python -m course` is the same as the `course` command."""

try:
    from course.launch import main
except KeyboardInterrupt:  # Ctrl-C while Python loads the entry point: the same line as later
    from course.errors import end_interrupted

    end_interrupted()

main()
