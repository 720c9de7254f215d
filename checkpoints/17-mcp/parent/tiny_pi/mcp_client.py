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
        raise NotImplementedError("lab 17.3: write Pending.settle")


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
        raise NotImplementedError("lab 17.3: write McpClient.request")

    async def settled(self, pending: Pending, signal: AbortSignal | None) -> None:
        """Wait until the response, the end of the connection, or the signal settles `pending`."""
        raise NotImplementedError("lab 17.3: write McpClient.settled")

    async def abort_on(self, signal: AbortSignal, pending: Pending) -> None:
        """Settle `pending` as aborted once `signal` flips."""
        raise NotImplementedError("lab 17.3: write McpClient.abort_on")

    async def cancel(self, pending: Pending) -> None:
        """Tell the server a request's answer is no longer wanted (never `initialize`, never on a closed connection)."""
        raise NotImplementedError("lab 17.3: write McpClient.cancel")

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification; on a connection that is gone it is dropped (nobody would read it)."""
        raise NotImplementedError("lab 17.3: write McpClient.notify")

    async def send(self, message: Request | Notification | Response) -> None:
        """Send one message; a transport that is closed ends the connection (McpClosed)."""
        raise NotImplementedError("lab 17.3: write McpClient.send")

    # The reader -----------------------------------------------------------------------

    async def read_loop(self) -> None:
        """Take the server's messages in order until its output ends; then every waiting request is closed."""
        raise NotImplementedError("lab 17.3: write McpClient.read_loop")

    async def answer(self, request: Request) -> None:
        """The server asked something: `ping` gets an empty result, anything else "method not found"."""
        raise NotImplementedError("lab 17.3: write McpClient.answer")

    async def ended_reason(self) -> str:
        """Why the output ended: the server's exit status, when it has exited within a grace."""
        raise NotImplementedError("lab 17.3: write McpClient.ended_reason")

    def connection_lost(self, reason: str) -> None:
        """The connection is over: keep the first reason, and close every request still waiting."""
        raise NotImplementedError("lab 17.3: write McpClient.connection_lost")

    async def close(self) -> int:
        """Close the connection: waiting requests end as closed, and the server process is gone on return."""
        raise NotImplementedError("lab 17.3: write McpClient.close")

    # The protocol ---------------------------------------------------------------------

    async def initialize(self) -> None:
        """The handshake: `initialize`, the chosen version checked, then `notifications/initialized`."""
        raise NotImplementedError("lab 17.3: write McpClient.initialize")

    async def list_tools(self) -> list[McpTool]:
        """Every tool the server lists, page after page."""
        raise NotImplementedError("lab 17.4: write McpClient.list_tools")

    async def call_tool(
        self, name: str, arguments: dict[str, Any], *, timeout: float | None = None, signal: AbortSignal | None = None,
    ) -> CallResult:
        """Call one of the server's tools; a tool that reports an error is a CallResult with is_error."""
        raise NotImplementedError("lab 17.4: write McpClient.call_tool")


def outcome(pending: Pending, limit: float) -> Any:
    """The result of a settled request, or the McpError that says how it ended."""
    raise NotImplementedError("lab 17.3: write outcome")


def tools_of(page: Any) -> list[McpTool]:
    """One page of tools/list as records; a page or a tool of the wrong shape is an McpError."""
    raise NotImplementedError("lab 17.4: write tools_of")


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
