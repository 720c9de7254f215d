"""Chapter 17: MCP, other processes' tools through a client you write.

Run alone with `python -m pytest tests/test_17_mcp.py`. The labs follow the
lesson: JSON-RPC messages and newline framing (17.1), the handshake and one
request's answer (17.2), the server's tools, page by page (17.3), the
other three ways out of a request and the three-step close (17.4), and the
servers' tools in the agent (17.5). Every server here is a real MCP server
over stdio: tests/mcp_fixture_server.py on the official MCP Python SDK, and
the official mcp-server-time for the payoff.
"""

import json
import re
import os
import sys
from pathlib import Path

import pytest
import trio
from loopback_server import STREAM_HEAD, LoopbackServer, chunk, send_chunk, sse, tool_call_chunks

import tiny_pi.mcp_client as mcp_client
from tiny_pi.abort import AbortSignal
from tiny_pi.jsonrpc import LineFramer, Notification, ProtocolError, Request, Response, RpcError, decode_line, encode, parse_message
from tiny_pi.mcp_client import SUPPORTED_VERSIONS, McpAborted, McpClient, McpClosed, McpError, McpTimeout, connect
from tiny_pi.mcp_tools import ConfigError, McpServers, load_config, mcp_tool_name, server_config
from tiny_pi.mcp_transport import StdioTransport
from tiny_pi.messages import ToolCall, text_of
from tiny_pi.tool_execution import execute_tool_call
from tiny_pi.tools import ToolRegistry

TIME_LIMIT = 30.0  # a guard against hangs, not a speed test: each server is a Python process importing the SDK
PROJECT = Path(__file__).resolve().parent.parent
FIXTURE = [sys.executable, str(Path(__file__).resolve().parent / "mcp_fixture_server.py")]


def run(main):
    async def guarded():
        with trio.fail_after(TIME_LIMIT):
            return await main()

    return trio.run(guarded)


def gone(pid):
    """Whether no process has the id `pid` any more (it exited and was waited for)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


class RecordingTransport(StdioTransport):
    """The real stdio transport, noting the method (or "response") of every message the client sends."""

    sent: list

    async def send(self, message):
        self.__dict__.setdefault("sent", []).append(message)
        await super().send(message)

    def methods(self):
        return [getattr(message, "method", "response") for message in self.__dict__.get("sent", [])]


async def recording_client(nursery, *flags, timeout=10.0, grace=2.0, supported=SUPPORTED_VERSIONS, handshake=True):
    transport = await RecordingTransport.start([*FIXTURE, *flags], grace=grace)
    client = McpClient(transport, timeout=timeout, supported=supported)
    nursery.start_soon(client.read_loop)
    if handshake:
        await client.initialize()
    return client


# Lab 17.1: JSON-RPC messages and newline framing ------------------------------------------


def test_message_kinds_are_told_apart_by_their_keys():
    assert parse_message({"jsonrpc": "2.0", "id": 1, "method": "ping"}) == Request(1, "ping")
    assert parse_message({"jsonrpc": "2.0", "method": "notifications/initialized"}) == Notification("notifications/initialized")
    assert parse_message({"jsonrpc": "2.0", "id": "a", "result": {"x": 1}}) == Response("a", result={"x": 1})
    error = parse_message({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
    assert error == Response(None, error=RpcError(-32700, "Parse error"))
    assert parse_message({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"cursor": "3"}}).params == {"cursor": "3"}


@pytest.mark.parametrize("line", [
    b'{"jsonrpc": "2.0", "id": NaN, "method": "ping"}',
    b'{"jsonrpc": "2.0", "id": Infinity, "result": {}}',
    b'{"jsonrpc": "2.0", "id": -Infinity, "method": "ping"}',
    b'{"jsonrpc": "2.0", "id": true, "result": {}}',
], ids=["nan", "infinity", "minus-infinity", "boolean"])
def test_message_ids_that_are_nan_infinite_or_boolean_are_refused(line):
    with pytest.raises(ProtocolError, match="id"):
        decode_line(line)


@pytest.mark.parametrize("value, words", [
    ([{"jsonrpc": "2.0", "id": 1, "method": "ping"}], "a message is a JSON object"),
    ({"id": 1, "method": "ping"}, "\"jsonrpc\": \"2.0\""),
    ({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "x"}}, "exactly one of result and error"),
    ({"jsonrpc": "2.0", "id": 1}, "exactly one of result and error"),
    ({"jsonrpc": "2.0", "id": 1, "error": {"message": "no code"}}, "an integer code and a string message"),
    ({"jsonrpc": "2.0", "id": None, "result": {}}, "a response's id is a string or a finite number"),
    ({"jsonrpc": "2.0", "result": {}}, "a method, an id, or both"),
], ids=["batch", "no-jsonrpc", "result-and-error", "neither", "error-without-code", "null-id-result", "no-method-no-id"])
def test_message_anything_else_is_a_protocol_error(value, words):
    with pytest.raises(ProtocolError) as raised:
        parse_message(value)
    assert words in str(raised.value)


def test_message_encode_gives_one_line_that_parses_back():
    messages = [Request(7, "tools/call", {"name": "echo", "arguments": {"text": "line\nbreak"}}),
                Notification("notifications/cancelled", {"requestId": 7}),
                Response(7, result={}), Response("x", error=RpcError(-32601, "no such method"))]
    for message in messages:
        line = encode(message)
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        assert decode_line(line[:-1]) == message


def test_message_a_half_line_waits_for_its_newline():
    framer = LineFramer()
    assert framer.feed(b'{"jsonrpc": "2.0", "id": 1, ') == []
    assert framer.pending == b'{"jsonrpc": "2.0", "id": 1, '
    assert framer.feed(b'"result": {}}\n{"jsonrpc"') == [b'{"jsonrpc": "2.0", "id": 1, "result": {}}']
    assert framer.pending == b'{"jsonrpc"'


def test_message_a_burst_of_lines_all_arrive():
    framer = LineFramer()
    lines = framer.feed(b'{"a": 1}\n\n{"b": 2}\r\n   \n{"c": 3}\n')
    assert lines == [b'{"a": 1}', b'{"b": 2}', b'{"c": 3}']
    assert framer.pending == b""


def test_message_a_line_that_is_not_json_is_a_protocol_error_with_its_text():
    with pytest.raises(ProtocolError) as raised:
        decode_line(b"starting the server...")
    assert str(raised.value) == "a line from the server is not JSON: 'starting the server...'"


# Lab 17.2: the transport, a process and its pipes --------------------------------------------


def initialize_request():
    return Request(1, "initialize", {"protocolVersion": SUPPORTED_VERSIONS[0], "capabilities": {},
                                     "clientInfo": {"name": "test", "version": "0"}})


def test_transport_a_request_line_gets_its_response_line():
    async def main():
        transport = await StdioTransport.start(FIXTURE)
        await transport.send(initialize_request())
        answer = await transport.receive()
        await transport.close()
        return answer, await transport.receive()

    answer, after = run(main)
    assert isinstance(answer, Response) and answer.id == 1 and answer.result["serverInfo"]["name"] == "fixture"
    assert after is None  # the end of the server's output


def test_transport_a_stray_line_is_a_protocol_error_and_the_next_message_still_arrives():
    async def main():
        transport = await StdioTransport.start([*FIXTURE, "--junk-first"])
        await transport.send(initialize_request())
        first, second = await transport.receive(), await transport.receive()
        await transport.close()
        return first, second

    first, second = run(main)
    assert isinstance(first, ProtocolError)
    assert str(first) == "a line from the server is not JSON: 'starting the fixture server...'"
    assert isinstance(second, Response) and second.id == 1


def test_transport_a_command_that_cannot_run_is_an_oserror():
    async def main():
        await StdioTransport.start(["no-such-mcp-server-here"])

    with pytest.raises(OSError):
        run(main)


# A server that exits at the end of its input gets a long grace: a loaded machine may take seconds to
# end a Python process, and close must not send SIGTERM while it is on its way out. The two that linger
# get a short one: each grace is waited in full.
@pytest.mark.parametrize("flags, status, grace", [([], 0, 10.0), (["--linger", "eof"], -15, 0.5),
                                                  (["--linger", "term"], -9, 0.5)], ids=["stdin", "sigterm", "sigkill"])
def test_transport_close_ends_stdin_then_sigterm_then_sigkill_and_the_server_is_gone(flags, status, grace):
    async def main():
        transport = await StdioTransport.start([*FIXTURE, *flags], grace=grace)
        await transport.send(initialize_request())
        await transport.receive()
        started = trio.current_time()
        exit_status = await transport.close()
        return transport, exit_status, trio.current_time() - started

    transport, exit_status, seconds = run(main)
    assert exit_status == status and gone(transport.pid)
    steps = {0: 0, -15: 1, -9: 2}[status]  # how many graces passed before the server was gone
    assert seconds >= grace * steps


# Lab 17.3: the client, the handshake and every request's one way out ---------------------------


def test_client_initialize_then_initialized_against_the_sdk_server():
    async def main():
        async with trio.open_nursery() as nursery:
            client = await recording_client(nursery)
            methods = client.transport.methods()
            await client.close()
            return client, methods

    client, methods = run(main)
    assert methods == ["initialize", "notifications/initialized"]
    assert client.closed == "the MCP connection was closed by the client" and gone(client.transport.pid)
    assert client.protocol_version == SUPPORTED_VERSIONS[0]
    assert client.server_info["name"] == "fixture"
    assert client.transport.sent[0].params["protocolVersion"] == SUPPORTED_VERSIONS[0]


def test_client_a_version_the_client_does_not_speak_closes_the_connection():
    async def main():
        async with trio.open_nursery() as nursery:
            client = await recording_client(nursery, supported=("2099-01-01",), handshake=False)
            with pytest.raises(McpError) as raised:
                await client.initialize()
            return client, str(raised.value)

    client, message = run(main)
    assert message.startswith("the server chose protocol version '2025-")
    assert message.endswith("; this client speaks 2099-01-01")
    assert client.closed is not None and gone(client.transport.pid)
    assert "notifications/initialized" not in client.transport.methods()


def test_client_the_client_answers_the_servers_ping():
    async def main():
        async with trio.open_nursery() as nursery:
            client = await recording_client(nursery)
            result = await client.request("tools/call", {"name": "ping_client", "arguments": {}})
            await client.close()
            return client, result

    client, result = run(main)
    assert result["content"][0]["text"] == "the client answered the ping"
    assert client.transport.methods()[-1] == "response"


def test_client_a_server_request_the_client_does_not_handle_gets_method_not_found():
    async def main():
        async with trio.open_nursery() as nursery:
            client = await recording_client(nursery)
            result = await client.request("tools/call", {"name": "roots", "arguments": {}})
            await client.close()
            return client, result

    client, result = run(main)
    assert result["content"][0]["text"] == "the client refused: this client does not handle roots/list"
    assert client.transport.sent[-1].error.code == -32601


def test_client_a_stray_line_is_noted_and_the_connection_lives_on():
    async def main():
        async with trio.open_nursery() as nursery:
            client = await recording_client(nursery, "--junk-first")
            result = await client.request("ping")
            await client.close()
            return client, result

    client, result = run(main)
    assert result == {}
    assert client.errors == ["a line from the server is not JSON: 'starting the fixture server...'"]


def cancelled_ids(client):
    return [message.params["requestId"] for message in client.transport.sent
            if getattr(message, "method", None) == "notifications/cancelled"]


def test_client_a_timeout_raises_and_cancels_the_request_on_the_server():
    async def main():
        async with trio.open_nursery() as nursery:
            client = await recording_client(nursery)
            with pytest.raises(McpTimeout) as raised:
                await client.call_tool("slow", {"seconds": 60}, timeout=0.5)
            slow_id = next(m.id for m in client.transport.sent if getattr(m, "method", None) == "tools/call")
            events = await client.call_tool("events", {"wait_for": "slow cancelled"})
            await client.close()
            return client, str(raised.value), slow_id, events

    client, message, slow_id, events = run(main)
    assert message == "the MCP request tools/call timed out after 0.5 s"
    assert cancelled_ids(client) == [slow_id]
    assert events.content[0]["text"] == "slow cancelled"
    assert client.pending == {}


def test_client_an_abort_raises_and_cancels_the_request_on_the_server():
    async def main():
        async with trio.open_nursery() as nursery:
            client = await recording_client(nursery)
            signal = AbortSignal()

            async def abort_soon():
                await trio.sleep(0.3)
                signal.abort()

            nursery.start_soon(abort_soon)
            with pytest.raises(McpAborted) as raised:
                await client.call_tool("slow", {"seconds": 60}, signal=signal)
            events = await client.call_tool("events", {"wait_for": "slow cancelled"})
            with pytest.raises(McpAborted):  # an aborted signal sends nothing more
                await client.call_tool("echo", {"text": "late"}, signal=signal)
            await client.close()
            return client, str(raised.value), events

    client, message, events = run(main)
    assert message == "the MCP request tools/call was aborted"
    assert len(cancelled_ids(client)) == 1 and events.content[0]["text"] == "slow cancelled"
    assert "late" not in json.dumps([getattr(m, "params", None) for m in client.transport.sent])


def test_client_initialize_is_never_cancelled():
    async def main():
        async with trio.open_nursery() as nursery:
            client = await recording_client(nursery, "--slow-start", "5", timeout=0.5, grace=0.2, handshake=False)
            with pytest.raises(McpTimeout, match="the MCP request initialize timed out after 0.5 s"):
                await client.initialize()
            await client.close()
            return client

    client = run(main)
    assert client.transport.methods() == ["initialize"]


def test_client_a_server_that_dies_closes_every_waiting_request():
    async def main():
        async with trio.open_nursery() as nursery:
            client = await recording_client(nursery)
            endings = []

            async def slow():
                try:
                    await client.call_tool("slow", {"seconds": 60})
                except McpClosed as error:
                    endings.append(str(error))

            nursery.start_soon(slow)
            await trio.sleep(0.2)
            with pytest.raises(McpClosed) as raised:
                await client.call_tool("crash", {})
            endings.append(str(raised.value))
            await trio.sleep(0)
            with pytest.raises(McpClosed):  # a request after the end is not sent at all
                await client.request("ping")
            await client.close()
            return client, endings

    client, endings = run(main)
    assert sorted(endings) == ["the MCP server closed the connection (exit status 3)"] * 2
    assert cancelled_ids(client) == [] and client.transport.methods()[-1] == "tools/call"


# Lab 17.4: the server's tools, page by page -------------------------------------------------


def listed(*flags):
    async def main():
        async with trio.open_nursery() as nursery:
            client = await recording_client(nursery, *flags)
            try:
                return await client.list_tools(), client.transport.sent
            except McpError as error:
                return error, None
            finally:
                await client.close()

    tools, sent = run(main)
    if isinstance(tools, McpError):
        raise tools
    return tools, sent


def test_tools_list_follows_every_page():
    tools, sent = listed("--page-size", "3")
    names = [tool.name for tool in tools]
    assert names[:3] == ["echo", "fail", "slow"] and len(names) == 12 and len(set(names)) == 12
    pages = [message.params for message in sent if getattr(message, "method", None) == "tools/list"]
    assert pages == [None, {"cursor": "3"}, {"cursor": "6"}, {"cursor": "9"}]
    echo = tools[0]
    assert echo.description == "Answer the text it is given." and echo.input_schema["required"] == ["text"]


def test_tools_an_empty_cursor_ends_the_list_as_a_missing_one_does():
    tools, _ = listed("--page-size", "5", "--empty-cursor")
    assert len(tools) == 12


def test_tools_a_repeated_cursor_is_an_error():
    with pytest.raises(McpError, match="tools/list gave the cursor 'again' twice: its pages would never end"):
        listed("--repeat-cursor")


def test_tools_a_list_over_the_page_cap_is_an_error(monkeypatch):
    monkeypatch.setattr(mcp_client, "MAX_PAGES", 2)
    with pytest.raises(McpError, match="tools/list has more than 2 pages"):
        listed("--page-size", "3")


def test_tools_call_gives_content_and_a_tool_error_stays_an_error():
    async def main():
        async with trio.open_nursery() as nursery:
            client = await recording_client(nursery)
            echoed = await client.call_tool("echo", {"text": "hello"})
            failed = await client.call_tool("fail", {})
            await client.close()
            return echoed, failed

    echoed, failed = run(main)
    assert echoed.content == [{"type": "text", "text": "hello"}] and not echoed.is_error
    assert failed.is_error and failed.content[0]["text"] == "it failed, as it always does"


# Lab 17.5: the servers' tools in the agent ---------------------------------------------------


def test_agent_tool_names_are_sanitised_bounded_and_unique():
    assert mcp_tool_name("time", "get_current_time") == "mcp__time__get_current_time"
    assert mcp_tool_name("my.clock", "get-time now") == "mcp__my_clock__get_time_now"
    long = mcp_tool_name("server", "t" * 80)
    assert len(long) == 64 and long.startswith("mcp__server__ttt") and long[-9] == "_"
    assert long != mcp_tool_name("server", "t" * 81)  # the hash is of the names, not of the cut
    clash = mcp_tool_name("a-b", "x", lambda name: name == "mcp__a_b__x")
    assert clash.startswith("mcp__a_b__x_") and len(clash) == len("mcp__a_b__x_") + 8
    assert clash != mcp_tool_name("a_b", "x", lambda name: name == "mcp__a_b__x")


@pytest.mark.parametrize("document, words", [
    ("[1, 2", "not JSON"),
    ('{"servers": {}}', 'the file has no "mcpServers" object'),
    ('{"mcpServers": {"t": {"args": []}}}', "server 't': \"command\" is a non-empty string"),
    ('{"mcpServers": {"t": {"command": "x", "args": "-m"}}}', "\"args\" is a list of strings"),
    ('{"mcpServers": {"t": {"command": "x", "env": {"N": 1}}}}', "\"env\" is an object of strings"),
    ('{"mcpServers": {"t": {"command": "x", "exposure": "hidden"}}}', "\"exposure\" is one of deferred, codemode, direct"),
    ('{"mcpServers": {"t": {"command": "x", "arg": []}}}', "unknown key 'arg'"),
    ('{"mcpServers": {"t": {"url": "http://127.0.0.1:1/mcp"}}}', "unknown key 'url'"),
    ('{"mcpServers": {"t": {"type": "http", "command": "x"}}}', "only stdio servers (a command) are supported"),
], ids=["not-json", "no-servers", "no-command", "args", "env", "exposure", "unknown-key", "url", "http"])
def test_agent_a_config_that_is_not_valid_is_one_config_error(tmp_path, document, words):
    path = tmp_path / "mcp.json"
    path.write_text(document, encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert str(raised.value).startswith(f"--mcp-config {path}") and words in str(raised.value)
    assert "\n" not in str(raised.value)


def test_agent_servers_register_deferred_tools_and_list_them_in_the_section():
    registry = ToolRegistry()
    configs = [server_config(Path("mcp.json"), "fixture", {"command": FIXTURE[0], "args": FIXTURE[1:]}),
               server_config(Path("mcp.json"), "broken", {"command": sys.executable, "args": ["-c", "raise SystemExit(1)"]})]
    sections = {}

    async def main():
        async with trio.open_nursery() as nursery:
            servers = McpServers(configs, registry)
            servers.attach(sections.__setitem__)
            first = sections["mcp_servers"]
            await servers.start(nursery)
            await servers.wait_for(servers.servers)
            call = ToolCall(id="c1", name="mcp__fixture__echo", arguments={"text": "hi"})
            echoed = await execute_tool_call(call, registry, signal=AbortSignal(), declared=[call.name])
            failed = await execute_tool_call(ToolCall(id="c2", name="mcp__fixture__fail", arguments={}), registry,
                                             signal=AbortSignal(), declared=["mcp__fixture__fail"])
            await servers.close()
            return first, echoed, failed, [server.client.transport.pid for server in servers.servers]

    first, echoed, failed, pids = run(main)
    assert first == "MCP servers:\n- fixture: connecting, 0 tools\n- broken: connecting, 0 tools"
    assert registry.exposure_of("mcp__fixture__echo") == "deferred" and registry.declared() == []
    lines = sections["mcp_servers"].split("\n")
    assert lines[1].startswith("- fixture: connected, 12 tools: mcp__fixture__echo, mcp__fixture__fail, ")
    assert lines[2] == "- broken: failed (the MCP server closed the connection (exit status 1)), 0 tools"
    assert "Answer the text" not in sections["mcp_servers"]  # names only: a reworded description changes nothing
    assert text_of(echoed) == "hi" and not echoed.is_error and echoed.details == {"server": "fixture", "tool": "echo"}
    assert failed.is_error and text_of(failed) == "it failed, as it always does"
    assert all(gone(pid) for pid in pids)


def environment(marker):
    env = {key: value for key, value in os.environ.items() if "proxy" not in key.lower()}
    env.pop("TINY_PI_API_KEY", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["TINY_PI_TEST_MARKER"] = marker
    return env


def processes_with(marker):
    """The pids whose environment holds `marker`: what the agent started and left running."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker.encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def agent(tmp_path, config, prompt, reply=None):
    """Run python -m tiny_pi.agent with --mcp-config against a loopback model; the requests it got."""
    root = tmp_path / "project"
    root.mkdir(exist_ok=True)
    path = tmp_path / "mcp.json"
    path.write_text(config if isinstance(config, str) else json.dumps(config), encoding="utf-8")
    requests = []
    marker = f"mcp-{os.getpid()}-{tmp_path.name}"

    async def record(stream, body):
        requests.append(body)
        await (reply or time_model)(stream, body)

    async def main():
        async with trio.open_nursery() as nursery:
            server = await LoopbackServer(record).start(nursery)
            command = [sys.executable, "-m", "tiny_pi.agent", "--base-url", server.base_url, "--model", "loopback",
                       "--root", str(root), "--tools", "read", "--mcp-config", str(path), prompt]
            done = await trio.run_process(command, cwd=PROJECT, env=environment(marker), capture_stdout=True,
                                          capture_stderr=True, check=False)
            nursery.cancel_scope.cancel()
        return done

    done = run(main)
    return done, requests, processes_with(marker)


async def send_payloads(stream, payloads):
    await stream.send_all(STREAM_HEAD)
    for payload in payloads:
        await send_chunk(stream, sse(payload))
    await send_chunk(stream, b"data: [DONE]\n\n")
    await stream.send_all(b"0\r\n\r\n")


async def time_model(stream, body):
    """Search for the time tool, call it for Tokyo, then answer with what it said."""
    results = [message for message in body["messages"] if message["role"] == "tool"]
    if not results:
        payloads = tool_call_chunks("call_1", "tool_search", json.dumps({"query": "current time in a timezone"}))
    elif len(results) == 1:
        payloads = tool_call_chunks("call_2", "mcp__time__get_current_time", json.dumps({"timezone": "Asia/Tokyo"}))
    else:
        answer = json.loads(results[-1]["content"])["datetime"]
        payloads = [chunk({"role": "assistant", "content": f"In Tokyo it is {answer}."}), chunk(finish_reason="stop")]
        await send_payloads(stream, payloads)
        return
    await send_payloads(stream, [*payloads, chunk(finish_reason="tool_calls")])


def test_agent_payoff_finds_the_time_tool_through_tool_search_and_leaves_no_server(tmp_path):
    config = {"mcpServers": {"time": {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}}}
    done, requests, left = agent(tmp_path, config, "What time is it in Tokyo?")

    assert done.returncode == 0, done.stderr.decode()
    declared = [[tool["function"]["name"] for tool in request.get("tools", [])] for request in requests]
    assert declared[0] == ["read", "tool_search"]
    assert "mcp__time__get_current_time" in declared[1]  # found by the search, declared from the next request
    system = requests[0]["messages"][0]["content"]  # the state as the prompt began: no wait for deferred servers
    assert re.search(r"\n- time: (connecting, 0 tools|connected, 2 tools: mcp__time__get_current_time, "
                     r"mcp__time__convert_time)$", system)
    assert "In Tokyo it is 20" in done.stdout.decode() and "+09:00" in done.stdout.decode()
    assert left == []


def test_agent_direct_servers_are_waited_for_before_the_first_request(tmp_path):
    config = {"mcpServers": {"fixture": {"command": FIXTURE[0], "args": [*FIXTURE[1:], "--slow-start", "1"],
                                         "exposure": "direct"}}}

    async def answer(stream, body):
        await send_payloads(stream, [chunk({"role": "assistant", "content": "ok"}), chunk(finish_reason="stop")])

    done, requests, left = agent(tmp_path, config, "hello", reply=answer)
    assert done.returncode == 0, done.stderr.decode()
    declared = [tool["function"]["name"] for tool in requests[0]["tools"]]
    assert declared[:3] == ["read", "tool_search", "mcp__fixture__echo"]
    assert left == []


@pytest.mark.parametrize("config, status, line", [
    ('{"mcpServers": {"t": {"command": ""}}}', 2, "server 't': \"command\" is a non-empty string"),
    ('{"mcpServers": {"t": {"command": "no-such-mcp-server-here"}}}', 2,
     "--mcp-config: server 't' did not start: [Errno 2] No such file or directory"),
], ids=["bad-config", "no-such-command"])
def test_agent_a_bad_config_or_a_server_that_will_not_start_is_one_line_and_exit_2(tmp_path, config, status, line):
    done, requests, left = agent(tmp_path, config, "hello")
    stderr = done.stderr.decode()
    assert done.returncode == status and line in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr
    assert requests == [] and left == []


def eval_task(tmp_path, task_toml, config=None):
    """TASKS/mcp/ with `task_toml` (and mcp.json beside it), and an --out DIR for the harness."""
    task = tmp_path / "tasks" / "mcp"
    (task / "workspace").mkdir(parents=True)
    (task / "task.toml").write_text(task_toml, encoding="utf-8")
    if config is not None:
        (task / "mcp.json").write_text(json.dumps(config), encoding="utf-8")
    return tmp_path / "tasks", tmp_path / "out"


def evaluate(tasks, out, reply):
    """python -m tiny_pi.eval TASKS against a loopback model; the process and the requests it got."""
    requests = []
    marker = f"mcp-eval-{os.getpid()}-{out.parent.name}"

    async def record(stream, body):
        requests.append(body)
        await reply(stream, body)

    async def main():
        async with trio.open_nursery() as nursery:
            server = await LoopbackServer(record).start(nursery)
            command = [sys.executable, "-m", "tiny_pi.eval", str(tasks), "--base-url", server.base_url,
                       "--model", "loopback", "--out", str(out)]
            done = await trio.run_process(command, cwd=PROJECT, env=environment(marker), capture_stdout=True,
                                          capture_stderr=True, check=False)
            nursery.cancel_scope.cancel()
        return done

    return run(main), requests, processes_with(marker)


async def echo_then_write(stream, body):
    """Search for echo, call it, write what it said into NAME.txt, then answer."""
    results = [message for message in body["messages"] if message["role"] == "tool"]
    steps = [
        ("tool_search", {"query": "echo some text"}),
        ("mcp__fixture__echo", {"text": "tiny-pi"}),
        ("write", {"path": "NAME.txt", "content": results[-1]["content"] if results else ""}),
    ]
    if len(results) < len(steps):
        name, arguments = steps[len(results)]
        payloads = [*tool_call_chunks(f"call_{len(results) + 1}", name, json.dumps(arguments)), chunk(finish_reason="tool_calls")]
    else:
        payloads = [chunk({"role": "assistant", "content": "Done."}), chunk(finish_reason="stop")]
    await send_payloads(stream, payloads)


def test_agent_eval_a_task_reaches_an_mcp_tool_through_tool_search_and_is_judged(tmp_path):
    """Chapter 14's harness measures the agent with the new tools: a task's defer, codemode and mcp_config."""
    tasks, out = eval_task(tmp_path, (
        'prompt = "Echo the name and write it into NAME.txt."\ntools = ["read", "write"]\ndefer = ["edit"]\n'
        'codemode = true\nmcp_config = "mcp.json"\nmax_turns = 6\n\n[[checks]]\npath = "NAME.txt"\ncontains = "tiny-pi"\n'
    ), {"mcpServers": {"fixture": {"command": FIXTURE[0], "args": FIXTURE[1:]}}})
    done, requests, left = evaluate(tasks, out, echo_then_write)

    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()
    assert done.stdout.decode().startswith("PASS mcp\n")
    declared = [[tool["function"]["name"] for tool in request.get("tools", [])] for request in requests]
    assert declared[0] == ["read", "write", "tool_search", "codemode"]  # edit and the MCP tools: deferred
    assert "mcp__fixture__echo" in declared[1]  # found by the search, declared from the next request
    assert (out / "mcp" / "workspace" / "NAME.txt").read_text() == "tiny-pi"
    assert left == []  # the MCP server and the codemode worker: ended with the agent


@pytest.mark.parametrize("keys, config, words", [
    ('defer = ["read"]', None, "defer: read is in --tools too"),
    ('defer = "edit"', None, "defer: must be a list of tool names"),
    ('codemode = "yes"', None, "codemode: must be true or false, got 'yes'"),
    ('mcp_config = "../mcp.json"', None, "mcp_config: '../mcp.json' is outside the task's directory"),
    ('mcp_config = "mcp.json"', {"servers": {}}, 'mcp_config: --mcp-config'),
], ids=["defer-in-tools", "defer-not-a-list", "codemode-not-a-bool", "config-outside", "config-not-valid"])
def test_agent_eval_a_task_with_bad_new_keys_is_refused_before_anything_runs(tmp_path, keys, config, words):
    tasks, out = eval_task(tmp_path, f'prompt = "Hello."\n{keys}\nmax_turns = 2\n\n[[checks]]\ncommand = "true"\n', config)
    done, requests, left = evaluate(tasks, out, echo_then_write)

    stderr = done.stderr.decode()
    assert done.returncode == 2 and words in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1 and requests == [] and not out.exists()
