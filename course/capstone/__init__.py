"""The capstone: a final exam of a learner's finished agent, drawn afresh at every run.

    course capstone [DIR] [--json]

Held out by construction, not by a hidden file: every run draws a new
seed and makes its cases from it, runs them against a frozen copy of DIR's
tiny_pi/ through its command line (and, for a router's state, which the
command line cannot set up, a course script that uses chapter 18's own
names), and reports counts and failure codes, never a case. One module
per job:

- seeds.py: the seed, and the Draw each family makes its cases from
- frozen.py: the copy of DIR's tiny_pi/ the cases run, and its hash
- model_server.py: scripted OpenAI-compatible servers on 127.0.0.1
- mcp_fixture.py: the MCP server (official SDK) the mcp family starts through --mcp-config
- router_driver.py: the router family's virtual model with a state, run on the frozen code
- processes.py: learner commands as processes, and what they leave running
- bench.py: what a family's cases run with
- records.py: Family, FamilyResult, CapstoneReport
- families/: one module per family of cases, each naming the chapter it needs
- runner.py: every family against one frozen copy
- report.py: the counts and codes, as lines and as JSON
- place.py, command.py: which DIR, and the `course capstone` command
"""
