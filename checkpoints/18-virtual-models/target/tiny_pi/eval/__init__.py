"""Evaluating the whole agent: tasks in, verdicts and safe evidence out.

    python -m tiny_pi.eval TASKS --base-url URL --model M --out DIR [--json]

One module per job: `tasks` reads and checks TASKS/NAME/task.toml,
`transcript_checks` checks that every tool call met its result, `judge`
runs a task's checks, `process` runs a command under a time limit,
`phases` takes one task through prepare, execute, collect, judge, dispose
and clean up, and `report` renders the results and the shareable report.
"""
