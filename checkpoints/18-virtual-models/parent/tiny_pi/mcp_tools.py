"""MCP servers' tools in the agent: named, registered (deferred by default), and listed in the system prompt.

Servers come from a config file, the shape pi and other agents use:

    {"mcpServers": {"time": {"command": "python", "args": ["-m", "mcp_server_time"]}}}

Each server may also have `env` (strings added to the environment), `cwd`,
and `exposure`: `deferred` (the default: reached through tool_search or a
codemode script), `codemode` or `direct`. A config that is not valid is
one ConfigError line; a server whose command cannot start is one
McpStartError line, and both end `python -m tiny_pi.agent` with exit 2.

A server's tool `get-time` of server `my.clock` is registered as
`mcp__my_clock__get_time`: every character outside `[A-Za-z0-9_]` becomes
`_` (so the name is also a script's `tools.NAME`), and a name over 64
characters, or one already taken, gets a short hash of the server and tool
names in place of its end. A tool's error result stays an error result.

The servers start together and connect in the background. Before the
first prompt the agent waits (at most STARTUP_WAIT) only for servers whose
tools are direct: the first request must declare them. A tool_search
waits (as long) for servers still connecting, so their tools can be found.
The system prompt's `mcp_servers` section lists each server's state and
its tools' names, never their descriptions: a server that rewords a
description does not change the prompt.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Callable, Sequence

import trio
from attrs import define, field, frozen

from tiny_pi.abort import AbortSignal
from tiny_pi.mcp_client import CallResult, McpClient, McpError, McpTool
from tiny_pi.mcp_transport import StdioTransport
from tiny_pi.messages import TextContent, text
from tiny_pi.tool_execution import Reply
from tiny_pi.tool_exposure import CODEMODE, DEFERRED, DIRECT
from tiny_pi.tools import Execute, Tool, ToolRegistry

MAX_NAME = 64
HASH_CHARS = 8
SERVER_EXPOSURES = (DEFERRED, CODEMODE, DIRECT)
SERVER_KEYS = ("command", "args", "env", "cwd", "exposure", "type")
STARTUP_WAIT = 10.0
MCP_SECTION = "mcp_servers"
CONNECTING, CONNECTED, FAILED, CLOSED = "connecting", "connected", "failed", "closed"


class ConfigError(ValueError):
    """The MCP config file cannot be used; the message is the one line to show."""


class McpStartError(RuntimeError):
    """A configured server's command did not start."""


# Names ---------------------------------------------------------------------------------


def mcp_tool_name(server: str, tool: str, taken: Callable[[str], bool] = lambda name: False) -> str:
    """`mcp__SERVER__TOOL` with `_` for anything outside [A-Za-z0-9_]; a hash suffix when too long or taken."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", f"mcp__{server}__{tool}")
    if len(name) <= MAX_NAME and not taken(name):
        return name
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:HASH_CHARS]
    return f"{name[:MAX_NAME - HASH_CHARS - 1]}_{digest}"


# The config file -----------------------------------------------------------------------


@frozen
class ServerConfig:
    """One server of the config file: how to start it, and how its tools are exposed."""

    name: str
    command: tuple[str, ...]
    env: dict[str, str] = field(factory=dict)
    cwd: str | None = None
    exposure: str = DEFERRED


def load_config(path: Path) -> list[ServerConfig]:
    """The servers of the config file at `path`, in its order; a ConfigError says what is wrong."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(f"--mcp-config {path}: {error.strerror or error}") from None
    except ValueError as error:
        raise ConfigError(f"--mcp-config {path}: not JSON ({error})") from None
    servers = document.get("mcpServers") if isinstance(document, dict) else None
    if not isinstance(servers, dict):
        raise ConfigError(f"--mcp-config {path}: the file has no \"mcpServers\" object")
    return [server_config(path, name, entry) for name, entry in servers.items()]


def server_config(path: Path, name: str, entry: Any) -> ServerConfig:
    """One entry of `mcpServers`, checked key by key."""
    where = f"--mcp-config {path}: server {name!r}"
    if not name:
        raise ConfigError(f"--mcp-config {path}: a server's name is empty")
    if not isinstance(entry, dict):
        raise ConfigError(f"{where} is not an object")
    unknown = sorted(set(entry) - set(SERVER_KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (the keys are {', '.join(SERVER_KEYS)})")
    if entry.get("type", "stdio") != "stdio" or "url" in entry:
        raise ConfigError(f"{where}: only stdio servers (a command) are supported")
    command, args = entry.get("command"), entry.get("args", [])
    if not isinstance(command, str) or not command:
        raise ConfigError(f"{where}: \"command\" is a non-empty string")
    if not (isinstance(args, list) and all(isinstance(arg, str) for arg in args)):
        raise ConfigError(f"{where}: \"args\" is a list of strings")
    env = entry.get("env", {})
    if not (isinstance(env, dict) and all(isinstance(value, str) for value in env.values())):
        raise ConfigError(f"{where}: \"env\" is an object of strings")
    cwd = entry.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise ConfigError(f"{where}: \"cwd\" is a string")
    exposure = entry.get("exposure", DEFERRED)
    if exposure not in SERVER_EXPOSURES:
        raise ConfigError(f"{where}: \"exposure\" is one of {', '.join(SERVER_EXPOSURES)}, got {exposure!r}")
    return ServerConfig(name, (command, *args), env, cwd, exposure)


# One server's tool as a Tool -----------------------------------------------------------


def mcp_tool(server: str, tool: McpTool, name: str, exposure: str, client: McpClient) -> Tool:
    """A registry Tool that calls `tool` on `client`; the server checks the arguments itself."""

    async def execute(arguments: dict[str, Any], *, signal: AbortSignal) -> Reply:
        result = await client.call_tool(tool.name, arguments, signal=signal)
        content = model_content(result)
        if result.is_error and not content:
            content = [text(f"MCP tool {server}/{tool.name} returned an error")]
        return Reply(content, details={"server": server, "tool": tool.name}, is_error=result.is_error)

    description = tool.description.strip() or f"MCP tool {tool.name} of server {server}"
    return Tool(name, description, object_schema(tool.input_schema), execute, exposure=exposure)


def model_content(result: CallResult) -> list[TextContent]:
    """Text blocks as they are; any other block (an image, a resource) as its JSON text."""
    return [text(block["text"]) if block.get("type") == "text" and isinstance(block.get("text"), str)
            else text(json.dumps(block, ensure_ascii=False)) for block in result.content]


def object_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The tool's inputSchema as the registry wants it: a schema of type object."""
    return {**schema, "type": "object"} if schema.get("type") != "object" else schema


# The servers ---------------------------------------------------------------------------


@define
class ServerState:
    """What the system prompt says of one server."""

    config: ServerConfig
    state: str = CONNECTING
    error: str | None = None
    tools: list[str] = field(factory=list)
    client: McpClient | None = None
    settled: trio.Event = field(factory=trio.Event)  # connected or failed: no longer connecting


class McpServers:
    """Every configured server: started together, connected in the background, closed together."""

    def __init__(self, configs: Sequence[ServerConfig], registry: ToolRegistry, *, timeout: float = 30.0,
                 wait: float = STARTUP_WAIT) -> None:
        self.servers = [ServerState(config) for config in configs]
        self.registry = registry
        self.timeout = timeout
        self.wait = wait
        self.on_change: Callable[[], None] = lambda: None
        self.closing = False

    async def start(self, nursery: trio.Nursery) -> None:
        """Start every server's process now (McpStartError if one cannot run), and connect each in the background."""
        for server in self.servers:
            config = server.config
            try:
                transport = await StdioTransport.start(config.command, env=config.env, cwd=config.cwd)
            except OSError as error:
                await self.close()
                raise McpStartError(f"--mcp-config: server {config.name!r} did not start: {error}") from None
            server.client = McpClient(transport, timeout=self.timeout)
            nursery.start_soon(server.client.read_loop)
            nursery.start_soon(self.connect, server)

    async def connect(self, server: ServerState) -> None:
        """Shake hands, list and register the tools; then note when the connection ends."""
        client = server.client
        assert client is not None
        try:
            await client.initialize()
            tools = await client.list_tools()
        except McpError as error:
            self.settle(server, FAILED, str(error))
            await client.close()
            return
        for tool in tools:
            name = mcp_tool_name(server.config.name, tool.name, lambda candidate: self.registry.get(candidate) is not None)
            self.registry.register(mcp_tool(server.config.name, tool, name, server.config.exposure, client))
            server.tools.append(name)
        self.settle(server, CONNECTED)
        await client.ended.wait()
        if not self.closing:
            self.settle(server, FAILED, client.closed)

    def settle(self, server: ServerState, state: str, error: str | None = None) -> None:
        server.state, server.error = state, error
        server.settled.set()
        self.on_change()

    async def wait_for_direct(self) -> None:
        """Wait, at most `wait` seconds, for the servers whose tools are direct."""
        await self.wait_for([server for server in self.servers if server.config.exposure == DIRECT])

    async def wait_for(self, servers: Sequence[ServerState]) -> None:
        with trio.move_on_after(self.wait):
            for server in servers:
                await server.settled.wait()

    def searching(self, execute: Execute) -> Execute:
        """tool_search's execute, after a bounded wait for the servers still connecting."""

        async def search(arguments: dict[str, Any], *, signal: AbortSignal) -> Any:
            await self.wait_for(self.servers)
            return await execute(arguments, signal=signal)

        return search

    def attach(self, set_section: Callable[[str, str], None]) -> None:
        """Keep the system prompt's `mcp_servers` section up to date, from now on."""
        self.on_change = lambda: set_section(MCP_SECTION, self.section())
        self.on_change()

    def section(self) -> str:
        """Each server's state and tools' names, one line each: no descriptions."""
        lines = ["MCP servers:"]
        for server in self.servers:
            state = f"{server.state} ({server.error})" if server.error else server.state
            count = f"{len(server.tools)} tool{'' if len(server.tools) == 1 else 's'}"
            names = f": {', '.join(server.tools)}" if server.tools else ""
            lines.append(f"- {server.config.name}: {state}, {count}{names}")
        return "\n".join(lines)

    async def close(self) -> None:
        """Close every server; each process is gone when this returns."""
        self.closing = True
        for server in self.servers:
            if server.client is not None:
                await server.client.close()
            if server.state != FAILED:
                server.state = CLOSED
