"""Chapter 16: codemode, scripts that call tools in a sandbox.

Run alone with `python -m pytest tests/test_16_codemode.py`. The labs follow
the lesson: the worker, spoken to in JSON lines as a real process (16.1); the
host's side, one script and one result (16.2); nested tool calls through the
tool contract in script scope (16.3); the limits and every way a script ends
(16.4); and the model-only codemode tool in the agent (16.5), the last against
the loopback server with `python -m tiny_pi.agent` as a real subprocess.
"""

import json
import os
import sys
import time
from pathlib import Path

import pytest
import trio
from loopback_server import STREAM_HEAD, LoopbackServer, chunk, send_chunk, sse, tool_call_chunks

import tiny_pi.codemode as codemode
from tiny_pi.abort import AbortSignal
from tiny_pi.agent_loop import run_agent
from tiny_pi.codemode import MAX_ARGUMENT_BYTES, MAX_LINE, MAX_RECORDS, OUTPUT_LIMIT, NestedCalls, codemode_tool, run_script
from tiny_pi.codemode_worker import NEVER_SETTLES
from tiny_pi.messages import AgentContext, ToolCall, assistant_message, text, text_of, user_message
from tiny_pi.scripted_model import ScriptedModel
from tiny_pi.session_log import MessageEntry, read_session
from tiny_pi.tool_execution import execute_tool_call
from tiny_pi.tools import Tool, ToolRegistry

TIME_LIMIT = 20.0  # a guard against hangs, not a speed test: each script starts a process
PROCESS_TIME_LIMIT = 30.0  # an agent subprocess imports httpx and trio first
PROJECT = Path(__file__).resolve().parent.parent
WORKER = PROJECT / "tiny_pi" / "codemode_worker.py"
VALUE = {"type": "object", "properties": {"value": {"type": "string"}}}


def worker(code, results=(), tools=("read",), memory_limit=16 * 1024 * 1024):
    """Run the worker with the host's lines written up front: (the lines it sent, parsed; its exit status).

    The worker reads a line only when its script waits for one, so a result
    written early waits in the pipe; when the lines run out, stdin is closed.
    Its stderr (a traceback of yours) shows under the failed test's captured output.
    """
    start = {"type": "start", "code": code, "tools": list(tools), "memory_limit": memory_limit}
    host = "".join(json.dumps(line) + "\n" for line in [start, *results]).encode()

    async def main():
        with trio.fail_after(TIME_LIMIT):
            return await trio.run_process([sys.executable, str(WORKER)], stdin=host, capture_stdout=True, check=False)

    done = trio.run(main)
    return [json.loads(line) for line in done.stdout.decode().splitlines()], done.returncode


def result_line(number, value=None, error=None):
    """The host's answer to call `number`: its value as JSON text, or its error."""
    if error is not None:
        return {"type": "result", "id": number, "ok": False, "error": error}
    return {"type": "result", "id": number, "ok": True, "value": json.dumps(value)}


def script(code, tools=None, **kwargs):
    async def main():
        with trio.fail_after(TIME_LIMIT):
            return await run_script(code, tools, **kwargs)

    return trio.run(main)


def gone(pid):
    """Whether no process has the id `pid` any more (it was killed and waited for)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def probe(name, exposure="direct", runs=None):
    """A tool that notes each run in `runs` and answers `NAME:VALUE`."""
    runs = runs if runs is not None else []

    async def execute(arguments, *, signal):
        runs.append(name)
        return [text(f"{name}:{arguments.get('value', '')}")]

    return Tool(name, f"the {name} tool", VALUE, execute, exposure=exposure)


def failing(name="broken"):
    """A tool that fails inside a nursery of its own: trio wraps its OSError in a group."""

    async def burn():
        raise OSError("disk on fire")

    async def execute(arguments, *, signal):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(burn)

    return Tool(name, "a tool that fails", VALUE, execute)


def sleeper(started, count=2):
    """A tool that never finishes; `started` is set once `count` of its calls are running."""
    running = []

    async def execute(arguments, *, signal):
        running.append(arguments)
        if len(running) >= count:
            started.set()
        await trio.sleep_forever()

    return Tool("wait", "a tool that never finishes", VALUE, execute)


def registry_of(*tools):
    registry = ToolRegistry(tools)
    registry.register(codemode_tool(registry, timeout=10.0))
    return registry


def run_codemode(registry, code, call_id="c1"):
    """One codemode call through the tool contract, as the model would make it."""
    call = ToolCall(id=call_id, name="codemode", arguments={"code": code})

    async def main():
        with trio.fail_after(TIME_LIMIT):
            return await execute_tool_call(call, registry, signal=AbortSignal())

    return trio.run(main)


# Lab 16.1: the worker, spoken to in JSON lines.


def test_worker_a_script_that_returns_sends_its_output_then_one_done_line():
    lines, status = worker('console.log("hi", {a: 1}); console.warn("careful"); return {list: [1, 2.5], none: null}')
    nothing, _ = worker("const x = 1;")

    assert lines == [{"type": "output", "text": 'hi {"a":1}'}, {"type": "output", "text": "careful"},
                     {"type": "done", "ok": True, "value": '{"list":[1,2.5],"none":null}'}]  # JSON text
    assert status == 0
    assert nothing == [{"type": "done", "ok": True, "value": None}]  # no return: undefined


def test_worker_a_call_line_waits_for_its_result_line():
    lines, status = worker("const a = await tools.read({path: 'x'}); return a.text.length",
                           [result_line(1, {"text": "hello"})])

    assert lines == [{"type": "call", "id": 1, "name": "read", "args": '{"path":"x"}'},
                     {"type": "done", "ok": True, "value": "5"}]
    assert status == 0


def test_worker_results_settle_the_calls_of_their_ids_in_any_order():
    code = ('const all = await Promise.allSettled([tools.read({path: "a"}), tools.read({path: "b"})]);'
            'return all.map(r => r.status === "fulfilled" ? r.value.text : r.reason.message)')
    lines, status = worker(code, [result_line(2, {"text": "B"}), result_line(1, error="disk on fire")])

    assert [(line["type"], line.get("id")) for line in lines] == [("call", 1), ("call", 2), ("done", None)]
    assert lines[-1] == {"type": "done", "ok": True, "value": '["disk on fire","B"]'}  # the script's order
    assert status == 0


def test_worker_a_thrown_error_or_a_syntax_error_is_a_done_line_with_ok_false():
    thrown, status = worker('console.log("before"); throw new RangeError("too far")')
    unparsable, _ = worker("return (")

    assert thrown[0] == {"type": "output", "text": "before"} and status == 0
    done, failed = thrown[1], unparsable[0]
    assert (done["type"], done["ok"], done["error"]["name"], done["error"]["message"]) == ("done", False, "RangeError", "too far")
    assert (failed["type"], failed["ok"], failed["error"]["name"]) == ("done", False, "SyntaxError")


def test_worker_says_at_once_when_the_script_can_never_settle():
    never = {"type": "done", "ok": False, "error": {"name": "Error", "message": NEVER_SETTLES}}
    alone, status = worker("await new Promise(() => {}); return 1")
    after_a_call, _ = worker("await tools.read({}); await new Promise(() => {}); return 1",
                             [result_line(1, {"text": ""})])

    assert (alone, status) == ([never], 0)  # said before it reads stdin, whose end would mean: exit 1
    assert after_a_call == [{"type": "call", "id": 1, "name": "read", "args": "{}"}, never]  # call 1 pends no more


def test_worker_exits_1_without_a_done_line_when_the_host_is_gone():
    lines, status = worker("return await tools.read({})")  # no result line will ever come

    assert (lines, status) == ([{"type": "call", "id": 1, "name": "read", "args": "{}"}], 1)


# Lab 16.2: the host, one script and one result.


def test_host_a_round_trip_gives_json_values_parsed_on_the_host():
    result = script('console.log("hi", {a: 1}); return {list: [1, 2.5], text: "\u00e9", none: null, yes: true}')

    assert result.ok and result.error is None
    assert result.value == {"list": [1, 2.5], "text": "\u00e9", "none": None, "yes": True}
    assert result.output == ('hi {"a":1}',)
    assert script("const x = 1;").value is None  # no return: undefined, which is None here


def test_host_a_thrown_error_is_an_ok_false_result_and_never_raises():
    result = script('console.log("before"); throw new RangeError("too far")')

    assert not result.ok and result.value is None
    assert (result.error.kind, result.error.name, result.error.message) == ("script", "RangeError", "too far")
    assert result.output == ("before",)  # the output up to the failure is kept


def test_host_a_syntax_error_is_an_ok_false_result():
    result = script("return (")

    assert not result.ok
    assert (result.error.kind, result.error.name) == ("script", "SyntaxError")


def test_host_a_failed_tool_is_thrown_where_the_script_awaits_it():
    async def broken(arguments, number):
        raise OSError("disk on fire")

    async def echo(arguments, number):
        return {"got": arguments, "n": number}

    caught = script('try { await tools.broken({}) } catch (e) { return [e.message, await tools.echo({n: 1})] }',
                    {"broken": broken, "echo": echo})
    uncaught = script("return await tools.broken({})", {"broken": broken})

    assert caught.value == ["disk on fire", {"got": {"n": 1}, "n": 2}]
    assert (uncaught.ok, uncaught.error.kind, uncaught.error.message) == (False, "script", "disk on fire")


def test_host_every_run_is_a_fresh_interpreter_in_a_fresh_process():
    first = script("globalThis.leak = 42; return typeof leak")
    second = script("return typeof leak")

    assert (first.value, second.value) == ("number", "undefined")
    assert first.pid != second.pid and gone(first.pid) and gone(second.pid)


def test_host_a_finished_script_does_not_wait_out_its_deadline():
    async def wait(arguments, number):
        await trio.sleep_forever()

    for code, signal in [("return 1", AbortSignal()),  # watch waits for an abort nobody makes
                         ("tools.wait({}); return 1", None)]:  # a call the script never awaited still runs
        began = time.monotonic()
        finished = script(code, {"wait": wait}, timeout=10.0, signal=signal)
        seconds = time.monotonic() - began

        assert (finished.ok, finished.value) == (True, 1) and gone(finished.pid)
        assert seconds < 5.0, f"{code!r} had returned, yet its result waited {seconds:.0f} s for the deadline"


def test_host_an_abort_ends_the_script_at_once():
    started = trio.Event()
    signal = AbortSignal()

    async def wait(arguments, number):
        started.set()
        await trio.sleep_forever()

    async def main():
        with trio.fail_after(TIME_LIMIT):
            async with trio.open_nursery() as nursery:
                async def abort_once_waiting():
                    await started.wait()
                    signal.abort()

                nursery.start_soon(abort_once_waiting)
                return await run_script('console.log("waiting"); await tools.wait({})', {"wait": wait},
                                        signal=signal, timeout=10.0)

    began = time.monotonic()
    aborted = trio.run(main)

    assert (aborted.ok, aborted.error.kind, aborted.error.message) == (False, "aborted", "the run was aborted")
    assert aborted.output == ("waiting",) and gone(aborted.pid)
    assert time.monotonic() - began < 5.0  # the deadline was 10 s away


# Lab 16.3: nested calls through the tool contract, in script scope.


def test_nested_calls_go_through_the_contract_in_script_scope_with_ids_parent_slash_n():
    runs = []
    registry = registry_of(probe("read", runs=runs), probe("issues", "deferred", runs),
                           probe("search", "model-only", runs))
    code = ('const a = await tools.read({value: "x"}); const b = await tools.issues({value: "y"});'
            'return [a.text, b.text]')
    result = run_codemode(registry, code, "call_7")

    assert not result.is_error
    assert json.loads(text_of(result)) == ["read:x", "issues:y"]  # a deferred tool, never declared
    calls = result.details["nested_calls"]["calls"]
    assert [(c["id"], c["name"], c["status"]) for c in calls] == [("call_7/1", "read", "ok"), ("call_7/2", "issues", "ok")]
    refused = run_codemode(registry, 'return await tools.search({value: "z"})')
    assert "search" not in runs  # model-only: not in the script's tools at all
    assert "tools.search is not a tool" in text_of(refused)


def test_nested_a_missing_tool_is_a_type_error_with_the_closest_names():
    registry = registry_of(probe("read"), probe("ls"))
    close = run_codemode(registry, 'console.log("looking"); return await tools.reed({})')
    far = run_codemode(registry, "return await tools.xyzzy({})")
    several = run_codemode(registry_of(probe("read"), probe("ready"), probe("ls")), "return await tools.reed({})")

    assert close.is_error
    assert text_of(close) == "looking\nScript failed (script): TypeError: tools.reed is not a tool; did you mean read?"
    assert close.details["output"] == ["looking"]  # a list, the output lines before the last line
    assert close.details["error"] == {"kind": "script", "message": "tools.reed is not a tool; did you mean read?"}
    assert text_of(far).endswith("tools.xyzzy is not a tool; the tools are: read, ls")
    assert text_of(several).endswith("tools.reed is not a tool; did you mean read, ready?")
    assert script("return await tools.reed({})").error.message == "tools.reed is not a tool; the tools are: none"


def test_nested_one_failing_call_does_not_lose_the_others():
    registry = registry_of(probe("read"), failing())
    code = ('const all = await Promise.allSettled([tools.read({value: "a"}), tools.broken({}),'
            'tools.read({value: 7}), tools.read("x")]); return all.map(r => r.status)')
    result = run_codemode(registry, code)

    assert json.loads(text_of(result)) == ["fulfilled", "rejected", "rejected", "rejected"]
    calls = result.details["nested_calls"]["calls"]
    assert [c["status"] for c in calls] == ["ok", "error", "error", "error"]
    assert calls[1]["error"] == "Tool 'broken' failed: OSError: disk on fire"  # not the group trio wrapped it in
    assert calls[2]["error"].startswith("Invalid arguments for tool 'read'")  # the contract checked it
    assert calls[3]["error"] == "Tool 'read' was not run: its arguments are not a JSON object (raw text: '\"x\"')"


def test_nested_records_are_bounded_and_never_hold_results():
    registry = registry_of(probe("read"))
    big = "x" * (MAX_ARGUMENT_BYTES + 10)
    code = (f'await tools.read({{value: "{big}"}});'
            f'for (let i = 0; i < {MAX_RECORDS + 5}; i++) await tools.read({{value: "v" + i}}); return "done"')
    result = run_codemode(registry, code)
    nested = result.details["nested_calls"]

    assert (nested["count"], len(nested["calls"]), nested["complete"]) == (MAX_RECORDS + 6, MAX_RECORDS, False)
    assert nested["calls"][0]["arguments"] is None
    assert nested["calls"][0]["argument_bytes"] == len(json.dumps({"value": big}).encode())  # json.dumps' bytes
    assert nested["calls"][1]["arguments"] == {"value": "v0"}
    assert "read:v0" not in json.dumps(result.details)  # a record never keeps what the tool answered


def test_nested_calls_never_enter_the_transcript_only_the_parent_details():
    registry = registry_of(probe("read"))
    code = 'return (await tools.read({value: "a"})).text'
    model = ScriptedModel([assistant_message([ToolCall(id="c1", name="codemode", arguments={"code": code})],
                                             "toolUse"), assistant_message([text("done")])])
    context = AgentContext([user_message("go")])

    async def main():
        with trio.fail_after(TIME_LIMIT):
            return await run_agent(model, context, registry)

    trio.run(main)

    assert [m.role for m in context.messages] == ["user", "system", "assistant", "toolResult", "assistant"]
    assert text_of(context.messages[3]) == '"read:a"'  # the system message is chapter 15's tool patch
    assert context.messages[3].details["nested_calls"]["calls"][0]["id"] == "c1/1"


# Lab 16.4: limits, and every way a script ends.


def test_limits_a_script_over_its_memory_limit_is_one_clear_error_result():
    result = script("const a = []; while (true) a.push(new Array(100000).fill(1))", memory_limit=16 * 1024 * 1024)

    assert (result.ok, result.error.kind, result.error.name, result.error.message) == (
        False, "script", "InternalError", "out of memory")


def test_limits_a_script_that_can_never_settle_fails_at_once_not_at_the_deadline():
    started = time.monotonic()
    result = script("await new Promise(() => {}); return 1", timeout=10.0)

    assert (result.error.kind, result.error.message) == ("script", "the script can never settle: no tool call is pending")
    assert time.monotonic() - started < 5.0  # the deadline was 10 s away


def test_limits_a_value_over_the_line_limit_is_one_clear_error_result():
    result = script(f'return "x".repeat({MAX_LINE} + 1)')

    assert (result.ok, result.error.kind, result.error.message) == (
        False, "script", f"the script sent more than {MAX_LINE} bytes in one line (a value, arguments or output)")
    assert gone(result.pid)


def test_limits_a_busy_loop_is_killed_at_the_deadline():
    result = script("while (true) {}", timeout=1.0)

    assert (result.error.kind, result.error.message) == ("timeout", "the script ran past its deadline of 1 s")
    assert gone(result.pid)


def test_limits_an_abort_kills_the_script_and_marks_pending_calls_cancelled():
    started = trio.Event()
    signal = AbortSignal()
    nested = NestedCalls(ToolRegistry([sleeper(started), probe("read")]), "c1", signal)
    code = 'await tools.read({value: "a"}); await Promise.all([tools.wait({}), tools.wait({})])'

    async def main():
        with trio.fail_after(TIME_LIMIT):
            async with trio.open_nursery() as nursery:
                async def abort_once_waiting():
                    await started.wait()
                    signal.abort()

                nursery.start_soon(abort_once_waiting)
                return await run_script(code, nested.tools(), signal=signal)

    result = trio.run(main)

    assert (result.error.kind, result.error.message) == ("aborted", "the run was aborted") and gone(result.pid)
    assert [call["status"] for call in nested.summary()["calls"]] == ["ok", "cancelled", "cancelled"]


def dying_worker(tmp_path, monkeypatch):
    """A worker that reads its start line and exits with status 3, as a crashed interpreter would."""
    dies = tmp_path / "dies.py"
    dies.write_text("import sys\nsys.stdin.readline()\nraise SystemExit(3)\n", encoding="utf-8")
    monkeypatch.setattr(codemode, "WORKER", dies)


def test_limits_a_worker_that_dies_on_its_own_is_a_sandbox_error(tmp_path, monkeypatch):
    dying_worker(tmp_path, monkeypatch)
    result = script("return 1")

    assert (result.error.kind, result.error.message) == (
        "sandbox", "the worker exited with status 3 before the script settled")
    assert gone(result.pid)


def test_limits_output_is_capped():
    result = script('for (let i = 0; i < 1000; i++) console.log("0123456789".repeat(5)); return 1')

    assert result.value == 1
    assert sum(len(line) for line in result.output[:-1]) == OUTPUT_LIMIT
    assert result.output[-1] == f"[output cut at {OUTPUT_LIMIT} characters]"


@pytest.mark.parametrize("code, timeout, outside", [
    ("return 1", 10.0, False),
    ("throw new Error('x')", 10.0, False),
    ("await new Promise(() => {})", 10.0, False),
    ("while (true) {}", 1.0, False),
    ("while (true) {}", 10.0, True),
], ids=["returns", "throws", "never-settles", "timeout", "cancelled-from-outside"])
def test_limits_no_worker_outlives_its_script(monkeypatch, code, timeout, outside):
    processes = []
    opened = trio.lowlevel.open_process

    async def recording(*args, **kwargs):
        processes.append(await opened(*args, **kwargs))
        return processes[-1]

    monkeypatch.setattr(trio.lowlevel, "open_process", recording)

    async def main():
        with trio.move_on_after(1.0 if outside else TIME_LIMIT):
            await run_script(code, timeout=timeout)

    trio.run(main)

    assert len(processes) == 1 and processes[0].returncode is not None and gone(processes[0].pid)


# Lab 16.5: the codemode tool in the agent, and the payoff.


def test_codemode_is_model_only_and_describes_the_tools_a_script_may_call():
    registry = registry_of(probe("read"), probe("issues", "deferred"), probe("search", "model-only"))
    tool = registry.get("codemode")

    assert tool.exposure == "model-only"
    assert [spec.name for spec in registry.declared()] == ["read", "search", "codemode"]
    assert tool.description.splitlines()[-2:] == ["- tools.read: the read tool", "- tools.issues: the issues tool"]


def test_codemode_a_failed_script_is_an_error_result_and_the_agent_lives_on(tmp_path, monkeypatch):
    dying_worker(tmp_path, monkeypatch)
    registry = registry_of(probe("read"))
    model = ScriptedModel([assistant_message([ToolCall(id="c1", name="codemode", arguments={"code": "return 1"})],
                                             "toolUse"), assistant_message([text("still here")])])
    context = AgentContext([user_message("go")])

    async def main():
        with trio.fail_after(TIME_LIMIT):
            return await run_agent(model, context, registry)

    trio.run(main)

    assert text_of(context.messages[3]) == (
        "Script failed (sandbox): the worker exited with status 3 before the script settled")
    assert context.messages[3].is_error and text_of(context.messages[4]) == "still here"


def payoff_model(state):
    """A loopback 'model': one codemode script that reads a file and lists the root at once, then stop."""

    async def reply(stream, body):
        tool_messages = [message for message in body["messages"] if message["role"] == "tool"]
        state.append(([tool["function"]["name"] for tool in body.get("tools", [])], tool_messages))
        if not tool_messages:
            code = ('const [notes, files] = await Promise.all([tools.read({path: "notes.txt"}), tools.ls({})]);'
                    'return {notes: notes.text, files: files.text}')
            arguments = json.dumps({"code": code})
            payloads = [*tool_call_chunks("call_1", "codemode", arguments), chunk(finish_reason="tool_calls")]
        else:
            payloads = [chunk({"role": "assistant", "content": "Both gathered."}), chunk(finish_reason="stop")]
        await stream.send_all(STREAM_HEAD)
        for payload in payloads:
            await send_chunk(stream, sse(payload))
        await send_chunk(stream, b"data: [DONE]\n\n")
        await stream.send_all(b"0\r\n\r\n")

    return reply


def environment():
    env = {key: value for key, value in os.environ.items() if "proxy" not in key.lower()}
    env.pop("TINY_PI_API_KEY", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def test_codemode_live_one_turn_gathers_a_direct_and_a_deferred_tool_and_the_transcript_stays_at_five(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.txt").write_text("ship it\n", encoding="utf-8")
    session = tmp_path / "s.jsonl"
    state = []

    async def main():
        async with trio.open_nursery() as nursery:
            server = await LoopbackServer(payoff_model(state)).start(nursery)
            command = [sys.executable, "-m", "tiny_pi.agent", "--base-url", server.base_url, "--model", "loopback",
                       "--root", str(root), "--tools", "read", "--defer", "ls", "--codemode",
                       "--session", str(session), "Gather the notes and the file list."]
            with trio.fail_after(PROCESS_TIME_LIMIT):
                done = await trio.run_process(command, cwd=PROJECT, env=environment(), capture_stdout=True,
                                              capture_stderr=True, check=False)
            nursery.cancel_scope.cancel()
        return done

    done = trio.run(main)

    assert done.returncode == 0, done.stderr.decode()
    assert [tools for tools, _ in state] == [["read", "tool_search", "codemode"]] * 2  # ls was never declared
    gathered = json.loads(state[1][1][0]["content"])
    assert gathered["notes"].startswith("ship it") and "notes.txt" in gathered["files"]
    messages = [entry.message for entry in read_session(session).entries if isinstance(entry, MessageEntry)]
    assert [message.role for message in messages] == ["user", "system", "assistant", "toolResult", "assistant"]
    nested = messages[3].details["nested_calls"]
    assert [(c["id"], c["name"], c["status"]) for c in nested["calls"]] == [("call_1/1", "read", "ok"),
                                                                          ("call_1/2", "ls", "ok")]
