"""The tool contract: one call in, exactly one ToolResultMessage out, whatever happens.

The model asks; it cannot be trusted to ask for a tool that exists, with
arguments that parsed and fit. The tool runs; it cannot be trusted not to
raise, or to return what it promised. Every one of those failures becomes an
error result the model can read and act on, so the transcript keeps a result
for every call and the agent loop never has to catch anything.

The one thing this module never turns into a result is trio.Cancelled from
outside: that belongs to whoever cancelled, and must keep unwinding.

Starter file of chapter 06: lab 6.3 writes the contract, lab 6.4 its abort.
"""

from __future__ import annotations

from tiny_pi.abort import AbortSignal
from tiny_pi.messages import ToolCall, ToolResultMessage
from tiny_pi.tools import ToolRegistry


async def execute_tool_call(
    call: ToolCall, registry: ToolRegistry, *, signal: AbortSignal
) -> ToolResultMessage:
    """Run `call` and return its one result; never raises, except to let a cancellation through."""
    raise NotImplementedError("lab 6.3: one call in, one result out")
