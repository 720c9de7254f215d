"""Chapter 14: evaluating complete agents with safe evidence.

Run alone with `python -m pytest tests/test_14_evaluation.py`. The labs
follow the lesson: tasks read and checked (14.1), the transcript's pairings
and the judge (14.2), one task through its phases with the real agent as a
subprocess against a scripted loopback server (14.3 to 14.5), and the command
line with its shareable report (14.6).
"""

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio
from loopback_server import STREAM_HEAD, LoopbackServer, chunk, send_chunk, sse, usage_chunk

from tiny_pi.eval.__main__ import main
from tiny_pi.eval.judge import CheckResult, contradiction, judge_check
from tiny_pi.eval import phases
from tiny_pi.eval.phases import INFRASTRUCTURE, Settings, run_task
from tiny_pi.eval.tasks import Check, TaskError, load_task, load_tasks
from tiny_pi.eval.transcript_checks import transcript_problems
from tiny_pi.messages import ToolCall, ToolResultMessage, assistant_message, text, user_message

TIME_LIMIT = 10.0  # a guard against hangs, not a speed test: the machine may be busy
PROCESS_TIME_LIMIT = 120.0  # a whole `python -m tiny_pi.eval` run, agents and checks included, on a busy machine
PROJECT = Path(__file__).resolve().parent.parent
README = "# tiny-pi\nA small agent runtime.\n"
SECRET_ANSWER = "The project is called tiny-pi."


def write_task(root, name, toml, files=None):
    """TASKS/NAME/task.toml and, when `files` is given, TASKS/NAME/workspace/ with them."""
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "task.toml").write_text(toml, encoding="utf-8")
    for relative, content in (files or {}).items():
        (directory / "workspace" / relative).parent.mkdir(parents=True, exist_ok=True)
        (directory / "workspace" / relative).write_text(content, encoding="utf-8")
    return directory


def snapshot(root):
    """Every file under `root` with its bytes: to prove nothing was changed."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def running(marker):
    """The ids of the live processes with `marker` in their command line (a zombie's is empty)."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            arguments = Path("/proc", name, "cmdline").read_bytes().split(b"\0")
        except OSError:  # it ended while we looked
            continue
        if any(marker.encode() in argument for argument in arguments):
            found.append(int(name))
    return found


def wait_for(condition, process=None, limit=PROCESS_TIME_LIMIT):
    """Poll `condition` until it holds; give up at `limit`, or as soon as `process` has exited."""
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline or (process is not None and process.poll() is not None):
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def marker():
    """A word unique to this test, as a sleep's duration: `sleep MARKER` runs for ten minutes.

    Whatever still runs with it in its command line at the end is killed, so
    a test that fails (on a harness that leaves processes behind) cleans up.
    """
    word = f"600.{uuid.uuid4().int % 10**9:09d}"
    yield word
    kill_all(word)


def kill_all(marker):
    for pid in running(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


# Lab 14.1: tasks, read and checked before anything runs.


def test_task_a_minimal_task_gets_the_read_only_tools_and_a_time_limit(tmp_path):
    directory = write_task(tmp_path, "name", 'prompt = "Name it."\nmax_turns = 3\n[[checks]]\ncommand = "true"\n')
    task = load_task(directory)
    assert (task.name, task.prompt, task.max_turns) == ("name", "Name it.", 3)
    assert task.tools == ("read", "ls")
    assert task.time_limit == 120.0
    assert task.checks == (Check(command="true"),)


MALFORMED = [
    ('max_turns = 3\n[[checks]]\ncommand = "true"\n', "prompt: must be a non-empty string, got None"),
    ('prompt = "  "\nmax_turns = 3\n[[checks]]\ncommand = "true"\n', "prompt: must be a non-empty string, got '  '"),
    ('prompt = "x"\nmax_turns = 0\n[[checks]]\ncommand = "true"\n', "max_turns: must be a whole number of 1 or more, got 0"),
    ('prompt = "x"\nmax_turns = 2\ntools = ["read", "shell"]\n[[checks]]\ncommand = "true"\n', "tools: unknown tool 'shell'"),
    ('prompt = "x"\nmax_turns = 2\n', "checks: give at least one [[checks]] table"),
    ('prompt = "x"\nmax_turns = 2\n[[checks]]\npath = "a"\ncommand = "true"\n', "checks[1]: give either path and contains, or command"),
    ('prompt = "x"\nmax_turns = 2\nmax_turn = 3\n[[checks]]\ncommand = "true"\n', "max_turn: unknown key"),
    ('prompt = "x"\nmax_turns = 2\ntime_limit = 0\n[[checks]]\ncommand = "true"\n', "time_limit: must be seconds above 0"),
    ('prompt = "x\nmax_turns = 2\n', "task.toml: unreadable: "),
    ('prompt = "x"\nmax_turns = 2\ntools = "read"\n[[checks]]\ncommand = "true"\n',
     "tools: must be a list of tool names, got 'read'"),
    ('prompt = "x"\nmax_turns = 2\n[[checks]]\ncommand = "true"\n[[checks]]\npath = "a"\ncontain = "x"\n',
     "checks[2].contain: unknown key (known: path, contains, command)"),
    ('prompt = "x"\nmax_turns = 2\n[[checks]]\npath = "a"\ncontains = 3\n', "checks[1].contains: must be a non-empty string, got 3"),
    ('prompt = "x\\u0000y"\nmax_turns = 2\n[[checks]]\ncommand = "true"\n', "prompt: must not contain a NUL character"),
    ('prompt = "x"\nmax_turns = 2\n[[checks]]\npath = "NAME\\u0000.txt"\ncontains = "x"\n',
     "checks[1].path: must not contain a NUL character"),
    ('prompt = "x"\nmax_turns = 2\n[[checks]]\ncommand = "true \\u0000"\n', "checks[1].command: must not contain a NUL character"),
]
MALFORMED_IDS = ["no-prompt", "blank-prompt", "no-turns", "unknown-tool", "no-checks", "both-kinds", "unknown-key", "no-time",
                 "not-toml", "tools-not-a-list", "unknown-check-key", "check-not-text", "nul-in-prompt", "nul-in-path",
                 "nul-in-command"]


@pytest.mark.parametrize("toml, message", MALFORMED, ids=MALFORMED_IDS)
def test_task_a_malformed_task_is_named_with_its_file_and_key(tmp_path, toml, message):
    directory = write_task(tmp_path, "broken", toml)
    with pytest.raises(TaskError) as error:
        load_task(directory)
    assert str(error.value).startswith(f"{directory / 'task.toml'}: ")
    assert message in str(error.value)


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "notes/../../x"], ids=["up", "absolute", "down-and-up"])
def test_task_a_check_outside_the_workspace_is_malformed(tmp_path, path):
    directory = write_task(tmp_path, "escape", f'prompt = "x"\nmax_turns = 2\n[[checks]]\npath = "{path}"\ncontains = "x"\n')
    with pytest.raises(TaskError, match=r"checks\[1\]\.path: .* is outside the workspace"):
        load_task(directory)


def test_task_tasks_load_by_name_and_a_missing_or_unreadable_file_is_named(tmp_path):
    write_task(tmp_path, "b", 'prompt = "x"\nmax_turns = 1\n[[checks]]\ncommand = "true"\n')
    write_task(tmp_path, "a", 'prompt = "y"\nmax_turns = 1\n[[checks]]\ncommand = "true"\n')
    (tmp_path / "README.md").write_text("Tasks for my agent.\n", encoding="utf-8")  # a plain file is no task
    assert [task.name for task in load_tasks(tmp_path)] == ["a", "b"]
    (tmp_path / "c").mkdir()
    with pytest.raises(TaskError, match=r"c/task\.toml: task\.toml: missing"):
        load_tasks(tmp_path)
    (tmp_path / "c" / "task.toml").mkdir()  # there, but no file: the system's own reason
    with pytest.raises(TaskError) as error:
        load_tasks(tmp_path)
    path = tmp_path / "c" / "task.toml"
    assert str(error.value) == f"{path}: task.toml: unreadable: [Errno 21] Is a directory: '{path}'"


def test_task_a_check_value_of_spaces_is_text_but_a_blank_prompt_is_not(tmp_path):
    directory = write_task(tmp_path, "spaces", 'prompt = "x"\nmax_turns = 1\n[[checks]]\npath = "a"\ncontains = "  "\n')
    assert load_task(directory).checks == (Check(path="a", contains="  "),)  # it looks for two spaces


def test_task_a_task_named_report_json_is_refused_before_any_runs(tmp_path):
    write_task(tmp_path, "a-fine", 'prompt = "x"\nmax_turns = 1\n[[checks]]\ncommand = "true"\n')
    write_task(tmp_path, "report.json", 'prompt = "y"\nmax_turns = 1\n[[checks]]\ncommand = "true"\n')
    with pytest.raises(TaskError) as error:
        load_tasks(tmp_path)
    assert str(error.value) == f"{tmp_path / 'report.json'}: name: report.json is the report's name in DIR: rename the task"


@pytest.mark.parametrize("kind, reason", [("a-file", "not a directory"), ("empty", "no task directories")])
def test_task_a_tasks_path_without_tasks_is_named_as_given(tmp_path, monkeypatch, kind, reason):
    monkeypatch.chdir(tmp_path)
    if kind == "a-file":
        (tmp_path / "tasks").write_text("not a directory", encoding="utf-8")
    else:
        (tmp_path / "tasks").mkdir()
    with pytest.raises(TaskError) as error:
        load_tasks(Path("tasks"))
    assert str(error.value) == f"tasks: TASKS: {reason}"


# Lab 14.2: the transcript's pairings, and the judge.


def call(call_id, name="read"):
    return ToolCall(id=call_id, name=name, arguments={"path": "README.md"})


def result(call_id, name="read"):
    return ToolResultMessage(call_id, name, (text(README),), False, 0)


def test_judge_a_whole_transcript_has_no_problems():
    messages = [user_message("q"), assistant_message([call("c1"), call("c2", "ls")], stop_reason="toolUse"),
                result("c1"), result("c2", "ls"), assistant_message([text("done")])]
    assert transcript_problems(messages) == []


BROKEN = [
    ([assistant_message([call("c1")], stop_reason="toolUse")], "call-without-result"),
    ([result("c9")], "result-without-call"),
    ([assistant_message([call("c1"), call("c1")], stop_reason="toolUse"), result("c1"), result("c1")], "duplicate-call"),
    ([assistant_message([call("c1")], stop_reason="toolUse"), result("c1"), result("c1")], "duplicate-result"),
    ([assistant_message([call("c1")], stop_reason="toolUse"), result("c1", "ls")], "result-name-mismatch"),
]


@pytest.mark.parametrize("messages, kind", BROKEN, ids=[kind for _, kind in BROKEN])
def test_judge_each_broken_pairing_is_found_with_its_class(messages, kind):
    problems = transcript_problems([user_message("q"), *messages])
    assert problems[0].kind == kind
    assert problems[0].call_id in ("c1", "c9")


def test_judge_path_and_command_checks_read_the_workspace(tmp_path):
    (tmp_path / "NAME.txt").write_text("tiny-pi\n", encoding="utf-8")
    assert judge_check(Check(path="NAME.txt", contains="tiny-pi"), tmp_path) == CheckResult(
        Check(path="NAME.txt", contains="tiny-pi"), True)
    missing = judge_check(Check(path="NOTES.md", contains="x"), tmp_path)
    assert (missing.passed, missing.detail) == (False, "NOTES.md is not a file")
    assert judge_check(Check(command="grep -q tiny-pi NAME.txt"), tmp_path).passed
    failed = judge_check(Check(command="grep -q nothing NAME.txt"), tmp_path)
    assert (failed.passed, failed.detail) == (False, "exit status 1")


def test_judge_a_link_out_of_the_workspace_fails_and_a_slow_command_times_out(tmp_path):
    root = tmp_path / "copy"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("tiny-pi", encoding="utf-8")
    (root / "NAME.txt").symlink_to(tmp_path / "secret.txt")
    linked = judge_check(Check(path="NAME.txt", contains="tiny-pi"), root)
    assert (linked.passed, linked.detail) == (False, "NAME.txt leads outside the workspace")
    slow = judge_check(Check(command="sleep 30"), root, time_limit=0.3)
    assert (slow.passed, slow.detail) == (False, "timed out after 0.3 s")


def test_judge_a_link_loop_the_agent_made_fails_its_check(tmp_path):
    (tmp_path / "NAME.txt").symlink_to("NAME.txt")  # ln -s NAME.txt NAME.txt
    looped = judge_check(Check(path="NAME.txt", contains="tiny-pi"), tmp_path)
    assert (looped.passed, looped.detail) == (False, "NAME.txt is not a file")


def test_judge_a_command_ends_when_its_process_exits_and_takes_its_children_with_it(tmp_path, marker):
    background = judge_check(Check(command=f"sleep {marker} & exit 0"), tmp_path, time_limit=TIME_LIMIT)
    assert (background.passed, background.detail) == (True, "")  # not "timed out": the shell exited at once
    assert wait_for(lambda: running(marker) == [], limit=TIME_LIMIT)  # its background sleep was killed


def test_judge_an_answer_that_contradicts_itself_is_refused(tmp_path):
    task = load_task(write_task(tmp_path, "t", 'prompt = "x"\nmax_turns = 1\n[[checks]]\ncommand = "true"\n'))
    check = task.checks[0]
    assert contradiction(task, [CheckResult(check, True)]) is None
    assert contradiction(task, [CheckResult(check, True, "exit status 1")]) == (
        "check 1 says passed=True with detail 'exit status 1'")  # a pass with a reason to fail
    assert contradiction(task, [CheckResult(check, False)]) == "check 1 says passed=False with detail ''"  # no reason
    assert contradiction(task, []) == "0 results for 1 checks, or not in their order"


# Lab 14.3: one task, phase by phase, with the agent as a subprocess.


def tool_calls(*calls):
    """One assistant turn that asks for `calls`, each (id, name, arguments), and says it used 50 + 10 tokens."""
    pieces = [chunk({"role": "assistant", "content": "On it."})]
    for index, (call_id, name, arguments) in enumerate(calls):
        first = {"index": index, "id": call_id, "type": "function",
                 "function": {"name": name, "arguments": json.dumps(arguments)}}
        pieces.append(chunk({"tool_calls": [first]}))
    return [*pieces, chunk(finish_reason="tool_calls"), usage_chunk(50, 10)]


def answer(words):
    return [chunk({"role": "assistant", "content": words}), chunk(finish_reason="stop"), usage_chunk(50, 10)]


def scripted(*turns):
    """A model that plays `turns` in order: the request holding K assistant messages gets turn K."""

    async def reply(stream, body):
        turn = turns[sum(m["role"] == "assistant" for m in body["messages"])]
        if turn == "hang":
            await trio.sleep_forever()
        await stream.send_all(STREAM_HEAD)
        for payload in turn:
            await send_chunk(stream, sse(payload))
        await send_chunk(stream, b"data: [DONE]\n\n")
        await stream.send_all(b"0\r\n\r\n")

    return reply


WRITE_NAME = scripted(tool_calls(("call_1", "write", {"path": "NAME.txt", "content": "tiny-pi\n"})), answer(SECRET_ANSWER))


@contextmanager
def serving(reply):
    """A loopback server in a thread of its own, so the harness can run in this thread."""
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


NAME_TASK = """prompt = "Write the project's name into NAME.txt."
tools = [TOOLS]
max_turns = 4
time_limit = 20
[[checks]]
path = "NAME.txt"
contains = "tiny-pi"
[[checks]]
command = "grep -q tiny-pi NAME.txt"
"""


def name_task(tasks, name="name", tools='"read", "write"', checks=""):
    return load_task(write_task(tasks, name, NAME_TASK.replace("TOOLS", tools) + checks, {"README.md": README}))


@pytest.fixture
def dirs(tmp_path, monkeypatch):
    monkeypatch.delenv("TINY_PI_API_KEY", raising=False)
    (tmp_path / "tasks").mkdir()
    return tmp_path / "tasks", tmp_path / "out"


def test_run_a_passing_task_keeps_its_evidence_and_leaves_the_task_unchanged(dirs):
    tasks, out = dirs
    task = name_task(tasks)
    before = snapshot(tasks)
    with serving(WRITE_NAME) as server:
        verdict = run_task(task, Settings(server.base_url, "loopback", out))

    assert snapshot(tasks) == before  # the agent worked in a copy
    assert sorted(p.name for p in out.parent.iterdir()) == ["out", "tasks"]  # nothing written beside OUT
    assert (verdict.status, verdict.turns, verdict.tokens) == ("pass", 2, 120)
    assert sorted(p.name for p in (out / "name").iterdir()) == ["agent.log", "checks.json", "session.jsonl", "workspace"]
    assert (out / "name" / "workspace" / "NAME.txt").read_text() == "tiny-pi\n"
    assert [r["passed"] for r in json.loads((out / "name" / "checks.json").read_text())] == [True, True]
    assert server.requests[0][1]["tools"][1]["function"]["name"] == "write"


def test_run_a_failed_check_is_a_fail_that_names_the_check(dirs):
    tasks, out = dirs
    task = name_task(tasks, checks='[[checks]]\npath = "NOTES.md"\ncontains = "tiny-pi"\n')
    with serving(WRITE_NAME) as server:
        verdict = run_task(task, Settings(server.base_url, "loopback", out))

    assert (verdict.status, verdict.failure) == ("fail", "check-failed")
    assert verdict.detail == "check 3 (NOTES.md contains 'tiny-pi'): NOTES.md is not a file"


def test_run_bash_is_offered_only_when_the_task_lists_it(dirs):
    tasks, out = dirs
    make_file = scripted(tool_calls(("call_1", "bash", {"command": "echo tiny-pi > NAME.txt"})), answer("Done."))
    with serving(make_file) as server:
        without = run_task(name_task(tasks, "without"), Settings(server.base_url, "loopback", out))
        with_bash = run_task(name_task(tasks, "with", '"bash"'), Settings(server.base_url, "loopback", out))

    assert [t["function"]["name"] for t in server.requests[0][1]["tools"]] == ["read", "write"]
    assert "Tool 'bash' not found" in (out / "without" / "session.jsonl").read_text()
    assert (without.status, with_bash.status) == ("fail", "pass")


def skill_file(name):
    """A SKILL.md as chapter 12 reads it: front matter with name and description, then a body."""
    return f"---\nname: {name}\ndescription: The {name} rules.\n---\nFollow the {name} rules.\n"


def test_run_the_agent_gets_the_tasks_resources_and_never_the_evaluators(dirs, empty_home):
    tasks, out = dirs
    (empty_home / ".tiny_pi" / "skills" / "house-style").mkdir(parents=True)
    (empty_home / ".tiny_pi" / "skills" / "house-style" / "SKILL.md").write_text(skill_file("house-style"))
    files = {"README.md": README, ".tiny_pi/skills/task-style/SKILL.md": skill_file("task-style")}
    task = load_task(write_task(tasks, "name", NAME_TASK.replace("TOOLS", '"read", "write"'), files))
    with serving(WRITE_NAME) as server:
        verdict = run_task(task, Settings(server.base_url, "loopback", out))

    system = server.requests[0][1]["messages"][0]
    assert system["role"] == "system" and "- task-style: The task-style rules." in system["content"]
    assert "house-style" not in system["content"]  # the evaluator's ~/.tiny_pi stays out of the run
    assert "house-style" not in (out / "name" / "session.jsonl").read_text()  # and out of its evidence
    assert verdict.status == "pass"


SLEEPY_AGENT = """import sys, time
if sys.argv[1] == "empty":
    open(sys.argv[sys.argv.index("--session") + 1], "w").close()
time.sleep(30)
"""


STOPPED_AGENT = """import sys
open(sys.argv[sys.argv.index("--session") + 1], "w").write("{}\\n")
sys.exit(143)  # how the agent (chapter 08) ends when someone sends it SIGTERM
"""


QUIET_AGENT = """import sys
from pathlib import Path
from tiny_pi.session_writer import SessionWriter
SessionWriter.create(Path(sys.argv[sys.argv.index("--session") + 1]))  # a whole session: its header, no turn
"""


def test_run_the_agent_gets_an_environment_of_its_own(dirs, monkeypatch):
    tasks, out = dirs
    monkeypatch.setenv("PYTHONPATH", ".")  # the agent runs in the copy: "." would be the workspace
    monkeypatch.setenv("PATH", os.pathsep.join([".", os.environ["PATH"]]))
    files = {"README.md": README, "trio.py": "raise SystemExit('the workspace trio.py was imported')\n"}
    task = load_task(write_task(tasks, "name", NAME_TASK.replace("TOOLS", '"bash"'), files))
    show = scripted(tool_calls(("call_1", "bash", {"command": 'echo "$HOME" > home.txt; echo "$PATH" > path.txt; '
                                                              "echo tiny-pi > NAME.txt"})), answer("Done."))
    with serving(show) as server:
        verdict = run_task(task, Settings(server.base_url, "loopback", out))

    assert verdict.status == "pass", (out / "name" / "agent.log").read_text()
    workspace = out / "name" / "workspace"
    assert (workspace / "home.txt").read_text().strip() == str(out / "name" / "user-root")
    assert all(os.path.isabs(entry) for entry in (workspace / "path.txt").read_text().strip().split(os.pathsep))


def test_run_a_file_that_cannot_be_collected_is_an_infrastructure_failure_of_collect(dirs):
    tasks, out = dirs
    fifo = scripted(tool_calls(("call_1", "bash", {"command": "mkfifo pipe"})), answer("Done."))
    with serving(fifo) as server:
        verdict = run_task(name_task(tasks, tools='"bash"'), Settings(server.base_url, "loopback", out))

    assert (verdict.status, verdict.phase, verdict.failure) == (INFRASTRUCTURE, "collect", "not-collected")
    assert verdict.detail == "pipe: not a regular file"


# Lab 14.4: the time limit, a kill, and nothing the task started left running.


def test_run_the_time_limit_kills_the_agent_and_fails_the_task(dirs):
    tasks, out = dirs
    task = load_task(write_task(tasks, "slow", NAME_TASK.replace("TOOLS", '"read"').replace("20", "1")))
    with serving(scripted("hang")) as server:
        verdict = run_task(task, Settings(server.base_url, "loopback", out))

    assert (verdict.status, verdict.failure, verdict.detail) == ("fail", "time-limit", "time limit: 1 s")
    assert (out / "slow" / "workspace").is_dir()
    assert not (out / "slow" / "run").exists()


@pytest.mark.parametrize("session", ["missing", "empty"])
def test_run_an_agent_killed_before_it_wrote_its_session_fails_the_task(dirs, session):
    tasks, out = dirs
    task = load_task(write_task(tasks, "slow", NAME_TASK.replace("TOOLS", '"read"').replace("20", "1")))
    sleepy = (sys.executable, "-c", SLEEPY_AGENT, session)
    verdict = run_task(task, Settings("http://127.0.0.1:9/v1", "loopback", out, sleepy))

    assert (verdict.status, verdict.failure, verdict.turns) == ("fail", "time-limit", 0)
    assert (out / "slow" / "session.jsonl").exists() == (session == "empty")


def test_run_the_time_limit_ends_every_process_the_agent_started(dirs, marker):
    tasks, out = dirs
    long_command = scripted(tool_calls(("call_1", "bash", {"command": f"touch started; sleep {marker}", "timeout": 600})))
    task = load_task(write_task(tasks, "slow", NAME_TASK.replace("TOOLS", '"bash"').replace("20", "8"), {"README.md": README}))
    with serving(long_command) as server:
        verdict = run_task(task, Settings(server.base_url, "loopback", out))

    assert (verdict.status, verdict.failure) == ("fail", "time-limit")
    assert (out / "slow" / "workspace" / "started").exists()  # the command was running at the limit
    assert wait_for(lambda: running(marker) == [], limit=TIME_LIMIT)  # in a session of its own, and still ended


# Lab 14.5: the harness's own failures, each in its phase, never the agent's.


def test_run_an_agent_that_crashes_is_an_infrastructure_failure_of_execute(dirs):
    tasks, out = dirs
    crash = (sys.executable, "-c", "raise RuntimeError('the agent fell over')")
    verdict = run_task(name_task(tasks), Settings("http://127.0.0.1:9/v1", "loopback", out, crash))

    assert (verdict.status, verdict.phase, verdict.failure) == (INFRASTRUCTURE, "execute", "agent-crashed")
    assert verdict.detail == "exit status 1: no session written"  # an uncaught exception exits 1 too
    assert "the agent fell over" in (out / "name" / "agent.log").read_text()


def test_run_an_agent_stopped_by_a_signal_the_harness_never_sends_is_a_crash(dirs):
    tasks, out = dirs
    stopped = (sys.executable, "-c", STOPPED_AGENT)
    verdict = run_task(name_task(tasks), Settings("http://127.0.0.1:9/v1", "loopback", out, stopped))

    assert (verdict.status, verdict.phase, verdict.failure) == (INFRASTRUCTURE, "execute", "agent-crashed")
    assert verdict.detail == "exit status 143"


def test_run_a_traceback_in_the_agents_output_is_not_a_crash(dirs):
    tasks, out = dirs
    quoting = scripted(
        tool_calls(("call_1", "bash", {"command": "python3 -c 'import no_such_module'; echo tiny-pi > NAME.txt"})),
        answer('The import failed:\nTraceback (most recent call last):\n  File "<string>", line 1, in <module>\n'
               "ModuleNotFoundError: No module named 'no_such_module'\nNAME.txt is written anyway."))
    with serving(quoting) as server:
        verdict = run_task(name_task(tasks, tools='"bash"'), Settings(server.base_url, "loopback", out))

    assert "Traceback (most recent call last):" in (out / "name" / "agent.log").read_text()
    assert (verdict.status, verdict.detail) == ("pass", "")


def test_run_a_broken_transcript_is_an_infrastructure_failure_not_the_agents(dirs):
    tasks, out = dirs
    twice = scripted(tool_calls(("call_1", "read", {"path": "README.md"}), ("call_1", "read", {"path": "README.md"})),
                     answer("Done."))
    with serving(twice) as server:
        verdict = run_task(name_task(tasks), Settings(server.base_url, "loopback", out))

    assert (verdict.status, verdict.phase, verdict.failure) == (INFRASTRUCTURE, "collect", "duplicate-call")


def test_run_a_judge_that_contradicts_itself_is_an_infrastructure_failure_of_judge(dirs):
    tasks, out = dirs

    def confused(task, root):
        return [CheckResult(check, True, "exit status 1") for check in task.checks]

    with serving(WRITE_NAME) as server:
        verdict = run_task(name_task(tasks), Settings(server.base_url, "loopback", out), judge=confused)

    assert (verdict.status, verdict.phase, verdict.failure) == (INFRASTRUCTURE, "judge", "judge-contradiction")
    assert not (out / "name" / "run").exists()


def test_run_a_judge_that_raises_an_os_error_is_an_infrastructure_failure_of_judge(dirs):
    tasks, out = dirs

    def no_shell(task, root):
        raise FileNotFoundError(2, "No such file or directory", "sh")

    def buggy(task, root):
        raise ValueError("a bug in the judge")

    quiet = Settings("http://127.0.0.1:9/v1", "loopback", out, (sys.executable, "-c", QUIET_AGENT))
    verdict = run_task(name_task(tasks), quiet, judge=no_shell)
    with pytest.raises(ValueError):  # not the judge failing: its bug, shown whole
        run_task(name_task(tasks, "buggy"), quiet, judge=buggy)

    assert (verdict.status, verdict.phase, verdict.failure) == (INFRASTRUCTURE, "judge", "judge-error")
    assert verdict.detail == "[Errno 2] No such file or directory: 'sh'"
    assert not (out / "name" / "run").exists() and not (out / "buggy" / "run").exists()


def test_run_a_failed_dispose_replaces_a_verdict_keeps_its_counts_and_never_an_earlier_failure(dirs, monkeypatch):
    tasks, out = dirs
    monkeypatch.setattr(phases, "end_descendants", lambda: 1)  # as if one process outlived every kill
    with serving(WRITE_NAME) as server:
        judged = run_task(name_task(tasks), Settings(server.base_url, "loopback", out))
    crash = (sys.executable, "-c", "raise SystemExit(3)")
    crashed = run_task(name_task(tasks, "crashed"), Settings("http://127.0.0.1:9/v1", "loopback", out, crash))

    assert (judged.status, judged.phase, judged.failure) == (INFRASTRUCTURE, "dispose", "dispose-failed")
    assert judged.detail == "1 processes still running"
    assert (judged.turns, judged.tokens, [c.passed for c in judged.checks]) == (2, 120, [True, True])  # as measured
    assert (out / "name" / "run").is_dir()  # clean up was not tried: something may still work in the copy
    assert (crashed.phase, crashed.failure, crashed.detail) == ("execute", "agent-crashed", "exit status 3")


# Lab 14.6: the command line and the shareable report.


def evaluate(server, tasks, out, *flags):
    return main([str(tasks), "--base-url", server.base_url, "--model", "loopback", "--out", str(out), *flags])


def test_report_a_line_per_task_a_summary_and_exit_1_when_one_fails(dirs, capsys):
    tasks, out = dirs
    name_task(tasks, "a-passes")
    name_task(tasks, "b-fails", checks='[[checks]]\npath = "NOTES.md"\ncontains = "x"\n')
    with serving(WRITE_NAME) as server:
        status = evaluate(server, tasks, out)

    assert status == 1
    assert capsys.readouterr().out.splitlines() == [
        "PASS a-passes",
        "FAIL b-fails: check 3 (NOTES.md contains 'x'): NOTES.md is not a file",
        "passed 1, failed 1, infrastructure 0; turns 4, tokens 240",
    ]


def test_report_json_holds_counts_statuses_and_classes_and_nothing_from_the_run(dirs, capsys):
    tasks, out = dirs
    name_task(tasks, "b-fails", checks='[[checks]]\npath = "NOTES.md"\ncontains = "x"\n')
    with serving(WRITE_NAME) as server:
        assert evaluate(server, tasks, out, "--json") == 1

    printed = capsys.readouterr().out
    report = (out / "report.json").read_text()
    session = (out / "b-fails" / "session.jsonl").read_text()
    secrets = ["call_1", SECRET_ANSWER, "tiny-pi", "small agent", "NAME.txt", "NOTES.md", "b-fails", str(out),
               str(tasks), os.sep + "tmp", "Write the project's name", json.loads(session.splitlines()[0])["id"]]
    assert [secret for secret in secrets if secret in report] == []  # from the run, its files or its paths
    assert json.loads(printed) == json.loads(report)
    assert json.loads(report)["summary"] == {"tasks": 1, "passed": 0, "failed": 1, "infrastructure": 0,
                                             "turns": 2, "tokens": 120}
    assert json.loads(report)["tasks"] == [{"status": "fail", "failure": "check-failed", "phase": None,
                                            "checks_passed": 2, "checks_failed": 1, "turns": 2, "tokens": 120}]


def test_report_a_malformed_task_exits_2_before_anything_runs(dirs, capsys):
    tasks, out = dirs
    name_task(tasks, "a-fine")
    write_task(tasks, "b-broken", 'prompt = "x"\nmax_turns = "many"\n[[checks]]\ncommand = "true"\n')
    with serving(WRITE_NAME) as server:
        status = evaluate(server, tasks, out)

    assert status == 2
    assert server.requests == []
    assert not out.exists()
    assert capsys.readouterr().err.strip() == (
        f"{tasks / 'b-broken' / 'task.toml'}: max_turns: must be a whole number of 1 or more, got 'many'")


def test_report_relative_tasks_and_out_work_from_any_directory(dirs, capsys, monkeypatch):
    tasks, out = dirs
    name_task(tasks)
    monkeypatch.chdir(tasks.parent)  # the agent runs in OUT/NAME/run: its paths must not be relative to here
    with serving(WRITE_NAME) as server:
        status = evaluate(server, Path("tasks"), Path("out"))

    assert capsys.readouterr().out.splitlines()[0] == "PASS name"
    assert status == 0
    assert (out / "name" / "workspace" / "NAME.txt").read_text() == "tiny-pi\n"
    assert json.loads((out / "report.json").read_text())["summary"]["passed"] == 1


def eval_command(server, tasks, out):
    """`python -m tiny_pi.eval` as a subprocess, from this snapshot's root."""
    return [sys.executable, "-m", "tiny_pi.eval", str(tasks), "--base-url", server.base_url, "--model", "loopback",
            "--out", str(out)]


def test_report_nothing_a_task_started_runs_on_after_it(dirs, marker):
    tasks, out = dirs
    daemon = scripted(tool_calls(("call_1", "bash", {"command": f"setsid sleep {marker} > /dev/null 2>&1 & "
                                                                "echo $! > daemon.pid; echo tiny-pi > NAME.txt"})),
                      answer("Done."))
    checks = f'[[checks]]\ncommand = "sleep {marker} & exit 0"\n[[checks]]\ncommand = "setsid sleep {marker} & exit 0"\n'
    name_task(tasks, tools='"bash"', checks=checks)
    with serving(daemon) as server:
        done = subprocess.run(eval_command(server, tasks, out), cwd=PROJECT, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=PROCESS_TIME_LIMIT, check=False)

    assert done.stdout.splitlines()[0] == "PASS name", done.stdout + done.stderr  # both checks exited 0 at once
    assert done.returncode == 0
    assert (out / "name" / "workspace" / "daemon.pid").read_text().strip().isdigit()  # the daemon did start
    assert running(marker) == []  # the agent's daemon and both checks' children: all ended


@pytest.mark.parametrize("number, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["sigterm", "ctrl-c"])
def test_report_a_stop_signal_ends_the_running_task_and_says_one_line(dirs, marker, number, status):
    tasks, out = dirs
    long_command = scripted(tool_calls(("call_1", "bash", {"command": f"sleep {marker}", "timeout": 600})))
    name_task(tasks, tools='"bash"')
    with serving(long_command) as server:
        harness = subprocess.Popen(eval_command(server, tasks, out), cwd=PROJECT, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert wait_for(lambda: running(marker), harness), "the task's bash command never started"
            harness.send_signal(number)
            printed, said = harness.communicate(timeout=PROCESS_TIME_LIMIT)
        finally:
            harness.kill()
            kill_all(str(out))  # an agent a broken harness left behind

    assert (harness.returncode, said, printed) == (status, f"stopped by {signal.Signals(number).name}: no report written\n", "")
    assert running(marker) == [] and running(str(out)) == []  # the bash command and the agent: ended
    assert not (out / "name" / "run").exists() and not (out / "report.json").exists()


def test_report_an_out_inside_tasks_is_refused_after_an_out_in_use(dirs, capsys):
    tasks, out = dirs
    name_task(tasks)
    inside = tasks / "runs"
    assert main([str(tasks), "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--out", str(inside)]) == 2
    assert capsys.readouterr().err == f"--out {inside}: inside TASKS, whose files are never changed\n"
    assert not inside.exists()
    in_use = tasks / "name" / "workspace"  # inside TASKS too, and not empty: the first refusal is said
    assert main([str(tasks), "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--out", str(in_use)]) == 2
    assert capsys.readouterr().err == f"--out {in_use}: exists and is not an empty directory\n"


def test_report_earlier_evidence_is_never_overwritten(dirs, capsys):
    tasks, out = dirs
    name_task(tasks)
    out.mkdir()
    (out / "report.json").write_text("{}", encoding="utf-8")
    with serving(WRITE_NAME) as server:
        assert evaluate(server, tasks, out) == 2

    assert (out / "report.json").read_text() == "{}"
    assert "exists and is not an empty directory" in capsys.readouterr().err
