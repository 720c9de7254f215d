"""The normalization seam: a wire assistant message becomes a canonical one.

Nothing a provider sends is copied into the transcript as it is. The seam
checks the few fields the transcript needs and rebuilds the message from
them; every other field (reasoning, refusal, annotations, index, audio,
...) stays behind. A field with the wrong shape is refused, with an error
that names it, instead of being coerced into something plausible.

Lab 5.9 starter: write the three functions.
"""

from __future__ import annotations

from tiny_pi.messages import AssistantContent, AssistantMessage, ToolCall


def normalize_assistant_message(
    wire: object, path: str = "message"
) -> tuple[AssistantContent, ...]:
    """The content of a wire assistant message, checked and rebuilt from an allow-list."""
    raise NotImplementedError("lab 5.9: the normalization seam")


def normalize_tool_call(wire: object, path: str) -> ToolCall:
    """One wire tool call: id, function name and arguments (a JSON string), nothing else."""
    raise NotImplementedError("lab 5.9: normalize one tool call")


def completion_to_message(body: object, *, provider: str, model: str) -> AssistantMessage:
    """A whole non-streamed `chat.completion` answer, through the seam."""
    raise NotImplementedError("lab 5.9: a non-streamed answer through the seam")
