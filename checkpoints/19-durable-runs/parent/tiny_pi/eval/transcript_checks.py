"""Checking a saved transcript the way a chat server would: every tool call meets one result.

A broken pairing is not the model's doing: the runtime produced it, so the
harness reports it as its own failure. Each problem has a class (shareable)
and the call id it concerns (local evidence only).
"""

from __future__ import annotations

from typing import Sequence

from attrs import frozen

from tiny_pi.messages import AgentMessage, AssistantMessage, ToolCall, ToolResultMessage

PROBLEM_CLASSES = (
    "call-without-result",
    "result-without-call",
    "duplicate-call",
    "duplicate-result",
    "result-name-mismatch",
)


@frozen
class TranscriptProblem:
    """One broken pairing: its class (one of PROBLEM_CLASSES) and the call id it concerns."""

    kind: str
    call_id: str


def transcript_problems(messages: Sequence[AgentMessage]) -> list[TranscriptProblem]:
    """Every broken pairing, in transcript order; the calls never answered come last."""
    calls: dict[str, str] = {}  # call id -> the tool name it asked for
    answered: set[str] = set()
    problems: list[TranscriptProblem] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            for call in (block for block in message.content if isinstance(block, ToolCall)):
                if call.id in calls:
                    problems.append(TranscriptProblem("duplicate-call", call.id))
                calls[call.id] = call.name
        elif isinstance(message, ToolResultMessage):
            problem = result_problem(message, calls, answered)
            if problem is not None:
                problems.append(TranscriptProblem(problem, message.tool_call_id))
            answered.add(message.tool_call_id)
    problems += [TranscriptProblem("call-without-result", i) for i in calls if i not in answered]
    return problems


def result_problem(result: ToolResultMessage, calls: dict[str, str], answered: set[str]) -> str | None:
    """What is wrong with one result, given the calls so far and the ids already answered."""
    if result.tool_call_id not in calls:
        return "result-without-call"
    if result.tool_call_id in answered:
        return "duplicate-result"
    if calls[result.tool_call_id] != result.tool_name:
        return "result-name-mismatch"
    return None
