"""The ways to drive a Runtime. Each mode only renders its events and hands it prompts.

- text: the reply and the tool lines stream to stdout, the summary goes to stderr;
- json: every agent event as one JSON object per line on stdout;
- interactive: a prompt loop on a terminal, with steering, Ctrl-C and slash commands.
"""

MODES = ("text", "json", "interactive")
