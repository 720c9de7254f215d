"""Chapter 13: one durable runtime, three modes.

Run alone with `python -m pytest tests/test_13_durable_runtime.py`. The labs
follow the lesson: the Runtime, driven in this process against the loopback
server (13.1 to 13.4: its queue, the system prompt entry, the poison, the
compaction before a prompt); `python -m tiny_pi.agent --mode text|json` as a
real subprocess (13.5 to 13.8); the interactive mode on a real
pseudo-terminal (13.9 to 13.11). Each mode is also killed with SIGKILL
mid-run, and a new run must go on from everything written before the kill.
"""

import io
import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio
from loopback_server import STREAM_HEAD, LoopbackServer, chunk, readme_model, send_chunk, sse, tool_call_chunks

from tiny_pi.compaction import ContextLimits
from tiny_pi.messages import AssistantMessage, ToolResultMessage, text_of
from tiny_pi.messages.transcript import message_from_data
from tiny_pi.providers.openai_compatible import OpenAICompatibleModel
from tiny_pi.runtime import DISPOSED, Runtime, RuntimeRefused
from tiny_pi.session import OpenSession, open_session, tree_lines
from tiny_pi.session_log import MessageEntry, SessionError, SystemPromptEntry, read_session
from tiny_pi.session_writer import SessionWriter
from tiny_pi.tools import ToolRegistry
from tiny_pi.toolset import chosen_tools

TIME_LIMIT = 10.0  # a guard against hangs, not a speed test: the machine may be busy
PROCESS_TIME_LIMIT = 30.0  # a subprocess imports httpx and trio first


def wait_while_running(event, process, what, printed=lambda: ""):
    """Wait for `event` (set by the server) only while `process` runs: a child that has exited never sets it."""
    deadline = time.monotonic() + PROCESS_TIME_LIMIT
    while not event.wait(0.05):
        if process.poll() is not None:
            shown = printed()
            shown = shown.decode("utf-8", errors="replace") if isinstance(shown, bytes) else shown
            raise AssertionError(f"{what}: the agent exited first, status {process.returncode}; it printed:\n{shown}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {PROCESS_TIME_LIMIT:.0f} s")
PROJECT = Path(__file__).resolve().parent.parent
README = "# tiny-pi\nA small agent runtime.\n"
ANSWER = "The project is called tiny-pi."


@pytest.fixture
def project(tmp_path, monkeypatch):
    root = tmp_path / "project"
    root.mkdir()
    (root / "README.md").write_text(README, encoding="utf-8")
    monkeypatch.delenv("TINY_PI_API_KEY", raising=False)
    return root


def user_texts(path):
    """The user messages of a session file, in file order."""
    entries = read_session(path).entries
    return [text_of(e.message) for e in entries if isinstance(e, MessageEntry) and e.message.role == "user"]


def sent_roles(request):
    return [message["role"] for message in request[1]["messages"]]


# Lab 13.1: a queue of prompts, answered one at a time in order; dispose ends it.


def run_with_runtime(root, session, script, reply=readme_model, system_prompt=None, limits=None):
    """Start the loopback server and a Runtime in one trio run; `script(runtime)` drives it."""

    async def main():
        async with trio.open_nursery() as nursery:
            server = await LoopbackServer(reply).start(nursery)
            model = OpenAICompatibleModel(base_url=server.base_url, model="loopback")
            registry = ToolRegistry(chosen_tools(root, ["read", "ls"]))
            sections = {"role": system_prompt} if system_prompt else None  # chapter 12's system prompt sections
            runtime = Runtime(model, registry, nursery, system_prompt=sections, session=session, limits=limits)
            with trio.fail_after(TIME_LIMIT):
                result = await script(runtime)
            nursery.cancel_scope.cancel()
        return server, runtime, result

    return trio.run(main)


def test_queue_a_second_prompt_while_one_runs_is_answered_after_it(project):
    async def two_at_once(runtime):
        runtime.prompt("First?")
        runtime.prompt("Second?")  # the bare Agent of chapter 09 would refuse this one: busy
        await runtime.flush()
        return runtime.agent.messages

    server, runtime, messages = run_with_runtime(project, None, two_at_once)

    assert not runtime.busy
    assert [text_of(m) for m in messages if m.role == "user"] == ["First?", "Second?"]
    assert [sent_roles(r) for r in server.requests] == [
        ["user"], ["user", "assistant", "tool"],
        ["user", "assistant", "tool", "assistant", "user"],
        ["user", "assistant", "tool", "assistant", "user", "assistant", "tool"],
    ]


def test_queue_an_entry_is_appended_only_after_the_agent_has_produced_it(project, tmp_path):
    path = tmp_path / "session.jsonl"
    on_disk_at_the_first_call = []

    async def reply(stream, body):
        if not on_disk_at_the_first_call:
            on_disk_at_the_first_call.append(user_texts(path))
        await readme_model(stream, body)

    async def queue_two(runtime):
        runtime.prompt("First?")
        runtime.prompt("Second?")
        await runtime.flush()

    run_with_runtime(project, open_session(path, None, "loopback"), queue_two, reply)

    assert on_disk_at_the_first_call == [["First?"]]  # the queued prompt is not the agent's yet: not in the log
    assert user_texts(path) == ["First?", "Second?"]
    assert [e.message.role for e in read_session(path).entries if isinstance(e, MessageEntry)] == [
        "user", "assistant", "toolResult", "assistant", "user", "assistant", "toolResult", "assistant",
    ]


def test_queue_dispose_waits_for_the_disk_then_refuses_new_prompts(project, tmp_path):
    path = tmp_path / "session.jsonl"
    disposed = []

    async def main():
        async with trio.open_nursery() as outer:
            server = await LoopbackServer(readme_model).start(outer)
            model = OpenAICompatibleModel(base_url=server.base_url, model="loopback")
            registry = ToolRegistry(chosen_tools(project, ["read", "ls"]))
            with trio.move_on_after(TIME_LIMIT) as waited:
                async with trio.open_nursery() as nursery:  # the Runtime's own: nothing here cancels it
                    runtime = Runtime(model, registry, nursery, session=open_session(path, None, "loopback"))
                    runtime.prompt("What is this project called?")
                    await runtime.dispose()  # no flush first: dispose waits for the answer itself
                    disposed.append(True)
            outer.cancel_scope.cancel()
        return runtime, waited.cancelled_caught

    runtime, stuck = trio.run(main)

    assert disposed, f"dispose did not return within {TIME_LIMIT:.0f} s"
    assert not stuck, "dispose returned, but the Runtime's nursery never exited: the queue's task still waits for a prompt"
    with pytest.raises(RuntimeRefused, match=DISPOSED):
        runtime.prompt("And now?")
    last = read_session(path).entries[-1]
    assert isinstance(last.message, AssistantMessage) and text_of(last.message) == ANSWER


# Lab 13.2: a system prompt entry, only when the prompt changed.


def test_system_prompt_is_recorded_only_when_it_changed(project, tmp_path):
    path = tmp_path / "session.jsonl"

    async def ask(runtime):
        runtime.prompt("What is this project called?")
        await runtime.flush()

    run_with_runtime(project, open_session(path, None, "loopback"), ask)  # no system prompt: nothing to note
    for system_prompt in ("Be brief.", "Be brief.", "Be thorough."):
        server, _, _ = run_with_runtime(project, open_session(path, None, "loopback"), ask, system_prompt=system_prompt)

    entries = read_session(path).entries
    assert [e.text for e in entries if isinstance(e, SystemPromptEntry)] == ["Be brief.", "Be thorough."]
    patch = next(i for i, e in enumerate(entries) if isinstance(e, SystemPromptEntry))
    assert isinstance(entries[patch + 1], MessageEntry) and entries[patch + 1].message.role == "user"
    assert server.requests[0][1]["messages"][0] == {"role": "system", "content": "Be thorough."}


def test_system_prompt_entry_is_checked_and_shown_in_the_tree(tmp_path):
    path = tmp_path / "session.jsonl"
    writer = SessionWriter.create(path)
    writer.append_system_prompt("Be brief.\nAnswer in English.")
    writer.close()
    assert tree_lines(read_session(path))[0].endswith("system_prompt: Be brief. Answer in English.  <- last")

    with path.open("a", encoding="utf-8") as file:
        file.write(json.dumps({"type": "system_prompt", "id": "b2", "parent_id": read_session(path).last_id,
                               "text": None}) + "\n")
    with pytest.raises(SessionError, match="a system prompt is a string, got None"):
        read_session(path)


# Lab 13.3: a failed write, whatever failed, poisons the runtime.


def test_poison_a_failed_write_makes_later_prompts_fail_with_that_error(project):
    if not Path("/dev/full").exists():
        pytest.skip("needs /dev/full, whose every write fails with ENOSPC")
    session = OpenSession((), SessionWriter(Path("/dev/full"), leaf_id=None, ids=()))

    async def two_then_a_third(runtime):
        runtime.prompt("First?")
        runtime.prompt("Second?")
        await runtime.flush()
        with pytest.raises(RuntimeRefused) as refused:
            runtime.prompt("Third?")
        return str(refused.value)

    server, runtime, refusal = run_with_runtime(project, session, two_then_a_third)

    assert "No space left on device" in runtime.failure
    assert refusal == f"the session log failed, so the runtime takes no more prompts: {runtime.failure}"
    assert server.requests == []  # nothing reached the model that the log does not hold


def test_poison_is_said_once_on_stderr_and_no_listener_error(project, capsys):
    if not Path("/dev/full").exists():
        pytest.skip("needs /dev/full, whose every write fails with ENOSPC")
    session = OpenSession((), SessionWriter(Path("/dev/full"), leaf_id=None, ids=()))

    async def two(runtime):
        runtime.prompt("First?")
        runtime.prompt("Second?")
        await runtime.flush()

    _, runtime, _ = run_with_runtime(project, session, two)

    stderr = capsys.readouterr().err
    said = [line for line in stderr.splitlines() if line.startswith("session: ")]
    assert said == [f"session: {runtime.failure}; the runtime takes no more prompts"]
    assert "listener" not in stderr, stderr  # record kept the error: the Agent's guard never saw it


async def call_with_nan(stream, body):
    """Every turn calls read with `{"path": NaN}`: Python's json reads it, no log line can hold it."""
    await stream.send_all(STREAM_HEAD)
    for payload in [*tool_call_chunks("call_1", "read", '{"path": NaN}'), chunk(finish_reason="tool_calls")]:
        await send_chunk(stream, sse(payload))
    await send_chunk(stream, b"data: [DONE]\n\n")
    await stream.send_all(b"0\r\n\r\n")


def test_poison_any_failure_to_write_poisons_not_only_the_disk(project, tmp_path):
    async def one_then_another(runtime):
        runtime.prompt("Read it.")
        await runtime.flush()
        with pytest.raises(RuntimeRefused) as refused:
            runtime.prompt("And again?")
        await runtime.dispose()
        with pytest.raises(RuntimeRefused) as refused_after_dispose:
            runtime.prompt("And again?")
        return [str(refused.value), str(refused_after_dispose.value)]

    session = open_session(tmp_path / "session.jsonl", None, "loopback")
    server, runtime, refusals = run_with_runtime(project, session, one_then_another, call_with_nan)

    assert runtime.failure.startswith("Out of range float values are not JSON compliant")  # 3.12 adds ': nan'
    poisoned = f"the session log failed, so the runtime takes no more prompts: {runtime.failure}"
    assert refusals == [poisoned, poisoned]  # disposed too, the runtime still says the failure: it is the cause
    assert len(server.requests) == 1  # the call the log cannot hold never reached the model again


def test_poison_the_prompts_queued_behind_the_failure_are_dropped(project, tmp_path):
    async def two_at_once(runtime):
        runtime.prompt("Read it.")
        runtime.prompt("And again?")  # queued behind the prompt whose entry cannot be written
        await runtime.flush()

    session = open_session(tmp_path / "session.jsonl", None, "loopback")
    server, runtime, _ = run_with_runtime(project, session, two_at_once, call_with_nan)

    assert runtime.failure is not None and not runtime.busy  # dropped, and no longer pending
    assert "And again?" not in [text_of(m) for m in runtime.agent.messages]  # never handed to the agent
    assert len(server.requests) == 1


# Lab 13.4: the compaction before a prompt, which a failure or an abort ends before the prompt is sent.


SMALL = ContextLimits(120, 20)  # every prompt after the first compacts the one before it


async def send_status(stream, status, message):
    body = json.dumps({"error": {"message": message}}).encode()
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    await stream.send_all(head.encode() + b"Connection: close\r\n\r\n" + body)


def test_compacting_a_failed_summary_is_the_prompts_outcome_and_nothing_is_sent(project, tmp_path, capsys):
    path = tmp_path / "session.jsonl"

    async def summariser_down(stream, body):
        if "tools" in body:  # a summary call has no tools
            return await readme_model(stream, body)
        await send_status(stream, "500 Internal Server Error", "the summariser is down")

    async def two(runtime):
        runtime.prompt("First?")
        await runtime.flush()
        before = path.read_bytes()
        runtime.prompt("Second?")
        await runtime.flush()
        return before

    session = open_session(path, None, "loopback")
    server, runtime, before = run_with_runtime(project, session, two, summariser_down, limits=SMALL)

    message = "compaction failed: the summary call failed: HTTP 500: the summariser is down; the session is unchanged"
    assert (runtime.last_outcome.stop_reason, runtime.last_outcome.error_message) == ("error", message)
    assert message in capsys.readouterr().err
    assert path.read_bytes() == before
    assert "Second?" not in json.dumps([body for _, body in server.requests])


def test_compacting_an_abort_while_compacting_leaves_the_prompt_unsent_and_the_file_as_it_was(project, tmp_path):
    path = tmp_path / "session.jsonl"
    summary_call = trio.Event()

    async def hold_the_summary(stream, body):
        if "tools" in body:
            return await readme_model(stream, body)
        summary_call.set()
        await trio.sleep_forever()  # the summary never comes

    async def abort_the_second(runtime):
        runtime.prompt("First?")
        await runtime.flush()
        before = path.read_bytes()
        runtime.prompt("Second?")
        await summary_call.wait()
        runtime.abort()  # what Ctrl-C does
        await runtime.flush()
        return before

    session = open_session(path, None, "loopback")
    server, runtime, before = run_with_runtime(project, session, abort_the_second, hold_the_summary, limits=SMALL)

    outcome = runtime.last_outcome
    assert outcome.stop_reason == "aborted"
    assert outcome.error_message == "aborted while compacting: the prompt was not sent"
    assert path.read_bytes() == before
    assert "Second?" not in json.dumps([body for _, body in server.requests])


# Lab 13.5: python -m tiny_pi.agent runs one Runtime in the mode it chose (text here), as a real subprocess.


@contextmanager
def serving(reply=readme_model):
    """A loopback server in a thread of its own, so a test can drive a process meanwhile."""
    started = queue.Queue()

    def serve():
        async def main():
            async with trio.open_nursery() as nursery:
                server = await LoopbackServer(reply).start(nursery)
                started.put((server, trio.lowlevel.current_trio_token(), nursery.cancel_scope))

        trio.run(main)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    server, token, scope = started.get(timeout=TIME_LIMIT)
    try:
        yield server
    finally:
        trio.from_thread.run_sync(scope.cancel, trio_token=token)
        thread.join(TIME_LIMIT)


def environment():
    env = {key: value for key, value in os.environ.items() if "proxy" not in key.lower()}
    env.pop("TINY_PI_API_KEY", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def command(server, root, *args):
    return [sys.executable, "-m", "tiny_pi.agent", "--base-url", server.base_url, "--model", "loopback",
            "--root", str(root), *args]


def run_agent(server, root, *args, stdin=""):
    """`python -m tiny_pi.agent ARGS` as a subprocess; returns the finished process.

    One that never exits fails with what it printed and the likeliest cause: an
    answer on stdout and no exit is a Runtime whose queue task still runs.
    """
    try:
        return subprocess.run(command(server, root, *args), cwd=PROJECT, env=environment(), input=stdin,
                              capture_output=True, text=True, timeout=PROCESS_TIME_LIMIT, check=False)
    except subprocess.TimeoutExpired as hung:
        printed = "".join(text.decode(errors="replace") if isinstance(text, bytes) else text
                          for text in (hung.stdout or "", hung.stderr or ""))
    pytest.fail(f"the agent did not exit within {PROCESS_TIME_LIMIT:.0f} s; it printed {printed[-600:]!r}. "
                "Does run dispose the Runtime? Its queue task keeps the nursery open until then.", pytrace=False)


def test_cli_an_unknown_mode_fails_before_any_prompt(project, tmp_path):
    path = tmp_path / "session.jsonl"
    with serving() as server:
        done = run_agent(server, project, "--mode", "yaml", "--session", str(path), "What is this project called?")

    assert done.returncode == 2
    assert "argument --mode: invalid choice: 'yaml'" in done.stderr and "Traceback" not in done.stderr
    assert server.requests == [] and not path.exists() and done.stdout == ""


def test_cli_interactive_with_another_mode_or_with_a_prompt_is_a_usage_error(project):
    with serving() as server:
        both = run_agent(server, project, "--interactive", "--mode", "json")
        prompted = run_agent(server, project, "--mode", "interactive", "What is this project called?")

    assert both.returncode == 2 and "error: --interactive contradicts --mode json" in both.stderr, both.stderr
    assert prompted.returncode == 2, prompted.stderr
    assert "error: interactive mode takes no PROMPT: type it at the prompt" in prompted.stderr
    assert server.requests == [] and "Traceback" not in both.stderr + prompted.stderr


def test_cli_text_is_the_default_and_streams_the_reply_to_stdout(project):
    with serving() as server:
        done = run_agent(server, project, "What is this project called?")

    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith(f"{ANSWER}\n") and "{" not in done.stdout.splitlines()[-1]
    assert "[stop] turns: 2" in done.stderr and "[stop]" not in done.stdout


def held_on_the_tool_result(held):
    """The README round trip, except that the call after the tool's result never gets its answer."""

    async def reply(stream, body):
        if body["messages"][-1]["role"] != "tool":
            return await readme_model(stream, body)
        held.set()
        await trio.sleep_forever()  # the process dies waiting

    return reply


def kill_when_held(process, held, printed=lambda: ""):
    try:
        wait_while_running(held, process, "the agent never got to the tool result's call", printed)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(PROCESS_TIME_LIMIT)
    assert process.returncode == -signal.SIGKILL


def assert_a_new_run_goes_on(project, path):
    """Everything written before the kill is in the file, and a new run sends it all."""
    from tiny_pi.agent import main

    assert user_texts(path) == ["What is this project called?"]
    with serving() as server:  # the new run, in this process: it is text mode's
        argv = ["--base-url", server.base_url, "--model", "loopback", "--root", str(project)]
        assert main([*argv, "--session", str(path), "And now?"]) == 0
    assert sent_roles(server.requests[0]) == ["user", "assistant", "tool", "user"]


def kill_9_mid_run(project, tmp_path, mode):
    """Kill the agent in `mode` with SIGKILL while it waits for the call after the tool's result.

    Returns the first line it showed; a new run must then go on from everything written.
    """
    path = tmp_path / "session.jsonl"
    held = threading.Event()
    shown, said = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with serving(held_on_the_tool_result(held)) as server, shown.open("w") as out, said.open("w") as err:
        args = command(server, project, "--mode", mode, "--session", str(path), "What is this project called?")
        process = subprocess.Popen(args, cwd=PROJECT, env=environment(), stdin=subprocess.DEVNULL,
                                   stdout=out, stderr=err)
        kill_when_held(process, held, lambda: shown.read_text() + said.read_text())
    assert_a_new_run_goes_on(project, path)
    return shown.read_text().splitlines()[0]


def sigterm_mid_run(project, tmp_path, mode):
    """SIGTERM while the agent in `mode` waits for the call after the tool's result: stdout and stderr."""
    path = tmp_path / "session.jsonl"
    held = threading.Event()
    with serving(held_on_the_tool_result(held)) as server:
        args = command(server, project, "--mode", mode, "--session", str(path), "What is this project called?")
        process = subprocess.Popen(args, cwd=PROJECT, env=environment(), stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_while_running(held, process, "the agent never got to the tool result's call", process.stderr.read)
            process.send_signal(signal.SIGTERM)  # what `kill` sends
            stdout, stderr = process.communicate(timeout=PROCESS_TIME_LIMIT)
        finally:
            process.kill()

    assert process.returncode == 143, stderr
    assert stderr.startswith("[aborted] turns: 2, ") and "Traceback" not in stderr, stderr
    assert_a_new_run_goes_on(project, path)
    return stdout


def test_cli_kill_9_mid_run_in_text_mode_loses_nothing_written(project, tmp_path):
    assert kill_9_mid_run(project, tmp_path, "text") == "I will read the README first."


def test_cli_sigterm_mid_run_in_text_mode_aborts_it_keeps_the_session_whole_and_exits_143(project, tmp_path):
    assert sigterm_mid_run(project, tmp_path, "text").startswith("I will read the README first.")


def test_cli_ctrl_c_while_compacting_aborts_the_prompt_and_keeps_the_file(project, tmp_path):
    from tiny_pi.agent import main

    path = tmp_path / "session.jsonl"
    limits = ["--session", str(path), "--context-window", "120", "--reserve-tokens", "20"]  # every later prompt compacts
    holding, held = threading.Event(), threading.Event()

    async def hold_the_summary(stream, body):
        if "tools" in body or not holding.is_set():  # the second prompt's summary is the round trip's first words
            return await readme_model(stream, body)
        held.set()
        await trio.sleep_forever()  # the third prompt's summary never comes

    with serving(hold_the_summary) as server:
        argv = ["--base-url", server.base_url, "--model", "loopback", "--root", str(project), *limits]
        assert [main([*argv, question]) for question in ("First?", "Second?")] == [0, 0]
        before = path.read_bytes()
        holding.set()
        process = subprocess.Popen(command(server, project, *limits, "Third?"), cwd=PROJECT, env=environment(),
                                   stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_while_running(held, process, "the summary call never came", process.stderr.read)
            process.send_signal(signal.SIGINT)  # what Ctrl-C sends
            _, stderr = process.communicate(timeout=PROCESS_TIME_LIMIT)
        finally:
            process.kill()

    assert process.returncode == 130, stderr
    assert "error: aborted while compacting: the prompt was not sent" in stderr
    assert path.read_bytes() == before
    assert "Third?" not in json.dumps([body for _, body in server.requests])


# Lab 13.6: JSON mode: every agent event as one JSON object per line on stdout, and nothing else there.


def test_json_prints_every_event_as_one_json_object_per_line_and_nothing_else(project):
    with serving() as server:
        done = run_agent(server, project, "--mode", "json", "What is this project called?")

    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]  # every line is one whole object
    types = [event["type"] for event in events]
    assert types[0] == "agent_start" and types[-1] == "agent_end" and types.count("agent_end") == 1
    assert {"turn_start", "text_delta", "tool_execution_start", "tool_execution_end", "turn_end"} <= set(types)
    assert "".join(e["delta"] for e in events if e["type"] == "text_delta").endswith(ANSWER)
    assert events[-1]["stop_reason"] == "stop" and events[-1]["turns"] == 2
    assert "[stop] turns: 2" in done.stderr  # the summary is for people: stderr


def test_json_tool_events_carry_the_call_id_and_messages_their_saved_form(project):
    with serving() as server:
        done = run_agent(server, project, "--mode", "json", "What is this project called?")

    assert done.returncode == 0, done.stderr  # a listener's error is said there
    events = [json.loads(line) for line in done.stdout.splitlines()]
    start = next(e for e in events if e["type"] == "tool_execution_start")
    end = next(e for e in events if e["type"] == "tool_execution_end")
    assert start["tool_call_id"] == end["tool_call_id"] == "call_1"
    assert start["tool_call"] == {"type": "toolCall", "id": "call_1", "name": "read",
                                  "arguments": {"path": "README.md"}, "rawArguments": '{"path": "README.md"}'}
    result = message_from_data(end["result"])
    assert isinstance(result, ToolResultMessage) and text_of(result) == README
    messages = [message_from_data(data) for data in events[-1]["messages"]]
    assert [m.role for m in messages] == ["assistant", "toolResult", "assistant"]  # what the run added
    turn_ends = [message_from_data(e["message"]) for e in events if e["type"] == "turn_end"]
    assert turn_ends == [messages[0], messages[2]]


def test_json_gives_each_prompt_of_stdin_its_own_run(project):
    with serving() as server:
        done = run_agent(server, project, "--mode", "json", stdin="First?\nSecond?\n")

    types = [json.loads(line)["type"] for line in done.stdout.splitlines()]
    assert done.returncode == 0, done.stderr
    assert types.count("agent_start") == types.count("agent_end") == 2
    assert types.index("agent_end") + 1 == types.index("agent_start", 1)


def test_json_kill_9_mid_run_loses_nothing_written(project, tmp_path):
    assert kill_9_mid_run(project, tmp_path, "json") == '{"type": "agent_start"}'


def test_json_sigterm_mid_run_aborts_it_keeps_the_session_whole_and_exits_143(project, tmp_path):
    stdout = sigterm_mid_run(project, tmp_path, "json")
    assert [json.loads(line)["type"] for line in stdout.splitlines()][:1] == ["agent_start"], stdout


# Lab 13.7: text that is not UTF-8 becomes U+FFFD, in the prompt and in every JSON line.


def test_utf8_a_prompt_that_is_not_utf8_is_valid_text_in_every_event_and_the_log(project, tmp_path):
    path = tmp_path / "session.jsonl"
    with serving() as server:  # the prompt's bytes as a Latin-1 terminal sends them: Python reads \udce9
        argv = [*map(os.fsencode, command(server, project, "--mode", "json", "--session", str(path))), b"caf\xe9?"]
        done = subprocess.run(argv, cwd=PROJECT, env=environment(), capture_output=True,
                              timeout=PROCESS_TIME_LIMIT, check=False)

    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    events = [json.loads(line) for line in done.stdout.decode("utf-8").splitlines()]  # valid UTF-8, every line
    assert [e["type"] for e in events][0] == "agent_start" and events[-1]["type"] == "agent_end"
    assert events[-1]["stop_reason"] == "stop"
    assert server.requests[0][1]["messages"][-1]["content"] == "caf\ufffd?"
    assert user_texts(path) == ["caf\ufffd?"]
    shown = subprocess.run([sys.executable, "-m", "tiny_pi.session", str(path)], cwd=PROJECT, env=environment(),
                           capture_output=True, timeout=PROCESS_TIME_LIMIT, check=False)
    assert shown.returncode == 0, shown.stderr.decode()
    assert "user: caf\ufffd?" in shown.stdout.decode("utf-8")


def test_utf8_the_json_printer_never_drops_an_event_it_cannot_encode(project):
    from tiny_pi.agent_events import AgentEndEvent, AgentOutcome
    from tiny_pi.messages import Usage, user_message
    from tiny_pi.modes.json_mode import JsonPrinter

    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)  # strict, as a pipe is
    printer = JsonPrinter(out, on_closed=lambda: None)
    printer(AgentEndEvent(AgentOutcome("stop", 1, Usage(), (user_message("caf\udce9"),))))

    line = out.buffer.getvalue().decode("utf-8")
    assert json.loads(line)["messages"][0]["content"] == [{"type": "text", "text": "caf\ufffd"}]


# Lab 13.8: a reader that closes stdout aborts the run, quietly, in either line mode.


def close_stdout_during_the_second_call(project, *mode):
    """Run the README round trip in `mode`, read one line of stdout, then close it as `| head -1` does.

    The server holds its second answer until stdout is closed, then asks for a `write`
    that nobody would see. Returns the line read, the exit status, stderr and the requests.
    """
    asked_again = threading.Event()  # the second model call has reached the server
    closed = threading.Event()  # the test has read its line and closed its end of stdout

    async def another_call_once_stdout_is_closed(stream, body):
        if len(body["messages"]) != 3:  # not the call after the first tool: the README round trip
            return await readme_model(stream, body)
        asked_again.set()
        await trio.to_thread.run_sync(closed.wait, PROCESS_TIME_LIMIT)
        await stream.send_all(STREAM_HEAD)
        call = tool_call_chunks("call_2", "write", json.dumps({"path": "NOTES.md", "content": "unread\n"}))
        for payload in (*call, chunk(finish_reason="tool_calls")):
            await send_chunk(stream, sse(payload))
        await send_chunk(stream, b"data: [DONE]\n\n")
        await stream.send_all(b"0\r\n\r\n")

    with serving(another_call_once_stdout_is_closed) as server:
        args = command(server, project, *mode, "--tools", "read,write", "What is this project called?")
        process = subprocess.Popen(args, cwd=PROJECT, env=environment(), stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            first_line = process.stdout.readline()
            wait_while_running(asked_again, process, "the second model call never came", process.stderr.read)
            process.stdout.close()  # what `| head -1` does once it has its line
            closed.set()
            _, stderr = process.communicate(timeout=PROCESS_TIME_LIMIT)
        finally:
            process.kill()
    return first_line, process.returncode, stderr, server.requests


def assert_aborted_quietly(project, returncode, stderr, requests):
    assert returncode == 130, stderr  # aborted, like Ctrl-C
    assert "[aborted] turns: 2" in stderr
    for noise in ("BrokenPipeError", "Traceback", "Exception ignored"):
        assert noise not in stderr
    assert not (project / "NOTES.md").exists()  # the second tool call never ran
    assert len(requests) == 2  # and no third model call was made


def test_closed_stdout_in_json_mode_aborts_the_run(project):
    first_line, *ending = close_stdout_during_the_second_call(project, "--mode", "json")

    assert json.loads(first_line) == {"type": "agent_start"}
    assert_aborted_quietly(project, *ending)


def test_closed_stdout_in_text_mode_aborts_the_run(project):
    first_line, *ending = close_stdout_during_the_second_call(project, "--mode", "text")

    assert first_line == "I will read the README first.\n"
    assert_aborted_quietly(project, *ending)


# Lab 13.9: the interactive mode, on a real pseudo-terminal: a prompt loop that steers while the agent works.


TAKE_TERMINAL = (  # the child makes the terminal its own, so that Ctrl-C there sends it SIGINT
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.executable, [sys.executable, '-m', 'tiny_pi.agent', *sys.argv[1:]])"
)


class Terminal:
    """`python -m tiny_pi.agent` on a pseudo-terminal: type into it, wait until it shows a text."""

    def __init__(self, server, root, *args):
        self.master, slave = os.openpty()
        agent_args = command(server, root, *args)[3:]
        self.process = subprocess.Popen([sys.executable, "-c", TAKE_TERMINAL, *agent_args], cwd=PROJECT,
                                        env=environment(), stdin=slave, stdout=slave, stderr=slave,
                                        start_new_session=True)
        os.close(slave)
        self.shown = ""
        self.cursor = 0

    def type(self, keys):
        os.write(self.master, keys.encode())

    def wait_for(self, text):
        """Read until `text` appears after the last text waited for; the typed keys are echoed too."""
        deadline = time.monotonic() + PROCESS_TIME_LIMIT
        while text not in self.shown[self.cursor:]:
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([self.master], [], [], max(remaining, 0))
            piece = self.read() if ready else b""
            if not piece:
                raise AssertionError(f"{text!r} never shown; the terminal shows:\n{self.shown}")
            self.shown += piece.decode("utf-8", errors="replace").replace("\r\n", "\n")
        self.cursor = self.shown.index(text, self.cursor) + len(text)

    def wait_for_event(self, event, what):
        """Wait for the server's `event` while the agent runs; if it ends first, show all the terminal showed."""
        wait_while_running(event, self.process, what, self.rest)

    def rest(self):
        """What the terminal showed, read to its end (the process has ended)."""
        while piece := self.read():
            self.shown += piece.decode("utf-8", errors="replace").replace("\r\n", "\n")
        return self.shown

    def read(self):
        try:
            return os.read(self.master, 65536)
        except OSError:  # EIO: the process has ended and closed the terminal
            return b""

    def exit_status(self):
        status = self.process.wait(PROCESS_TIME_LIMIT)
        os.close(self.master)
        return status

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(PROCESS_TIME_LIMIT)


@contextmanager
def terminal(server, root, *args):
    term = Terminal(server, root, *args)
    try:
        yield term
    finally:
        term.kill()


WELCOME = "commands: /session, /tree, /compact, /quit"


def test_loop_on_a_terminal_a_prompt_is_answered_and_the_prompt_returns(project):
    with serving() as server, terminal(server, project) as term:  # no flag: stdin and stdout are terminals
        term.wait_for(WELCOME)
        term.type("What is this project called?\n")
        term.wait_for(ANSWER)
        term.wait_for("[stop] turns: 2")
        term.wait_for("> ")
        term.type("\x04")  # Ctrl-D: /quit is lab 13.10's
        assert term.exit_status() == 0


def test_loop_a_line_typed_while_the_agent_works_steers_it(project):
    held, release = threading.Event(), threading.Event()

    async def hold_the_first(stream, body):
        if len(body["messages"]) == 1:
            held.set()
            await trio.to_thread.run_sync(release.wait)
        await readme_model(stream, body)

    with serving(hold_the_first) as server, terminal(server, project, "--interactive") as term:
        term.wait_for(WELCOME)
        term.type("What is this project called?\n")
        term.wait_for_event(held, "the model call never came")
        term.type("Mention its licence too.\n")
        term.wait_for("[steer] Mention its licence too.")
        release.set()
        term.wait_for("[stop]")
        term.type("\x04")
        assert term.exit_status() == 0

    second = server.requests[1][1]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "tool", "user"]
    assert second[-1]["content"] == "Mention its licence too."


def test_loop_ctrl_d_at_the_prompt_exits(project):
    with serving() as server, terminal(server, project, "--interactive") as term:
        term.wait_for(WELCOME)
        term.type("\x04")
        assert term.exit_status() == 0
    assert server.requests == []


def test_loop_ctrl_d_while_the_agent_works_lets_the_answer_end_then_exits(project):
    held, release = threading.Event(), threading.Event()

    async def hold_the_first(stream, body):
        if len(body["messages"]) == 1:
            held.set()
            await trio.to_thread.run_sync(release.wait)
        await readme_model(stream, body)

    with serving(hold_the_first) as server, terminal(server, project, "--interactive") as term:
        term.wait_for(WELCOME)
        term.type("What is this project called?\n")
        term.wait_for_event(held, "the model call never came")
        term.type("\x04")
        term.wait_for("(exiting once the running prompt has ended)")
        release.set()
        term.wait_for("[stop] turns: 2")  # the answer's summary: the loop waited for it
        assert term.exit_status() == 0
    assert len(server.requests) == 2


def test_loop_a_prompt_template_is_filled_in_and_sent_as_the_prompt(project):
    prompts = project / ".tiny_pi" / "prompts"  # chapter 12's project resource root
    prompts.mkdir(parents=True)
    (prompts / "name.md").write_text("What is {{thing}} called?\n", encoding="utf-8")
    with serving() as server, terminal(server, project) as term:
        term.wait_for(WELCOME)
        term.type("/name\n")
        term.wait_for("error: prompt template /name is missing thing=...")
        term.type("/name thing=this\n")
        term.wait_for("[stop] turns: 2")
        term.type("\x04")
        assert term.exit_status() == 0

    users = [m["content"] for m in server.requests[0][1]["messages"] if m["role"] == "user"]
    assert [text.strip() for text in users] == ["What is this called?"]


def test_loop_kill_9_mid_run_loses_nothing_written(project, tmp_path):
    path = tmp_path / "session.jsonl"
    held = threading.Event()
    with serving(held_on_the_tool_result(held)) as server, terminal(server, project, "--session", str(path)) as term:
        term.wait_for(WELCOME)
        term.type("What is this project called?\n")
        kill_when_held(term.process, held, term.rest)
    assert_a_new_run_goes_on(project, path)


# Lab 13.10: the slash commands: /session, /tree, /compact and /quit.


def readme_or_summary(stream, body):
    """The README round trip; a call without tools is a summary call, answered in one piece."""
    if "tools" in body:
        return readme_model(stream, body)
    return send_summary(stream)


async def send_summary(stream):
    await stream.send_all(STREAM_HEAD)
    for payload in (chunk({"role": "assistant", "content": "We read the README twice."}), chunk(finish_reason="stop")):
        await send_chunk(stream, sse(payload))
    await send_chunk(stream, b"data: [DONE]\n\n")
    await stream.send_all(b"0\r\n\r\n")


def test_command_session_tree_compact_and_quit(project, tmp_path):
    path = tmp_path / "session.jsonl"
    with serving(readme_or_summary) as server, terminal(server, project, "--session", str(path)) as term:
        term.wait_for(WELCOME)
        for question in ("First?", "Second?"):
            term.type(f"{question}\n")
            term.wait_for("[stop]")
        term.type("/session\n")
        term.wait_for(f"session: {path} (9 entries)")  # the model change and eight messages
        term.type("/compact\n")
        term.wait_for("[compaction] ~")
        term.wait_for("4 messages summarised, 4 kept")
        term.type("/tree\n")
        term.wait_for("compaction: keeps from")
        term.type("/bogus\n")
        term.wait_for("unknown command /bogus; the commands are /session, /tree, /compact, /quit")
        term.type("/quit\n")
        assert term.exit_status() == 0

    assert [e.type for e in read_session(path).entries][-1] == "compaction"
    assert "We read the README twice." in read_session(path).entries[-1].summary


def test_command_session_and_tree_without_a_session_say_how_to_keep_one(project):
    with serving() as server, terminal(server, project) as term:
        term.wait_for(WELCOME)
        for name in ("/session", "/tree"):
            term.type(f"{name}\n")
            term.wait_for("no session: start with --session FILE to keep the conversation")
        term.type("/quit\n")
        assert term.exit_status() == 0
    assert server.requests == []


# Lab 13.11: Ctrl-C, SIGTERM and a closed terminal, watched while the loop reads.


def test_keys_ctrl_c_aborts_the_turn_and_twice_at_the_prompt_exits(project):
    held = threading.Event()

    async def never_answer(stream, body):
        held.set()
        await trio.sleep_forever()

    with serving(never_answer) as server, terminal(server, project, "--interactive") as term:
        term.wait_for(WELCOME)
        term.type("What is this project called?\n")
        term.wait_for_event(held, "the model call never came")
        term.type("\x03")
        term.wait_for("[aborted]")
        term.wait_for("> ")
        term.type("\x03")
        term.wait_for("(Ctrl-C again exits; so does Ctrl-D)")
        term.type("\x03")
        assert term.exit_status() == 130


@pytest.mark.parametrize("how", ["kill", "closed terminal"])
def test_keys_sigterm_or_a_closed_terminal_aborts_the_turn_and_exits(project, tmp_path, how):
    path = tmp_path / "session.jsonl"
    held = threading.Event()
    with serving(held_on_the_tool_result(held)) as server, terminal(server, project, "--session", str(path)) as term:
        term.wait_for(WELCOME)
        term.type("What is this project called?\n")
        term.wait_for_event(held, "the agent never got to the tool result's call")
        if how == "kill":
            term.process.send_signal(signal.SIGTERM)
            assert term.exit_status() == 143
        else:
            os.close(term.master)  # the terminal goes away: the agent, which leads its session, gets SIGHUP
            assert term.process.wait(PROCESS_TIME_LIMIT) == 129
    assert_a_new_run_goes_on(project, path)
