"""The capstone's MCP server, on the official MCP Python SDK, over stdio.

    python -P mcp_fixture.py SPEC.json MARK

SPEC.json names the server, its tools (a list of {"name", "description",
"answer"}) and the page size of tools/list; each tool answers its own `answer`, a
space and the `text` it was given. Once its imports are done (the slow
part of its start) it creates SPEC.ready beside SPEC.json, so the
capstone's model can wait for it before it asks for a search. MARK is only
there to be seen on the command line: the capstone looks for a server
still running after the agent exited. The server ends when its input
ends, as stdio servers do.
It imports nothing of the course (the agent starts it as a command of its
own), and `-P` keeps this folder's modules off its path.
"""

from __future__ import annotations

import json
import sys

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

TEXT_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def build(spec: dict) -> Server:
    server: Server = Server(spec["name"])
    tools = [types.Tool(name=tool["name"], description=tool["description"], inputSchema=TEXT_SCHEMA)
             for tool in spec["tools"]]
    answers = {tool["name"]: tool["answer"] for tool in spec["tools"]}
    page = spec["page_size"]

    @server.list_tools()
    async def list_tools(request: types.ListToolsRequest) -> types.ListToolsResult:
        # The SDK asks with no request when it checks a call's arguments against the schema.
        cursor = request.params.cursor if request is not None and request.params is not None else None
        start = int(cursor) if cursor else 0
        following = str(start + page) if start + page < len(tools) else None
        return types.ListToolsResult(tools=tools[start:start + page], nextCursor=following)

    @server.call_tool()
    async def call_tool(name: str, arguments: dict) -> list[types.TextContent]:
        return [types.TextContent(type="text", text=f"{answers[name]} {arguments.get('text', '')}")]

    return server


def main(arguments: list[str]) -> None:
    with open(arguments[0], encoding="utf-8") as stream:
        server = build(json.load(stream))
    open(arguments[0].removesuffix(".json") + ".ready", "w").close()

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main(sys.argv[1:])
