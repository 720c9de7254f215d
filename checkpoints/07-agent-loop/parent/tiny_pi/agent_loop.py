"""The agent loop: call the model, run the tools it asks for, and go round again.

One run is a sequence of turns. A turn streams the model with the
transcript and the registry's tool specs, forwarding every event as it
arrives, and appends the assistant message. If the model stopped for
`toolUse`, the turn runs its calls concurrently through the tool contract and
appends the results in call order. The run ends when a turn stops for any
other reason, when the signal is aborted, or at the turn limit.

Starter file of chapter 07: labs 7.1 to 7.3 write run_agent and the helpers
you choose (the lesson suggests run_turn, stream_message, run_tools,
run_end, error_message and add_usage).
"""

from __future__ import annotations

from typing import Callable, Protocol, Sequence

from tiny_pi.abort import AbortSignal
from tiny_pi.agent_events import AgentEvent, AgentOutcome
from tiny_pi.messages import AgentContext, ModelStream
from tiny_pi.tools import Tool, ToolRegistry

DEFAULT_MAX_TURNS = 10

Emit = Callable[[AgentEvent], None]


class ToolUsingModel(Protocol):
    """A model whose calls are offered tools: ScriptedModel and OpenAICompatibleModel both are."""

    def stream(
        self,
        context: AgentContext,
        *,
        signal: AbortSignal | None = None,
        tools: Sequence[Tool] | None = None,
    ) -> ModelStream: ...


def ignore(event: AgentEvent) -> None:
    """The default listener: a run needs nobody watching it."""


async def run_agent(
    model: ToolUsingModel,
    context: AgentContext,
    registry: ToolRegistry,
    *,
    signal: AbortSignal | None = None,
    max_turns: int = DEFAULT_MAX_TURNS,
    on_event: Emit = ignore,
) -> AgentOutcome:
    """Run turns on `context` until the model stops; every fact goes to `on_event` as it happens.

    The caller appends the user's message first; the run appends the rest.
    """
    raise NotImplementedError("lab 7.1: run turns until the model stops")
