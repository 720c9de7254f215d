"""A small MCP server for chapter 17's tests, built on the official MCP Python SDK (`mcp`), run over stdio.

    python tests/mcp_fixture_server.py [--page-size N] [--repeat-cursor] [--junk-first]
                                       [--linger eof|term] [--slow-start SECONDS]

It is an unmodified SDK server: the client under test must get along with
it as it is. Its tools (listed PAGE_SIZE a page, with a cursor):

    echo(text)        answers text
    fail()            a tool error: a result with isError true
    slow(seconds)     sleeps; a cancellation of it is noted as an event
    events(wait_for)  the events noted so far, once wait_for is among them (or after 5 s)
    ping_client()     pings the client and says whether it answered
    noisy()           prints a line that is not JSON to stdout, then answers "quiet again"
    roots()           asks the client for its roots and answers what the client said
    crash()           the process exits at once with status 3
    tool_5 ...        padding, so the list has several pages

--empty-cursor ends the list with "" instead of no cursor. Flags that
misbehave on purpose: --repeat-cursor gives the same cursor on
every page; --junk-first prints a non-JSON line before serving; --linger eof
keeps the process alive after its input ends, --linger term ignores SIGTERM
too; --slow-start waits before it reads anything.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import McpError

EVENT_WAIT = 5.0


def text_schema(*names: str) -> dict:
    return {"type": "object", "properties": {name: {"type": "string"} for name in names},
            "required": list(names)}


TOOLS = [
    types.Tool(name="echo", description="Answer the text it is given.", inputSchema=text_schema("text")),
    types.Tool(name="fail", description="Always report an error.", inputSchema={"type": "object", "properties": {}}),
    types.Tool(name="slow", description="Sleep for a number of seconds.",
               inputSchema={"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]}),
    types.Tool(name="events", description="The events noted so far.", inputSchema=text_schema("wait_for")),
    types.Tool(name="ping_client", description="Ping the client.", inputSchema={"type": "object", "properties": {}}),
    types.Tool(name="noisy", description="Print a stray line to stdout.", inputSchema={"type": "object", "properties": {}}),
    types.Tool(name="roots", description="Ask the client for its roots.", inputSchema={"type": "object", "properties": {}}),
    types.Tool(name="crash", description="Exit at once.", inputSchema={"type": "object", "properties": {}}),
    *[types.Tool(name=f"tool_{n}", description=f"Padding tool {n}.", inputSchema={"type": "object", "properties": {}})
      for n in range(5, 9)],
]


def build(page_size: int, repeat_cursor: bool, empty_cursor: bool) -> Server:
    server: Server = Server("fixture")
    events: list[str] = []

    @server.list_tools()
    async def list_tools(request: types.ListToolsRequest) -> types.ListToolsResult:
        # The SDK itself asks with None when it checks a call's arguments against the tool's schema.
        cursor = request.params.cursor if request is not None and request.params is not None else None
        if repeat_cursor:
            return types.ListToolsResult(tools=TOOLS[:page_size], nextCursor="again")
        start = int(cursor) if cursor else 0
        end = start + page_size
        following = ("" if empty_cursor else None) if end >= len(TOOLS) else str(end)
        return types.ListToolsResult(tools=TOOLS[start:end], nextCursor=following)

    @server.call_tool()
    async def call_tool(name: str, arguments: dict) -> list[types.TextContent]:
        if name == "echo":
            return [types.TextContent(type="text", text=arguments["text"])]
        if name == "fail":
            raise RuntimeError("it failed, as it always does")
        if name == "slow":
            try:
                await anyio.sleep(float(arguments["seconds"]))
            except anyio.get_cancelled_exc_class():
                events.append("slow cancelled")
                raise
            return [types.TextContent(type="text", text="slept")]
        if name == "events":
            with anyio.move_on_after(EVENT_WAIT):
                while arguments["wait_for"] not in events:
                    await anyio.sleep(0.01)
            return [types.TextContent(type="text", text=",".join(events))]
        if name == "ping_client":
            await server.request_context.session.send_ping()
            return [types.TextContent(type="text", text="the client answered the ping")]
        if name == "noisy":
            os.write(1, b"this line is not JSON\n")
            return [types.TextContent(type="text", text="quiet again")]
        if name == "roots":
            try:
                await server.request_context.session.list_roots()
            except McpError as error:
                return [types.TextContent(type="text", text=f"the client refused: {error.error.message}")]
            return [types.TextContent(type="text", text="the client listed its roots")]
        if name == "crash":
            os._exit(3)
        return [types.TextContent(type="text", text=name)]

    return server


def linger(how: str) -> None:
    """Keep the process alive after its input ends (a thread that never finishes); `term`: ignore SIGTERM too."""
    if how == "term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    threading.Thread(target=lambda: time.sleep(3600), daemon=False).start()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--page-size", type=int, default=3)
    parser.add_argument("--repeat-cursor", action="store_true")
    parser.add_argument("--empty-cursor", action="store_true")
    parser.add_argument("--junk-first", action="store_true")
    parser.add_argument("--linger", choices=["eof", "term"])
    parser.add_argument("--slow-start", type=float, default=0.0)
    args = parser.parse_args()
    if args.linger:
        linger(args.linger)
    if args.junk_first:
        os.write(1, b"starting the fixture server...\n")
    time.sleep(args.slow_start)
    server = build(args.page_size, args.repeat_cursor, args.empty_cursor)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
