"""Text from a learner's run, made safe to print on a terminal.

A test can print anything, and its output reaches the learner's terminal
through every command that shows a run: escape sequences would clear the
screen, retitle the window, hide text, or draw a fake `[ok]` line over a real
one (a carriage return or cursor movement). They are removed before the text
is stored in a result, so no renderer has to remember to do it.
"""

from __future__ import annotations

import re

# ESC-introduced sequences: CSI (ESC [ ... final), OSC/DCS/SOS/PM/APC strings
# (ESC ] ... terminated by BEL or ESC \), and two-character escapes; then the
# 8-bit C1 forms of CSI and the string introducers, then every other control
# character except tab and newline (a lone carriage return rewrites a line).
_SEQUENCES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b[\]PX^_].*?(?:\x07|\x1b\\|\Z)"
    r"|\x1b[ -/]*[0-~]"
    r"|\x9b[0-?]*[ -/]*[@-~]"
    r"|[\x90\x98\x9d\x9e\x9f].*?(?:\x07|\x9c|\x1b\\|\Z)",
    re.DOTALL,
)
_CONTROLS = re.compile(r"\r\n|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` without terminal control sequences; CRLF becomes LF."""
    text = _SEQUENCES.sub("", text)
    return _CONTROLS.sub(lambda match: "\n" if match.group() == "\r\n" else "", text)
