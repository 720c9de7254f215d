"""Compaction: a summary in place of the old messages, so the context fits the window.

A model reads at most N tokens (its context window), and the reply needs
room too (R, the reserve). Before a model call whose context would exceed
N - R (before a prompt, and between the tool round trips of a run), the
agent keeps the newest interactions (a user message and all that follows
it up to the next user message) within a budget, asks the model to
summarise everything older, and sends the summary instead. The session
file keeps every original entry; only what is sent shrinks.

Tokens are estimated: characters / 4, a rough rule for English text and
JSON. Where the server reported a call's usage, that count replaces the
estimate for everything the call measured.
"""

from __future__ import annotations

import json
from typing import Sequence

from attrs import frozen

from tiny_pi.agent_loop import ToolUsingModel
from tiny_pi.messages import AgentContext, AgentMessage, AssistantMessage, ToolCall, UserMessage, text_of, user_message
from tiny_pi.tools import Tool

CHARS_PER_TOKEN = 4
DEFAULT_CONTEXT_WINDOW = 128_000
SAFETY_MARGIN = 0.05  # of the window: the estimate may be low by this much
HEADINGS = ("Goal", "Constraints", "Done", "Decisions", "Changed files", "Open questions", "Next steps")
FREE_TEXT_HEADING = "Summary"
SUMMARY_INTRO = "The conversation so far was compacted. This summary replaces its older messages:"
SUMMARY_PROMPT = (
    "You summarise a conversation between a user and a coding agent so that the agent can go on "
    "without it. Reply with exactly these Markdown headings, in this order, each followed by short "
    "bullet points (write 'none' when a section is empty): "
    + ", ".join(f"## {heading}" for heading in HEADINGS)
    + ". Keep file names, commands, numbers and error messages exactly as written."
)


class CompactionError(RuntimeError):
    """The summary could not be made; nothing was written, and the history is whole."""


@frozen
class ContextLimits:
    """The model's context window N and the reserve R kept for its reply, in tokens."""

    window: int
    reserve: int


@frozen
class Cut:
    """Where the history is cut: messages[:index] are summarised, messages[index:] are kept."""

    index: int
    kept_tokens: int
    newest_over_budget: bool


def default_reserve(window: int) -> int:
    """Room kept for the reply: a quarter of the window, at most 16384 tokens."""
    return min(16384, window // 4)


def estimate_tokens(message: AgentMessage) -> int:
    """An estimate, not a count: the characters of the message's text and tool calls / 4, rounded up."""
    characters = len(text_of(message))
    for block in message.content:
        if isinstance(block, ToolCall):
            characters += len(block.name) + len(json.dumps(block.arguments))
    return -(-characters // CHARS_PER_TOKEN)


def fixed_tokens(system_prompt: str | None, tools: Sequence[Tool]) -> int:
    """What every call costs besides its messages: the system prompt and the tools as one JSON list."""
    specs = [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in tools]
    characters = len(system_prompt or "") + len(json.dumps(specs))
    return -(-characters // CHARS_PER_TOKEN)


def context_tokens(messages: Sequence[AgentMessage], fixed: int, measured_from: int = 0) -> int:
    """The whole context: the last usage reported at or after `measured_from`, plus estimates after it.

    A reported usage counted everything the call sent (fixed costs included)
    and its reply; without one, the fixed costs and every message are estimated.
    """
    for index in range(len(messages) - 1, measured_from - 1, -1):
        message = messages[index]
        if isinstance(message, AssistantMessage) and message.usage.input > 0:
            after = sum(estimate_tokens(later) for later in messages[index + 1 :])
            return message.usage.input + message.usage.output + after
    return fixed + sum(estimate_tokens(message) for message in messages)


def keep_budget(window: int, reserve: int, fixed: int) -> int:
    """Tokens the kept messages may use: half of what the fixed costs and margin leave; the summary gets the rest."""
    room = window - reserve - fixed - int(window * SAFETY_MARGIN)
    return max(room // 2, 0)


def interaction_starts(messages: Sequence[AgentMessage]) -> list[int]:
    """The index of every user message: the only places where a cut keeps tool calls with their results."""
    return [index for index, message in enumerate(messages) if isinstance(message, UserMessage)]


def find_cut(messages: Sequence[AgentMessage], budget: int) -> Cut:
    """Keep whole interactions, newest first, while they fit `budget`; the newest is always kept."""
    starts = interaction_starts(messages)
    if not starts:
        return Cut(0, sum(estimate_tokens(message) for message in messages), False)
    index = starts[-1]
    kept = sum(estimate_tokens(message) for message in messages[index:])
    newest_over_budget = kept > budget
    for start in reversed(starts[:-1]):
        size = sum(estimate_tokens(message) for message in messages[start:index])
        if kept + size > budget:
            break
        index, kept = start, kept + size
    return Cut(index, kept, newest_over_budget)


def render_transcript(messages: Sequence[AgentMessage]) -> str:
    """The old messages as plain text for the summary call: one `[role]` block per message.

    A tool patch (chapter 15, role `system`) is left out: it holds no words of the
    conversation, and the tools it declares are sent with every request anyway.
    """
    blocks = []
    for message in messages:
        if message.role == "system":
            continue
        body = text_of(message)
        if isinstance(message, AssistantMessage):
            calls = [block for block in message.content if isinstance(block, ToolCall)]
            body = "\n".join([body, *(f"(calls {c.name} {json.dumps(c.arguments)})" for c in calls)]).strip()
        blocks.append(f"[{message.role}]\n{body}")
    return "\n\n".join(blocks)


def structure_summary(reply: str) -> str:
    """The reply as it is when it has every heading in order; otherwise free text under one heading."""
    positions = [reply.find(f"## {heading}") for heading in HEADINGS]
    if -1 not in positions and positions == sorted(positions):
        return reply[positions[0] :].strip()
    return f"## {FREE_TEXT_HEADING}\n{reply.strip()}"


def summary_message(summary: str) -> UserMessage:
    """How the summary reaches the model: a user message, the intro line and the headings."""
    return user_message(f"{SUMMARY_INTRO}\n\n{summary}")


async def summarise(model: ToolUsingModel, messages: Sequence[AgentMessage]) -> str:
    """One model call with no tools: the structured summary of `messages`, or a CompactionError."""
    context = AgentContext(system_prompt=SUMMARY_PROMPT, messages=[user_message(render_transcript(messages))])
    stream = model.stream(context, tools=None)
    async with stream:
        async for _ in stream:
            pass
        reply = await stream.result()
    if reply.stop_reason in ("error", "aborted"):
        raise CompactionError(f"the summary call failed: {reply.error_message}")
    return structure_summary(text_of(reply))
