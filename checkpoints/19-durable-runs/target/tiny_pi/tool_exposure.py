"""Tool exposure: who is shown a tool, and who may call it.

Five exposures, one per tool:

    exposure     declared to the model       callable by the model   callable by a script
    direct       always                      yes                     yes
    model-only   always                      yes                     no
    codemode     once activated              once activated          yes
    deferred     once activated              once activated          yes
    hidden       never                       no                      no

The model may call exactly what the request it answered declared; a script
(chapter 16's codemode) may call the direct, codemode and deferred tools.
The two callers are the two scopes, MODEL and SCRIPT.
"""

from __future__ import annotations

DIRECT = "direct"
MODEL_ONLY = "model-only"
CODEMODE = "codemode"
DEFERRED = "deferred"
HIDDEN = "hidden"
EXPOSURES = (DIRECT, MODEL_ONLY, CODEMODE, DEFERRED, HIDDEN)

MODEL = "model"
SCRIPT = "script"
SCOPES = (MODEL, SCRIPT)


def is_declared(exposure: str, active: bool) -> bool:
    """Whether a tool of `exposure` goes into the next request's `tools` (`active`: activated by a search)."""
    if exposure in (DIRECT, MODEL_ONLY):
        return True
    return exposure in (CODEMODE, DEFERRED) and active


def script_may_call(exposure: str) -> bool:
    """Whether a script may call a tool of `exposure`, activated or not."""
    return exposure in (DIRECT, CODEMODE, DEFERRED)


def activatable(exposure: str) -> bool:
    """Whether a search may activate a tool of `exposure`: only codemode and deferred wait to be declared."""
    return exposure in (CODEMODE, DEFERRED)
