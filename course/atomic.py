"""Replace a file the course keeps for itself in one step, or leave it as it was.

The course's own files (the index of practice dirs, stored verdicts, parsed
chapter.toml files) are read by the next command, maybe while this one still
writes. So each is written whole to a new file beside it and renamed over it:
a reader sees the old file or the new one, never half of one, and a command
interrupted mid-write leaves the old one. None of them is worth a failed
command: a write that fails only costs time or memory next run.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def replace_text(path: Path, text: str) -> bool:
    """Make `path` hold `text` (its folder too, if missing); False when the disk said no."""
    temporary: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, path)
        return True
    except OSError:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        return False
