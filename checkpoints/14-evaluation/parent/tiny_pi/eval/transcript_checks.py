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
    raise NotImplementedError("lab 14.2: check the transcript's pairings")


def result_problem(result: ToolResultMessage, calls: dict[str, str], answered: set[str]) -> str | None:
    """What is wrong with one result, given the calls so far and the ids already answered."""
    raise NotImplementedError("lab 14.2: check one result")
