"""Chapter 10: the session log.

Run alone with `python -m pytest tests/test_10_session_log.py`. The labs
follow the lesson: reading a session file that is whole or refused, with
the line that is not (10.1), the tree and the path the model is sent
(10.2), the writer that puts each entry on disk before it returns (10.3),
and `python -m tiny_pi.agent --session FILE` over real HTTP: resume,
branch, refuse, survive a kill -9 (10.4). Every file is a real file in a
tmp dir; the agent runs in this process (fast) except where it must die.
"""

import errno
import io
import json
import os
import queue
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

from tiny_pi.builtin_tools import builtin_tools
from tiny_pi.messages import ToolCall, ToolResultMessage, assistant_message, text, user_message
from tiny_pi.messages.transcript import to_data
from tiny_pi.providers.openai_compatible import OpenAICompatibleModel
from tiny_pi.session import SessionRecorder
from tiny_pi.session_log import (
    MessageEntry,
    ModelChangeEntry,
    SessionError,
    branch_path,
    context_messages,
    read_session,
)
from tiny_pi.session_writer import SessionWriteError, SessionWriter
from tiny_pi.stateful_agent import Agent
from tiny_pi.tools import ToolRegistry

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
CALL = ToolCall(id="call_1", name="read", arguments={"path": "README.md"})
RESULT = ToolResultMessage("call_1", "read", (text(README),), False, 1700000000500)


def entry(kind, entry_id, parent_id, **fields):
    return {"type": kind, "id": entry_id, "parent_id": parent_id, **fields}


def message_entry(entry_id, parent_id, message):
    return entry("message", entry_id, parent_id, message=to_data(message))


def tree_file_lines():
    """A session with a branch at e5: f6 and g7 on one side, h8 on the other (lines 1 to 9)."""
    rows = [
        {"type": "session", "version": 1, "id": "s1", "timestamp": 1700000000000},
        entry("model_change", "a1", None, model="llama3.2"),
        message_entry("b2", "a1", user_message("What is this project called?")),
        message_entry("c3", "b2", assistant_message([text("I will read the README first."), CALL], "toolUse")),
        message_entry("d4", "c3", RESULT),
        message_entry("e5", "d4", assistant_message([text("The project is called tiny-pi.")])),
        message_entry("f6", "e5", user_message("And what does it do?")),
        message_entry("g7", "f6", assistant_message([text("It runs agents.")])),
        message_entry("h8", "e5", user_message("Who wrote it?")),
    ]
    return [json.dumps(row) for row in rows]


def write_lines(path, lines, final_newline=True):
    """The lines, each a str (written as UTF-8) or bytes (written as they are)."""
    raw = [line if isinstance(line, bytes) else line.encode("utf-8") for line in lines]
    path.write_bytes(b"\n".join(raw) + (b"\n" if final_newline else b""))
    return path


def replace(number, row):
    """A corruption: line `number` (1 = the header) becomes `row` (a dict, or raw text)."""

    def corrupt(lines):
        lines[number - 1] = row if isinstance(row, (str, bytes)) else json.dumps(row)
        return lines

    return corrupt


def with_arguments(raw_arguments):
    """Line 4 with the tool call's arguments written as raw JSON text."""
    good = json.loads(tree_file_lines()[3])
    good["message"]["content"][1]["arguments"] = {}
    return json.dumps(good).replace('"arguments": {}', f'"arguments": {raw_arguments}')


UNCOMMITTED = (
    "uncommitted write: the last line has no final newline (a write cut off mid-way); "
    "to repair, delete that line, or end it with a newline if it is whole"
)
LONE_SURROGATE = "a lone surrogate \\udce9 is not Unicode text"
# A line that is not JSON text: refused whatever line it is on.
NOT_JSON_TEXT = [
    ("not_utf8", replace(3, b'{"type": "message", "id": "b2", "note": "caf\xe9"}'), 3, "not UTF-8: invalid continuation byte"),
    ("not_json", replace(3, '{"type": "message", "id": "b2"'), 3, "not JSON: Expecting ',' delimiter (column 31)"),
    ("not_an_object", replace(2, "[1, 2]"), 2, "expected a JSON object, got list"),
    ("nan", replace(4, with_arguments('{"n": NaN}')), 4, "NaN is not a JSON value"),
    ("infinity", replace(4, with_arguments('{"n": 1e999}')), 4, "1e999 is out of range for a JSON number"),
    # valid JSON (json.dumps writes the escape \udce9), but half a UTF-16 pair is no text
    ("lone_surrogate", replace(3, message_entry("b2", "a1", user_message("caf\udce9"))), 3, LONE_SURROGATE),
    ("key_twice", replace(3, '{"type": "message", "id": "b2", "id": "x2"}'), 3, "the key 'id' appears twice"),
]
# JSON objects that break the log: a header, an entry's type and fields, its id, its parent, its content.
BROKEN_ENTRIES = [
    ("not_a_header", replace(1, entry("model_change", "a0", None, model="m")), 1, "expected the session header, got type 'model_change'"),
    ("header_version", replace(1, {"type": "session", "version": 2, "id": "s1", "timestamp": 0}), 1, "unsupported version 2 (this reader knows 1)"),
    ("header_id", replace(1, {"type": "session", "version": 1, "id": None, "timestamp": 0}), 1, "a session id is a non-empty string, got None"),
    ("header_without_id", replace(1, {"type": "session", "version": 1, "timestamp": 0}), 1, "missing field 'id'"),
    ("unknown_type", replace(6, entry("label", "e5", "d4", name="done")), 6, "unknown entry type 'label'"),
    ("unknown_field", replace(2, entry("model_change", "a1", None, model="m", note="x")), 2, "unknown field 'note'"),
    ("missing_field", replace(2, {"type": "model_change", "id": "a1", "model": "m"}), 2, "missing field 'parent_id'"),
    ("bad_id", replace(2, entry("model_change", 7, None, model="m")), 2, "an id is a non-empty string, got 7"),
    ("reused_id", replace(7, message_entry("c3", "e5", user_message("Hi"))), 7, "id 'c3' is already used by line 4"),
    ("unknown_parent", replace(7, message_entry("f6", "zz", user_message("Hi"))), 7, "parent_id 'zz' names no earlier entry"),
    # h8 is on line 9, after f6, but not below it: a later parent that forms no cycle
    ("later_parent", replace(7, message_entry("f6", "h8", user_message("Hi"))), 7, "parent_id 'h8' names no earlier entry"),
    ("second_root", replace(9, message_entry("h8", None, user_message("Hi"))), 9, "parent_id is null, but only the first entry is a root"),
    ("model_not_a_string", replace(2, entry("model_change", "a1", None, model=3)), 2, "a model is a string, got 3"),
    (
        "message_refused",
        replace(8, entry("message", "g7", "f6", message={"role": "robot", "content": []})),
        8,
        "message refused: message: unknown role 'robot'",
    ),
]
# What a crash in the middle of a write leaves, and a file with nothing in it.
UNCOMMITTED_TAILS = [
    ("torn", "torn", 9, UNCOMMITTED),
    ("unended", "unended", 9, UNCOMMITTED),
]
CORRUPTIONS = NOT_JSON_TEXT + BROKEN_ENTRIES + UNCOMMITTED_TAILS + [("empty", "empty", 1, "no session header: the file is empty")]


def corrupt_file(tmp_path, corrupt):
    """The tree file, with one line corrupted; "torn": half a last line, "unended": a whole one, neither ended;
    "empty": no bytes at all."""
    if corrupt == "empty":
        return write_lines(tmp_path / "session.jsonl", [], final_newline=False)
    lines = tree_file_lines()
    if corrupt == "torn":
        lines[-1] = lines[-1][: len(lines[-1]) // 2]
    if corrupt in ("torn", "unended"):
        return write_lines(tmp_path / "session.jsonl", lines, final_newline=False)
    return write_lines(tmp_path / "session.jsonl", corrupt(lines))


def roles(messages):
    return [message.role for message in messages]


# Lab 10.1: reading a whole session; the newline commits a line.


def test_read_a_session_gives_its_entries_in_file_order(tmp_path):
    path = write_lines(tmp_path / "session.jsonl", tree_file_lines())

    session = read_session(path)

    assert session.id == "s1"
    assert [(e.id, e.parent_id, e.line) for e in session.entries] == [
        ("a1", None, 2), ("b2", "a1", 3), ("c3", "b2", 4), ("d4", "c3", 5),
        ("e5", "d4", 6), ("f6", "e5", 7), ("g7", "f6", 8), ("h8", "e5", 9),
    ]
    assert session.entries[0] == ModelChangeEntry("a1", None, 2, "llama3.2")
    assert session.entries[3] == MessageEntry("d4", "c3", 5, RESULT)
    assert session.entries[2].message.content[1] == CALL
    assert session.last_id == "h8"
    assert session.uncommitted_line is None


def test_read_splits_lines_only_at_the_newline(tmp_path):
    odd = "one\u2028two\u0085three\rfour"  # JSON may carry these raw: they are not line ends here
    lines = tree_file_lines()[:2] + [json.dumps(message_entry("b2", "a1", user_message(odd)), ensure_ascii=False)]
    path = write_lines(tmp_path / "session.jsonl", lines)

    session = read_session(path)

    assert session.entries[1].message == user_message(odd)


def test_read_may_skip_an_uncommitted_tail_only_when_asked(tmp_path):
    path = corrupt_file(tmp_path, "torn")

    session = read_session(path, skip_uncommitted=True)

    assert session.uncommitted_line == 9
    assert session.last_id == "g7"
    with pytest.raises(SessionError, match="9: uncommitted write"):
        read_session(path)


@pytest.mark.parametrize(("name", "corrupt", "line", "reason"), UNCOMMITTED_TAILS + [CORRUPTIONS[-1]], ids=["torn", "unended", "empty"])
def test_read_refuses_an_uncommitted_last_line_or_an_empty_file(tmp_path, name, corrupt, line, reason):
    assert_refused(corrupt_file(tmp_path, corrupt), line, reason)


def assert_refused(path, line, reason):
    with pytest.raises(SessionError) as refused:
        read_session(path)

    assert str(refused.value) == f"{path}:{line}: {reason}"
    assert (refused.value.line, refused.value.reason) == (line, reason)


# Lab 10.2: refusing a line that is not JSON text, with its number.


@pytest.mark.parametrize(("name", "corrupt", "line", "reason"), NOT_JSON_TEXT, ids=[c[0] for c in NOT_JSON_TEXT])
def test_read_refuses_a_line_that_is_not_json_text(tmp_path, name, corrupt, line, reason):
    assert_refused(corrupt_file(tmp_path, corrupt), line, reason)


def test_read_refuses_a_line_by_the_word_it_met_and_keeps_whole_numbers_exact(tmp_path):
    assert_refused(corrupt_file(tmp_path, replace(4, with_arguments('{"n": -Infinity}'))), 4,
                   "-Infinity is not a JSON value")

    lines = tree_file_lines()
    lines[3] = with_arguments('{"n": 1' + "0" * 400 + "}")  # digits only: an int, not a float
    session = read_session(write_lines(tmp_path / "whole.jsonl", lines))

    assert session.entries[2].message.content[1].arguments == {"n": 10**400}

    lines[3] = with_arguments('{"n": 1' + "0" * 5000 + "}")  # past the digits Python converts by default
    with pytest.raises(SessionError) as too_long:  # json.loads' own ValueError, refused like the others
        read_session(write_lines(tmp_path / "too-long.jsonl", lines))
    assert too_long.value.line == 4 and too_long.value.reason.startswith("Exceeds the limit (4300 digits)")


# Lab 10.3: refusing an entry that breaks the log, in the order of its checks.


@pytest.mark.parametrize(("name", "corrupt", "line", "reason"), BROKEN_ENTRIES, ids=[c[0] for c in BROKEN_ENTRIES])
def test_read_refuses_an_entry_that_breaks_the_log(tmp_path, name, corrupt, line, reason):
    assert_refused(corrupt_file(tmp_path, corrupt), line, reason)


def test_read_refuses_an_entry_whose_type_or_parent_id_is_not_a_string(tmp_path):
    for number, (field, value, reason) in enumerate([
        ("type", None, "unknown entry type None"),  # no type at all reads as None
        ("type", 3, "unknown entry type 3"),
        ("type", ["message"], "unknown entry type ['message']"),  # a list: no dict key, never a TypeError
        ("parent_id", ["f6"], "a parent_id is null or a string, got ['f6']"),
    ]):
        row = json.loads(tree_file_lines()[7])
        if value is None:
            del row[field]
        else:
            row[field] = value
        folder = tmp_path / str(number)
        folder.mkdir()
        assert_refused(corrupt_file(folder, replace(8, row)), 8, reason)


# Lab 10.4: the tree, and the path the model is sent.


def test_tree_the_path_runs_from_the_root_to_the_leaf_and_leaves_other_branches_out(tmp_path):
    session = read_session(write_lines(tmp_path / "session.jsonl", tree_file_lines()))

    assert [e.id for e in branch_path(session, "h8")] == ["a1", "b2", "c3", "d4", "e5", "h8"]
    assert [e.id for e in branch_path(session, "g7")] == ["a1", "b2", "c3", "d4", "e5", "f6", "g7"]
    assert [e.id for e in branch_path(session, "c3")] == ["a1", "b2", "c3"]
    assert branch_path(session, None) == []
    with pytest.raises(KeyError):  # a leaf the session does not hold: callers check first
        branch_path(session, "zz")


def test_tree_metadata_entries_never_reach_the_model(tmp_path):
    lines = tree_file_lines()
    lines.append(json.dumps(entry("model_change", "i9", "h8", model="qwen2.5")))
    lines.append(json.dumps(message_entry("j10", "i9", assistant_message([text("Nobody knows.")]))))
    session = read_session(write_lines(tmp_path / "session.jsonl", lines))

    path = branch_path(session, "j10")
    messages = context_messages(path)

    assert [e.type for e in path].count("model_change") == 2
    assert roles(messages) == ["user", "assistant", "toolResult", "assistant", "user", "assistant"]
    assert messages[-1].content == (text("Nobody knows."),)


def test_tree_show_prints_ids_roles_and_first_words(tmp_path, capsys):
    from tiny_pi.session import main

    path = write_lines(tmp_path / "session.jsonl", tree_file_lines())

    assert main([str(path)]) == 0

    assert capsys.readouterr().out == (
        "session s1: 8 entries\n"
        "a1 model_change: llama3.2\n"
        "b2 user: What is this project called?\n"
        "c3 assistant: I will read the README first. [read]\n"
        "d4 toolResult: # tiny-pi A small agent runtime.\n"
        "e5 assistant: The project is called tiny-pi.\n"
        "+ f6 user: And what does it do?\n"
        "  g7 assistant: It runs agents.\n"
        "+ h8 user: Who wrote it?  <- last\n"
    )

    lines = tree_file_lines()  # a second fork below the first, at f6: g7 and i9
    lines.append(json.dumps(message_entry("i9", "f6", assistant_message([text("Nobody knows.")]))))
    assert main([str(write_lines(tmp_path / "nested.jsonl", lines))]) == 0

    assert capsys.readouterr().out.splitlines()[6:] == [
        "+ f6 user: And what does it do?",
        "  + g7 assistant: It runs agents.",
        "  + i9 assistant: Nobody knows.  <- last",
        "+ h8 user: Who wrote it?",
    ]


def test_tree_show_skips_an_uncommitted_tail_with_a_warning_and_changes_nothing(tmp_path, capsys):
    from tiny_pi.session import main

    path = corrupt_file(tmp_path, "torn")
    before = path.read_bytes()

    assert main([str(path)]) == 0

    out, err = capsys.readouterr()
    assert err == f"warning: {path}:9: {UNCOMMITTED}; not shown\n"
    assert out.splitlines()[-1] == "g7 assistant: It runs agents.  <- last"  # no branch left: no indent
    assert "h8" not in out
    assert path.read_bytes() == before


def test_tree_show_refuses_a_lone_surrogate_in_one_line_never_a_traceback(tmp_path):
    path = corrupt_file(tmp_path, replace(3, message_entry("b2", "a1", user_message("caf\udce9"))))

    done = subprocess.run([sys.executable, "-m", "tiny_pi.session", str(path)], cwd=PROJECT,
                          capture_output=True, timeout=PROCESS_TIME_LIMIT, check=False)

    assert (done.returncode, done.stdout) == (2, b"")
    assert done.stderr.decode() == f"{path}:3: {LONE_SURROGATE}\n"


# Lab 10.5: the writer, one committed line per entry.


def test_writer_creates_a_session_and_chains_each_entry_to_the_one_before(tmp_path):
    path = tmp_path / "session.jsonl"
    messages = [user_message("Name?"), assistant_message([text("Reading."), CALL], "toolUse"), RESULT]

    writer = SessionWriter.create(path)
    ids = [writer.append_model_change("llama3.2")] + [writer.append_message(m) for m in messages]
    writer.close()

    session = read_session(path)
    assert [e.id for e in session.entries] == ids
    assert [e.parent_id for e in session.entries] == [None, *ids[:-1]]
    assert context_messages(list(session.entries)) == messages
    assert path.read_bytes().count(b"\n") == 5
    with pytest.raises(FileExistsError):
        SessionWriter.create(path)


def test_writer_an_entry_is_on_disk_before_append_returns(tmp_path, monkeypatch):
    path = tmp_path / "session.jsonl"
    writer = SessionWriter.create(path)
    synced = []
    real_fsync = os.fsync

    def spy(fd):
        synced.append(path.read_bytes().count(b"\n"))  # what another process could read now
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    writer.append_message(user_message("one"))
    writer.append_message(user_message("two"))

    assert synced == [2, 3]  # each line reached the file, then the disk, before append returned


def test_writer_stores_the_entry_as_it_was_when_appended(tmp_path):
    path = tmp_path / "session.jsonl"
    arguments = {"path": "README.md"}
    writer = SessionWriter.create(path)

    writer.append_message(assistant_message([ToolCall("call_1", "read", arguments)], "toolUse"))
    arguments["path"] = "SECRET.md"  # the caller goes on using its dict
    writer.append_message(user_message("next"))

    stored = read_session(path).entries[0].message.content[0]
    assert stored.arguments == {"path": "README.md"}


def test_writer_refuses_values_json_cannot_hold_and_writes_nothing(tmp_path):
    path = tmp_path / "session.jsonl"
    writer = SessionWriter.create(path)
    before = path.read_bytes()

    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        writer.append_message(assistant_message([ToolCall("c", "read", {"n": float("nan")})], "toolUse"))

    assert path.read_bytes() == before
    with pytest.raises(UnicodeEncodeError):  # a ValueError: UTF-8 has no lone surrogate
        writer.append_message(user_message("caf\udce9"))
    assert path.read_bytes() == before
    writer.append_message(user_message("still fine"))  # not an I/O failure: the writer goes on
    assert len(read_session(path).entries) == 1


def test_writer_after_an_io_failure_refuses_every_later_append_with_the_same_error(tmp_path, monkeypatch):
    path = tmp_path / "session.jsonl"
    writer = SessionWriter.create(path)
    writer.append_message(user_message("one"))

    def failing_fsync(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(SessionWriteError) as first:
        writer.append_message(user_message("two"))
    monkeypatch.undo()  # the disk works again; the writer must not believe it
    after_failure = path.read_bytes()
    with pytest.raises(SessionWriteError) as second:
        writer.append_message(user_message("three"))

    assert str(first.value) == f"cannot write {path}: [Errno 5] Input/output error"
    assert str(second.value) == str(first.value)
    assert path.read_bytes() == after_failure


# Lab 10.6: python -m tiny_pi.agent --session FILE keeps and resumes the conversation.


@contextmanager
def serving(reply=readme_model):
    """A loopback server in a thread of its own, so the agent can run in this thread."""
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


@pytest.fixture
def project(tmp_path, monkeypatch):
    root = tmp_path / "project"
    root.mkdir()
    (root / "README.md").write_text(README, encoding="utf-8")
    monkeypatch.delenv("TINY_PI_API_KEY", raising=False)
    return root


def agent(server, root, *args):
    """`python -m tiny_pi.agent ARGS`, run in this process; returns the exit status."""
    from tiny_pi.agent import main

    return main(["--base-url", server.base_url, "--model", "loopback", "--root", str(root), *args])


def sent_roles(server, index):
    return [m["role"] for m in server.requests[index][1]["messages"]]


def fifo(tmp_path):
    os.mkfifo(tmp_path / "pipe.jsonl")  # nobody ever writes: opening it to read would wait for ever
    return tmp_path / "pipe.jsonl"


def dangling_link(tmp_path):
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    return tmp_path / "link.jsonl"


def directory(tmp_path):
    (tmp_path / "sessions").mkdir()
    return tmp_path / "sessions"


async def call_with_nan_then_answer(stream, body):
    """Turn 1 calls read with `{"path": NaN}` (Python's json reads NaN); any later turn answers."""
    if body["messages"][-1]["role"] == "user" and len(body["messages"]) == 1:
        payloads = [*tool_call_chunks("call_1", "read", '{"path": NaN}'), chunk(finish_reason="tool_calls")]
    else:
        payloads = [chunk({"role": "assistant", "content": "Done."}), chunk(finish_reason="stop")]
    await stream.send_all(STREAM_HEAD)
    for payload in payloads:
        await send_chunk(stream, sse(payload))
    await send_chunk(stream, b"data: [DONE]\n\n")
    await stream.send_all(b"0\r\n\r\n")


def test_live_a_resumed_run_sends_the_earlier_conversation(tmp_path, project, capsys):
    path = tmp_path / "session.jsonl"
    with serving() as server:
        assert agent(server, project, "--session", str(path), "What is this project called?") == 0
        assert agent(server, project, "--session", str(path), "And again?") == 0

    assert len(server.requests) == 4
    assert sent_roles(server, 2) == ["user", "assistant", "tool", "assistant", "user"]
    assert server.requests[2][1]["messages"][0]["content"] == "What is this project called?"
    session = read_session(path)
    assert [e.type for e in session.entries].count("model_change") == 1  # same model: noted once
    assert roles(context_messages(branch_path(session, session.last_id))) == [
        "user", "assistant", "toolResult", "assistant", "user", "assistant", "toolResult", "assistant",
    ]


def test_live_every_message_is_on_disk_before_the_next_request(tmp_path, project, capsys):
    path = tmp_path / "session.jsonl"
    on_disk = []

    async def look_then_answer(stream, body):
        on_disk.append(roles(context_messages(list(read_session(path).entries))))
        await readme_model(stream, body)

    with serving(look_then_answer) as server:
        assert agent(server, project, "--session", str(path), "What is this project called?") == 0

    assert on_disk == [["user"], ["user", "assistant", "toolResult"]]
    assert len(read_session(path).entries) == 5  # the model change and four messages


def test_live_prompts_from_stdin_append_to_one_session(tmp_path, project, capsys, monkeypatch):
    path = tmp_path / "session.jsonl"
    monkeypatch.setattr(sys, "stdin", io.StringIO("What is this project called?\nAnd again?\n"))
    with serving() as server:
        assert agent(server, project, "--session", str(path)) == 0

    session = read_session(path)
    assert [e.parent_id for e in session.entries[1:]] == [e.id for e in session.entries[:-1]]
    assert len(session.entries) == 9  # one model change, two round trips of four messages


def test_live_kill_9_during_a_model_call_loses_nothing_written_before_it(tmp_path, project):
    path = tmp_path / "session.jsonl"
    held = threading.Event()

    async def hold_the_second(stream, body):
        if len(body["messages"]) < 3:
            return await readme_model(stream, body)
        held.set()
        await trio.sleep_forever()  # the answer never comes: the process dies waiting

    env = {key: value for key, value in os.environ.items() if "proxy" not in key.lower()}
    env.pop("TINY_PI_API_KEY", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    with serving(hold_the_second) as server:
        command = [sys.executable, "-m", "tiny_pi.agent", "--base-url", server.base_url, "--model", "loopback",
                   "--root", str(project), "--session", str(path), "What is this project called?"]
        process = subprocess.Popen(command, cwd=PROJECT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_while_running(held, process, "the second model call never came", process.stderr.read)
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait(PROCESS_TIME_LIMIT)
            process.stderr.close()
    assert process.returncode == -signal.SIGKILL

    session = read_session(path)  # whole: every line that was written was committed
    assert roles(context_messages(list(session.entries))) == ["user", "assistant", "toolResult"]

    with serving() as server:
        assert agent(server, project, "--session", str(path), "And now?") == 0
    assert sent_roles(server, 0) == ["user", "assistant", "tool", "user"]


# Lab 10.7: --branch ID continues from an earlier entry.


def test_live_branch_sends_only_its_path_and_keeps_the_other_branch(tmp_path, project, capsys):
    path = tmp_path / "session.jsonl"
    with serving() as server:
        agent(server, project, "--session", str(path), "What is this project called?")
        answer_id = read_session(path).last_id
        agent(server, project, "--session", str(path), "Left branch?")
        assert agent(server, project, "--session", str(path), "--branch", answer_id, "Right branch?") == 0

    right = server.requests[4][1]["messages"]
    assert [m["role"] for m in right] == ["user", "assistant", "tool", "assistant", "user"]
    assert right[-1]["content"] == "Right branch?"
    assert "Left branch?" not in json.dumps(right)
    session = read_session(path)
    texts = {e.message.content[0].text: e for e in session.entries if e.type == "message" and e.message.role == "user"}
    assert set(texts) == {"What is this project called?", "Left branch?", "Right branch?"}
    assert texts["Right branch?"].parent_id == answer_id == texts["Left branch?"].parent_id


def test_live_an_unknown_branch_is_refused_before_any_request(tmp_path, project, capsys):
    path = write_lines(tmp_path / "session.jsonl", tree_file_lines())
    before = path.read_bytes()
    with serving() as server:
        status = agent(server, project, "--session", str(path), "--branch", "nope", "Hello?")

    assert status == 2
    assert capsys.readouterr().err == f"{path}: --branch nope: no entry has this id\n"
    assert (path.read_bytes(), server.requests) == (before, [])


# Lab 10.8: refused before any request, stopped before the next call when a write fails.


NOT_FILES = [
    ("fifo", fifo, "a named pipe"),
    ("dev_zero", lambda tmp_path: Path("/dev/zero"), "a character device"),  # endless zeros
    ("directory", directory, "a directory"),
    ("dangling_link", dangling_link, "a symbolic link to nothing"),
]
# The agent runs as a process of its own, with a memory limit: an open that waits for ever
# ends at the timeout, a read that never ends fails fast, and neither stops this test run.
LIMITED_AGENT = (
    "import resource, runpy; resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30)); "
    "runpy.run_module('tiny_pi.agent', run_name='__main__')"
)


@pytest.mark.parametrize(("name", "corrupt", "line", "reason"), CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS])
def test_live_a_corrupt_session_is_refused_before_any_request(tmp_path, project, capsys, name, corrupt, line, reason):
    path = corrupt_file(tmp_path, corrupt)
    before = path.read_bytes()
    with serving() as server:
        status = agent(server, project, "--session", str(path), "What is this project called?")

    assert status == 2
    assert capsys.readouterr().err == f"{path}:{line}: {reason}\n"
    assert path.read_bytes() == before
    assert server.requests == []


@pytest.mark.parametrize(("name", "make", "kind"), NOT_FILES, ids=[case[0] for case in NOT_FILES])
def test_live_a_session_path_that_is_not_a_regular_file_is_refused_in_one_line(tmp_path, project, name, make, kind):
    path = make(tmp_path)
    env = {key: value for key, value in os.environ.items() if "proxy" not in key.lower()}
    env.pop("TINY_PI_API_KEY", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    with serving() as server:
        done = subprocess.run(
            [sys.executable, "-c", LIMITED_AGENT, "--base-url", server.base_url, "--model", "loopback",
             "--root", str(project), "--session", str(path), "Hi"],
            cwd=PROJECT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=PROCESS_TIME_LIMIT, check=False,
        )
    assert (done.returncode, done.stderr) == (
        2, f"{path}: {kind}, not a regular file; a session is a regular file, or a new path to start one\n"
    )
    assert server.requests == []
    assert not (tmp_path / "nowhere.jsonl").exists()  # the link's target is never created


# The agent runs as a process of its own whose files may not grow past the session's size
# (RLIMIT_FSIZE): the kernel refuses the model change's line (EFBIG), a real failed append,
# also for root, whom a read-only file would not stop.
SIZE_LIMITED_AGENT = (
    "import resource, runpy, sys; limit = int(sys.argv.pop(1)); "
    "resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)); "
    "runpy.run_module('tiny_pi.agent', run_name='__main__')"
)


def test_live_a_model_change_that_cannot_be_written_is_one_line_and_nothing_is_sent(tmp_path, project):
    path = write_lines(tmp_path / "session.jsonl", tree_file_lines())  # its model is llama3.2
    before = path.read_bytes()
    env = {key: value for key, value in os.environ.items() if "proxy" not in key.lower()}
    env.pop("TINY_PI_API_KEY", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    with serving() as server:
        done = subprocess.run(
            [sys.executable, "-c", SIZE_LIMITED_AGENT, str(len(before)), "--base-url", server.base_url,
             "--model", "loopback", "--root", str(project), "--session", str(path), "Hi"],
            cwd=PROJECT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=PROCESS_TIME_LIMIT, check=False,
        )
    reason = f"[Errno {errno.EFBIG}] {os.strerror(errno.EFBIG)}"
    assert (done.returncode, done.stderr) == (os.EX_IOERR, f"cannot write {path}: {reason}; nothing was sent\n")
    assert server.requests == []
    assert path.read_bytes() == before


def test_live_a_failed_write_stops_the_run_before_the_next_model_call(tmp_path, project, monkeypatch, capsys):
    writer = SessionWriter.create(tmp_path / "session.jsonl")

    def failing_fsync(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    async def main():
        with trio.fail_after(TIME_LIMIT):
            async with trio.open_nursery() as nursery:
                server = await LoopbackServer().start(nursery)
                model = OpenAICompatibleModel(base_url=server.base_url, model="loopback")
                agent = Agent(model, ToolRegistry(builtin_tools(project)), nursery)
                agent.subscribe(SessionRecorder(writer, agent))
                agent.prompt("What is this project called?")
                await agent.wait_for_idle()
                monkeypatch.setattr(os, "fsync", failing_fsync)
                agent.prompt("And again?")  # its message cannot be saved: it must not be sent
                await agent.wait_for_idle()
                outcomes = [agent.state.outcome]
                agent.prompt("Once more?")  # nor any later one
                await agent.wait_for_idle()
                outcomes.append(agent.state.outcome)
                nursery.cancel_scope.cancel()
                return server, outcomes

    server, outcomes = trio.run(main)

    assert len(server.requests) == 2  # the first round trip only
    assert [outcome.stop_reason for outcome in outcomes] == ["aborted", "aborted"]
    err = capsys.readouterr().err
    assert "listener SessionRecorder raised SessionWriteError: cannot write" in err
    assert err.count("listener SessionRecorder raised") == 1, err  # reported once, not at every event


def test_live_any_failure_to_write_an_entry_stops_the_run_before_the_next_model_call(tmp_path, project):
    path = tmp_path / "session.jsonl"
    env = {key: value for key, value in os.environ.items() if "proxy" not in key.lower()}
    env.pop("TINY_PI_API_KEY", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    with serving(call_with_nan_then_answer) as server:
        command = [sys.executable, "-m", "tiny_pi.agent", "--base-url", server.base_url, "--model", "loopback",
                   "--root", str(project), "--session", str(path)]
        done = subprocess.run(command, cwd=PROJECT, env=env, input=b"Read it.\nAnd again?\n",
                              capture_output=True, timeout=PROCESS_TIME_LIMIT, check=False)

    stderr = done.stderr.decode()
    assert len(server.requests) == 1, stderr  # the message the log cannot hold is never sent
    assert done.returncode != 0, stderr  # stopped: 130, aborted (chapter 13's poisoned runtime says 1)
    assert stderr.count("Out of range float values are not JSON compliant") == 1, stderr  # why, in one line, once
    assert "Traceback" not in stderr
    assert roles(context_messages(list(read_session(path).entries))) == ["user"]
