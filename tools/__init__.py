"""The old spellings of the author's tools, `python -m tools.NAME`, kept so they still work.

The tools live in course/dev and run as `course dev NAME` from anywhere;
`python -S -m tools.floors` is what CI runs before anything is installed.
"""
