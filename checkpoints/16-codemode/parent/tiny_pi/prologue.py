"""The prologue: a whole agent run, offline, in one module you can read in one sitting.

A user asks what the project is called; a scripted model asks to `read` the
README, the tool returns it, and the model names the project. Every part is
a miniature of what chapters 02-07 build for real, so you can watch the
whole trace before building any of it:

    python -m tiny_pi.prologue              # the README round trip
    python -m tiny_pi.prologue --no-readme  # the same run when the tool fails

Nothing here touches the network or the disk: the "files" are a dict.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable

import trio
from attrs import field, frozen
from attrs.validators import in_, instance_of

README = "# tiny-pi\nA small agent runtime.\n"
QUESTION = "What is this project called?"
ROLES = ("user", "assistant", "toolResult")


@frozen
class ToolCall:
    """The model's request to run one tool (built for real in chapter 03)."""

    id: str = field(validator=instance_of(str))
    name: str = field(validator=instance_of(str))
    arguments: dict[str, str] = field(validator=instance_of(dict))


@frozen
class Message:
    """One entry of the transcript: what was said, by whom (chapter 03)."""

    role: str = field(validator=in_(ROLES))
    text: str = field(validator=instance_of(str))
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    is_error: bool = False


@frozen
class Reply:
    """One scripted turn: the text the model says and the calls it makes."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()


Files = dict[str, str]
Emit = Callable[[str], None]


class ScriptedModel:
    """A model that plays prepared replies in order and remembers what it was sent (chapter 04)."""

    def __init__(self, replies: list[Reply]) -> None:
        self._replies = list(replies)
        self.received: list[tuple[Message, ...]] = []

    async def stream(self, messages: tuple[Message, ...]) -> AsyncIterator[tuple[str, str]]:
        """Play the next reply as events, the way a provider streams one (chapters 02 and 05)."""
        self.received.append(messages)
        reply = self._replies.pop(0)
        yield ("start", "")
        await trio.lowlevel.checkpoint()
        yield ("text_delta", reply.text)
        for call in reply.tool_calls:
            yield ("toolcall_end", f"{call.id} {call.name} {json.dumps(call.arguments)}")
        yield ("done", "toolUse" if reply.tool_calls else "stop")


def readme_script() -> ScriptedModel:
    """The two turns of the README round trip."""
    call = ToolCall(id="call_1", name="read", arguments={"path": "README.md"})
    return ScriptedModel(
        [
            Reply("I will read the README first.", (call,)),
            Reply("The project is called tiny-pi."),
        ]
    )


async def read(arguments: dict[str, str], files: Files) -> str:
    """The `read` tool: the text of one file (chapter 07 reads a real directory)."""
    await trio.lowlevel.checkpoint()
    path = arguments["path"]
    if path not in files:
        raise FileNotFoundError(f"no such file: {path}")
    return files[path]


async def execute(call: ToolCall, files: Files) -> Message:
    """Run one call; every call ends in one result, a failure included (chapter 06)."""
    try:
        output = await read(call.arguments, files)
    except FileNotFoundError as error:
        return Message("toolResult", str(error), tool_call_id=call.id, is_error=True)
    return Message("toolResult", output, tool_call_id=call.id)


async def run_agent(question: str, model: ScriptedModel, files: Files, emit: Emit) -> list[Message]:
    """Turn after turn until the model stops calling tools; return the transcript (chapter 07)."""
    transcript = [Message("user", question)]
    emit("agent_start")
    turn = 0
    while True:
        turn += 1
        emit(f"turn_start {turn}")
        reply = await model_turn(model, transcript, emit)
        transcript.append(reply)
        for call in reply.tool_calls:
            emit(f"tool_execution_start {call.id} {call.name}")
            result = await execute(call, files)
            emit(f"tool_execution_end {call.id} {'error' if result.is_error else 'ok'}")
            transcript.append(result)
        emit(f"turn_end {turn}")
        if not reply.tool_calls:
            break
    emit("agent_end")
    return transcript


async def model_turn(model: ScriptedModel, transcript: list[Message], emit: Emit) -> Message:
    """Forward every model event, then build the assistant message the events describe."""
    text = ""
    calls: list[ToolCall] = []
    async for kind, data in model.stream(tuple(transcript)):
        emit(f"  {kind} {data}".rstrip())
        if kind == "text_delta":
            text += data
        elif kind == "toolcall_end":
            call_id, name, arguments = data.split(" ", 2)
            calls.append(ToolCall(call_id, name, json.loads(arguments)))
    return Message("assistant", text, tuple(calls))


def trace(files: Files | None = None) -> tuple[list[str], list[Message]]:
    """Run the README round trip; return every trace line and the final transcript."""
    lines: list[str] = []
    files = {"README.md": README} if files is None else files
    transcript = trio.run(run_agent, QUESTION, readme_script(), files, lines.append)
    return lines, transcript


def main(argv: list[str]) -> int:
    """Print the whole trace, then the transcript's roles and the last answer."""
    files = {} if "--no-readme" in argv else None
    lines, transcript = trace(files)
    for line in lines:
        print(line)
    print("transcript:", " ".join(message.role for message in transcript))
    print("answer:", transcript[-1].text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
