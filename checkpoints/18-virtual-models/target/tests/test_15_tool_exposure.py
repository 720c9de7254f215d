"""Chapter 15: tool exposure and tool search.

Run alone with `python -m pytest tests/test_15_tool_exposure.py`. The labs
follow the lesson: the five exposures and the registry's two sets (15.1),
the scope check of the tool contract (15.2), the declared set in the
transcript as tool patches (15.3), and tool_search with `--defer` (15.4),
the last against the loopback server with `python -m tiny_pi.agent` as a
real subprocess.
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from loopback_server import STREAM_HEAD, LoopbackServer, chunk, send_chunk, sse, tool_call_chunks

from tiny_pi.abort import AbortSignal
from tiny_pi.agent_loop import run_agent
from tiny_pi.compaction import render_transcript
from tiny_pi.messages import AgentContext, ToolCall, assistant_message, text, text_of, user_message
from tiny_pi.providers.outbound import build_request_body
from tiny_pi.runtime import Runtime
from tiny_pi.scripted_model import ScriptedModel
from tiny_pi.session import open_session, tree_lines
from tiny_pi.session_log import MessageEntry, SessionError, read_session
from tiny_pi.tool_execution import execute_tool_call
from tiny_pi.tool_exposure import EXPOSURES, SCRIPT, activatable, is_declared, script_may_call
from tiny_pi.tool_patches import ToolsPatch, patch_between, replay, spec_of
from tiny_pi.tool_search import SEARCH_DESCRIPTION, bm25_scores, rank_tools, tokenize, tool_search_tool
from tiny_pi.tools import Tool, ToolRegistry

TIME_LIMIT = 5.0  # a guard against hangs, not a speed test: the machine may be busy
PROCESS_TIME_LIMIT = 30.0  # a subprocess imports httpx and trio first
PROJECT = Path(__file__).resolve().parent.parent
VALUE = {"type": "object", "properties": {"value": {"type": "string"}}}


def probe(name, exposure="direct", description=None, runs=None):
    """A tool that notes each run in `runs` (a list) and answers `NAME:VALUE`."""
    runs = runs if runs is not None else []

    async def execute(arguments, *, signal):
        runs.append(name)
        return [text(f"{name}:{arguments.get('value', '')}")]

    return Tool(name, description or f"the {name} tool", VALUE, execute, exposure=exposure)


def five(runs=None):
    """One tool of each exposure, in this order: read, search, script_only, issues, secret."""
    return ToolRegistry([
        probe("read", runs=runs),
        probe("search", "model-only", runs=runs),
        probe("script_only", "codemode", runs=runs),
        probe("issues", "deferred", runs=runs),
        probe("secret", "hidden", runs=runs),
    ])


def names(tools):
    return [tool.name for tool in tools]


def call(name, arguments=None, call_id="c1", raw=None):
    return ToolCall(id=call_id, name=name, arguments={} if arguments is None and raw is None else arguments,
                    raw_arguments=raw)


def execute(tool_call, registry, **kwargs):
    async def main():
        with trio.fail_after(TIME_LIMIT):
            return await execute_tool_call(tool_call, registry, signal=AbortSignal(), **kwargs)

    return trio.run(main)


class Recording:
    """A ScriptedModel that also keeps the `tools` of each request, as specs."""

    def __init__(self, turns):
        self.scripted = ScriptedModel(turns)
        self.tools = []

    @property
    def requests(self):
        return self.scripted.requests

    def stream(self, context, *, signal=None, tools=None):
        self.tools.append([spec_of(tool) for tool in tools or []])
        return self.scripted.stream(context, signal=signal, tools=tools)


def play(model, registry, prompt="go"):
    context = AgentContext([user_message(prompt)])

    async def main():
        with trio.fail_after(TIME_LIMIT):
            return await run_agent(model, context, registry)

    return trio.run(main), context


def roles(messages):
    return [message.role for message in messages]


def activator(registry, runs=None):
    """A model-only tool that activates the tool its `value` names, as tool_search would."""
    runs = runs if runs is not None else []

    async def execute(arguments, *, signal):
        runs.append("activate")
        return [text(f"activated {registry.activate([arguments['value']])}")]

    return Tool("activate", "activate a tool", VALUE, execute, exposure="model-only")


# Lab 15.1: five exposures, and the registry's two sets.


@pytest.mark.parametrize("exposure, inactive, active, script", [
    ("direct", True, True, True),
    ("model-only", True, True, False),
    ("codemode", False, True, True),
    ("deferred", False, True, True),
    ("hidden", False, False, False),
])
def test_exposure_table_who_is_shown_a_tool_and_who_may_call_it(exposure, inactive, active, script):
    assert exposure in EXPOSURES
    assert (is_declared(exposure, False), is_declared(exposure, True), script_may_call(exposure)) == (
        inactive, active, script)
    assert activatable(exposure) == (exposure in ("codemode", "deferred"))


def test_exposure_declared_and_callable_are_two_sets_in_registration_order():
    registry = five()

    assert names(registry.declared()) == ["read", "search"]
    assert names(registry.specs()) == ["read", "search"]
    assert names(registry.callable()) == ["read", "script_only", "issues"]
    assert [registry.exposure_of(name) for name in ("read", "secret", "missing")] == ["direct", "hidden", None]
    assert registry.uses_exposure is True


def test_exposure_a_registry_of_direct_tools_declares_and_lets_call_everything():
    registry = ToolRegistry([probe("read"), probe("write")])

    assert registry.uses_exposure is False
    assert names(registry.declared()) == names(registry.callable()) == names(registry.specs()) == ["read", "write"]
    assert Tool("ls", "list", VALUE, probe("ls").execute).exposure == "direct"


def test_exposure_activate_declares_only_codemode_and_deferred_tools_in_registration_order():
    registry = five()

    assert registry.activate(["issues", "secret", "missing", "read", "search", "script_only"]) == [
        "script_only", "issues"]
    assert registry.activate(["issues"]) == []
    assert (registry.is_active("issues"), registry.is_active("secret")) == (True, False)
    assert names(registry.declared()) == ["read", "search", "script_only", "issues"]
    assert names(registry.callable()) == ["read", "script_only", "issues"]


def test_exposure_an_unknown_exposure_is_refused_and_register_adds_after_the_others():
    with pytest.raises(ValueError, match="an exposure is one of direct, model-only, codemode, deferred, hidden, "
                                         "got 'public'"):
        probe("read", "public")
    registry = ToolRegistry([probe("read")])
    registry.register(probe("later", "deferred"))
    assert registry.names == ["read", "later"]
    with pytest.raises(ValueError, match="two tools are named 'read'"):
        registry.register(probe("read"))


# Lab 15.2: the scope check, between the unknown tool and the arguments.


def test_scope_the_model_may_not_call_a_deferred_tool_before_it_is_declared():
    runs = []
    registry = five(runs)

    result = execute(call("issues", {"value": "x"}, "c7"), registry)

    assert (result.tool_call_id, result.tool_name, result.is_error) == ("c7", "issues", True)
    assert text_of(result) == "Tool 'issues' was not run: the request that called it did not declare it"
    assert runs == []
    registry.activate(["issues"])
    assert text_of(execute(call("issues", {"value": "x"}), registry)) == "issues:x"


def test_scope_a_script_may_call_codemode_and_deferred_tools_but_not_a_model_only_one():
    runs = []
    registry = five(runs)

    assert text_of(execute(call("script_only", {"value": "a"}), registry, scope=SCRIPT)) == "script_only:a"
    assert text_of(execute(call("issues", {"value": "b"}), registry, scope=SCRIPT)) == "issues:b"
    refused = execute(call("search", {"value": "c"}), registry, scope=SCRIPT)
    assert refused.is_error and text_of(refused) == "Tool 'search' was not run: a script may not call it"
    assert runs == ["script_only", "issues"]


def test_scope_a_hidden_tool_never_runs_for_either_caller():
    runs = []
    registry = five(runs)

    for scope in ("model", "script"):
        result = execute(call("secret"), registry, scope=scope)
        assert result.is_error and text_of(result).startswith("Tool 'secret' was not run: ")
    assert runs == []


def test_scope_is_checked_before_the_arguments_are_looked_at():
    registry = five()

    garbled = execute(call("issues", raw='{"value": '), registry)
    misfit = execute(call("issues", {"value": 3}), registry)

    assert text_of(garbled) == text_of(misfit) == (
        "Tool 'issues' was not run: the request that called it did not declare it")


def test_scope_an_unknown_tool_lists_only_what_its_caller_may_call():
    registry = five()

    by_model = execute(call("nope"), registry)
    by_script = execute(call("nope"), registry, scope=SCRIPT)

    assert text_of(by_model) == "Tool 'nope' not found (available tools: read, search)"
    assert text_of(by_script) == "Tool 'nope' not found (available tools: read, script_only, issues)"
    with pytest.raises(ValueError, match="a scope is one of model, script, got 'user'"):
        execute(call("read"), registry, scope="user")


def test_scope_a_call_is_checked_against_the_declared_set_of_its_request():
    runs = []
    registry = five(runs)
    registry.activate(["issues"])  # after the request that declared only read and search

    refused = execute(call("issues"), registry, declared=["read", "search"])

    assert text_of(refused) == "Tool 'issues' was not run: the request that called it did not declare it"
    assert runs == []


@pytest.mark.parametrize("order", ["call-first", "activate-first"])
def test_scope_in_the_loop_a_call_activated_in_its_own_turn_is_refused_in_either_order(order):
    runs = []
    registry = ToolRegistry([probe("read", runs=runs), probe("issues", "deferred", runs=runs)])
    registry.register(activator(registry, runs))
    calls = [call("issues", {"value": "early"}, "c1"), call("activate", {"value": "issues"}, "c2")]
    if order == "activate-first":
        calls.reverse()
    model = Recording([
        assistant_message(calls, "toolUse"),
        assistant_message([call("issues", {"value": "late"}, "c3")], "toolUse"),
        assistant_message([text("done")]),
    ])

    outcome, context = play(model, registry)

    results = {m.tool_call_id: m for m in context.messages if m.role == "toolResult"}
    assert outcome.stop_reason == "stop"
    assert text_of(results["c1"]) == "Tool 'issues' was not run: the request that called it did not declare it"
    assert text_of(results["c3"]) == "issues:late"
    assert runs == ["activate", "issues"]
    assert [sorted(spec["name"] for spec in tools) for tools in model.tools] == [
        ["activate", "read"], ["activate", "issues", "read"], ["activate", "issues", "read"]]


# Lab 15.3: the declared set in the transcript.


ALPHA = {"name": "alpha", "description": "a", "parameters": {"type": "object"}}
BETA = {"name": "beta", "description": "b", "parameters": {"type": "object"}}
BETA_2 = {"name": "beta", "description": "b, second version", "parameters": {"type": "object"}}
GAMMA = {"name": "gamma", "description": "g", "parameters": {"type": "object"}}


def test_patch_replay_applies_each_patch_in_order_removals_before_additions():
    messages = [
        ToolsPatch(tools_added=(ALPHA, BETA)),
        user_message("hi"),
        ToolsPatch(tools_added=(GAMMA,), tools_removed=({"name": "alpha"},)),
        assistant_message([text("ok")]),
        ToolsPatch(tools_added=(BETA_2,), tools_removed=({"name": "beta"},)),
    ]

    assert replay(messages) == [GAMMA, BETA_2]
    assert replay(messages[:1]) == [ALPHA, BETA]
    assert replay([user_message("no patch")]) == []


def test_patch_between_two_sets_is_none_when_they_are_equal_and_a_changed_spec_goes_and_comes_back():
    reordered = {"parameters": {"type": "object"}, "description": "a", "name": "alpha"}

    assert patch_between([ALPHA, BETA], [reordered, BETA]) is None
    assert patch_between([], []) is None
    assert patch_between([ALPHA, BETA], [BETA_2, GAMMA]) == ToolsPatch(
        tools_added=(BETA_2, GAMMA), tools_removed=({"name": "alpha"}, {"name": "beta"}))
    assert patch_between([], [ALPHA]) == ToolsPatch(tools_added=(ALPHA,))
    assert patch_between([ALPHA], []) == ToolsPatch(tools_removed=({"name": "alpha"},))


def test_patch_a_registry_without_exposure_writes_none_and_the_transcript_is_chapter_07s():
    model = Recording([assistant_message([call("echo", {"value": "a"})], "toolUse"), assistant_message([text("done")])])

    outcome, context = play(model, ToolRegistry([probe("echo")]))

    assert roles(context.messages) == ["user", "assistant", "toolResult", "assistant"]
    assert [[spec["name"] for spec in tools] for tools in model.tools] == [["echo"], ["echo"]]


def test_patch_with_exposure_one_patch_precedes_the_first_request_and_none_while_the_set_is_the_same():
    registry = ToolRegistry([probe("echo"), probe("issues", "deferred"), probe("secret", "hidden")])
    model = Recording([assistant_message([call("echo", {"value": "a"})], "toolUse"), assistant_message([text("done")])])

    outcome, context = play(model, registry)

    assert roles(context.messages) == ["user", "system", "assistant", "toolResult", "assistant"]
    assert context.messages[1] == ToolsPatch(tools_added=(spec_of(registry.get("echo")),))
    for request, tools in zip(model.requests, model.tools):
        assert replay(request.messages) == tools == [spec_of(registry.get("echo"))]


def test_patch_an_activation_adds_one_patch_before_the_next_request_and_replay_gives_every_request_exactly():
    registry = ToolRegistry([probe("read"), probe("issues", "deferred")])
    registry.register(activator(registry))
    model = Recording([
        assistant_message([call("activate", {"value": "issues"})], "toolUse"),
        assistant_message([call("issues", {"value": "x"}, "c2")], "toolUse"),
        assistant_message([text("done")]),
    ])

    outcome, context = play(model, registry)

    patches = [message for message in context.messages if isinstance(message, ToolsPatch)]
    assert roles(context.messages) == [
        "user", "system", "assistant", "toolResult", "system", "assistant", "toolResult", "assistant"]
    assert [spec["name"] for spec in patches[1].tools_added] == ["issues"] and patches[1].tools_removed is None
    for request, tools in zip(model.requests, model.tools):
        assert replay(request.messages) == tools  # the same specs, in the same order
    assert [spec["name"] for spec in model.tools[-1]] == ["read", "activate", "issues"]


def test_patch_is_never_sent_as_a_message_its_tools_go_as_the_requests_tools():
    tool = probe("echo")
    context = AgentContext([user_message("go"), ToolsPatch(tools_added=(spec_of(tool),))])

    body = build_request_body("m", context, [tool])

    assert [message["role"] for message in body["messages"]] == ["user"]
    assert [entry["function"]["name"] for entry in body["tools"]] == ["echo"]


def test_patch_is_left_out_of_what_a_summary_call_reads():
    messages = [user_message("go"), ToolsPatch(tools_added=(ALPHA,)), assistant_message([text("done")])]

    assert render_transcript(messages) == "[user]\ngo\n\n[assistant]\ndone"


def session_file(tmp_path, patch):
    path = tmp_path / "session.jsonl"
    lines = [
        {"type": "session", "version": 1, "id": "s15", "timestamp": 1},
        {"type": "message", "id": "a1", "parent_id": None, "message": {"role": "user", "content": [
            {"type": "text", "text": "go"}], "timestamp": 1}},
        {"type": "message", "id": "a2", "parent_id": "a1", "message": patch},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_patch_the_strict_reader_takes_a_patch_in_its_exact_shape(tmp_path):
    patch = {"role": "system", "toolsAdded": [ALPHA], "toolsRemoved": [{"name": "beta"}]}

    entry = read_session(session_file(tmp_path, patch)).entries[-1]

    assert isinstance(entry, MessageEntry)
    assert entry.message == ToolsPatch(tools_added=(ALPHA,), tools_removed=({"name": "beta"},))


@pytest.mark.parametrize("patch, says", [
    ({"role": "system"}, "a system message carries toolsAdded or toolsRemoved"),
    ({"role": "system", "toolsAdded": []}, "toolsAdded is a non-empty list, got []"),
    ({"role": "system", "toolsRemoved": []}, "toolsRemoved is a non-empty list, got []"),
    ({"role": "system", "toolsAdded": [{**ALPHA, "extra": 1}]},
     "toolsAdded[0] is an object with exactly the keys name, description, parameters"),
    ({"role": "system", "toolsAdded": [{**ALPHA, "parameters": "no"}]},
     "toolsAdded[0].parameters is a JSON Schema with type 'object', got 'no'"),
    ({"role": "system", "toolsAdded": [{**ALPHA, "name": ""}]}, "toolsAdded[0].name is a tool name, got ''"),
    ({"role": "system", "toolsRemoved": [{"name": "alpha", "description": "x"}]},
     "toolsRemoved[0] is an object with exactly the keys name"),
    ({"role": "system", "toolsAdded": [ALPHA], "content": []},
     "a system message has only toolsAdded and toolsRemoved, got the key 'content'"),
], ids=["neither", "empty-added", "empty-removed", "extra-key", "parameters", "name", "removal", "content"])
def test_patch_the_strict_reader_refuses_any_other_shape_with_its_line(tmp_path, patch, says):
    path = session_file(tmp_path, patch)

    with pytest.raises(SessionError) as refused:
        read_session(path)

    assert refused.value.line == 3
    assert str(refused.value).startswith(f"{path}:3: tool patch refused: {says}")


def run_runtime(session, registry, model, prompt="go"):
    async def main():
        async with trio.open_nursery() as nursery:
            runtime = Runtime(model, registry, nursery, session=session)
            with trio.fail_after(TIME_LIMIT):
                runtime.prompt(prompt)
                await runtime.dispose()
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_patch_a_session_keeps_every_patch_and_its_tree_shows_them(tmp_path):
    path = tmp_path / "s.jsonl"
    registry = ToolRegistry([probe("read"), probe("issues", "deferred")])
    registry.register(activator(registry))
    model = Recording([assistant_message([call("activate", {"value": "issues"})], "toolUse"),
                       assistant_message([text("done")])])

    run_runtime(open_session(path, None, "m"), registry, model)

    patches = [e.message for e in read_session(path).entries if isinstance(getattr(e, "message", None), ToolsPatch)]
    assert [[spec["name"] for spec in patch.tools_added] for patch in patches] == [["read", "activate"], ["issues"]]
    shown = [line.split(" ", 1)[1] for line in tree_lines(read_session(path)) if "system:" in line]
    assert shown == ["system: tools +read +activate", "system: tools +issues"]


# Lab 15.4: tool_search, and --defer.


def test_search_tokenize_splits_at_camel_case_and_punctuation_and_drops_stop_words():
    assert tokenize("Search the Jira issues for a repo") == ["search", "jira", "issue", "repo"]
    assert tokenize("listPullRequests of old_text") == ["list", "pull", "request", "old", "text"]
    assert tokenize("the and of") == []


def test_search_bm25_is_okapi_with_k1_1_2_and_b_0_75():
    documents = [["edit", "file", "file"], ["write", "file"], ["run", "command", "shell", "bash"]]

    scores = bm25_scores(["file", "edit"], documents)

    average = 3.0
    idf_file = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    idf_edit = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    first = idf_file * 2 * 2.2 / (2 + 1.2 * (0.25 + 0.75 * 3 / average)) + \
        idf_edit * 1 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 3 / average))
    second = idf_file * 1 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 2 / average))
    assert scores == pytest.approx([first, second, 0.0])


def test_search_ranks_by_overlap_then_bm25_then_registration_order():
    tools = [
        probe("mcp_github_pulls", "deferred", "List pull requests of a GitHub repository"),
        probe("mcp_github_issues", "deferred", "List issues of a GitHub repository"),
        probe("jira_y", "deferred", "Search Jira issues"),
        probe("weather", "deferred", "Current weather of a city"),
        probe("jira_x", "deferred", "Search Jira issues"),
    ]

    ranked = rank_tools("github issues", tools, 8)

    assert [(match.name, match.overlap) for match in ranked] == [
        ("mcp_github_issues", 2), ("mcp_github_pulls", 1), ("jira_y", 1), ("jira_x", 1)]
    assert ranked[1].score > ranked[2].score == ranked[3].score  # a tie keeps registration order
    assert [match.name for match in rank_tools("github issues", tools, 1)] == ["mcp_github_issues"]
    assert rank_tools("the and of", tools, 8) == []


def search_registry(runs=None):
    registry = ToolRegistry([
        probe("read", "direct", "Read a file", runs),
        probe("edit", "deferred", "Edit a file in place", runs),
        probe("shell", "codemode", "Run a shell command", runs),
        probe("secret", "hidden", "Edit secret files", runs),
    ])
    registry.register(tool_search_tool(registry))
    return registry


def test_search_activates_the_hits_and_says_which_from_the_next_request_on():
    registry = search_registry()

    first = execute(call("tool_search", {"query": "edit a file"}), registry)
    again = execute(call("tool_search", {"query": "edit a file"}), registry)

    assert text_of(first) == "Declared 1 tool; call them from your next request:\n- edit: Edit a file in place"
    assert names(registry.declared()) == ["read", "edit", "tool_search"]
    assert text_of(again) == "No tool that is not declared yet matches 'edit a file'."
    shell = execute(call("tool_search", {"query": "run shell file", "limit": 1}), registry)
    assert text_of(shell).splitlines() == ["Declared 1 tool; call them from your next request:",
                                           "- shell: Run a shell command"]


def test_search_is_model_only_and_its_description_never_names_the_searchable_tools():
    registry = search_registry()
    search = registry.get("tool_search")

    assert search.exposure == "model-only" and search.description == SEARCH_DESCRIPTION
    assert not {"edit", "shell", "secret"} & set(tokenize(search.description))
    assert text_of(execute(call("tool_search", {"query": "edit"}), registry, scope=SCRIPT)) == (
        "Tool 'tool_search' was not run: a script may not call it")


def test_search_an_empty_query_or_a_limit_below_one_is_an_error_result():
    registry = search_registry()

    empty = execute(call("tool_search", {"query": "  "}), registry)
    zero = execute(call("tool_search", {"query": "edit", "limit": 0}), registry)

    assert text_of(empty) == "Tool 'tool_search' failed: ValueError: the query is empty: say what the tool should do"
    assert text_of(zero) == "Tool 'tool_search' failed: ValueError: limit is a whole number of 1 or more, got 0"
    assert names(registry.declared()) == ["read", "tool_search"]


def test_search_an_activation_survives_a_session_reopen(tmp_path):
    path = tmp_path / "s.jsonl"
    model = Recording([assistant_message([call("tool_search", {"query": "edit"})], "toolUse"),
                       assistant_message([text("found it")])])
    run_runtime(open_session(path, None, "m"), search_registry(), model)
    lines = path.read_text(encoding="utf-8").splitlines()

    session = open_session(path, None, "m")
    registry = search_registry()  # a new process: nothing activated in memory
    resumed = Recording([assistant_message([call("edit", {"value": "v"}, "c9")], "toolUse"),
                         assistant_message([text("edited")])])
    run_runtime(session, registry, resumed, "now edit")

    assert session.declared == ("read", "tool_search", "edit")
    assert [spec["name"] for spec in resumed.tools[0]] == ["read", "tool_search", "edit"]
    after = path.read_text(encoding="utf-8").splitlines()
    assert after[: len(lines)] == lines
    assert not any('"role": "system"' in line for line in after[len(lines):])  # nothing removed, nothing added
    messages = [entry.message for entry in read_session(path).entries if isinstance(entry, MessageEntry)]
    results = [message for message in messages if message.role == "toolResult"]
    assert text_of(results[-1]) == "edit:v"


def find_and_edit(state):
    """A loopback 'model': search for edit, then edit notes.txt with the tool it found, then stop."""

    async def reply(stream, body):
        tool_messages = [message for message in body["messages"] if message["role"] == "tool"]
        if not tool_messages:
            arguments = json.dumps({"query": "edit a file", "limit": 1})
            payloads = [*tool_call_chunks("call_1", "tool_search", arguments), chunk(finish_reason="tool_calls")]
        elif len(tool_messages) == 1:
            arguments = json.dumps({"path": "notes.txt", "old_text": "draft", "new_text": "final"})
            payloads = [*tool_call_chunks("call_2", "edit", arguments), chunk(finish_reason="tool_calls")]
        else:
            payloads = [chunk({"role": "assistant", "content": "Done."}), chunk(finish_reason="stop")]
        state.append([tool["function"]["name"] for tool in body.get("tools", [])])
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


def test_search_defer_live_the_model_finds_edit_and_uses_it_on_its_next_request(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.txt").write_text("a draft\n", encoding="utf-8")
    session = tmp_path / "s.jsonl"
    tools = []

    async def main():
        async with trio.open_nursery() as nursery:
            server = await LoopbackServer(find_and_edit(tools)).start(nursery)
            command = [sys.executable, "-m", "tiny_pi.agent", "--base-url", server.base_url, "--model", "loopback",
                       "--root", str(root), "--tools", "read,ls", "--defer", "write,edit,bash",
                       "--session", str(session), "Change draft to final in notes.txt."]
            with trio.fail_after(PROCESS_TIME_LIMIT):
                done = await trio.run_process(command, cwd=PROJECT, env=environment(), capture_stdout=True,
                                              capture_stderr=True, check=False)
            nursery.cancel_scope.cancel()
        return done

    done = trio.run(main)
    shown = subprocess.run([sys.executable, "-m", "tiny_pi.session", str(session)], cwd=PROJECT, env=environment(),
                           capture_output=True, text=True, timeout=PROCESS_TIME_LIMIT, check=False)

    assert done.returncode == 0, done.stderr.decode()
    assert tools == [["read", "ls", "tool_search"], ["read", "ls", "tool_search", "edit"],
                     ["read", "ls", "tool_search", "edit"]]
    assert (root / "notes.txt").read_text(encoding="utf-8") == "a final\n"
    patches = [line.split(" ", 1)[1] for line in shown.stdout.splitlines() if "system:" in line]
    assert patches == ["system: tools +read +ls +tool_search", "system: tools +edit"]


@pytest.mark.parametrize("defer, line", [
    ("edit,mv", "python -m tiny_pi.agent: --defer: unknown tool 'mv' (choose from read, ls, write, edit, bash)"),
    ("read,edit", "python -m tiny_pi.agent: --defer: read is in --tools too: a tool is either direct or deferred"),
], ids=["unknown", "also-direct"])
def test_search_defer_a_bad_name_is_one_line_and_exit_2(tmp_path, defer, line):
    done = subprocess.run([sys.executable, "-m", "tiny_pi.agent", "--base-url", "http://127.0.0.1:9/v1", "--model",
                           "m", "--root", str(tmp_path), "--defer", defer, "hi"], cwd=PROJECT, env=environment(),
                          capture_output=True, text=True, timeout=PROCESS_TIME_LIMIT, check=False)

    assert (done.returncode, done.stdout, done.stderr) == (2, "", line + "\n")
