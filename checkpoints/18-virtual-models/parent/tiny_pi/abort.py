"""AbortSignal: a caller's way to say "stop this model call", from any task.

The signal itself cancels nothing. It is a one-way switch: `abort()` flips
it, `aborted` reads it, and `await wait()` sleeps until it flips. Whoever
produces events decides what aborting means for its own work, usually by
cancelling a trio cancel scope that surrounds that work and then reporting
an `aborted` error event with the partial message it had.
"""

from __future__ import annotations

import trio


class AbortSignal:
    """A one-way switch that any task of the same trio run can flip.

    A plain `trio.Event` underneath: setting it is synchronous and never
    blocks, so `abort()` can be called from a callback, a key handler or a
    task that must not wait. Flipping it twice is harmless.
    """

    def __init__(self) -> None:
        self._flipped = trio.Event()

    def abort(self) -> None:
        """Ask for the call to stop; every task waiting in `wait()` wakes up."""
        self._flipped.set()

    @property
    def aborted(self) -> bool:
        """Whether `abort()` has been called: a producer checks it before starting."""
        return self._flipped.is_set()

    async def wait(self) -> None:
        """Return once the signal is aborted (at once if it already is)."""
        await self._flipped.wait()

    def __repr__(self) -> str:
        return f"AbortSignal(aborted={self.aborted})"


async def cancel_on_abort(signal: AbortSignal, scope: trio.CancelScope) -> None:
    """Cancel `scope` as soon as `signal` is aborted: the bridge from the signal to trio.

    Run it as a task next to the work that `scope` surrounds; cancel that
    task too once the work is over, or it waits forever.
    """
    await signal.wait()
    scope.cancel()
