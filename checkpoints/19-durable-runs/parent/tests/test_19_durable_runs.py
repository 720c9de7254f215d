"""Chapter 19: durable runs, progress committed before anyone sees it.

Run alone with `python -m pytest tests/test_19_durable_runs.py`. The labs
follow the lesson: a batch SQLite takes whole or not at all (19.1), one
mutation line in front of it (19.2), work as tasks (19.3), a tool's intent
committed before it runs (19.4), and recovery: a cut reply, replies never
sent again, and real processes killed with SIGKILL at every commit (19.5).

The store is always a real SQLite file. A second connection to it plays
the part of somebody else looking: what it sees is what a crash would leave.
"""

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing
from loopback_server import STREAM_HEAD, LoopbackServer, chunk, send_chunk, sse

from tiny_pi.durable_run import CUT_OFF, DurableRun
from tiny_pi.durable_store import DurableSession, SqliteStore, StorageRejected, StoreError, Write
from tiny_pi.durable_tasks import (
    COMPLETED,
    FAILED,
    PENDING,
    RUNNING,
    TaskError,
    generation_task,
    moved,
    next_pending,
    reopened,
)
from tiny_pi.messages import ToolCall, ToolResultMessage, assistant_message, text, text_of
from tiny_pi.scripted_model import ScriptedFailure, ScriptedModel
from tiny_pi.tools import Tool, ToolRegistry

TIME_LIMIT = 60.0  # a guard against hangs, not a speed test
PROJECT = Path(__file__).resolve().parent.parent
ECHO_PARAMETERS = {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]}


def run(main, limit=TIME_LIMIT):
    async def guarded():
        with trio.fail_after(limit):
            return await main()

    return trio.run(guarded)


def peek(path):
    """The records as another connection sees them: what is on disk, committed."""
    connection = sqlite3.connect(path)
    try:
        rows = connection.execute("SELECT collection, id, value FROM records ORDER BY rowid").fetchall()
        seq = connection.execute("SELECT max(seq) FROM commits").fetchone()[0] or 0
    finally:
        connection.close()
    records = {"entries": {}, "tasks": {}}
    for collection, record_id, value in rows:
        records[collection][record_id] = json.loads(value)
    return records, seq


def write_lock_free(path):
    """Whether another connection can start writing now: no transaction of the store is open."""
    connection = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        connection.close()


def echo_tool(runs, started=None, hang_on=None):
    """`echo {value}` -> `echo:VALUE`; counts its runs in `runs`, and hangs on run number `hang_on`."""

    async def execute(arguments, *, signal):
        runs.append(arguments["value"])
        if started is not None:
            started.set()
        if len(runs) == hang_on:
            await trio.sleep_forever()
        return [text(f"echo:{arguments['value']}")]

    return Tool("echo", "Echo a value.", ECHO_PARAMETERS, execute)


def calling(*values, prefix="c"):
    """A reply that calls echo once per value."""
    calls = [ToolCall(f"{prefix}{number}", "echo", {"value": value}) for number, value in enumerate(values, start=1)]
    return assistant_message([text("calling"), *calls], "toolUse")


def commit_log(session):
    """`SEQ:entry:ROLE` and `SEQ:KIND:STATUS:PHASE` for every write of every commit from now on."""
    log = []

    def note(seq, writes):
        for write in writes:
            value = write.value
            if write.collection == "entries":
                log.append(f"{seq}:entry:{value['message']['role']}")
            else:
                log.append(f"{seq}:{value['kind']}:{value['status']}:{value['checkpoint']['phase']}")

    session.on_commit = note
    return log


async def crash_at(durable, seq, work):
    """Run `work` and cut it off right after commit `seq`, as a crash would: nothing after it is committed."""
    with trio.CancelScope() as scope:
        noted = durable.session.on_commit

        def cut(number, writes):
            noted(number, writes)
            if number == seq:
                scope.cancel()

        durable.session.on_commit = cut
        await work()
    durable.session.store.close()
    assert scope.cancelled_caught, f"the run ended before commit {seq}"


# Lab 19.1: a batch SQLite takes whole, or not at all ------------------------------------------


def test_store_a_refused_batch_leaves_no_record_and_no_number(tmp_path):
    store = SqliteStore.open(tmp_path / "run.db")
    assert store.commit([Write("entries", "e1", {"n": 1}), Write("tasks", "t1", {"status": "pending"})]) == 1
    with pytest.raises(StorageRejected, match="tasks/t2 is not a JSON value"):
        store.commit([Write("entries", "e2", {"n": 2}), Write("tasks", "t2", {"bad": float("nan")})])
    assert store.read() == {"entries": {"e1": {"n": 1}}, "tasks": {"t1": {"status": "pending"}}}
    assert store.seq == 1
    assert store.commit([Write("entries", "e2", {"n": 2})]) == 2  # no number was lost to the refused batch
    assert peek(tmp_path / "run.db") == (store.read(), 2)


@pytest.mark.parametrize("write, message", [
    (Write("entries", "e1", {"x": float("inf")}), "entries/e1 is not a JSON value"),
    (Write("entries", "e1", {"x": object()}), "entries/e1 is not a JSON value"),
    (Write("entries", "e1", "\udce9"), "entries/e1 is not a JSON value"),
    (Write("notes", "n1", {}), "unknown collection 'notes': a store has entries, tasks"),
    (Write("tasks", "", {}), "a record id is a non-empty string, got ''"),
])
def test_store_refuses_a_write_json_cannot_hold(tmp_path, write, message):
    store = SqliteStore.open(tmp_path / "run.db")
    with pytest.raises(StorageRejected) as refused:
        store.commit([Write("entries", "e0", {"fine": True}), write])
    assert message in str(refused.value)
    assert store.read() == {"entries": {}, "tasks": {}} and store.seq == 0


def test_store_a_write_replaces_its_record_and_the_first_order_stays(tmp_path):
    store = SqliteStore.open(tmp_path / "run.db")
    store.commit([Write("tasks", "t0", {"status": "pending"}), Write("tasks", "t1", {"status": "pending"})])
    store.commit([Write("tasks", "t0", {"status": "running"})])
    assert list(store.read()["tasks"].items()) == [("t0", {"status": "running"}), ("t1", {"status": "pending"})]


def test_store_is_sqlite_in_wal_mode_and_reopens_as_it_was(tmp_path):
    store = SqliteStore.open(tmp_path / "run.db")
    store.commit([Write("entries", "e0", {"text": "héllo"})])
    settings = [store.connection.execute(f"PRAGMA {name}").fetchone()[0]
                for name in ("journal_mode", "synchronous", "user_version")]
    assert settings == ["wal", 2, 19]  # 2 is FULL: a commit is on disk when it returns
    store.close()
    again = SqliteStore.open(tmp_path / "run.db")
    assert again.read() == {"entries": {"e0": {"text": "héllo"}}, "tasks": {}}
    assert again.seq == 1


def test_store_a_process_killed_inside_a_commit_leaves_that_batch_out(tmp_path):
    """SIGKILL with the second batch written and not committed: SQLite forgets it, as a crash must."""
    script = (
        "import sys; from tiny_pi.durable_store import SqliteStore, Write\n"
        "store = SqliteStore.open(sys.argv[1])\n"
        "store.commit([Write('entries', 'e0', {'n': 0})])\n"
        "store.commit([Write('entries', 'e1', {'n': 1}), Write('tasks', 't0', {'n': 1})])\n"
    )
    env = {**os.environ, "TINY_PI_KILL_AT_COMMIT": "2", "PYTHONPATH": str(PROJECT)}
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "run.db")], env=env, timeout=TIME_LIMIT)
    assert done.returncode == -signal.SIGKILL
    assert peek(tmp_path / "run.db") == ({"entries": {"e0": {"n": 0}}, "tasks": {}}, 1)


@pytest.mark.parametrize("kind", ["directory", "text", "other database"])
def test_store_refuses_a_file_that_cannot_be_a_store(tmp_path, kind):
    path = tmp_path / "run.db"
    if kind == "directory":
        path.mkdir()
        expected = "a directory, not a durable store"
    elif kind == "text":
        path.write_text("not a database at all, just words\n" * 100)
        expected = "not a tiny_pi durable store (file is not a database)"
    else:
        sqlite3.connect(path).execute("CREATE TABLE notes (body TEXT)").connection.close()
        expected = "another program's database"
    with pytest.raises(StoreError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        SqliteStore.open(path)
    with pytest.raises(StoreError, match="no such file"):
        SqliteStore.open(tmp_path / "missing.db", create=False)


# Lab 19.2: one mutation line, and nothing visible before it is stored --------------------------


class GatedStore(SqliteStore):
    """A real store whose commits wait (in their thread) until the test opens the gate; notes what was visible."""

    def __init__(self, *args):
        super().__init__(*args)
        import threading

        self.gate = threading.Event()
        self.visible_while_storing = []
        self.session = None

    def commit(self, writes):
        if self.session is not None:
            self.visible_while_storing.append([write.id in self.session.view[write.collection] for write in writes])
        self.gate.wait(TIME_LIMIT)
        return super().commit(writes)


def gated(path):
    store = SqliteStore.open(path)
    store.close()
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    return GatedStore(path, connection)


def test_line_writes_become_visible_only_after_the_store_has_them(tmp_path):
    async def main():
        store = gated(tmp_path / "run.db")
        session = DurableSession(store)
        store.session = session
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.commit, lambda tx: tx.put("entries", "e0", {"n": 0}))
            await trio.testing.wait_all_tasks_blocked()
            try:
                assert session.get("entries", "e0") is None  # asked for, not stored: nobody may see it
            finally:
                store.gate.set()  # a failed check must not leave the commit waiting in its thread
        assert store.visible_while_storing == [[False]]
        assert session.get("entries", "e0") == {"n": 0}
        assert peek(tmp_path / "run.db") == ({"entries": {"e0": {"n": 0}}, "tasks": {}}, 1)

    run(main)


def test_line_a_change_that_raises_or_a_refused_batch_changes_nothing(tmp_path):
    async def main():
        session = DurableSession(SqliteStore.open(tmp_path / "run.db"))
        committed = []
        session.on_commit = lambda seq, writes: committed.append(seq)

        def raising(tx):
            tx.put("entries", "e0", {"n": 0})
            raise ValueError("the change failed")

        with pytest.raises(ValueError, match="the change failed"):
            await session.commit(raising)
        with pytest.raises(StorageRejected):
            await session.commit(lambda tx: (tx.put("entries", "e0", {"n": 0}), tx.put("tasks", "t0", {"x": {1, 2}})))
        assert session.list("entries") == [] and session.list("tasks") == [] and committed == []
        assert await session.commit(lambda tx: tx.get("entries", "e0")) is None  # reads only: no commit
        await session.commit(lambda tx: tx.put("entries", "e0", {"n": 0}))
        assert committed == [1] and session.get("entries", "e0") == {"n": 0}

    run(main)


def test_line_a_listener_hears_of_a_commit_once_the_view_holds_it_as_the_store_keeps_it(tmp_path):
    async def main():
        session = DurableSession(SqliteStore.open(tmp_path / "run.db"))
        heard = []
        session.on_commit = lambda seq, writes: heard.append((seq, writes, session.get("entries", "e0")))

        result = await session.commit(lambda tx: (tx.put("entries", "e0", {"pair": (1, 2)}), "done")[1])

        assert result == "done"  # commit returns what the change returned
        assert heard == [(1, [Write("entries", "e0", {"pair": (1, 2)})], {"pair": [1, 2]})]
        assert session.get("entries", "e0") == {"pair": [1, 2]}  # the JSON text read back, as the store keeps it

    run(main)


def test_line_concurrent_commits_run_one_after_another_and_each_reads_the_last(tmp_path):
    async def main():
        store = gated(tmp_path / "run.db")
        session = DurableSession(store)
        seen = []

        def add_one(tx):
            count = (tx.get("entries", "counter") or {"n": 0})["n"]
            seen.append(count)
            tx.put("entries", "counter", {"n": count + 1})

        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(session.commit, add_one)
            await trio.testing.wait_all_tasks_blocked()
            try:
                assert seen == [0]  # the others wait in line: their changes have not run
            finally:
                store.gate.set()
        assert seen == [0, 1, 2, 3, 4]
        assert session.get("entries", "counter") == {"n": 5}
        assert peek(tmp_path / "run.db")[1] == 5

    run(main)


# Lab 19.3: work as tasks ---------------------------------------------------------------------


def test_tasks_move_pending_running_then_completed_or_failed_and_nowhere_else():
    task = generation_task(0, 1, turn=1)
    running = moved(task, RUNNING)
    assert [moved(running, COMPLETED).status, moved(running, FAILED, error="x").error] == [COMPLETED, "x"]
    for start, status in [(task, COMPLETED), (moved(running, COMPLETED), RUNNING), (moved(running, FAILED), PENDING)]:
        with pytest.raises(TaskError, match=f"task t0 cannot move from {start.status} to {status}"):
            moved(start, status)


def test_tasks_reopening_turns_running_back_to_pending_and_keeps_the_checkpoint():
    tasks = [moved(generation_task(0, 1, turn=1), RUNNING), generation_task(1, 3, turn=1)]
    tasks[0] = attrs.evolve(tasks[0], checkpoint={"phase": "request", "partial": {"x": 1}})
    back = reopened(tasks)
    assert [(task.id, task.status, task.checkpoint) for task in back] == [
        ("t0", PENDING, {"phase": "request", "partial": {"x": 1}})]
    assert next_pending([tasks[1], *back]).id == "t0"  # first in line
    assert next_pending([moved(tasks[1], RUNNING)]) is None


def test_tasks_a_prompt_is_one_commit_and_a_reply_moves_its_task_to_completed(tmp_path):
    async def main():
        durable = await DurableRun.open(SqliteStore.open(tmp_path / "run.db"),
                                        ScriptedModel([assistant_message([text("hello")])]), ToolRegistry())
        log = commit_log(durable.session)
        await durable.prompt("hi")
        assert log == ["1:entry:user", "1:generation:pending:request"]
        await durable.run()
        assert log[2:] == ["2:generation:running:request", "3:generation:running:request",
                           "4:entry:assistant", "4:generation:completed:request"]
        assert [(task.status, task.checkpoint) for task in durable.tasks()] == [(COMPLETED, {"phase": "request"})]
        assert [message.role for message in durable.messages()] == ["user", "assistant"]
        await durable.run()  # nothing pending: nothing committed
        assert durable.session.store.seq == 4

    run(main)


def test_tasks_the_model_is_called_outside_any_commit_after_running_is_stored(tmp_path):
    path = tmp_path / "run.db"
    seen = []

    class LookingModel(ScriptedModel):
        def stream(self, context, **options):
            records, _ = peek(path)
            seen.append((write_lock_free(path), [task["status"] for task in records["tasks"].values()]))
            return super().stream(context, **options)

    async def main():
        durable = await DurableRun.open(SqliteStore.open(path), LookingModel([assistant_message([text("hi")])]),
                                        ToolRegistry())
        await durable.prompt("hello")
        await durable.run()

    run(main)
    assert seen == [(True, [RUNNING])]


def test_tasks_every_event_is_shown_after_what_it_shows_is_stored(tmp_path):
    path = tmp_path / "run.db"
    shown, types = [], []

    def listener(event):
        types.append(event.type)
        records, _ = peek(path)
        task = records["tasks"]["t0"]
        if event.type == "text_delta":
            shown.append(("text_delta", task["checkpoint"]["partial"]["content"][0]["text"]))
        elif event.type == "done":
            shown.append(("done", task["status"], [e["message"]["role"] for e in records["entries"].values()]))

    async def main():
        durable = await DurableRun.open(SqliteStore.open(path), ScriptedModel([assistant_message([text("Hello")])]),
                                        ToolRegistry(), on_event=listener)
        await durable.prompt("say hello")
        await durable.run()

    run(main)
    assert shown == [("text_delta", "Hello"), ("done", COMPLETED, ["user", "assistant"])]
    assert types == ["start", "text_delta", "done"]  # start shows an empty reply: it is passed on at once


class Recording:
    """A scripted model that also keeps the tools each request declared."""

    def __init__(self, turns):
        self.script = ScriptedModel(turns)
        self.tools = []

    def stream(self, context, *, signal=None, tools=None):
        self.tools.append([tool.name for tool in tools or ()])
        return self.script.stream(context, signal=signal, tools=tools)


def test_tasks_the_request_carries_the_system_prompt_and_the_declared_tools(tmp_path):
    async def main():
        model = Recording([assistant_message([text("Hi.")])])
        hidden = attrs.evolve(echo_tool([]), name="hidden", exposure="deferred")  # registered, not declared
        durable = await DurableRun.open(SqliteStore.open(tmp_path / "run.db"), model,
                                        ToolRegistry([echo_tool([]), hidden]), system_prompt="Be brief.")
        await durable.prompt("hi")
        await durable.run()
        assert model.tools == [["echo"]]
        assert model.script.requests[0].system_prompt == "Be brief."

    run(main)


def test_tasks_an_error_reply_ends_its_task_and_is_never_sent_to_a_model_again(tmp_path):
    async def main():
        model = ScriptedModel([ScriptedFailure("error", "rate limited", partial_text="half an ans"),
                               assistant_message([text("recovered")])])
        durable = await DurableRun.open(SqliteStore.open(tmp_path / "run.db"), model, ToolRegistry())
        await durable.prompt("first")
        await durable.run()
        failed = durable.messages()[1]
        assert (failed.stop_reason, failed.error_message) == ("error", "rate limited")  # kept for the reader
        assert [(task.kind, task.status) for task in durable.tasks()] == [("generation", COMPLETED)]
        await durable.prompt("again")
        await durable.run()
        assert [message.role for message in durable.messages()] == ["user", "assistant", "user", "assistant"]
        assert [text_of(message) for message in model.requests[1].messages] == ["first", "again"]

    run(main)


def test_tasks_a_reopened_store_runs_the_task_a_crash_left_running(tmp_path):
    async def main():
        first = await DurableRun.open(SqliteStore.open(tmp_path / "run.db"),
                                      ScriptedModel([assistant_message([text("never sent")])]), ToolRegistry())
        await first.prompt("hi")
        await crash_at(first, 2, first.run)  # 2: the task is running, the model not yet called
        assert [task["status"] for task in peek(tmp_path / "run.db")[0]["tasks"].values()] == [RUNNING]
        model = ScriptedModel([assistant_message([text("hello")])])
        second = await DurableRun.open(SqliteStore.open(tmp_path / "run.db"), model, ToolRegistry())
        assert [task.status for task in second.tasks()] == [PENDING]
        assert second.session.store.seq == 3  # the reopen is one commit
        await second.run()
        assert [text_of(message) for message in second.messages()] == ["hi", "hello"]
        second.session.store.close()
        third = await DurableRun.open(SqliteStore.open(tmp_path / "run.db"), model, ToolRegistry())
        assert third.session.store.seq == 6  # nothing was running: opening commits nothing

    run(main)


# Lab 19.4: a tool's intent, committed before it runs -------------------------------------------


def test_tool_intent_is_committed_before_the_tool_runs_outside_any_commit(tmp_path):
    path = tmp_path / "run.db"
    looked = []

    async def echo(arguments, *, signal):
        task = peek(path)[0]["tasks"]["t1"]
        looked.append((write_lock_free(path), task["status"], task["checkpoint"]))
        return [text(f"echo:{arguments['value']}")]

    async def main():
        registry = ToolRegistry([Tool("echo", "Echo.", ECHO_PARAMETERS, echo)])
        durable = await DurableRun.open(SqliteStore.open(path), ScriptedModel([calling("x"), assistant_message(
            [text("done")])]), registry, replay={"echo": "safe"})
        log = commit_log(durable.session)
        await durable.prompt("go")
        await durable.run()
        assert log == [
            "1:entry:user", "1:generation:pending:request",
            "2:generation:running:request",
            "3:generation:running:request", "4:generation:running:request", "5:generation:running:request",
            "6:entry:assistant", "6:tool:pending:call", "6:generation:completed:request",
            "7:tool:running:call",
            "8:tool:running:execute",
            "9:entry:toolResult", "9:tool:completed:execute", "9:generation:pending:request",
            "10:generation:running:request",
            "11:generation:running:request",
            "12:entry:assistant", "12:generation:completed:request",
        ]
        assert [text_of(message) for message in durable.messages()] == ["go", "calling", "echo:x", "done"]

    run(main)
    assert looked == [(True, RUNNING, {"phase": "execute", "arguments": {"value": "x"}, "replay": "safe"})]


async def cut_off_while_running(path, stored_policy):
    """A run whose echo call is cut off after it started: the store holds its intent, and no result."""
    runs, started = [], trio.Event()
    durable = await DurableRun.open(SqliteStore.open(path), ScriptedModel([calling("x")]),
                                    ToolRegistry([echo_tool(runs, started, hang_on=1)]), replay={"echo": stored_policy})
    await durable.prompt("go")
    with trio.CancelScope() as crash:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(durable.run)
            await started.wait()
            crash.cancel()
    durable.session.store.close()
    assert runs == ["x"]
    tool = peek(path)[0]["tasks"]["t1"]
    assert (tool["status"], tool["checkpoint"]["phase"]) == (RUNNING, "execute")


def test_tool_cut_off_and_safe_on_both_sides_runs_again_with_its_stored_arguments(tmp_path):
    async def main():
        await cut_off_while_running(tmp_path / "run.db", "safe")
        runs = []
        durable = await DurableRun.open(SqliteStore.open(tmp_path / "run.db"),
                                        ScriptedModel([assistant_message([text("done")])]),
                                        ToolRegistry([echo_tool(runs)]), replay={"echo": "safe"})
        await durable.run()
        assert runs == ["x"]
        result = durable.messages()[2]
        assert (result.is_error, text_of(result)) == (False, "echo:x")
        assert [task.status for task in durable.tasks()] == [COMPLETED] * 3

    run(main)


@pytest.mark.parametrize("stored, now", [("unsafe", "safe"), ("safe", "unsafe"), ("unsafe", "unsafe")])
def test_tool_cut_off_and_unsafe_on_either_side_is_interrupted_not_run_again(tmp_path, stored, now):
    async def main():
        await cut_off_while_running(tmp_path / "run.db", stored)
        runs = []
        model = ScriptedModel([assistant_message([text("I will check before trying again.")])])
        durable = await DurableRun.open(SqliteStore.open(tmp_path / "run.db"), model,
                                        ToolRegistry([echo_tool(runs)]), replay={"echo": now})
        await durable.run()
        assert runs == []
        tool = durable.tasks()[1]
        assert (tool.status, tool.error) == (FAILED, "interrupted")
        result = durable.messages()[2]
        message = "Tool 'echo' was interrupted and may have partially run"
        assert (result.tool_call_id, result.is_error, text_of(result)) == ("c1", True, message)
        assert result.details == {"error": "interrupted", "message": message}
        assert [m.role for m in model.requests[0].messages] == ["user", "assistant", "toolResult"]
        assert text_of(durable.messages()[-1]) == "I will check before trying again."

    run(main)


def test_tool_events_a_call_shows_its_start_and_end_and_an_interrupted_one_only_its_end(tmp_path):
    def noted(events):
        """A listener that keeps (type, call id) of each tool event, and an end's result text."""
        def listener(event):
            if event.type == "tool_execution_start":
                events.append((event.type, event.tool_call.id))
            elif event.type == "tool_execution_end":
                events.append((event.type, event.tool_call.id, text_of(event.result)))
        return listener

    async def main():
        ran = []
        durable = await DurableRun.open(SqliteStore.open(tmp_path / "ran.db"),
                                        ScriptedModel([calling("x"), assistant_message([text("done")])]),
                                        ToolRegistry([echo_tool([])]), on_event=noted(ran))
        await durable.prompt("go")
        await durable.run()
        assert ran == [("tool_execution_start", "c1"), ("tool_execution_end", "c1", "echo:x")]

        await cut_off_while_running(tmp_path / "cut.db", "unsafe")
        cut = []
        durable = await DurableRun.open(SqliteStore.open(tmp_path / "cut.db"),
                                        ScriptedModel([assistant_message([text("ok")])]),
                                        ToolRegistry([echo_tool([])]), on_event=noted(cut))
        await durable.run()
        assert cut == [("tool_execution_end", "c1", "Tool 'echo' was interrupted and may have partially run")]

    run(main)


def test_tool_a_round_runs_its_calls_together_and_asks_the_model_once(tmp_path):
    both = [trio.Event(), trio.Event()]

    async def meet(arguments, *, signal):
        mine = int(arguments["value"])
        both[mine].set()
        await both[1 - mine].wait()  # each waits for the other: calls one after another would never end
        return [text(f"met {mine}")]

    async def main():
        model = ScriptedModel([calling("0", "1"), assistant_message([text("done")])])
        durable = await DurableRun.open(SqliteStore.open(tmp_path / "run.db"), model,
                                        ToolRegistry([Tool("echo", "Meet.", ECHO_PARAMETERS, meet)]))
        await durable.prompt("go")
        await durable.run()
        kinds = [task.kind for task in durable.tasks()]
        assert kinds == ["generation", "tool", "tool", "generation"]  # one request after the round, not two
        results = [m for m in durable.messages() if isinstance(m, ToolResultMessage)]
        assert sorted((result.tool_call_id, text_of(result)) for result in results) == [("c1", "met 0"), ("c2", "met 1")]
        assert [m.role for m in model.requests[1].messages] == ["user", "assistant", "toolResult", "toolResult"]

    run(main)


def test_tool_a_round_at_the_turn_limit_asks_the_model_no_more(tmp_path):
    async def main():
        model = ScriptedModel([calling("x"), assistant_message([text("never asked")])])
        durable = await DurableRun.open(SqliteStore.open(tmp_path / "run.db"), model,
                                        ToolRegistry([echo_tool([])]), max_turns=1)
        await durable.prompt("go")
        await durable.run()
        assert [(task.kind, task.status) for task in durable.tasks()] == [("generation", COMPLETED), ("tool", COMPLETED)]
        assert [message.role for message in durable.messages()] == ["user", "assistant", "toolResult"]
        assert len(model.requests) == 1

    run(main)


def test_tool_a_call_that_cannot_run_still_gets_its_one_result(tmp_path):
    async def main():
        reply = assistant_message([ToolCall("c1", "missing", {})], "toolUse")
        model = ScriptedModel([reply, assistant_message([text("ok")])])
        durable = await DurableRun.open(SqliteStore.open(tmp_path / "run.db"), model, ToolRegistry())
        await durable.prompt("go")
        await durable.run()
        result = durable.messages()[2]
        assert (result.is_error, text_of(result)) == (True, "Tool 'missing' not found (available tools: none)")
        assert [task.status for task in durable.tasks()] == [COMPLETED] * 3  # an error result completes its task
        assert durable.tasks()[1].checkpoint["phase"] == "execute"  # its intent was committed like any other

    run(main)


# Lab 19.5: recovery: a cut reply, replies never sent again, and real crashes --------------------


def test_recovery_a_cut_reply_becomes_an_aborted_entry_and_the_same_request_goes_again(tmp_path):
    async def main():
        first_model = ScriptedModel([assistant_message([text("Hel"), text("lo, world")])])
        first = await DurableRun.open(SqliteStore.open(tmp_path / "run.db"), first_model, ToolRegistry())
        await first.prompt("say hello")
        await crash_at(first, 3, first.run)  # 3: the first delta, "Hel", is committed
        assert [e["message"]["role"] for e in peek(tmp_path / "run.db")[0]["entries"].values()] == ["user"]
        model = ScriptedModel([assistant_message([text("Hello there")])])
        second = await DurableRun.open(SqliteStore.open(tmp_path / "run.db"), model, ToolRegistry())
        log = commit_log(second.session)
        await second.run()
        assert log[:3] == ["5:generation:running:request", "6:entry:assistant", "6:generation:running:request"]
        cut, answer = second.messages()[1:]
        assert (cut.stop_reason, text_of(cut), cut.error_message) == ("aborted", "Hel", CUT_OFF)
        assert (answer.stop_reason, text_of(answer)) == ("stop", "Hello there")
        assert model.requests[0].messages == first_model.requests[0].messages  # the same request, from scratch
        assert second.tasks()[0].checkpoint == {"phase": "request"}

    run(main)


def test_recovery_aborted_and_error_replies_are_never_sent_to_a_model_again(tmp_path):
    async def main():
        first = await DurableRun.open(SqliteStore.open(tmp_path / "run.db"),
                                      ScriptedModel([assistant_message([text("cut off here")])]), ToolRegistry())
        await first.prompt("one")
        await crash_at(first, 3, first.run)
        model = ScriptedModel([
            assistant_message([text("answer one")]),
            ScriptedFailure("error", "rate limited", partial_text="half an ans"),
            calling("x"),
            assistant_message([text("answer three")]),
        ])
        durable = await DurableRun.open(SqliteStore.open(tmp_path / "run.db"), model,
                                        ToolRegistry([echo_tool([])]))
        await durable.run()
        await durable.prompt("two")
        await durable.run()
        await durable.prompt("three")
        await durable.run()
        kept = [(m.role, getattr(m, "stop_reason", None)) for m in durable.messages()]
        assert ("assistant", "aborted") in kept and ("assistant", "error") in kept  # kept for the reader
        for request in model.requests:
            sent = [text_of(message) for message in request.messages]
            assert "cut off here" not in sent and "half an ans" not in sent
        assert [text_of(m) for m in model.requests[-1].messages] == [
            "one", "answer one", "two", "three", "calling", "echo:x"]

    run(main)


# Lab 19.5, continued: the agent killed for real, at every commit of a tool round trip

EFFECTS = "effects.txt"


def round_trip(command):
    """A loopback "model": asked by a user, it says so and calls bash `command`; given a result, it is done."""

    async def reply(stream, body):
        last = body["messages"][-1]
        if last["role"] == "tool":
            chunks = [chunk({"role": "assistant", "content": "Done."}), chunk(finish_reason="stop")]
        else:
            call = {"index": 0, "id": "call_1", "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps({"command": command})}}
            chunks = [chunk({"role": "assistant", "content": "I will run it."}), chunk({"tool_calls": [call]}),
                      chunk(finish_reason="tool_calls")]
        await stream.send_all(STREAM_HEAD)
        for payload in chunks:
            await send_chunk(stream, sse(payload))
        await send_chunk(stream, b"data: [DONE]\n\n")
        await stream.send_all(b"0\r\n\r\n")

    return reply


def environment(root):
    """No proxy, no key, no kill point; a marker that every process the agent starts inherits."""
    env = {key: value for key, value in os.environ.items()
           if "proxy" not in key.lower() and key not in ("TINY_PI_API_KEY", "TINY_PI_KILL_AT_COMMIT")}
    env["TINY_PI_TEST_MARKER"] = str(root)
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


async def agent(server, root, *extra, kill_at=None, check=False):
    """`python -m tiny_pi.agent --durable root/run.db` against `server`; its CompletedProcess."""
    env = environment(root)
    if kill_at is not None:
        env["TINY_PI_KILL_AT_COMMIT"] = str(kill_at)
    command = [sys.executable, "-m", "tiny_pi.agent", "--base-url", server.base_url, "--model", "m",
               "--root", str(root), "--tools", "bash", "--durable", str(root / "run.db"), *extra]
    return await trio.run_process(command, cwd=PROJECT, env=env, stdin=subprocess.DEVNULL,
                                  capture_stdout=True, capture_stderr=True, check=check)


def conversation_problems(path):
    """What is wrong with a finished store: unfinished tasks, unpaired calls, no final answer."""
    records, _ = peek(path)
    entries = sorted(records["entries"].values(), key=lambda entry: entry["index"])
    messages = [entry["message"] for entry in entries]
    problems = [f"task {task['id']} is {task['status']}" for task in records["tasks"].values()
                if task["status"] not in (COMPLETED, FAILED)]
    sent = [m for m in messages if m["role"] != "assistant" or m["stopReason"] not in ("aborted", "error")]
    calls = [block["id"] for m in sent if m["role"] == "assistant" for block in m["content"]
             if block["type"] == "toolCall"]
    results = [m["toolCallId"] for m in messages if m["role"] == "toolResult"]
    if sorted(calls) != sorted(results):
        problems.append(f"calls {calls} are not paired one to one with results {results}")
    if not messages or messages[-1]["role"] != "assistant" or messages[-1]["stopReason"] != "stop":
        problems.append("the conversation did not finish with an answer")
    return problems


def test_crash_the_agent_killed_at_every_commit_of_a_tool_round_trip_finishes_without_running_twice(tmp_path):
    async def crash_and_restart(server, root, number, problems):
        root.mkdir()
        crashed = await agent(server, root, "Run it.", kill_at=number)
        if crashed.returncode != -signal.SIGKILL:
            problems.append(f"commit {number}: the agent exited {crashed.returncode}, not killed "
                            f"(does DurableStore.commit call kill_point before COMMIT?) {crashed.stderr[-300:]!r}")
            return
        before, _ = peek(root / "run.db")
        prompted = any(entry["message"]["role"] == "user" for entry in before["entries"].values())
        again = await agent(server, root, *([] if prompted else ["Run it."]))  # a prompt never committed was never taken
        after, _ = peek(root / "run.db")
        effects = (root / EFFECTS).read_text().count("ran") if (root / EFFECTS).exists() else 0
        lost = [key for key, entry in before["entries"].items() if after["entries"].get(key) != entry]
        found = [f"exit {again.returncode}: {again.stderr[-300:]!r}"] if again.returncode != 0 else []
        found += [f"committed entries lost or changed: {lost}"] if lost else []
        found += [f"the unsafe tool ran {effects} times"] if effects > 1 else []
        found += conversation_problems(root / "run.db")
        problems.extend(f"commit {number}: {problem}" for problem in found)

    async def main():
        problems = []
        async with trio.open_nursery() as nursery:
            server = await LoopbackServer(round_trip(f"echo ran >> {EFFECTS}")).start(nursery)
            clean = tmp_path / "clean"
            clean.mkdir()
            await agent(server, clean, "Run it.", check=True)
            commits = peek(clean / "run.db")[1]
            assert conversation_problems(clean / "run.db") == []
            limit = trio.CapacityLimiter(3)

            async def one(number):
                async with limit:
                    await crash_and_restart(server, tmp_path / f"kill-at-{number}", number, problems)

            async with trio.open_nursery() as crashes:
                for number in range(1, commits + 1):
                    crashes.start_soon(one, number)
            nursery.cancel_scope.cancel()
        assert sorted(problems) == []
        assert commits == 12  # the round trip of the lesson's commit log

    run(main, limit=10 * TIME_LIMIT)  # 25 processes: a loaded machine may take minutes


def test_agent_durable_killed_in_the_middle_of_a_tool_call_finishes_on_restart(tmp_path):
    """The payoff: kill -9 while bash runs; the same command without PROMPT finishes, and the viewer shows it."""

    async def main():
        async with trio.open_nursery() as nursery:
            server = await LoopbackServer(round_trip(f"echo ran >> {EFFECTS}; kill -9 $PPID")).start(nursery)
            killed = await agent(server, tmp_path, "Run it, please.")
            assert killed.returncode == -signal.SIGKILL
            again = await agent(server, tmp_path)
            assert again.returncode == 0, again.stderr
            assert b"[resume] 1 unfinished task(s)" in again.stderr
            assert b"[error] bash: Tool 'bash' was interrupted and may have partially run" in again.stdout
            nursery.cancel_scope.cancel()

    run(main)
    assert (tmp_path / EFFECTS).read_text() == "ran\n"  # once: the restart did not run it again
    shown = subprocess.run([sys.executable, "-m", "tiny_pi.durable_view", str(tmp_path / "run.db")], cwd=PROJECT,
                           capture_output=True, text=True, timeout=TIME_LIMIT)
    assert shown.returncode == 0, shown.stderr
    assert "e2 toolResult bash (interrupted): Tool 'bash' was interrupted and may have partially run" in shown.stdout
    assert "t1 tool failed (interrupted): call call_1 of e1" in shown.stdout
    assert "e3 assistant: Done." in shown.stdout.splitlines()


def test_agent_durable_stopped_by_ctrl_c_keeps_the_run_for_the_next_start(tmp_path):
    """SIGINT mid-tool stops the run where it is (exit 130), bash and all; a restart finishes it."""

    async def main():
        async with trio.open_nursery() as nursery:
            server = await LoopbackServer(round_trip(f"echo ran >> {EFFECTS}; kill -INT $PPID; sleep 30")).start(nursery)
            stopped = await agent(server, tmp_path, "Run it.")
            assert stopped.returncode == 130, stopped.stderr
            assert b"keeps the run: start again to finish it" in stopped.stderr
            again = await agent(server, tmp_path)
            assert again.returncode == 0, again.stderr
            nursery.cancel_scope.cancel()

    run(main)
    assert (tmp_path / EFFECTS).read_text() == "ran\n"
    assert conversation_problems(tmp_path / "run.db") == []
    assert processes_with(str(tmp_path)) == []  # the bash of the stopped run ended with it


def test_agent_durable_with_session_is_refused_in_one_usage_line(tmp_path):
    command = [sys.executable, "-m", "tiny_pi.agent", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
               "--durable", str(tmp_path / "run.db"), "--session", str(tmp_path / "s.jsonl"), "hi"]
    done = subprocess.run(command, cwd=PROJECT, capture_output=True, text=True, timeout=TIME_LIMIT)
    assert done.returncode == 2
    assert "--durable and --session both keep the conversation: give one of them" in done.stderr
    assert not (tmp_path / "run.db").exists() and not (tmp_path / "s.jsonl").exists()


@pytest.mark.parametrize("kind", ["directory", "text"])
def test_agent_durable_refuses_a_file_that_cannot_be_a_store_in_one_line(tmp_path, kind):
    path = tmp_path / "run.db"
    if kind == "directory":
        path.mkdir()
    else:
        path.write_text("just words\n" * 200)
    for viewer in ([], ["view"]):
        command = ([sys.executable, "-m", "tiny_pi.durable_view", str(path)] if viewer else
                   [sys.executable, "-m", "tiny_pi.agent", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                    "--durable", str(path), "hi"])
        done = subprocess.run(command, cwd=PROJECT, capture_output=True, text=True, timeout=TIME_LIMIT)
        assert done.returncode == 2
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
        assert ("a directory, not a durable store" if kind == "directory" else "file is not a database") in done.stderr
    assert kind == "directory" or path.read_text() == "just words\n" * 200  # the file is untouched
