"""Chapter 08: tools that touch files and processes, safely.

Run alone with `python -m pytest tests/test_08_file_and_process_tools.py`.
The labs follow the lesson: a window of a long file (8.1), write (8.2), edit
(8.3), calls on one path in call order (8.4), bash and its guardrail (8.5),
and `python -m tiny_pi.agent --tools ...` over real HTTP (8.6). Every tool
runs against real files in a temporary directory and real processes;
timeouts are short (half a second) so the file stays quick to re-run.
"""

import json
import os
import re
import signal as signals
import stat
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest
import trio
from loopback_server import STREAM_HEAD, LoopbackServer, chunk, send_chunk, sse, usage_chunk

from tiny_pi.abort import AbortSignal
from tiny_pi.agent_loop import run_agent
from tiny_pi.bash_tool import bash_tool
from tiny_pi.builtin_tools import read_tool
from tiny_pi.file_tools import edit_tool, write_tool
from tiny_pi.messages import AgentContext, ToolCall, ToolResultMessage, assistant_message, text, user_message
from tiny_pi.scripted_model import ScriptedModel
from tiny_pi.tool_execution import execute_tool_call
from tiny_pi.tools import Tool, ToolRegistry
from tiny_pi.toolset import DEFAULT_TOOLS, chosen_tools, tool_names

TIME_LIMIT = 10.0  # a guard against hangs, not a speed test: the machine may be busy
PROCESS_TIME_LIMIT = 30.0  # a subprocess imports httpx and trio first
SHORT = 0.5  # the bash timeout of these tests, in seconds
PROJECT = Path(__file__).resolve().parent.parent
SECRET = "sk-test-08-s3cret"


def project(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    return root


def call_tool(registry, name, arguments, signal=None):
    """One call through chapter 06's contract; returns (is_error, text)."""

    async def main():
        with trio.fail_after(TIME_LIMIT):
            call = ToolCall(id="call_1", name=name, arguments=arguments)
            return await execute_tool_call(call, registry, signal=signal or AbortSignal())

    result = trio.run(main)
    (block,) = result.content
    return result.is_error, block.text


def running(pid):
    """Whether process `pid` still runs; a zombie, dead but not yet reaped, does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    if not Path("/proc").is_dir():
        return True  # no /proc (macOS): os.kill found it, and zombies are reaped at once there
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False  # gone since os.kill looked
    return status.rpartition(")")[2].split()[0] != "Z"


def gone_soon(pid, within=2.0):
    """True once `pid` no longer runs; False (and it is killed) if it still runs after `within` s."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not running(pid):
            return True
        time.sleep(0.02)
    try:
        os.kill(pid, signals.SIGKILL)  # leave nothing behind, even when the test fails
    except ProcessLookupError:
        pass
    return False


def pid_written(file):
    """Whether a command has written its child's process id to `file` yet."""
    return file.exists() and file.read_text().strip() != ""


def pid_in(output):
    """The process id a command echoed as `pid=1234`."""
    return int(re.search(r"pid=(\d+)", output).group(1))


# Lab 8.1: a window of numbered lines.


def test_read_a_window_of_numbered_lines_says_where_to_read_on(tmp_path):
    root = project(tmp_path)
    (root / "five.txt").write_text("a\nb\nc\nd\ne\n", encoding="utf-8")
    (root / "dos.txt").write_bytes(b"one\r\ntwo\r\n")
    registry = ToolRegistry([read_tool(root)])

    is_error, content = call_tool(registry, "read", {"path": "five.txt", "offset": 2, "limit": 2})
    assert not is_error, content
    assert content == "2: b\n3: c\n[lines 2-3 of 5; read on with offset 4]"
    assert call_tool(registry, "read", {"path": "five.txt", "offset": 4}) == (
        False, "4: d\n5: e\n[lines 4-5 of 5; end of file]"
    )
    assert call_tool(registry, "read", {"path": "dos.txt", "limit": 1}) == (
        False, "1: one\n[lines 1-1 of 2; read on with offset 2]"
    )
    assert call_tool(registry, "read", {"path": "five.txt"}) == (False, "a\nb\nc\nd\ne\n")  # as in chapter 07


def test_read_a_window_is_capped_in_lines_and_bytes_never_cutting_a_line(tmp_path):
    root = project(tmp_path)
    (root / "short.txt").write_text("x\n" * 3000, encoding="utf-8")
    wide = "é" * 99  # 198 UTF-8 bytes
    (root / "wide.txt").write_text((wide + "\n") * 300, encoding="utf-8")
    registry = ToolRegistry([read_tool(root)])

    _, content = call_tool(registry, "read", {"path": "short.txt", "offset": 1})
    assert content.endswith("2000: x\n[lines 1-2000 of 3000; read on with offset 2001]")

    seen, windows = [], []
    offset = 1
    while True:
        is_error, content = call_tool(registry, "read", {"path": "wide.txt", "offset": offset})
        assert not is_error, content
        assert len(content.encode("utf-8")) <= 20_000
        *lines, notice = content.split("\n")
        assert lines == [f"{number}: {wide}" for number in range(offset, offset + len(lines))]
        seen += lines
        windows.append(len(lines))
        if notice.endswith("end of file]"):
            break
        assert notice == f"[lines {offset}-{offset + len(lines) - 1} of 300; read on with offset {offset + len(lines)}]"
        offset += len(lines)
    assert len(seen) == 300
    assert windows[0] == 98  # as many whole lines as fit: a 99th would pass 20,000 bytes


def test_read_an_offset_past_the_end_and_an_overlong_line_are_errors(tmp_path):
    root = project(tmp_path)
    (root / "three.txt").write_text("1\n2\n3\n", encoding="utf-8")
    (root / "long.txt").write_text("y" * 30_000 + "\n", encoding="utf-8")
    (root / "empty.txt").write_text("", encoding="utf-8")
    registry = ToolRegistry([read_tool(root)])

    assert call_tool(registry, "read", {"path": "three.txt", "offset": 9}) == (
        True, "Tool 'read' failed: ValueError: offset 9 is past the end: three.txt has 3 lines"
    )
    assert call_tool(registry, "read", {"path": "empty.txt", "offset": 1}) == (
        True, "Tool 'read' failed: ValueError: offset 1 is past the end: empty.txt has 0 lines"
    )
    assert call_tool(registry, "read", {"path": "three.txt", "offset": 0}) == (
        True, "Tool 'read' failed: ValueError: offset and limit start at 1, got offset 0 and limit 2000"
    )
    assert call_tool(registry, "read", {"path": "long.txt", "offset": 1}) == (
        True, "Tool 'read' failed: ValueError: line 1 of long.txt alone is over 20000 bytes"
    )


# Lab 8.2: write, whole and confined.


def test_write_creates_parent_directories_and_replaces_whole_files(tmp_path):
    root = project(tmp_path)
    registry = ToolRegistry([write_tool(root)])

    assert call_tool(registry, "write", {"path": "notes/2026/todo.md", "content": "- tea\n"}) == (
        False, "wrote 6 bytes to notes/2026/todo.md"
    )
    todo = root / "notes" / "2026" / "todo.md"
    assert todo.read_text(encoding="utf-8") == "- tea\n"

    todo.chmod(0o640)
    assert call_tool(registry, "write", {"path": "notes/2026/todo.md", "content": "- café\n"}) == (
        False, "wrote 8 bytes to notes/2026/todo.md"
    )
    assert todo.read_text(encoding="utf-8") == "- café\n"
    assert stat.S_IMODE(todo.stat().st_mode) == 0o640  # a replaced file keeps its permissions
    assert sorted(os.listdir(todo.parent)) == ["todo.md"]  # no temporary file left behind
    (root / "todo.md").symlink_to(todo)  # a link that stays inside the root
    assert call_tool(registry, "write", {"path": "todo.md", "content": "- milk\n"}) == (
        False, "wrote 7 bytes to todo.md"
    )
    assert (root / "todo.md").is_symlink()  # the temporary file went beside the resolved file
    assert todo.read_text(encoding="utf-8") == "- milk\n"
    assert sorted(os.listdir(todo.parent)) == ["todo.md"]
    assert call_tool(registry, "write", {"path": "notes", "content": ""}) == (
        True, "Tool 'write' failed: IsADirectoryError: notes is a directory"
    )


def test_write_refuses_paths_that_leave_the_root(tmp_path):
    root = project(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "out").symlink_to(outside)  # a symlinked directory
    (root / "note.txt").symlink_to(outside / "note.txt")  # a symlinked file, not there yet
    registry = ToolRegistry([write_tool(root)])

    refusals = {
        "../outside/x.txt": "'../outside/x.txt' leads outside the project root",
        "new/../../outside/x.txt": "'new/../../outside/x.txt' leads outside the project root",
        str(outside / "x.txt"): f"{str(outside / 'x.txt')!r} is absolute; give a path relative to the project root",
        "out/x.txt": "'out/x.txt' leads outside the project root",
        "note.txt": "'note.txt' leads outside the project root",
    }
    for path, why in refusals.items():
        assert call_tool(registry, "write", {"path": path, "content": "escaped"}) == (
            True, f"Tool 'write' failed: ValueError: {why}"
        )
    assert os.listdir(outside) == []
    assert not (root / "new").exists()


def test_write_a_failure_midway_leaves_the_old_file_intact(tmp_path, monkeypatch):
    root = project(tmp_path)
    config = root / "config.toml"
    config.write_text("answer = 42\n", encoding="utf-8")
    registry = ToolRegistry([write_tool(root)])

    def disk_full(descriptor):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(os, "fsync", disk_full)  # the write fails after some bytes went out
    assert call_tool(registry, "write", {"path": "config.toml", "content": "answer = 4"}) == (
        True, "Tool 'write' failed: OSError: disk full (simulated)"
    )
    assert config.read_text(encoding="utf-8") == "answer = 42\n"
    assert os.listdir(root) == ["config.toml"]


# Lab 8.3: edit, exactly once, all or nothing.


def test_edit_replaces_text_that_occurs_exactly_once(tmp_path):
    root = project(tmp_path)
    app = root / "app.py"
    app.write_text("def greet():\n    return 'hi'\n", encoding="utf-8")
    registry = ToolRegistry([edit_tool(root)])

    arguments = {"path": "app.py", "old_text": "'hi'", "new_text": "'hello'"}
    assert call_tool(registry, "edit", arguments) == (False, "edited app.py (1 edit): 29 bytes before, 32 after")
    assert app.read_text(encoding="utf-8") == "def greet():\n    return 'hello'\n"


def test_edit_old_text_must_occur_exactly_once(tmp_path):
    root = project(tmp_path)
    app = root / "app.py"
    before = "x = 1\ny = 1\nzzz\n"
    app.write_text(before, encoding="utf-8")
    registry = ToolRegistry([edit_tool(root)])

    def edit(old_text):
        return call_tool(registry, "edit", {"path": "app.py", "old_text": old_text, "new_text": "2"})

    ambiguous = edit("= 1")
    assert app.read_text(encoding="utf-8") == before  # two places: neither changes, never a guess
    assert ambiguous == (
        True,
        "Tool 'edit' failed: ValueError: old_text occurs 2 times in app.py; "
        "include more context so that it occurs exactly once",
    )
    assert edit("w = 1") == (
        True, "Tool 'edit' failed: ValueError: old_text not found in app.py; copy it exactly from the file"
    )
    assert edit("zz")[1].startswith("Tool 'edit' failed: ValueError: old_text occurs 2 times")  # zz and zz overlap
    assert edit("")[1] == "Tool 'edit' failed: ValueError: old_text is empty; give the text to replace"
    assert app.read_text(encoding="utf-8") == before
    assert edit("x = 1") == (False, "edited app.py (1 edit): 16 bytes before, 12 after")
    assert app.read_text(encoding="utf-8") == "2\ny = 1\nzzz\n"


def test_edit_keeps_crlf_line_endings(tmp_path):
    root = project(tmp_path)
    notes = root / "notes.txt"
    notes.write_bytes(b"first\r\nsecond\r\nthird\r\n")
    registry = ToolRegistry([edit_tool(root)])

    arguments = {"path": "notes.txt", "old_text": "first\nsecond", "new_text": "one\ntwo\nthree"}
    assert call_tool(registry, "edit", arguments) == (False, "edited notes.txt (1 edit): 22 bytes before, 24 after")
    assert notes.read_bytes() == b"one\r\ntwo\r\nthree\r\nthird\r\n"

    arguments = {"path": "notes.txt", "old_text": "\nthird", "new_text": "\n3"}  # starts at a line ending
    assert call_tool(registry, "edit", arguments)[0] is False
    assert notes.read_bytes() == b"one\r\ntwo\r\nthree\r\n3\r\n"  # the whole \r\n was matched and rewritten
    notes.write_bytes(b"a\r\nb")  # a last line without an ending takes the one before it
    arguments = {"path": "notes.txt", "old_text": "b", "new_text": "b\nc"}
    assert call_tool(registry, "edit", arguments) == (False, "edited notes.txt (1 edit): 4 bytes before, 7 after")
    assert notes.read_bytes() == b"a\r\nb\r\nc"


def test_edit_changes_only_the_bytes_it_replaces_in_a_file_of_mixed_line_endings(tmp_path):
    root = project(tmp_path)
    notes = root / "notes.txt"
    notes.write_bytes(b"one\r\ntwo\nthree\nfour\r\nfive\n")
    registry = ToolRegistry([edit_tool(root)])

    # old_text matches "two\nthree" whatever the endings; the new lines take the \n of the line it starts in
    arguments = {"path": "notes.txt", "old_text": "two\r\nthree", "new_text": "2\n3\n3.5"}
    report = call_tool(registry, "edit", arguments)
    assert notes.read_bytes() == b"one\r\n2\n3\n3.5\nfour\r\nfive\n"  # every byte outside "two\nthree" as it was
    assert report == (False, "edited notes.txt (1 edit): 26 bytes before, 24 after")

    arguments = {"path": "notes.txt", "old_text": "four\nfive", "new_text": "4\n5"}  # across \r\n, then \n
    assert call_tool(registry, "edit", arguments)[0] is False
    assert notes.read_bytes() == b"one\r\n2\n3\n3.5\n4\r\n5\n"  # the new line ending is the \r\n of line "four"


def test_edit_a_batch_applies_in_order_all_or_nothing(tmp_path):
    root = project(tmp_path)
    app = root / "app.py"
    app.write_text("name = 'pi'\nsize = 'tiny'\n", encoding="utf-8")
    registry = ToolRegistry([edit_tool(root)])

    def batch(edits, **more):
        return call_tool(registry, "edit", {"path": "app.py", "edits": edits, **more})

    failing = [
        {"old_text": "'pi'", "new_text": "'tiny_pi'"},
        {"old_text": "tiny", "new_text": "small"},  # once in the file, twice after edit 0
    ]
    assert batch(failing) == (
        True,
        "Tool 'edit' failed: ValueError: edits[1]: old_text occurs 2 times in app.py; "
        "include more context so that it occurs exactly once",
    )
    assert app.read_text(encoding="utf-8") == "name = 'pi'\nsize = 'tiny'\n"  # edit 0 was not written

    in_order = [
        {"old_text": "'pi'", "new_text": "'tiny_pi'"},
        {"old_text": "'tiny_pi'", "new_text": "'tiny-pi'"},  # matches what edit 0 wrote
    ]
    assert batch(in_order) == (False, "edited app.py (2 edits): 26 bytes before, 31 after")
    assert app.read_text(encoding="utf-8") == "name = 'tiny-pi'\nsize = 'tiny'\n"

    assert batch([]) == (True, "Tool 'edit' failed: ValueError: edits is empty; give at least one {old_text, new_text}")
    assert batch([{"old_text": "", "new_text": "x"}]) == (
        True, "Tool 'edit' failed: ValueError: edits[0]: old_text is empty; give the text to replace"
    )
    assert batch(in_order, old_text="a", new_text="b") == (
        True, "Tool 'edit' failed: ValueError: give old_text and new_text, or edits, not both"
    )
    assert call_tool(registry, "edit", {"path": "app.py"}) == (  # neither form: a single edit without its texts
        True, "Tool 'edit' failed: ValueError: give old_text and new_text, both strings"
    )
    assert batch("'pi'") == (  # not a list: chapter 06's schema check answers before the tool runs
        True, "Invalid arguments for tool 'edit': arguments.edits: expected array, got string"
    )
    assert app.read_text(encoding="utf-8") == "name = 'tiny-pi'\nsize = 'tiny'\n"


# Lab 8.4: calls on one path, one after another.


def play_turn(calls, registry, signal=None):
    """One toolUse turn of `calls` through run_agent, then a closing text; returns the results."""
    turns = [assistant_message(calls, "toolUse"), assistant_message([text("done")])]
    context = AgentContext([user_message("go")])

    async def main():
        with trio.fail_after(TIME_LIMIT):
            return await run_agent(ScriptedModel(turns), context, registry, signal=signal)

    trio.run(main)
    return [message for message in context.messages if isinstance(message, ToolResultMessage)]


def test_queue_calls_on_one_path_run_in_call_order_others_concurrently():
    finished = []  # the paths whose slow call has ended
    seen = []  # each quick call: its path, and whether the slow call on x.txt had ended
    y_started = trio.Event()

    async def slow(arguments, *, signal):
        await y_started.wait()  # ends only once the call on y.txt has started: y must not wait for x
        await trio.sleep(0.05)
        finished.append(arguments["path"])
        return [text("slow")]

    async def quick(arguments, *, signal):
        if arguments["path"] == "y.txt":
            y_started.set()
        seen.append((arguments["path"], "x.txt" in finished))
        return [text("quick")]

    path = {"type": "object", "properties": {"path": {"type": "string"}}}
    registry = ToolRegistry([Tool("slow", "Slow.", path, slow), Tool("quick", "Quick.", path, quick)])
    calls = [
        ToolCall(id="call_1", name="slow", arguments={"path": "x.txt"}),
        ToolCall(id="call_2", name="quick", arguments={"path": "./x.txt"}),  # the same path, spelled otherwise
        ToolCall(id="call_3", name="quick", arguments={"path": "y.txt"}),
    ]

    results = play_turn(calls, registry)

    assert sorted(seen) == [("./x.txt", True), ("y.txt", False)]
    assert [result.tool_call_id for result in results] == ["call_1", "call_2", "call_3"]


def test_queue_a_failed_call_does_not_block_the_next_on_its_path(tmp_path):
    root = project(tmp_path)
    registry = ToolRegistry([write_tool(root), edit_tool(root)])
    calls = [
        ToolCall(id="call_1", name="edit", arguments={"path": "a.txt", "old_text": "x", "new_text": "y"}),
        ToolCall(id="call_2", name="write", arguments={"path": "a.txt", "content": "x\n"}),
        ToolCall(id="call_3", name="edit", arguments={"path": "a.txt", "old_text": "x", "new_text": "y"}),
    ]

    results = play_turn(calls, registry)

    assert [result.is_error for result in results] == [True, False, False]
    assert results[0].content == (text("Tool 'edit' failed: FileNotFoundError: no such file: a.txt"),)
    assert (root / "a.txt").read_text(encoding="utf-8") == "y\n"


def test_queue_edits_of_one_file_in_one_turn_all_land(tmp_path):
    root = project(tmp_path)
    registry = ToolRegistry([write_tool(root), edit_tool(root)])
    steps = [("write", {"content": "v1\n"})] + [
        ("edit", {"old_text": f"v{n}", "new_text": f"v{n + 1}"}) for n in range(1, 6)
    ]
    calls = [
        ToolCall(id=f"call_{index}", name=name, arguments={"path": "a.txt", **arguments})
        for index, (name, arguments) in enumerate(steps)
    ]
    calls.append(ToolCall(id="call_b", name="write", arguments={"path": "b.txt", "content": "b\n"}))

    results = play_turn(calls, registry)

    assert [result.is_error for result in results] == [False] * 7, [r.content for r in results]
    assert (root / "a.txt").read_text(encoding="utf-8") == "v6\n"
    assert (root / "b.txt").read_text(encoding="utf-8") == "b\n"


# Lab 8.5: bash, one command, its output and how it ended.


def test_bash_runs_in_the_root_and_merges_output_with_the_exit_status(tmp_path):
    root = project(tmp_path)
    registry = ToolRegistry([bash_tool(root, SHORT)])

    assert call_tool(registry, "bash", {"command": "pwd; echo out; echo err >&2; echo after"}) == (
        False, f"{root.resolve()}\nout\nerr\nafter\n[exit status 0]"
    )
    assert call_tool(registry, "bash", {"command": "printf partial; exit 3"}) == (
        True, "Tool 'bash' failed: CommandFailed: partial\n[exit status 3]"
    )
    assert call_tool(registry, "bash", {"command": "true"}) == (False, "[exit status 0]")
    assert call_tool(registry, "bash", {"command": "kill -KILL $$"}) == (  # no exit status: minus the signal
        True, "Tool 'bash' failed: CommandFailed: [exit status -9]"
    )


# Lab 8.6: the output cap, the end of a long output.


def test_bash_output_keeps_its_end_with_a_note_inside_the_cap(tmp_path):
    root = project(tmp_path)
    registry = ToolRegistry([bash_tool(root, SHORT)])
    everything = "".join(f"{n}\n" for n in range(1, 10_001))  # 48,894 characters

    is_error, content = call_tool(registry, "bash", {"command": "seq 1 10000"})

    assert not is_error
    output, status = content.rsplit("\n", 1)
    output += "\n"
    assert status == "[exit status 0]"
    note, kept = output.split("\n", 1)
    cut = int(note.split(" of ")[0].rsplit(" ", 1)[1])
    assert note == f"[output cut: the first {cut} of {len(everything)} characters are not shown]"
    assert kept == everything[cut:]
    assert len(output) <= 30_000


# Lab 8.7: every ending stops the whole process group.


def test_bash_a_timeout_kills_the_whole_process_tree(tmp_path):
    root = project(tmp_path)
    registry = ToolRegistry([bash_tool(root, 60)])
    # The grandchild ignores SIGTERM and lets go of the output pipe; only SIGKILL to the group ends it.
    command = "(trap '' TERM; exec sleep 30 >/dev/null 2>&1) & echo pid=$!; wait"

    started = time.monotonic()
    is_error, content = call_tool(registry, "bash", {"command": command, "timeout": SHORT})
    elapsed = time.monotonic() - started

    assert is_error
    assert content.startswith("Tool 'bash' failed: TimeoutError: ")
    assert content.endswith("\n[timed out after 0.5 s; the command and everything it started were killed]")
    assert gone_soon(pid_in(content)), "the grandchild still runs after the timeout"
    assert elapsed < 5


def test_bash_the_default_timeout_and_nothing_left_after_an_exit(tmp_path):
    root = project(tmp_path)
    registry = ToolRegistry([bash_tool(root, SHORT)])  # what --bash-timeout sets

    is_error, content = call_tool(registry, "bash", {"command": "sleep 30"})
    assert (is_error, content.split(";")[0]) == (True, "Tool 'bash' failed: TimeoutError: [timed out after 0.5 s")

    is_error, content = call_tool(registry, "bash", {"command": "sleep 30 >/dev/null & echo pid=$!"})
    assert not is_error, content
    assert gone_soon(pid_in(content)), "a background process outlived its command"


def test_bash_a_process_that_left_the_group_cannot_hold_the_call_open(tmp_path, monkeypatch):
    root = project(tmp_path)
    registry = ToolRegistry([bash_tool(root, 60)])
    # A process in a session of its own escapes the group's signals but still holds the output pipe.
    monkeypatch.setenv("ESCAPING_PYTHON", sys.executable)  # a variable: the guardrail does not read it
    escape = "import os, time; os.setsid(); open('escaped.pid', 'w').write(str(os.getpid())); time.sleep(30)"
    command = f'"$ESCAPING_PYTHON" -c "{escape}" & while [ ! -s escaped.pid ]; do sleep 0.05; done; echo escaped'

    async def main():
        with trio.move_on_after(TIME_LIMIT):
            call = ToolCall(id="call_1", name="bash", arguments={"command": command})
            return await execute_tool_call(call, registry, signal=AbortSignal())

    started = time.monotonic()
    try:
        result = trio.run(main)
    finally:
        if pid_written(root / "escaped.pid"):
            os.kill(int((root / "escaped.pid").read_text()), signals.SIGKILL)
    elapsed = time.monotonic() - started

    assert result is not None, "the call waited for a process that left the group and still held the pipe"
    assert (result.is_error, result.content) == (False, (text("escaped\n[exit status 0]"),))
    assert elapsed < 5


# Lab 8.8: an abort ends the command; an aborted call starts none.


def test_bash_an_abort_kills_the_process_tree_and_says_aborted(tmp_path):
    root = project(tmp_path)
    registry = ToolRegistry([bash_tool(root, 60)])
    signal = AbortSignal()
    # The child ignores SIGTERM (its pid is written once the trap is set): only the SIGKILL after the
    # grace ends it, and that SIGKILL is sent while the abort is cancelling the tool's task.
    command = "(trap '' TERM; echo $BASHPID > sleep.pid; exec sleep 30 >/dev/null 2>&1) & wait"
    call = ToolCall(id="call_1", name="bash", arguments={"command": command})

    async def abort_once_it_runs():
        while not pid_written(root / "sleep.pid"):
            await trio.sleep(0.02)
        signal.abort()

    async def main():
        with trio.fail_after(TIME_LIMIT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(abort_once_it_runs)
                return await execute_tool_call(call, registry, signal=signal)

    result = trio.run(main)

    assert (result.is_error, result.content) == (True, (text("Tool 'bash' was aborted before it finished"),))
    assert gone_soon(int((root / "sleep.pid").read_text())), "the command's child outlived the abort"


def test_bash_a_call_aborted_before_it_starts_never_starts_a_process(tmp_path):
    root = project(tmp_path)
    bash = bash_tool(root, SHORT)
    signal = AbortSignal()
    signal.abort()

    async def main():
        with trio.fail_after(TIME_LIMIT):
            await bash.execute({"command": "touch started"}, signal=signal)

    with pytest.raises(RuntimeError, match="the run was aborted; the command was not started"):
        trio.run(main)
    assert call_tool(ToolRegistry([bash]), "bash", {"command": "touch started"}, signal) == (
        True, "Tool 'bash' was not run: the run was aborted"
    )
    assert not (root / "started").exists()


# Lab 8.9: the guardrail, paths outside the root refused before running.


def test_bash_guardrail_refuses_paths_outside_the_root_without_running(tmp_path):
    root = project(tmp_path)
    (tmp_path / "secret.txt").write_text("TOP SECRET", encoding="utf-8")
    (root / "README.md").write_text("# tiny-pi\n", encoding="utf-8")
    registry = ToolRegistry([bash_tool(root, SHORT)])

    refused = {
        "touch ran; cat ../secret.txt": "../secret.txt",
        f"touch ran && cat {tmp_path / 'secret.txt'}": str(tmp_path / "secret.txt"),
        "touch ran; cat ~/.ssh/id_rsa": "~/.ssh/id_rsa",
        "touch ran; cd ..; cat secret.txt": "..",
        "touch ran; cp README.md --target-directory=../": "../",
        "touch ran; echo leak>../secret.txt": "../secret.txt",
        "touch ran; /usr/bin/python3 x.py": "/usr/bin/python3",  # a program named by a path outside
    }
    for command, word in refused.items():
        assert call_tool(registry, "bash", {"command": command}) == (
            True, f"Tool 'bash' failed: ValueError: refused without running: {word!r} leads outside the project root"
        )
    # The order of the checks: the guardrail, the timeout's value, the abort.
    assert call_tool(registry, "bash", {"command": "touch ran; cat ../secret.txt", "timeout": 0}) == (
        True, "Tool 'bash' failed: ValueError: refused without running: '../secret.txt' leads outside the project root"
    )
    assert call_tool(registry, "bash", {"command": "touch ran", "timeout": 0}) == (
        True, "Tool 'bash' failed: ValueError: timeout must be above 0 seconds, got 0"
    )
    aborted = AbortSignal()
    aborted.abort()
    with pytest.raises(ValueError, match="timeout must be above 0 seconds, got 0"):
        trio.run(partial(registry.get("bash").execute, {"command": "touch ran", "timeout": 0}, signal=aborted))
    assert not (root / "ran").exists()
    assert (tmp_path / "secret.txt").read_text(encoding="utf-8") == "TOP SECRET"
    (root / "src").mkdir()
    inside = f"cat src/../README.md {root / 'README.md'} 2>/dev/null"
    assert call_tool(registry, "bash", {"command": inside}) == (False, "# tiny-pi\n# tiny-pi\n[exit status 0]")


# Lab 8.10: python -m tiny_pi.agent with --tools and --bash-timeout, over real HTTP.


def tool_calls_chunks(calls):
    """The chunks of one assistant turn that asks for `calls`, each (name, arguments) in order."""
    chunks = [chunk({"role": "assistant", "content": ""})]
    for index, (name, arguments) in enumerate(calls):
        first = {"index": index, "id": f"call_{index + 1}", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(arguments)}}
        chunks.append(chunk({"tool_calls": [first]}))
    return [*chunks, chunk(finish_reason="tool_calls"), usage_chunk(10, 5)]


def scripted(*turns):
    """A loopback reply that plays `turns` in order: a list of calls, or a final text."""

    async def reply(stream, body):
        turn = turns[sum(1 for message in body["messages"] if message["role"] == "assistant")]
        if isinstance(turn, str):
            payloads = [chunk({"role": "assistant", "content": turn}), chunk(finish_reason="stop"), usage_chunk(10, 5)]
        else:
            payloads = tool_calls_chunks(turn)
        await stream.send_all(STREAM_HEAD)
        for payload in payloads:
            await send_chunk(stream, sse(payload))
        await send_chunk(stream, b"data: [DONE]\n\n")
        await stream.send_all(b"0\r\n\r\n")

    return reply


def agent_command(server, root, *extra):
    return [sys.executable, "-m", "tiny_pi.agent", "--base-url", server.base_url, "--model", "loopback",
            "--root", str(root), *extra, "Tidy up the notes."]


def agent_env():
    """The environment of the agent process: the key set, no proxy that could reroute 127.0.0.1."""
    env = {key: value for key, value in os.environ.items() if "proxy" not in key.lower()}
    env["TINY_PI_API_KEY"] = SECRET
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_agent_process(reply, root, *extra):
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


def test_cli_the_tool_contract_over_real_http(tmp_path):
    root = project(tmp_path)
    (root / "big.txt").write_text("".join(f"line {n}\n" for n in range(1, 101)), encoding="utf-8")
    turn_1 = [
        ("write", {"path": "notes/todo.md", "content": "- milk\n- tea\n"}),
        ("edit", {"path": "notes/todo.md", "old_text": "- tea", "new_text": "- green tea"}),
        ("edit", {"path": "notes/todo.md", "old_text": "- ", "new_text": "* "}),
        ("write", {"path": "../escape.txt", "content": "out"}),
        ("read", {"path": "big.txt", "offset": 99}),
    ]
    turn_2 = [
        ("bash", {"command": "cat notes/todo.md; echo ${TINY_PI_API_KEY:-no key}"}),
        ("bash", {"command": "sleep 30"}),
        ("bash", {"command": "cat ../escape.txt"}),
    ]
    reply = scripted(turn_1, turn_2, "Done.")

    server, done = run_agent_process(reply, root, "--tools", "read,ls,write,edit,bash", "--bash-timeout", "0.5")

    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, stderr
    lines = stdout.splitlines()
    assert lines[-1] == "Done."
    assert [line.split(" ")[0] for line in lines].count("[tool]") == 8
    assert [line.split(" ")[0] for line in lines].count("[error]") == 4
    last_request = server.requests[2][1]
    assert [tool["function"]["name"] for tool in last_request["tools"]] == ["read", "ls", "write", "edit", "bash"]
    assert [message["content"] for message in last_request["messages"] if message["role"] == "tool"] == [
        "wrote 13 bytes to notes/todo.md",
        "edited notes/todo.md (1 edit): 13 bytes before, 19 after",
        "Tool 'edit' failed: ValueError: old_text occurs 2 times in notes/todo.md; "
        "include more context so that it occurs exactly once",
        "Tool 'write' failed: ValueError: '../escape.txt' leads outside the project root",
        "99: line 99\n100: line 100\n[lines 99-100 of 100; end of file]",
        "- milk\n- green tea\nno key\n[exit status 0]",
        "Tool 'bash' failed: TimeoutError: "
        "[timed out after 0.5 s; the command and everything it started were killed]",
        "Tool 'bash' failed: ValueError: refused without running: '../escape.txt' leads outside the project root",
    ]
    assert (root / "notes" / "todo.md").read_text(encoding="utf-8") == "- milk\n- green tea\n"
    assert not (tmp_path / "escape.txt").exists()
    assert SECRET not in stdout + stderr


def test_cli_tools_names_the_tools_the_model_is_offered(tmp_path):
    root = project(tmp_path)
    assert [tool.name for tool in chosen_tools(root, tool_names(DEFAULT_TOOLS))] == ["read", "ls"]
    assert tool_names("read,,ls,") == ["read", "ls"]  # an empty name is no name, not an error

    server, done = run_agent_process(scripted("Nothing to do."), root, "--tools", " ls, read,ls")

    assert done.returncode == 0, done.stderr.decode()
    assert [tool["function"]["name"] for tool in server.requests[0][1]["tools"]] == ["ls", "read"]


def test_cli_bad_tool_names_and_timeouts_exit_2_with_one_clear_line(tmp_path, capsys):
    from tiny_pi.agent import main

    server = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m"]  # never reached: nothing may be sent
    for extra, why in (
        (["--tools", "read,rm"], "--tools: unknown tool 'rm' (choose from read, ls, write, edit, bash)"),
        (["--tools", " , "], "--tools: name at least one tool (choose from read, ls, write, edit, bash)"),
        (["--bash-timeout", "0"], "--bash-timeout must be above 0, got 0"),
        (["--bash-timeout", "soon"], "argument --bash-timeout: invalid float value: 'soon'"),
        (["--tools", "rm", "--bash-timeout", "0"], "--bash-timeout must be above 0, got 0"),  # checked before --tools
    ):
        with pytest.raises(SystemExit) as exit:
            main([*server, "--root", str(tmp_path), *extra, "Hi"])
        stderr = capsys.readouterr().err
        assert exit.value.code == 2
        assert stderr.splitlines()[-1] == f"python -m tiny_pi.agent: error: {why}"
        assert "Traceback" not in stderr


# Lab 8.11: ls shows a name that is not UTF-8 as valid text.


def test_cli_ls_shows_a_byte_of_a_name_that_is_not_utf8_as_an_x_escape(tmp_path):
    root = project(tmp_path)
    os.close(os.open(os.fsencode(root) + b"/caf\xe9.txt", os.O_CREAT | os.O_WRONLY))  # Latin-1 bytes
    (root / "notes.md").write_text("tea\n", encoding="utf-8")
    reply = scripted([("ls", {})], [("read", {"path": "notes.md"})], "Done.")

    server, done = run_agent_process(reply, root)

    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().splitlines()[-1] == "Done."
    tool_results = [message["content"] for message in server.requests[2][1]["messages"] if message["role"] == "tool"]
    assert tool_results == ["caf\\xe9.txt\nnotes.md", "tea\n"]


def signalled_agent(root, command, *numbers):
    """Run the agent on a scripted `bash` call of `command`; once sleep.pid is written, send `numbers`.

    The signals go 0.1 s apart. Returns (server, exit status, stdout, stderr).
    """
    reply = scripted([("bash", {"command": command})], "never asked")

    async def main():
        with trio.fail_after(PROCESS_TIME_LIMIT):
            async with trio.open_nursery() as nursery:
                server = await LoopbackServer(reply).start(nursery)
                argv = agent_command(server, root, "--tools", "bash")
                process = await nursery.start(partial(
                    trio.run_process, argv, cwd=PROJECT, env=agent_env(),
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False,
                ))
                while not pid_written(root / "sleep.pid") and process.poll() is None:
                    await trio.sleep(0.02)
                for number in numbers:
                    if process.poll() is None:  # the command runs: press Ctrl-C, or kill the agent
                        process.send_signal(number)
                        await trio.sleep(0.1)
                out = b"".join([piece async for piece in process.stdout])
                errors = b"".join([piece async for piece in process.stderr])
                await process.wait()
                nursery.cancel_scope.cancel()
        return server, process.returncode, out.decode(), errors.decode()

    return trio.run(main)


SLEEP_30 = "sleep 30 & echo $! > sleep.pid; wait"


# Lab 8.12: stop signals end a running bash command.


def test_cli_ctrl_c_kills_a_running_bash_command(tmp_path):
    root = project(tmp_path)

    server, returncode, stdout, stderr = signalled_agent(root, SLEEP_30, signals.SIGINT)

    assert returncode == 130, stderr
    assert stdout.splitlines()[-1] == "[error] bash: Tool 'bash' was aborted before it finished"
    assert stderr.startswith("[aborted] turns: 1, ")
    assert gone_soon(int((root / "sleep.pid").read_text())), "the command's child outlived Ctrl-C"
    assert len(server.requests) == 1


@pytest.mark.parametrize("number, status", [(signals.SIGTERM, 143), (signals.SIGHUP, 129)], ids=["SIGTERM", "SIGHUP"])
def test_cli_sigterm_and_sighup_end_a_running_bash_command_like_ctrl_c(tmp_path, number, status):
    root = project(tmp_path)

    server, returncode, stdout, stderr = signalled_agent(root, SLEEP_30, number)

    assert returncode == status, stderr
    assert stdout.splitlines()[-1] == "[error] bash: Tool 'bash' was aborted before it finished"
    assert stderr.startswith("[aborted] turns: 1, "), stderr  # Ctrl-C's summary, and nothing more
    assert stderr.splitlines()[1:] == ["error: the run was aborted while tools were running"]
    assert gone_soon(int((root / "sleep.pid").read_text())), f"the command's child outlived {number.name}"
    assert len(server.requests) == 1


def test_cli_a_second_stop_signal_stops_at_once_in_one_line(tmp_path):
    root = project(tmp_path)
    stubborn = f"trap '' TERM; {SLEEP_30}"  # the sleep ignores SIGTERM: the abort waits out the grace

    server, returncode, stdout, stderr = signalled_agent(root, stubborn, signals.SIGTERM, signals.SIGINT)

    assert returncode == 143, stderr
    assert stderr == "\nstopped by SIGTERM\n"
    assert gone_soon(int((root / "sleep.pid").read_text())), "SIGKILL did not reach the stubborn sleep"
    assert len(server.requests) == 1
