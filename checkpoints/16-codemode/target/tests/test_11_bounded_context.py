"""Chapter 11: bounded context from immutable history.

Run alone with `python -m pytest tests/test_11_bounded_context.py`. The labs
follow the lesson: the estimate, the budget and the cut point (11.1), the
summary and the compaction entry in the session (11.2), then
`python -m tiny_pi.agent --context-window N` over real HTTP, against a server
that refuses a tool message without its call, as real servers do: compaction
before a prompt (11.3), the compaction in the session file (11.4), and
compaction between a run's tool round trips (11.5).
"""

import io
import json
import queue
import re
import threading
from contextlib import contextmanager
from functools import partial

import pytest
import trio
import trio.testing
from loopback_server import (
    STREAM_HEAD, LoopbackServer, chunk, readme_answer, send_chunk, sse, tool_call_chunks, usage_chunk,
)

from tiny_pi.agent_loop import run_agent
from tiny_pi.compaction import (
    FREE_TEXT_HEADING,
    HEADINGS,
    SUMMARY_INTRO,
    context_tokens,
    default_reserve,
    estimate_tokens,
    find_cut,
    fixed_tokens,
    keep_budget,
    render_transcript,
    structure_summary,
    summary_message,
)
from tiny_pi.messages import (
    AgentContext, ToolCall, ToolResultMessage, Usage, assistant_message, text, text_of, user_message,
)
from tiny_pi.model_stream import ModelCallStream
from tiny_pi.projection import project as events_of
from tiny_pi.scripted_model import ScriptedModel
from tiny_pi.session import open_session
from tiny_pi.session_log import CompactionEntry, MessageEntry, SessionError, read_session
from tiny_pi.session_writer import SessionWriter
from tiny_pi.stateful_agent import Agent
from tiny_pi.tools import Tool, ToolRegistry
from tiny_pi.toolset import chosen_tools

TIME_LIMIT = 10.0  # a guard against hangs, not a speed test: the machine may be busy
README = "# tiny-pi\nA small agent runtime.\n"
STRUCTURED = "\n".join(f"## {heading}\n- none" for heading in HEADINGS)


def round_trip(question, call_id="call_1"):
    """One interaction: the question, a read call, its result, the answer."""
    call = ToolCall(id=call_id, name="read", arguments={"path": "README.md"})
    return [
        user_message(question),
        assistant_message([call], stop_reason="toolUse"),
        ToolResultMessage(call_id, "read", (text(README),), False, 0),
        assistant_message([text("The project is called tiny-pi.")]),
    ]


# Lab 11.1: the estimate, the budget and the cut point.


def test_budget_estimate_is_characters_over_four_rounded_up():
    assert estimate_tokens(user_message("x" * 10)) == 3
    call = ToolCall(id="c1", name="read", arguments={"path": "README.md"})  # 4 + 21 characters
    assert estimate_tokens(assistant_message([text("abc"), call], stop_reason="toolUse")) == 7
    assert estimate_tokens(assistant_message([text("abcd"), text("efgh")])) == 3  # text_of's "abcd\nefgh": 9
    spaced = ToolCall(id="c2", name="read", arguments={"path": "README.md"}, raw_arguments='{ "path" : "README.md" }' + " " * 40)
    assert estimate_tokens(assistant_message([spaced], stop_reason="toolUse")) == 7  # json.dumps(arguments), not the raw text


def test_budget_reported_usage_replaces_the_estimate_for_what_it_measured():
    history = round_trip("What is this?")
    measured = assistant_message([text("ok")], usage=Usage(input=500, output=20))
    after = user_message("And now?")
    assert context_tokens([*history, measured, after], fixed=100) == 500 + 20 + estimate_tokens(after)
    assert context_tokens([*history, measured, after], fixed=100, measured_from=len(history) + 1) == 100 + sum(
        estimate_tokens(message) for message in [*history, measured, after]
    )


def test_budget_default_reserve_and_what_the_kept_messages_may_use():
    assert default_reserve(128_000) == 16384
    assert default_reserve(2000) == 500
    assert keep_budget(10_000, 1000, 500) == (10_000 - 1000 - 500 - 500) // 2


def test_budget_fixed_costs_are_the_system_prompt_and_the_tools_as_one_json_list(tmp_path):
    tools = chosen_tools(tmp_path, ["read", "ls"])  # the agent's default tools: a JSON list of 820 characters
    assert fixed_tokens(None, tools) == 205  # not 181: name, description and parameters counted apart
    assert fixed_tokens("Be brief.", tools) == 208  # (9 + 820) / 4, rounded up
    assert keep_budget(2400, 1959, fixed_tokens(None, tools)) == 58  # lab 11.3's limits leave 58 for kept messages


def test_budget_cut_keeps_whole_interactions_newest_first():
    messages = round_trip("first", "c1") + round_trip("second", "c2") + round_trip("third", "c3")
    one = sum(estimate_tokens(m) for m in messages[8:])
    cut = find_cut(messages, budget=2 * one + 5)
    assert cut.index == 4
    assert not cut.newest_over_budget


def test_budget_cut_never_separates_tool_calls_from_their_results():
    messages = round_trip("first", "c1") + round_trip("second", "c2")
    newest = sum(estimate_tokens(m) for m in messages[4:])
    budget = newest + estimate_tokens(messages[3]) + estimate_tokens(messages[2])  # room for a result, not its call
    cut = find_cut(messages, budget)
    assert messages[cut.index].role == "user"
    assert cut.index == 4


def test_budget_the_newest_interaction_is_kept_whole_even_alone_over_budget():
    messages = round_trip("first", "c1") + round_trip("second", "c2")
    cut = find_cut(messages, budget=1)
    assert cut.index == 4
    assert cut.newest_over_budget


# Lab 11.2: the summary, and the compaction entry in the session.


def test_summary_with_every_heading_is_kept_as_the_model_wrote_it():
    assert structure_summary("Sure!\n" + STRUCTURED) == STRUCTURED  # the words before the first heading go
    extra = STRUCTURED + "\n## Notes\n- a heading of the model's own stays"
    assert structure_summary(extra + "\n\n") == extra


def test_summary_without_the_structure_is_free_text_under_one_heading():
    assert structure_summary("  We read the README.\n") == f"## {FREE_TEXT_HEADING}\nWe read the README."
    missing = STRUCTURED.replace("## Decisions\n", "")
    assert structure_summary(missing) == f"## {FREE_TEXT_HEADING}\n{missing}"
    swapped = STRUCTURED.replace("## Goal", "## Later").replace("## Done", "## Goal").replace("## Later", "## Done")
    assert structure_summary(swapped) == f"## {FREE_TEXT_HEADING}\n{swapped}"  # every heading, not in order


def test_summary_the_old_messages_go_as_plain_text_one_block_per_message():
    call = ToolCall(id="c1", name="read", arguments={"path": "README.md"})
    messages = [
        user_message("What is this?"),
        assistant_message([text("I will read the README first."), call], stop_reason="toolUse"),
        ToolResultMessage("c1", "read", (text("# tiny-pi"),), False, 0),
        assistant_message([text("The project is called tiny-pi.")]),
    ]
    assert render_transcript(messages) == (
        '[user]\nWhat is this?\n\n[assistant]\nI will read the README first.\n(calls read {"path": "README.md"})'
        "\n\n[toolResult]\n# tiny-pi\n\n[assistant]\nThe project is called tiny-pi."
    )
    assert render_transcript([assistant_message([call], stop_reason="toolUse")]) == (
        '[assistant]\n(calls read {"path": "README.md"})'  # no text: the calls alone
    )


def test_summary_reaches_the_model_as_a_user_message_with_the_headings():
    message = summary_message(STRUCTURED)
    assert message.role == "user"
    assert text_of(message).startswith(SUMMARY_INTRO)
    assert all(f"## {heading}" in text_of(message) for heading in HEADINGS)


def test_summary_compaction_entry_is_written_read_and_resumed_from_the_latest(tmp_path):
    path = tmp_path / "session.jsonl"
    writer = SessionWriter.create(path)
    ids = [writer.append_message(m) for m in round_trip("first", "c1") + round_trip("second", "c2")]
    writer.append_compaction("## Summary\nold one", ids[0], 900)
    writer.append_compaction("## Summary\nnew one", ids[4], 1200)
    third = writer.append_message(user_message("third"))
    writer.close()
    before = path.read_bytes()

    entries = read_session(path).entries
    assert [e.type for e in entries].count("message") == 9  # every original entry stays
    latest = entries[-2]
    assert isinstance(latest, CompactionEntry)
    assert (latest.summary, latest.first_kept_id, latest.tokens_before) == ("## Summary\nnew one", ids[4], 1200)

    opened = open_session(path, None, "loopback")
    assert text_of(opened.messages[0]) == f"{SUMMARY_INTRO}\n\n## Summary\nnew one"
    assert [text_of(m) for m in opened.messages[1:2]] == ["second"]
    assert opened.ids == (None, *ids[4:], third)
    assert opened.measured_from == 5  # the summary and the four messages kept from before it
    assert path.read_bytes().startswith(before)


BAD_FIELDS = [
    ("first_kept_id", "nowhere", "first_kept_id 'nowhere' names no earlier entry"),
    ("summary", 42, "a summary is a string, got 42"),
    ("tokens_before", -1, "tokens_before is a whole number, got -1"),
    ("tokens_before", True, "tokens_before is a whole number, got True"),
]


@pytest.mark.parametrize(("name", "value", "reason"), BAD_FIELDS, ids=[f"{n}={v!r}" for n, v, _ in BAD_FIELDS])
def test_summary_a_compaction_entry_with_a_bad_field_is_refused_with_its_line(tmp_path, name, value, reason):
    path = tmp_path / "session.jsonl"
    writer = SessionWriter.create(path)
    first = writer.append_message(user_message("first"))
    fields = {"summary": "## Summary\nx", "first_kept_id": first, "tokens_before": 10, name: value}
    writer.append_compaction(**fields)  # the writer writes what it is given; the reader checks
    writer.close()
    with pytest.raises(SessionError) as refused:
        read_session(path)
    assert str(refused.value) == f"{path}:3: {reason}"


def test_summary_a_resume_whose_compaction_keeps_from_another_branch_is_refused(tmp_path, project, capsys):
    path = tmp_path / "session.jsonl"
    writer = SessionWriter.create(path)
    first = writer.append_message(user_message("first"))
    elsewhere = writer.append_message(assistant_message([text("an answer on one branch")]))
    writer.leaf_id = first  # a second branch starts at the first message
    writer.append_message(user_message("a question on another branch"))
    writer.append_compaction("## Summary\nx", elsewhere, 10)  # line 5: keeps from the other branch
    writer.close()
    before = path.read_bytes()
    from tiny_pi.agent import main

    with serving(strict_server([])) as server:  # no --context-window: reading the session refuses it
        argv = ["--base-url", server.base_url, "--model", "loopback", "--root", str(project), "--session", str(path)]
        assert main([*argv, "Next?"]) == 2

    assert capsys.readouterr().err.strip() == f"{path}:5: first_kept_id {elsewhere!r} is not on this path"
    assert path.read_bytes() == before
    assert server.requests == []


def test_summary_the_tree_shows_a_compaction_entry(tmp_path, capsys):
    from tiny_pi.session import main

    path = tmp_path / "session.jsonl"
    writer = SessionWriter.create(path)
    first = writer.append_message(user_message("first"))
    compaction = writer.append_compaction("## Summary\nx", first, 457)
    writer.close()
    assert main([str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"{compaction} compaction: keeps from {first}, was ~457 tokens  <- last"


# The live labs' server and command line.


def orphan_tool_message(messages):
    """The first tool message whose call is not in the assistant message before it, or None."""
    calls = set()
    for message in messages:
        if message["role"] == "assistant":
            calls = {call["id"] for call in message.get("tool_calls") or []}
        elif message["role"] == "tool" and message.get("tool_call_id") not in calls:
            return message
    return None


async def send_stream(stream, payloads):
    await stream.send_all(STREAM_HEAD)
    for payload in payloads:
        await send_chunk(stream, sse(payload))
    await send_chunk(stream, b"data: [DONE]\n\n")
    await stream.send_all(b"0\r\n\r\n")


async def send_status(stream, status, message):
    body = json.dumps({"error": {"message": message}}).encode()
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    await stream.send_all(head.encode() + b"Connection: close\r\n\r\n" + body)


def reads_so_far(messages):
    """The question (the last user message) and how many tool results came after it."""
    last = max(index for index, message in enumerate(messages) if message["role"] == "user")
    return messages[last]["content"], sum(message["role"] == "tool" for message in messages[last:])


def strict_server(summaries, fail_summary=False, refused=None, padding="", reads=None):
    """The README round trip behind a server's checks; a request without tools is a summary call.

    `reads` maps a question to how many times the README is read before the answer (default once).
    """

    async def reply(stream, body):
        orphan = orphan_tool_message(body["messages"])
        if orphan is not None:
            message = f"tool message {orphan['tool_call_id']} has no tool call before it"
            (refused if refused is not None else []).append(message)
            await send_status(stream, "400 Bad Request", message)
        elif "tools" not in body:
            if fail_summary:
                await send_status(stream, "500 Internal Server Error", "the summariser is down")
                return
            summaries.append(body)
            answer = STRUCTURED.replace("- none", f"- summary {len(summaries)}{padding}", 1)
            await send_stream(stream, [chunk({"role": "assistant", "content": answer}), chunk(finish_reason="stop")])
        else:  # the README round trip, with usage that grows with what was sent
            measured = usage_chunk(len(json.dumps(body)) // 4, 20)
            question, done = reads_so_far(body["messages"])
            turn = readme_answer(body)[:-1]
            if 0 < done < (reads or {}).get(question, 1):  # read it again
                call = tool_call_chunks(f"call_{done + 1}", "read", json.dumps({"path": "README.md"}))
                turn = [chunk({"role": "assistant", "content": "Once more."}), *call, chunk(finish_reason="tool_calls")]
            await send_stream(stream, [*turn, measured])

    return reply


@contextmanager
def serving(reply):
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


LIMITS = ["--context-window", "2400", "--reserve-tokens", "1959"]  # 441 tokens: two questions fit, three do not


def agent(server, root, path, prompt, *args):
    """`python -m tiny_pi.agent --session PATH` with LIMITS, in this process."""
    from tiny_pi.agent import main

    argv = ["--base-url", server.base_url, "--model", "loopback", "--root", str(root)]
    return main([*argv, "--session", str(path), *LIMITS, *args, prompt])


def conversation(server, root, monkeypatch, questions, *args):
    """`python -m tiny_pi.agent` with LIMITS and no session, the questions piped into stdin, in this process."""
    from tiny_pi.agent import main

    monkeypatch.setattr("sys.stdin", io.StringIO("".join(f"{question}\n" for question in questions)))
    return main(["--base-url", server.base_url, "--model", "loopback", "--root", str(root), *LIMITS, *args])


def contents(request):
    return [m.get("content") or "" for m in request[1]["messages"]]


QUESTIONS = ("First question?", "Second question?", "Third question?")
ANSWERED = ["I will read the README first.", README, "The project is called tiny-pi."]


# Lab 11.3: compaction before a prompt, in memory: python -m tiny_pi.agent --context-window N, over real HTTP.


def test_live_a_third_question_is_sent_with_a_summary_in_place_of_the_first(project, monkeypatch, capsys):
    summaries = []
    with serving(strict_server(summaries)) as server:
        assert conversation(server, project, monkeypatch, QUESTIONS) == 0

    assert "tools" not in summaries[0] and "First question?" in summaries[0]["messages"][1]["content"]
    third = next(r for r in server.requests if "tools" in r[1] and "Third question?" in contents(r))
    sent = contents(third)  # its first call: the prompt is the newest interaction, the second is kept
    assert sent[0].startswith(SUMMARY_INTRO) and "- summary 1" in sent[0]
    assert sent[1:] == ["Second question?", *ANSWERED, "Third question?"]
    found = re.search(r"\[compaction\] ~(\d+) -> ~(\d+) tokens: (\d+) messages summarised, (\d+) kept",
                      capsys.readouterr().err)
    before, after, summarised, kept = map(int, found.groups())
    assert before > 441 >= after
    assert (summarised, kept) == (4, 5)  # the first interaction; the second and the prompt


def test_live_the_newest_interaction_alone_over_budget_is_kept_whole_and_said(project, monkeypatch, capsys):
    long = "Please look again, " + "and again, " * 60 + "at the README?"
    with serving(strict_server([])) as server:
        assert conversation(server, project, monkeypatch, ["First?", long]) == 0

    err = capsys.readouterr().err
    notice = r"compaction: the newest interaction alone \(~\d+ tokens\) is over the budget; it is kept whole"
    assert len(re.findall(notice, err)) == 1  # once for this prompt, though its later call is over budget too
    last = contents(server.requests[-1])  # the long run's second call, after a compaction
    assert last[0].startswith(SUMMARY_INTRO) and last[1] == long and last[-1] == README


def test_live_a_summary_too_long_to_fit_is_said(project, monkeypatch, capsys):
    with serving(strict_server([], padding=" and more" * 200)) as server:
        assert conversation(server, project, monkeypatch, QUESTIONS) == 0

    err = capsys.readouterr().err
    assert re.search(r"compaction: the next model call sends ~\d+ tokens, over N - R = 441", err)


def test_live_a_failed_summary_call_before_a_prompt_ends_the_conversation(project, monkeypatch, capsys):
    with serving(strict_server([], fail_summary=True)) as server:
        assert conversation(server, project, monkeypatch, QUESTIONS) == 1

    assert "Third question?" not in [c for r in server.requests for c in contents(r)]
    failed = "compaction failed: the summary call failed: HTTP 500: the summariser is down; the session is unchanged"
    assert failed in capsys.readouterr().err


LIMITS_REFUSED = [
    (["--context-window", "0"], "--context-window must be at least 1, got 0"),
    (["--reserve-tokens", "-1"], "--reserve-tokens must be at least 0 and below --context-window, got -1"),
    (["--context-window", "100", "--reserve-tokens", "100"],
     "--reserve-tokens must be at least 0 and below --context-window, got 100"),
]


def test_live_nothing_older_to_summarise_means_no_messages_or_a_summary_alone():
    """A summary is a user message whose text starts with SUMMARY_INTRO: alone, it is not summarised again.

    Before: a learner's `not messages` passed every test of this lab and broke two labs later.
    """
    try:
        from tiny_pi.runtime import only_a_summary  # chapter 13 moves it into the runtime
    except ImportError:
        from tiny_pi.agent import only_a_summary

    earlier = summary_message("## Goal\nRead the README.")
    assert only_a_summary([]) and only_a_summary([earlier])
    assert not only_a_summary([user_message("What is this project called?")])
    assert not only_a_summary([earlier, user_message("And then?")])


def test_options_a_window_or_reserve_out_of_range_is_refused_with_one_line(project, capsys):
    from tiny_pi.agent import main

    argv = ["--base-url", "http://127.0.0.1:9/v1", "--model", "loopback", "--root", str(project)]
    for options, line in LIMITS_REFUSED:
        with pytest.raises(SystemExit) as stopped:
            main([*argv, *options, "Hi?"])
        assert stopped.value.code == 2
        assert capsys.readouterr().err.splitlines()[-1].endswith(f"error: {line}")


# Lab 11.4: the compaction in the session file: python -m tiny_pi.agent --session FILE --context-window N.


def test_live_a_resumed_run_starts_from_the_latest_compaction(tmp_path, project, capsys):
    path = tmp_path / "session.jsonl"
    summaries = []
    with serving(strict_server(summaries)) as server:
        for question in ("First?", "Second?", "Third?", "Fourth?"):
            assert agent(server, project, path, question) == 0
        assert len(summaries) == 2
        requests_before = len(server.requests)
        assert agent(server, project, path, "Fifth?", "--context-window", "100000") == 0

    sent = contents(server.requests[requests_before])
    assert sent[0].startswith(SUMMARY_INTRO) and "- summary 2" in sent[0]
    assert sent[1:3] == ["Third?", "I will read the README first."]
    entries = read_session(path).entries
    assert [e.type for e in entries].count("compaction") == 2
    messages = [text_of(e.message) for e in entries if isinstance(e, MessageEntry)]
    assert messages == [m for q in ("First?", "Second?", "Third?", "Fourth?", "Fifth?") for m in [q, *ANSWERED]]


def test_live_a_failed_summary_call_stops_with_nothing_lost(tmp_path, project, capsys):
    path = tmp_path / "session.jsonl"
    with serving(strict_server([], fail_summary=True)) as server:
        assert agent(server, project, path, "First?") == 0
        assert agent(server, project, path, "Second?") == 0
        before = path.read_bytes()
        assert agent(server, project, path, "Third?") == 1

    assert path.read_bytes() == before
    assert "Third?" not in [c for r in server.requests for c in contents(r)]
    assert "compaction failed: the summary call failed: HTTP 500: the summariser is down" in capsys.readouterr().err


def test_live_a_resumed_conversation_is_brought_within_the_limit_before_its_first_call(tmp_path, project, capsys):
    path = tmp_path / "session.jsonl"
    (project / "README.md").write_text(README + "One more line about the project.\n" * 300, encoding="utf-8")
    summaries = []
    with serving(strict_server(summaries)) as server:
        assert agent(server, project, path, "First?", "--context-window", "100000") == 0
        requests_before = len(server.requests)
        assert agent(server, project, path, "Short?", "--context-window", "3000", "--reserve-tokens", "500") == 0
        first = next(r for r in server.requests[requests_before:] if "tools" in r[1])
        requests_resumed = len(server.requests)
        assert agent(server, project, path, "Again?", "--context-window", "100000") == 0

    assert len(summaries) == 1 and "First?" in summaries[0]["messages"][1]["content"]
    sent = contents(first)  # the prompt is the newest interaction: all that came before it was summarised
    assert sent[0].startswith(SUMMARY_INTRO) and sent[1:] == ["Short?"]
    entries = read_session(path).entries
    compaction = next(e for e in entries if isinstance(e, CompactionEntry))
    short = next(e for e in entries if isinstance(e, MessageEntry) and text_of(e.message) == "Short?")
    assert compaction.first_kept_id == short.id
    assert entries.index(compaction) == entries.index(short) + 1  # only the prompt kept: its entry comes first
    resumed = contents(server.requests[requests_resumed])
    assert resumed[0].startswith(SUMMARY_INTRO) and resumed[1] == "Short?" and "First?" not in resumed
    assert capsys.readouterr().err.count("[compaction] ~") == 1


# Lab 11.5: compaction before every later model call of a run, between its tool round trips.


def test_live_a_run_over_budget_sends_the_summary_while_the_file_keeps_every_message(tmp_path, project, capsys):
    path = tmp_path / "session.jsonl"
    summaries, refused = [], []
    with serving(strict_server(summaries, refused=refused)) as server:
        statuses = [agent(server, project, path, q) for q in ("First question?", "Second question?", "Third question?")]

    assert refused == []  # a server refuses a tool result whose call was cut away
    assert statuses == [0, 0, 0]
    assert len(summaries) == 2  # before the third prompt, and again before its second call
    assert "First question?" in summaries[0]["messages"][1]["content"]
    third = next(r for r in server.requests if "tools" in r[1] and "Third question?" in contents(r))
    sent = contents(third)
    assert sent[0].startswith(SUMMARY_INTRO) and "- summary 1" in sent[0]
    assert "First question?" not in sent
    assert sent[1] == "Second question?"
    entries = read_session(path).entries
    assert [text_of(e.message) for e in entries if isinstance(e, MessageEntry) and e.message.role == "user"] == [
        "First question?", "Second question?", "Third question?",
    ]
    compaction = next(e for e in entries if isinstance(e, CompactionEntry))
    assert compaction.first_kept_id == next(e.id for e in entries if isinstance(e, MessageEntry)
                                            and text_of(e.message) == "Second question?")
    before, after = map(int, re.search(r"\[compaction\] ~(\d+) -> ~(\d+) tokens", capsys.readouterr().err).groups())
    assert before > 441 >= after  # the summary and the kept messages fit within N - R


def test_live_a_run_is_compacted_between_its_tool_round_trips(tmp_path, project, capsys):
    path = tmp_path / "session.jsonl"
    summaries, refused = [], []
    with serving(strict_server(summaries, refused=refused, reads={"Read it four times?": 4})) as server:
        assert agent(server, project, path, "First?") == 0
        assert agent(server, project, path, "Read it four times?") == 0

    assert refused == []
    assert ["tools" in r[1] for r in server.requests] == [True] * 4 + [False] + [True] * 3  # False: the summary
    assert "First?" in summaries[0]["messages"][1]["content"]
    sent = contents(server.requests[-1])
    assert sent[0].startswith(SUMMARY_INTRO)
    assert sent[1:] == ["Read it four times?", "I will read the README first.", *[README, "Once more."] * 3, README]
    entries = read_session(path).entries
    compaction = next(e for e in entries if isinstance(e, CompactionEntry))
    before = [e.message.role for e in entries[: entries.index(compaction)] if isinstance(e, MessageEntry)]
    assert before[-4:] == ["assistant", "toolResult", "assistant", "toolResult"]  # written mid-run
    assert compaction.first_kept_id == next(e.id for e in entries if isinstance(e, MessageEntry)
                                            and text_of(e.message) == "Read it four times?")
    err = capsys.readouterr().err  # the two later calls are over budget too, with nothing older left: said once
    assert err.count("[compaction] ~") == 1
    assert err.count("is over the budget; it is kept whole") == err.count("nothing older to summarise") == 1
    assert err.count("over N - R = 441") == 2  # but each call that goes out over the limit is said


def test_live_compaction_works_without_a_session(project, monkeypatch, capsys):
    from tiny_pi.agent import main

    summaries = []
    monkeypatch.setattr("sys.stdin", io.StringIO("First question?\nSecond question?\nThird question?\n"))
    with serving(strict_server(summaries)) as server:
        argv = ["--base-url", server.base_url, "--model", "loopback", "--root", str(project), *LIMITS]
        assert main(argv) == 0

    assert len(summaries) == 2
    third = next(r for r in server.requests if "tools" in r[1] and "Third question?" in contents(r))
    sent = contents(third)
    assert sent[0].startswith(SUMMARY_INTRO) and sent[1] == "Second question?"


def test_live_a_failed_summary_call_mid_run_sends_the_context_as_it_is(tmp_path, project, capsys):
    path = tmp_path / "session.jsonl"
    with serving(strict_server([], fail_summary=True, reads={"Read it four times?": 4})) as server:
        assert agent(server, project, path, "First?") == 0
        assert agent(server, project, path, "Read it four times?") == 0

    assert contents(server.requests[-1])[:2] == ["First?", "I will read the README first."]  # nothing summarised
    assert [e.type for e in read_session(path).entries].count("compaction") == 0
    err = capsys.readouterr().err  # the line says the call goes over the limit: no over-limit line besides
    failed = "compaction failed: the summary call failed: HTTP 500: the summariser is down; sending the context as it is"
    assert failed in err.splitlines()
    assert "over N - R" not in err


async def read_readme(arguments, *, signal):
    return [text(README)]


READ = ToolRegistry([Tool("read", "Read a file.", {"type": "object"}, read_readme)])  # no thread: the mock clock


class Hangs:
    """A model that reads the README once, then starts an answer and hangs without looking at its signal."""

    def __init__(self):
        self.model = ScriptedModel([round_trip("x")[1]])

    def stream(self, context, *, signal=None, tools=None):
        if self.model.cursor == 0:
            return self.model.stream(context, signal=signal)
        events = events_of(assistant_message([text("Let me think")]))

        async def produce(stream):
            for event in events[:-1]:  # start and text_delta; never the done
                stream.push(event)
            await trio.sleep_forever()

        return ModelCallStream(produce)


async def summary_in_place(seen, messages):
    """A seam that summarises the first interaction, changing the list it was given."""
    seen.append(len(messages))
    if text_of(messages[0]) == "First?":
        del messages[:4]
        messages.insert(0, summary_message("## Summary\n- the first question"))
    return messages


def test_seam_is_awaited_before_each_turn_with_a_copy_and_what_it_returns_is_sent():
    model = ScriptedModel([round_trip("x")[1], round_trip("x")[3]])  # a read call, then the answer
    context = AgentContext(messages=[*round_trip("First?"), user_message("Second?")])
    events, seen = [], []

    async def seam(messages):
        seen.append(events[-1].type)
        return await summary_in_place([], messages)

    outcome = trio.run(partial(run_agent, model, context, READ, on_event=events.append, before_model_call=seam))

    assert seen == ["agent_start", "turn_end"]  # before each turn starts: before its turn_start
    assert [text_of(r.messages[0]) for r in model.requests] == [text_of(summary_message("## Summary\n- the first question"))] * 2
    assert [m.role for m in context.messages] == ["user", "user", "assistant", "toolResult", "assistant"]
    assert outcome.messages == tuple(context.messages[2:])  # exactly the run's own, after a shorter past


def test_seam_a_cancelled_run_after_a_compaction_names_exactly_its_own_messages():
    outcomes, seen = [], []

    async def body():
        with trio.fail_after(TIME_LIMIT):
            async with trio.open_nursery() as nursery:
                agent = Agent(Hangs(), READ, nursery, messages=round_trip("First?"))
                agent.before_model_call = partial(summary_in_place, seen)

                def listener(event):
                    if event.type == "text_delta":
                        agent.abort()  # ignored: the run is cancelled after the grace
                    elif event.type == "agent_end":
                        outcomes.append(event.outcome)

                agent.subscribe(listener)
                agent.prompt("Second?")
                await agent.wait_for_idle()
                return agent.messages

    transcript = trio.run(body, clock=trio.testing.MockClock(autojump_threshold=0))

    assert seen == [5, 4]  # the first call summarised the first interaction
    assert outcomes[0].stop_reason == "aborted"
    assert [m.role for m in outcomes[0].messages] == ["assistant", "toolResult"]
    assert outcomes[0].messages == transcript[2:]
