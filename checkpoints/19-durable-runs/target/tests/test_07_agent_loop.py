"""Chapter 07: the agent loop.

Run alone with `python -m pytest tests/test_07_agent_loop.py`. The labs
follow the lesson: one turn and the round trip with ScriptedModel (7.1),
tools in the loop (7.2), how a run ends (7.3), the same round trip over real
HTTP against the loopback server of tests/loopback_server.py (7.4), and the
built-in tools and `python -m tiny_pi.agent` as a real subprocess (7.5).
Every async body runs under a short `trio.fail_after`, so a run that never
ends fails fast.
"""

import os
import signal as signals
import subprocess
import sys
import unicodedata
from functools import partial
from pathlib import Path

import attrs
import httpx
import pytest
import trio
import trio.testing
from loopback_server import STREAM_HEAD, LoopbackServer, chunk, readme_answer, readme_model, send_chunk, sse

from tiny_pi.abort import AbortSignal
from tiny_pi.agent_loop import run_agent
from tiny_pi.builtin_tools import builtin_tools
from tiny_pi.messages import AgentContext, ToolCall, ToolResultMessage, Usage, assistant_message, text, user_message
from tiny_pi.providers.openai_compatible import OpenAICompatibleModel
from tiny_pi.scripted_model import ScriptedFailure, ScriptedModel
from tiny_pi.tool_execution import execute_tool_call
from tiny_pi.tools import Tool, ToolRegistry

TIME_LIMIT = 5.0  # a guard against hangs, not a speed test: the machine may be busy
PROCESS_TIME_LIMIT = 30.0  # a subprocess imports httpx and trio first
PROJECT = Path(__file__).resolve().parent.parent
README = "# tiny-pi\nA small agent runtime.\n"
QUESTION = "What is this project called?"
SECRET = "sk-test-07-s3cret"


async def read_readme(arguments, *, signal):
    return [text(README)]


READ = Tool(
    "read",
    "Read a UTF-8 text file.",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    read_readme,
)

README_CALL = ToolCall(id="call_1", name="read", arguments={"path": "README.md"})
TURN_1 = assistant_message([text("I will read the README first."), README_CALL], "toolUse",
                           usage=Usage(input=60, output=18, total_tokens=78))
TURN_2 = assistant_message([text("The project is called tiny-pi.")],
                           usage=Usage(input=95, output=9, total_tokens=104))


def play(model, context, registry, **kwargs):
    """run_agent in a fresh trio run; returns (outcome, events)."""
    events = []

    async def main():
        with trio.fail_after(TIME_LIMIT):
            return await run_agent(model, context, registry, on_event=events.append, **kwargs)

    return trio.run(main), events


def types(events):
    return [event.type for event in events]


def untimed(message):
    """Tool results carry the time they were made; compare them without it."""
    return attrs.evolve(message, timestamp=0) if isinstance(message, ToolResultMessage) else message


# Lab 7.1: one turn at a time, and the README round trip.


def test_loop_a_text_reply_is_one_turn_that_stops():
    context = AgentContext([user_message("Hi")])
    reply = assistant_message([text("Hello!")])

    outcome, events = play(ScriptedModel([reply]), context, ToolRegistry([READ]))

    assert types(events) == [
        "agent_start", "turn_start", "start", "text_delta", "done", "turn_end", "agent_end",
    ]
    assert (outcome.stop_reason, outcome.turns, outcome.error_message) == ("stop", 1, None)
    assert outcome.messages == (reply,)
    assert context.messages == [user_message("Hi"), reply]
    assert events[-1].outcome is outcome
    assert (events[1].turn, events[-2].turn, events[-2].message, events[-2].tool_results) == (1, 1, reply, ())


def test_loop_readme_round_trip_transcript_and_event_order():
    model = ScriptedModel([TURN_1, TURN_2])
    context = AgentContext([user_message(QUESTION)])

    outcome, events = play(model, context, ToolRegistry([READ]))

    result = ToolResultMessage("call_1", "read", (text(README),), is_error=False, timestamp=0)
    assert [untimed(message) for message in context.messages] == [
        user_message(QUESTION), TURN_1, result, TURN_2,
    ]
    assert types(events) == [
        "agent_start",
        "turn_start", "start", "text_delta", "toolcall_delta", "toolcall_end", "done",
        "tool_execution_start", "tool_execution_end", "turn_end",
        "turn_start", "start", "text_delta", "done", "turn_end",
        "agent_end",
    ]
    assert events[7].tool_call == README_CALL
    assert untimed(events[8].result) == result
    assert [untimed(r) for r in events[9].tool_results] == [result]
    assert [len(request.messages) for request in model.requests] == [1, 3]
    assert untimed(model.requests[1].messages[2]) == result
    assert (outcome.stop_reason, outcome.turns) == ("stop", 2)
    assert [untimed(m) for m in outcome.messages] == [TURN_1, result, TURN_2]


def test_loop_sums_usage_over_turns_and_offers_the_tools_each_call():
    offered = []

    class Recording:
        """A ScriptedModel that also notes which tools each call was offered."""

        def __init__(self, turns):
            self.model = ScriptedModel(turns)

        def stream(self, context, *, signal=None, tools=None):
            offered.append([tool.name for tool in tools])
            return self.model.stream(context, signal=signal)

    outcome, _ = play(Recording([TURN_1, TURN_2]), AgentContext([user_message(QUESTION)]), ToolRegistry([READ]))

    assert outcome.usage == Usage(input=155, output=27, total_tokens=182, cache_read=0, cache_write=0)
    assert offered == [["read"], ["read"]]


def test_loop_forwards_each_event_before_the_next_one_is_produced():
    seen_while_streaming = []
    context = AgentContext([user_message(QUESTION)])

    def listener(event):
        if event.type == "text_delta":  # the transcript does not have the message yet
            seen_while_streaming.append(len(context.messages))

    async def main():
        with trio.fail_after(TIME_LIMIT):
            return await run_agent(ScriptedModel([TURN_1, TURN_2]), context, ToolRegistry([READ]),
                                   on_event=listener)

    trio.run(main)

    assert seen_while_streaming == [1, 3]


# Lab 7.2: tools in the loop.


def test_tools_run_concurrently_and_results_keep_call_order():
    b_reported = trio.Event()
    events = []

    def listener(event):
        events.append(event)
        if event.type == "tool_execution_end" and event.tool_call.id == "call_b":
            b_reported.set()

    async def slow_a(arguments, *, signal):
        await b_reported.wait()  # ends only after b's result: run one by one, this never ends
        return [text("a")]

    async def quick_b(arguments, *, signal):
        return [text("b")]

    registry = ToolRegistry([Tool("a", "A.", {"type": "object"}, slow_a), Tool("b", "B.", {"type": "object"}, quick_b)])
    calls = [ToolCall(id="call_a", name="a", arguments={}), ToolCall(id="call_b", name="b", arguments={})]
    turns = [assistant_message(calls, "toolUse"), assistant_message([text("done")])]
    context = AgentContext([user_message("both")])

    async def main():
        with trio.fail_after(TIME_LIMIT):
            return await run_agent(ScriptedModel(turns), context, registry, on_event=listener)

    outcome = trio.run(main)

    assert [m.tool_call_id for m in context.messages if isinstance(m, ToolResultMessage)] == ["call_a", "call_b"]
    tool_events = [(e.type, e.tool_call.id) for e in events if e.type.startswith("tool_execution")]
    assert tool_events == [
        ("tool_execution_start", "call_a"), ("tool_execution_start", "call_b"),
        ("tool_execution_end", "call_b"), ("tool_execution_end", "call_a"),
    ]
    assert [r.tool_call_id for r in events[types(events).index("turn_end")].tool_results] == ["call_a", "call_b"]
    assert outcome.stop_reason == "stop"


def test_tools_errors_go_back_to_the_model_and_the_run_goes_on():
    wrong = ToolCall(id="call_w", name="write", arguments={"path": "README.md"})
    turns = [assistant_message([wrong], "toolUse"), TURN_1, TURN_2]
    model = ScriptedModel(turns)

    outcome, _ = play(model, AgentContext([user_message(QUESTION)]), ToolRegistry([READ]))

    error = model.requests[1].messages[2]
    assert (error.tool_call_id, error.is_error) == ("call_w", True)
    assert error.content == (text("Tool 'write' not found (available tools: read)"),)
    assert (outcome.stop_reason, outcome.turns) == ("stop", 3)


def test_tools_of_a_length_stop_never_run():
    ran = []

    async def spy(arguments, *, signal):
        ran.append(arguments)
        return [text("ran")]

    cut_off = ToolCall(id="call_1", name="read", arguments=None, raw_arguments='{"path": "REA')
    registry = ToolRegistry([Tool("read", "Read.", {"type": "object"}, spy)])
    context = AgentContext([user_message(QUESTION)])

    outcome, events = play(ScriptedModel([assistant_message([cut_off], "length")]), context, registry)

    assert ran == []
    assert "tool_execution_start" not in types(events)
    assert (outcome.stop_reason, outcome.turns, len(context.messages)) == ("length", 1, 2)


# Lab 7.3: how a run ends.


def test_end_an_error_turn_stays_in_the_transcript_and_ends_the_run():
    failure = ScriptedFailure("error", "rate limited", partial_text="I will")
    model = ScriptedModel([failure, TURN_2])
    context = AgentContext([user_message(QUESTION)])

    outcome, events = play(model, context, ToolRegistry([READ]))

    assert (outcome.stop_reason, outcome.error_message, outcome.turns) == ("error", "rate limited", 1)
    assert context.messages[-1].stop_reason == "error"
    assert context.messages[-1].content == (text("I will"),)
    assert len(model.requests) == 1
    assert types(events)[-3:] == ["error", "turn_end", "agent_end"]


def test_end_the_turn_limit_is_a_clear_error_and_leaves_a_valid_transcript():
    again = [assistant_message([attrs.evolve(README_CALL, id=f"call_{n}")], "toolUse") for n in (1, 2, 3)]
    model = ScriptedModel(again)
    context = AgentContext([user_message(QUESTION)])

    outcome, events = play(model, context, ToolRegistry([READ]), max_turns=2)

    assert outcome.stop_reason == "turn_limit"
    assert outcome.error_message == "turn limit reached: the model still wanted tools after 2 turns"
    assert [m.role for m in context.messages] == ["user", "assistant", "toolResult", "assistant", "toolResult"]
    assert len(model.requests) == 2
    assert types(events)[-2:] == ["turn_end", "agent_end"]


def test_end_max_turns_below_one_is_refused_before_anything_happens():
    model = ScriptedModel([assistant_message([text("never sent")], "stop")])
    context = AgentContext([user_message(QUESTION)])
    events = []

    async def main():
        with trio.fail_after(TIME_LIMIT):
            await run_agent(model, context, ToolRegistry([READ]), on_event=events.append, max_turns=0)

    with pytest.raises(ValueError, match="max_turns must be at least 1, got 0"):
        trio.run(main)
    assert (len(model.requests), events, len(context.messages)) == (0, [], 1)


def test_end_a_signal_aborted_before_the_run_ends_it_after_one_call():
    signal = AbortSignal()
    signal.abort()
    model = ScriptedModel([TURN_1, TURN_2])

    outcome, _ = play(model, AgentContext([user_message(QUESTION)]), ToolRegistry([READ]), signal=signal)

    assert (outcome.stop_reason, outcome.error_message) == ("aborted", "Request was aborted")
    assert outcome.messages[0].stop_reason == "aborted"
    assert len(model.requests) == 1


def test_end_an_abort_during_a_tool_ends_the_run_promptly_with_no_task_left():
    log = []
    signal = AbortSignal()

    async def stuck(arguments, *, signal):
        log.append("tool started")
        try:
            await trio.sleep_forever()
        finally:
            log.append("tool task gone")

    registry = ToolRegistry([Tool("read", "Read.", {"type": "object"}, stuck)])
    model = ScriptedModel([TURN_1, TURN_2])
    context = AgentContext([user_message(QUESTION)])

    async def press_stop():
        await trio.testing.wait_all_tasks_blocked()
        log.append("abort")
        signal.abort()

    async def main():
        with trio.fail_after(TIME_LIMIT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(press_stop)
                outcome = await run_agent(model, context, registry, signal=signal)
                log.append("run over")
                return outcome

    outcome = trio.run(main)

    assert log == ["tool started", "abort", "tool task gone", "run over"]
    assert (outcome.stop_reason, outcome.turns) == ("aborted", 1)
    assert outcome.error_message == "the run was aborted while tools were running"
    assert context.messages[-1].content == (text("Tool 'read' was aborted before it finished"),)
    assert len(model.requests) == 1


# Lab 7.5: the same round trip over real HTTP (its command-line tests follow lab 7.4's).


def real_model(server, api_key=SECRET):
    """The chapter 05 provider through httpx's real transport (given explicitly, so that
    proxy settings in the environment cannot reroute a request meant for 127.0.0.1)."""
    return OpenAICompatibleModel(server.base_url, "loopback", api_key, transport=httpx.AsyncHTTPTransport())


def project_dir(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    (root / "README.md").write_text(README, encoding="utf-8")
    return root


def test_http_readme_round_trip_over_a_real_server(tmp_path):
    context = AgentContext([user_message(QUESTION)])
    registry = ToolRegistry(builtin_tools(project_dir(tmp_path)))
    events = []

    async def main():
        with trio.fail_after(TIME_LIMIT):
            async with trio.open_nursery() as nursery:
                server = await LoopbackServer().start(nursery)
                outcome = await run_agent(real_model(server), context, registry, on_event=events.append)
                nursery.cancel_scope.cancel()
        return server, outcome

    server, outcome = trio.run(main)

    assert (outcome.stop_reason, outcome.turns) == ("stop", 2)
    assert context.messages[-1].content == (text("The project is called tiny-pi."),)
    assert outcome.usage == Usage(input=155, output=27, total_tokens=182, cache_read=0, cache_write=0)
    (first_head, first), (_, second) = server.requests
    assert f"authorization: bearer {SECRET}" in first_head.lower()
    assert [tool["function"]["name"] for tool in first["tools"]] == ["read", "ls"]
    assert second["tools"] == first["tools"]
    assert second["messages"] == [
        {"role": "user", "content": QUESTION},
        {
            "role": "assistant",
            "content": "I will read the README first.",
            "tool_calls": [{
                "id": "call_1",
                "type": "function",
                "function": {"name": "read", "arguments": '{"path": "README.md"}'},
            }],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": README},
    ]
    assert types(events).count("text_delta") == 3  # the reply arrived in pieces, forwarded as they came


def test_http_abort_during_the_model_call_keeps_the_partial_and_never_sends_it_back(tmp_path):
    signal = AbortSignal()
    context = AgentContext([user_message(QUESTION)])
    registry = ToolRegistry(builtin_tools(project_dir(tmp_path)))

    async def hang_after_a_word(stream, body):
        if len(server.requests) > 1:  # the second run gets a real answer
            return await readme_model(stream, body)
        await stream.send_all(STREAM_HEAD)
        await send_chunk(stream, sse(chunk({"role": "assistant", "content": "Let me"})))
        await trio.sleep_forever()  # the rest never comes

    server = LoopbackServer(hang_after_a_word)

    def abort_on_first_word(event):
        if event.type == "text_delta":
            signal.abort()

    async def main():
        with trio.fail_after(TIME_LIMIT):
            async with trio.open_nursery() as nursery:
                await server.start(nursery)
                aborted = await run_agent(real_model(server), context, registry, signal=signal,
                                          on_event=abort_on_first_word)
                context.messages.append(user_message("Please try again."))
                again = await run_agent(real_model(server), context, registry)
                nursery.cancel_scope.cancel()
        return aborted, again

    aborted, again = trio.run(main)

    assert (aborted.stop_reason, aborted.turns) == ("aborted", 1)
    partial = context.messages[1]
    assert (partial.stop_reason, partial.content) == ("aborted", (text("Let me"),))
    assert again.stop_reason == "stop"
    assert [message["role"] for message in server.requests[1][1]["messages"]] == ["user", "user"]


# Lab 7.4: the built-in tools read and ls, confined to a root.


def call_tool(registry, name, arguments, call_id="call_1"):
    async def main():
        with trio.fail_after(TIME_LIMIT):
            call = ToolCall(id=call_id, name=name, arguments=arguments)
            return await execute_tool_call(call, registry, signal=AbortSignal())

    result = trio.run(main)
    (block,) = result.content
    return result.is_error, block.text


def test_builtin_read_returns_text_and_bounds_it(tmp_path):
    root = project_dir(tmp_path)
    (root / "big.txt").write_text("x" * 25_000, encoding="utf-8")
    registry = ToolRegistry(builtin_tools(root))

    assert call_tool(registry, "read", {"path": "README.md"}) == (False, README)
    is_error, content = call_tool(registry, "read", {"path": "big.txt"})
    assert not is_error
    assert content == "x" * 20_000 + "\n[truncated: showed 20000 of 25000 characters]"


def test_builtin_read_refuses_missing_and_binary_files(tmp_path):
    root = project_dir(tmp_path)
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    registry = ToolRegistry(builtin_tools(root))

    assert call_tool(registry, "read", {"path": "nope.md"}) == (
        True, "Tool 'read' failed: FileNotFoundError: no such file: nope.md"
    )
    assert call_tool(registry, "read", {"path": "logo.png"}) == (
        True, "Tool 'read' failed: ValueError: logo.png is not UTF-8 text"
    )


def test_builtin_paths_that_leave_the_root_are_refused(tmp_path):
    root = project_dir(tmp_path)
    secrets = tmp_path / "project-secrets"
    secrets.mkdir()
    (secrets / "key.txt").write_text("TOP SECRET", encoding="utf-8")
    (root / "link.txt").symlink_to(secrets / "key.txt")
    registry = ToolRegistry(builtin_tools(root))

    refusals = {
        "../project-secrets/key.txt": "'../project-secrets/key.txt' leads outside the project root",
        "link.txt": "'link.txt' leads outside the project root",
        str(secrets / "key.txt"): f"{str(secrets / 'key.txt')!r} is absolute; give a path relative to the project root",
    }
    for path, why in refusals.items():
        assert call_tool(registry, "read", {"path": path}) == (True, f"Tool 'read' failed: ValueError: {why}")
    assert call_tool(registry, "ls", {"path": ".."}) == (
        True, "Tool 'ls' failed: ValueError: '..' leads outside the project root"
    )


def test_builtin_ls_lists_one_entry_a_line(tmp_path):
    root = project_dir(tmp_path)
    (root / "src").mkdir()
    (root / "src" / "main.py").write_text("", encoding="utf-8")
    (root / "empty").mkdir()
    registry = ToolRegistry(builtin_tools(root))

    assert call_tool(registry, "ls", {}) == (False, "README.md\nempty/\nsrc/")
    assert call_tool(registry, "ls", {"path": "src"}) == (False, "main.py")
    assert call_tool(registry, "ls", {"path": "empty"}) == (False, "(empty directory)")
    assert call_tool(registry, "ls", {"path": "README.md"}) == (
        True, "Tool 'ls' failed: NotADirectoryError: no such directory: README.md"
    )


# Lab 7.5, continued: python -m tiny_pi.agent, the command line.


def agent_command(server, root, *extra):
    return [sys.executable, "-m", "tiny_pi.agent", "--base-url", server.base_url, "--model", "loopback",
            "--root", str(root), *extra, QUESTION]


def agent_env():
    """The environment of the agent process: the key set, no proxy that could reroute 127.0.0.1."""
    env = {key: value for key, value in os.environ.items() if "proxy" not in key.lower()}
    env["TINY_PI_API_KEY"] = SECRET
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_agent_process(reply, root, *extra):
    """Start the loopback server, run `python -m tiny_pi.agent` against it, return the process result."""

    async def main():
        with trio.fail_after(PROCESS_TIME_LIMIT):
            async with trio.open_nursery() as nursery:
                server = await LoopbackServer(reply).start(nursery)
                done = await trio.run_process(
                    agent_command(server, root, *extra), cwd=PROJECT, env=agent_env(),
                    capture_stdout=True, capture_stderr=True, check=False,
                )
                nursery.cancel_scope.cancel()
        return server, done

    return trio.run(main)


def test_cli_round_trip_as_a_real_process(tmp_path):
    server, done = run_agent_process(readme_model, project_dir(tmp_path))

    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, stderr
    assert stdout == (
        "I will read the README first.\n"
        '[tool] read {"path": "README.md"}\n'
        "[ok] read: # tiny-pi A small agent runtime.\n"
        "The project is called tiny-pi.\n"
    )
    assert stderr == "[stop] turns: 2, tokens: input 155, output 27, cache read 0, cache write 0\n"
    assert len(server.requests) == 2
    assert f"bearer {SECRET}" in server.requests[0][0].lower()


def test_cli_an_error_exits_1_and_never_shows_the_key(tmp_path):
    async def refuse(stream, body):
        message = f"Incorrect API key provided: {SECRET}"
        payload = ('{"error": {"message": "%s"}}' % message).encode()
        await stream.send_all(
            b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(payload), payload)
        )

    _, done = run_agent_process(refuse, project_dir(tmp_path))

    output = done.stdout.decode() + done.stderr.decode()
    assert done.returncode == 1
    assert "[error] turns: 1" in output
    assert "error: HTTP 401: Incorrect API key provided" in output
    assert SECRET not in output


def test_cli_the_turn_limit_exits_1(tmp_path):
    async def always_read(stream, body):
        body = {**body, "messages": [{"role": "user", "content": "again"}]}  # never "sees" a result
        await stream.send_all(STREAM_HEAD)
        for payload in readme_answer(body):
            await send_chunk(stream, sse(payload))
        await stream.send_all(b"0\r\n\r\n")

    server, done = run_agent_process(always_read, project_dir(tmp_path), "--max-turns", "2")

    assert done.returncode == 1
    assert done.stderr.decode().endswith(
        "error: turn limit reached: the model still wanted tools after 2 turns\n"
    )
    assert len(server.requests) == 2


def test_cli_bad_usage_exits_2_with_one_clear_line(tmp_path, capsys):
    from tiny_pi.agent import main

    server = ["--base-url", "http://127.0.0.1:9/v1"]  # never reached: nothing may be sent
    for argv, why in (
        ([*server, "--model", "m", "--max-turns", "0"], "--max-turns must be at least 1, got 0"),
        ([*server, "--model", "m", "--root", str(tmp_path / "nowhere")], "is not a directory"),
        (server, "the following arguments are required: --model"),
    ):
        with pytest.raises(SystemExit) as exit:
            main([*argv, QUESTION])
        stderr = capsys.readouterr().err
        assert exit.value.code == 2
        assert why in stderr and "Traceback" not in stderr


def test_cli_ctrl_c_aborts_the_turn_and_prints_the_partial(tmp_path):
    async def hang_after_a_word(stream, body):
        await stream.send_all(STREAM_HEAD)
        await send_chunk(stream, sse(chunk({"role": "assistant", "content": "Let me look"})))
        await trio.sleep_forever()

    async def main():
        with trio.fail_after(PROCESS_TIME_LIMIT):
            async with trio.open_nursery() as nursery:
                server = await LoopbackServer(hang_after_a_word).start(nursery)
                command = agent_command(server, project_dir(tmp_path))
                process = await nursery.start(partial(
                    trio.run_process, command, cwd=PROJECT, env=agent_env(),
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False,
                ))
                seen = b""
                while b"Let me look" not in seen:
                    piece = await process.stdout.receive_some(4096)
                    if not piece:
                        break  # the agent ended (or crashed) before the first words
                    seen += piece
                else:
                    process.send_signal(signals.SIGINT)
                async for piece in process.stdout:
                    seen += piece
                errors = b"".join([piece async for piece in process.stderr])
                await process.wait()
                nursery.cancel_scope.cancel()
        return process.returncode, seen.decode(), errors.decode()

    returncode, stdout, stderr = trio.run(main)

    assert returncode == 130, stderr
    assert stdout == "Let me look\n"
    assert stderr.startswith("[aborted] turns: 1, ")
    assert stderr.endswith("error: Request was aborted\n")


def call_chunk(index, call_id, name, arguments):
    """A whole tool call in one chunk, at its own wire index."""
    function = {"name": name, "arguments": arguments}
    return chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function", "function": function}]})


async def hostile_model(stream, body):
    """A reply, a tool name and (through ls) a file name that try to drive the terminal; no usage."""
    if body["messages"][-1]["role"] != "tool":
        payloads = [
            chunk({"role": "assistant", "content": "Title\x1b]0;pwned\x07 and\x1b[2J clear, "}),
            chunk({"content": "safe\rEVIL\n\tindented\n"}),
            call_chunk(0, "call_1", "ls", "{}"),
            call_chunk(1, "call_2", "l\x1bs", "{}"),
            chunk(finish_reason="tool_calls"),
        ]
    else:
        payloads = [chunk({"role": "assistant", "content": "Done."}), chunk(finish_reason="stop")]
    await stream.send_all(STREAM_HEAD)
    for payload in payloads:
        await send_chunk(stream, sse(payload))
    await send_chunk(stream, b"data: [DONE]\n\n")
    await stream.send_all(b"0\r\n\r\n")


def test_cli_text_it_did_not_write_never_drives_the_terminal(tmp_path):
    root = project_dir(tmp_path)
    (root / "\x1b]0;owned\x07.md").write_text("a file name with a title change in it", encoding="utf-8")

    _, done = run_agent_process(hostile_model, root)

    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, stderr
    controls = sorted({char for char in stdout + stderr if unicodedata.category(char) == "Cc"} - {"\n", "\t"})
    assert controls == [], f"control characters reached the terminal: {controls}"
    assert "\n\tindented\n" in stdout  # the reply's own newlines and tabs are kept
    assert [word in stdout for word in ("pwned", "EVIL", "owned", "l")] == [True] * 4
    starts = [line.split(" ")[0] for line in stdout.splitlines()[-5:]]  # results come as they finish
    assert sorted(starts[2:4]) == ["[error]", "[ok]"] and starts[:2] + starts[4:] == ["[tool]", "[tool]", "Done."]


def test_cli_a_server_that_reports_no_usage_is_said_so(tmp_path):
    async def no_usage(stream, body):
        await stream.send_all(STREAM_HEAD)
        for payload in readme_answer(body):
            if "usage" not in payload:
                await send_chunk(stream, sse(payload))
        await send_chunk(stream, b"data: [DONE]\n\n")
        await stream.send_all(b"0\r\n\r\n")

    _, done = run_agent_process(no_usage, project_dir(tmp_path))

    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr.decode() == "[stop] turns: 2, tokens: not reported by the server\n"
