"""An MCP client: the handshake, the server's tools, and every request's one way out.

One reader task (`read_loop`) takes the server's messages in order. A
response goes to the request that waits for its id, in the pending table;
a request from the server is answered at once (`ping` with an empty
result, anything else with "method not found"); a notification needs
nothing from this client. A request ends in exactly one of four ways:

    response  its answer arrived: the result, or the server's error raised
    timeout   its deadline passed first                  (McpTimeout)
    abort     the caller's AbortSignal flipped first      (McpAborted)
    closed    the connection ended first                  (McpClosed)

A request that ends without its answer (the deadline, the signal, a
cancellation from outside) is cancelled on the server with
`notifications/cancelled`, except `initialize`, which the protocol says
must never be cancelled, and except on a connection that is gone.

The handshake is `initialize` (the newest protocol version this client
speaks), then the `notifications/initialized` notification. The server
answers with the version it chose; one this client does not speak closes
the connection. `tools/list` is paged: a null or empty `nextCursor` ends
the list, a cursor seen before would loop for ever and is an error, and so
is a list longer than MAX_PAGES pages.
"""

from __future__ import annotations

from typing import Any, Sequence

import trio
from attrs import define, field, frozen

from tiny_pi.abort import AbortSignal
from tiny_pi.jsonrpc import METHOD_NOT_FOUND, Notification, ProtocolError, Request, Response, RpcError
from tiny_pi.mcp_transport import CLOSE_GRACE, StdioTransport, TransportClosed

LATEST_VERSION = "2025-11-25"
SUPPORTED_VERSIONS = (LATEST_VERSION, "2025-06-18", "2025-03-26", "2024-11-05")
CLIENT_INFO = {"name": "tiny-pi", "version": "0.17"}
INITIALIZE = "initialize"
DEFAULT_TIMEOUT = 30.0
MAX_PAGES = 100

RESPONSE = "response"
ABORTED = "aborted"
CLOSED = "closed"


class McpError(RuntimeError):
    """An MCP request did not give a result; the message says why."""


class McpTimeout(McpError):
    """The request's deadline passed before its response."""


class McpAborted(McpError):
    """The caller's signal flipped before the response."""


class McpClosed(McpError):
    """The connection ended before the response (or before the request was sent)."""


@frozen
class McpTool:
    """One tool a server lists: its name, its description and the JSON Schema of its arguments."""

    name: str
    description: str
    input_schema: dict[str, Any]


@frozen
class CallResult:
    """What `tools/call` gave: content blocks, and whether the tool itself reported an error."""

    content: list[dict[str, Any]]
    is_error: bool = False


@define
class Pending:
    """One request in the table: the first exit to arrive settles it, and later ones are ignored."""

    id: int
    method: str
    done: trio.Event = field(factory=trio.Event)
    exit: str | None = None
    response: Response | None = None
    reason: str = ""

    def settle(self, exit: str, response: Response | None = None, reason: str = "") -> None:
        """Note how the request ended, unless it already has."""
        if self.done.is_set():
            return
        self.exit, self.response, self.reason = exit, response, reason
        self.done.set()


class McpClient:
    """One connection to one server, over a transport that sends and receives messages."""

    def __init__(
        self, transport: StdioTransport, *, timeout: float = DEFAULT_TIMEOUT,
        supported: Sequence[str] = SUPPORTED_VERSIONS,
    ) -> None:
        self.transport = transport
        self.timeout = timeout
        self.supported = tuple(supported)
        self.pending: dict[int, Pending] = {}
        self.last_id = 0
        self.closed: str | None = None  # why the connection ended, once it has
        self.ended = trio.Event()
        self.errors: list[str] = []  # lines that were not messages: noted, never fatal
        self.protocol_version: str | None = None
        self.server_info: dict[str, Any] = {}

    # The pending table ------------------------------------------------------------

    async def request(
        self, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None,
        signal: AbortSignal | None = None,
    ) -> Any:
        """Send a request and wait for its one exit: the result, or McpError (timeout, abort, closed, the server's error)."""
        if self.closed is not None:
            raise McpClosed(self.closed)
        if signal is not None and signal.aborted:
            raise McpAborted(f"the MCP request {method} was aborted")
        limit = self.timeout if timeout is None else timeout
        self.last_id += 1
        pending = self.pending[self.last_id] = Pending(self.last_id, method)
        try:
            await self.send(Request(pending.id, method, params))
            with trio.move_on_after(limit):
                await self.settled(pending, signal)
        finally:
            del self.pending[pending.id]
            if pending.exit in (None, ABORTED):  # it ended unanswered: the server may stop its work
                await self.cancel(pending)
        return outcome(pending, limit)

    async def settled(self, pending: Pending, signal: AbortSignal | None) -> None:
        """Wait until the response, the end of the connection, or the signal settles `pending`."""
        async with trio.open_nursery() as nursery:
            if signal is not None:
                nursery.start_soon(self.abort_on, signal, pending)
            await pending.done.wait()
            nursery.cancel_scope.cancel()

    async def abort_on(self, signal: AbortSignal, pending: Pending) -> None:
        """Settle `pending` as aborted once `signal` flips."""
        await signal.wait()
        pending.settle(ABORTED)

    async def cancel(self, pending: Pending) -> None:
        """Tell the server a request's answer is no longer wanted (never `initialize`, never on a closed connection)."""
        if pending.method == INITIALIZE or self.closed is not None:
            return
        with trio.CancelScope(shield=True):  # also when the caller itself was cancelled
            await self.notify("notifications/cancelled", {"requestId": pending.id, "reason": "the client stopped waiting"})

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification; on a connection that is gone it is dropped (nobody would read it)."""
        try:
            await self.send(Notification(method, params))
        except McpClosed:
            pass

    async def send(self, message: Request | Notification | Response) -> None:
        """Send one message; a transport that is closed ends the connection (McpClosed)."""
        try:
            await self.transport.send(message)
        except TransportClosed as error:
            self.connection_lost(str(error))
            raise McpClosed(self.closed or str(error)) from None

    # The reader -----------------------------------------------------------------------

    async def read_loop(self) -> None:
        """Take the server's messages in order until its output ends; then every waiting request is closed."""
        while (item := await self.transport.receive()) is not None:
            if isinstance(item, ProtocolError):
                self.errors.append(str(item))  # a stray line: noted, and the connection lives on
            elif isinstance(item, Response):
                pending = self.pending.get(item.id)  # type: ignore[arg-type]
                if pending is not None:  # an answer nobody waits for (its request timed out) is dropped
                    pending.settle(RESPONSE, item)
            elif isinstance(item, Request):
                await self.answer(item)
        self.connection_lost(await self.ended_reason())

    async def answer(self, request: Request) -> None:
        """The server asked something: `ping` gets an empty result, anything else "method not found"."""
        if request.method == "ping":
            reply = Response(request.id, result={})
        else:
            reply = Response(request.id, error=RpcError(METHOD_NOT_FOUND, f"this client does not handle {request.method}"))
        try:
            await self.send(reply)
        except McpClosed:
            pass

    async def ended_reason(self) -> str:
        """Why the output ended: the server's exit status, when it has exited within a grace."""
        with trio.move_on_after(CLOSE_GRACE):
            await self.transport.process.wait()
        status = self.transport.process.returncode
        return "the MCP server closed the connection" + (f" (exit status {status})" if status is not None else "")

    def connection_lost(self, reason: str) -> None:
        """The connection is over: keep the first reason, and close every request still waiting."""
        if self.closed is None:
            self.closed = reason
        for pending in list(self.pending.values()):
            pending.settle(CLOSED, reason=self.closed)
        self.ended.set()

    async def close(self) -> int:
        """Close the connection: waiting requests end as closed, and the server process is gone on return."""
        self.connection_lost("the MCP connection was closed by the client")
        return await self.transport.close()

    # The protocol ---------------------------------------------------------------------

    async def initialize(self) -> None:
        """The handshake: `initialize`, the chosen version checked, then `notifications/initialized`."""
        result = await self.request(INITIALIZE, {
            "protocolVersion": self.supported[0], "capabilities": {}, "clientInfo": CLIENT_INFO,
        })
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        if version not in self.supported:
            await self.close()
            raise McpError(f"the server chose protocol version {version!r}; this client speaks {', '.join(self.supported)}")
        self.protocol_version = version
        self.server_info = result.get("serverInfo") or {}
        await self.notify("notifications/initialized")

    async def list_tools(self) -> list[McpTool]:
        """Every tool the server lists, page after page."""
        tools: list[McpTool] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            page = await self.request("tools/list", {"cursor": cursor} if cursor else None)
            tools += tools_of(page)
            cursor = page.get("nextCursor")
            if cursor is None or cursor == "":
                return tools
            if not isinstance(cursor, str):
                raise McpError(f"tools/list gave a cursor that is not a string: {cursor!r}")
            if cursor in seen:
                raise McpError(f"tools/list gave the cursor {cursor!r} twice: its pages would never end")
            seen.add(cursor)
        raise McpError(f"tools/list has more than {MAX_PAGES} pages")

    async def call_tool(
        self, name: str, arguments: dict[str, Any], *, timeout: float | None = None, signal: AbortSignal | None = None,
    ) -> CallResult:
        """Call one of the server's tools; a tool that reports an error is a CallResult with is_error."""
        result = await self.request("tools/call", {"name": name, "arguments": arguments}, timeout=timeout, signal=signal)
        content = result.get("content") if isinstance(result, dict) else None
        if not isinstance(content, list):
            raise McpError("tools/call gave a result without a content list")
        return CallResult([block for block in content if isinstance(block, dict)], result.get("isError") is True)


def outcome(pending: Pending, limit: float) -> Any:
    """The result of a settled request, or the McpError that says how it ended."""
    if pending.exit == RESPONSE:
        assert pending.response is not None
        error = pending.response.error
        if error is not None:
            raise McpError(f"the MCP server answered {pending.method} with error {error.code}: {error.message}")
        return pending.response.result
    if pending.exit == CLOSED:
        raise McpClosed(pending.reason)
    if pending.exit == ABORTED:
        raise McpAborted(f"the MCP request {pending.method} was aborted")
    raise McpTimeout(f"the MCP request {pending.method} timed out after {limit:g} s")


def tools_of(page: Any) -> list[McpTool]:
    """One page of tools/list as records; a page or a tool of the wrong shape is an McpError."""
    if not isinstance(page, dict) or not isinstance(page.get("tools"), list):
        raise McpError("tools/list gave a page without a tools list")
    tools = []
    for entry in page["tools"]:
        if not (isinstance(entry, dict) and isinstance(entry.get("name"), str) and isinstance(entry.get("inputSchema"), dict)):
            raise McpError(f"tools/list gave a tool without a name and an inputSchema object: {entry!r:.80}")
        description = entry.get("description")
        tools.append(McpTool(entry["name"], description if isinstance(description, str) else "", entry["inputSchema"]))
    return tools


async def connect(
    nursery: trio.Nursery, command: Sequence[str], *, env: dict[str, str] | None = None, cwd: str | None = None,
    timeout: float = DEFAULT_TIMEOUT, grace: float = CLOSE_GRACE, supported: Sequence[str] = SUPPORTED_VERSIONS,
) -> McpClient:
    """Start a server, read it in `nursery`, and shake hands; on any failure the server is closed first."""
    transport = await StdioTransport.start(command, env=env, cwd=cwd, grace=grace)
    client = McpClient(transport, timeout=timeout, supported=supported)
    nursery.start_soon(client.read_loop)
    try:
        await client.initialize()
    except BaseException:
        await client.close()
        raise
    return client
