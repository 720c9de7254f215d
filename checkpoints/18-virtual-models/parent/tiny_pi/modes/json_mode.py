"""JSON mode: every agent event as one JSON object per line on stdout, and nothing else there.

For a program that drives the agent: it reads stdout line by line and
never has to parse text meant for people. Each object has a `type` (the
event's); a run's first object is `agent_start`, its last `agent_end`. The
event's fields keep their names; messages, tool calls and usage are in the
IR's saved form (chapter 03: camelCase keys, `message_from_data` reads them
back); a tool event also carries `tool_call_id`. The growing partial
message of a model event is left out: `turn_end` carries the whole one.
Every line is valid UTF-8: a lone surrogate that got this far (an
extension's output, say) is written as U+FFFD, never a dropped event.
Summaries and diagnostics go to stderr, as in text mode. A reader that
closes stdout aborts the run: nobody is left to read what it does.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Callable, Iterator, TextIO

import attrs
import trio

from tiny_pi.agent_events import AgentEndEvent, AgentEvent, ToolExecutionEndEvent, ToolExecutionStartEvent
from tiny_pi.messages.transcript import to_data
from tiny_pi.modes.text import run_prompts, silence
from tiny_pi.providers.chunks import valid_text
from tiny_pi.runtime import Runtime


def event_data(event: AgentEvent) -> dict[str, Any]:
    """One event as JSON data: its type, its public fields (an agent_end's are its outcome's)."""
    data: dict[str, Any] = {"type": event.type}
    record = event.outcome if isinstance(event, AgentEndEvent) else event
    for attribute in attrs.fields(type(record)):
        if attribute.name != "type" and not attribute.name.startswith("_"):
            data[attribute.name] = saved_form(getattr(record, attribute.name))
    if isinstance(event, (ToolExecutionStartEvent, ToolExecutionEndEvent)):
        data["tool_call_id"] = event.tool_call.id
    return data


def saved_form(value: Any) -> Any:
    """A record as chapter 03 saves it, a tuple as a list, anything else as it is."""
    if attrs.has(type(value)):
        return to_data(value)
    if isinstance(value, tuple):
        return [saved_form(item) for item in value]
    return value


class JsonPrinter:
    """Writes each event as one line of JSON, flushed at once: the reader may be waiting for it.

    A reader that goes away (`| head -1`) closes the pipe, and the next write raises
    BrokenPipeError. Nobody reads what the agent does from then on, so the printer
    calls `on_closed` (JSON mode passes `runtime.abort`) for that event and every
    later one, and drops them; `silence` points the stream at os.devnull.
    """

    def __init__(self, out: TextIO, on_closed: Callable[[], None]) -> None:
        self.out = out
        self.on_closed = on_closed
        self.closed = False

    def __call__(self, event: AgentEvent) -> None:
        if not self.closed:
            try:
                self.out.write(valid_text(json.dumps(event_data(event), ensure_ascii=False)) + "\n")
                self.out.flush()
            except BrokenPipeError:
                self.closed = True
                silence(self.out)
        if self.closed:
            self.on_closed()


async def run_json(runtime: Runtime, prompts: Iterator[str], received: list[int], scope: trio.CancelScope) -> int:
    """JSON mode: the prompts as in text mode, the events as JSON lines on stdout; closing it aborts the run."""
    runtime.subscribe(JsonPrinter(sys.stdout, runtime.abort))
    return await run_prompts(runtime, prompts, received, scope)
