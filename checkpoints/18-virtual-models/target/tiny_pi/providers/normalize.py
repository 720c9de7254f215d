"""The normalization seam: a wire assistant message becomes a canonical one.

Nothing a provider sends is copied into the transcript as it is. The seam
checks the few fields the transcript needs and rebuilds the message from
them; every other field (reasoning, refusal, annotations, index, audio,
...) stays behind. A field with the wrong shape is refused, with an error
that names it, instead of being coerced into something plausible.
"""

from __future__ import annotations

from tiny_pi.messages import (
    AssistantContent,
    AssistantMessage,
    TextContent,
    ToolCall,
    Usage,
    now_ms,
)
from tiny_pi.providers.chunks import parse_arguments, stop_reason_for, unparsed, usage_from_wire
from tiny_pi.providers.wire import (
    WireError,
    expect_list,
    expect_object,
    expect_str,
    optional_str,
)


def normalize_assistant_message(
    wire: object, path: str = "message"
) -> tuple[AssistantContent, ...]:
    """The content of a wire assistant message, checked and rebuilt from an allow-list."""
    message = expect_object(wire, path)
    if message.get("role") != "assistant":
        raise WireError(f"{path}.role must be 'assistant', got {message.get('role')!r}")
    content = optional_str(message.get("content"), f"{path}.content")
    blocks: list[AssistantContent] = [TextContent(content)] if content else []
    if message.get("tool_calls") is None:
        return tuple(blocks)
    calls = expect_list(message["tool_calls"], f"{path}.tool_calls")
    if not calls:
        raise WireError(f"{path}.tool_calls must not be empty; leave it out or use null")
    for position, call in enumerate(calls):
        blocks.append(normalize_tool_call(call, f"{path}.tool_calls[{position}]"))
    return tuple(blocks)


def normalize_tool_call(wire: object, path: str) -> ToolCall:
    """One wire tool call: id, function name and arguments (a JSON string), nothing else."""
    call = expect_object(wire, path)
    if call.get("type", "function") != "function":
        raise WireError(f"{path}.type must be 'function', got {call.get('type')!r}")
    call_id = expect_str(call.get("id"), f"{path}.id")
    function = expect_object(call.get("function"), f"{path}.function")
    name = expect_str(function.get("name"), f"{path}.function.name")
    raw = expect_str(function.get("arguments"), f"{path}.function.arguments")
    return ToolCall(id=call_id, name=name, arguments=parse_arguments(raw), raw_arguments=raw)


def completion_to_message(body: object, *, provider: str, model: str) -> AssistantMessage:
    """A whole non-streamed `chat.completion` answer, through the seam."""
    completion = expect_object(body, "response")
    choices = expect_list(completion.get("choices"), "response.choices")
    if not choices:
        raise WireError("response.choices is empty")
    choice = expect_object(choices[0], "response.choices[0]")
    content = normalize_assistant_message(choice.get("message"), "response.choices[0].message")
    finish_reason = optional_str(choice.get("finish_reason"), "response.choices[0].finish_reason")
    has_calls = any(isinstance(block, ToolCall) for block in content)
    stop_reason = stop_reason_for(finish_reason, has_calls)
    if stop_reason == "length":
        content = tuple(unparsed(block) for block in content)
    usage = completion.get("usage")
    return AssistantMessage(
        content=content,
        provider=provider,
        model=model,
        usage=Usage() if usage is None else usage_from_wire(usage, "response.usage"),
        stop_reason=stop_reason,
        timestamp=now_ms(),
    )
