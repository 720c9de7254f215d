"""Chapter 18: virtual models, routing and fallback.

Run alone with `python -m pytest tests/test_18_virtual_models.py`. The labs
follow the lesson: a catalog of physical and virtual models and one routing
step (18.1), the loop's prepare_request hook (18.2), the router and its
state on the session (18.3), fallback against real HTTP servers on
127.0.0.1 that fail in each way (18.4), and models.toml with the payoff, the
agent run as a subprocess (18.5).
"""

import json
import os
import sys
from functools import partial
from pathlib import Path

import attrs
import pytest
import trio
from loopback_server import STREAM_HEAD, LoopbackServer, chunk, send_chunk, sse

from tiny_pi.abort import AbortSignal
from tiny_pi.agent_loop import retry_decision, run_agent
from tiny_pi.compaction import summarise
from tiny_pi.fallback import FallbackModel, fallback_reason
from tiny_pi.messages import (
    AgentContext,
    ToolCall,
    ToolResultMessage,
    assistant_message,
    now_ms,
    text,
    text_of,
    user_message,
)
from tiny_pi.model_catalog import (
    CatalogError,
    ModelCatalog,
    ModelRequest,
    Route,
    RoutingError,
    latest_reply,
    request_reason,
    resolve_route,
)
from tiny_pi.model_config import ModelsConfigError, load_models
from tiny_pi.modes.json_mode import event_data
from tiny_pi.providers.openai_compatible import OpenAICompatibleModel
from tiny_pi.routing import DirectModel, Router
from tiny_pi.runtime import Runtime, RuntimeRefused
from tiny_pi.scripted_model import ScriptedModel
from tiny_pi.session import open_session, tree_lines
from tiny_pi.session_log import RouterStateEntry, SessionError, read_session
from tiny_pi.session_writer import SessionWriteError
from tiny_pi.tool_patches import ToolsPatch
from tiny_pi.tools import Tool, ToolRegistry

TIME_LIMIT = 20.0  # a guard against hangs, not a speed test
PROJECT = Path(__file__).resolve().parent.parent


def run(main, *args):
    async def guarded():
        with trio.fail_after(TIME_LIMIT):
            return await main(*args)

    return trio.run(guarded)


def reply(model, words="ok", stop="stop", calls=(), **fields):
    """A reply as the physical model `model` gives it: its replies carry its id."""
    return assistant_message([text(words), *calls], stop, model=model, provider="test", **fields)


def failed(model, why):
    return assistant_message([], "error", model=model, provider="test", error_message=why)


async def echo_execute(arguments, *, signal):
    return [text(arguments.get("value", ""))]


ECHO = Tool("echo", "Say the value back.", {"type": "object"}, echo_execute)
CALL = ToolCall(id="c1", name="echo", arguments={"value": "x"})


class Counting:
    """A virtual model that alternates fast and smart, and counts its routes in its state."""

    def __init__(self, id="auto", raises=None):
        self.id = id
        self.seen = []
        self.raises = raises

    def route(self, request):
        self.seen.append(request)
        if self.raises:
            raise self.raises
        count = (request.state or {}).get("count", 0) + 1
        return Route("fast" if count % 2 else "smart", {"count": count})


def two_models(fast_turns=(), smart_turns=()):
    catalog = ModelCatalog()
    fast = catalog.add_physical("fast", ScriptedModel(list(fast_turns)))
    smart = catalog.add_physical("smart", ScriptedModel(list(smart_turns)))
    return catalog, fast.model, smart.model


# Lab 18.1: the catalog, and one routing step ---------------------------------------------


def test_catalog_holds_physical_and_virtual_models_under_one_set_of_ids():
    catalog, fast, _ = two_models()
    auto = Counting()
    catalog.add_virtual(auto)

    assert catalog.physical("fast").model is fast and catalog.physical("fast").context_window is None
    assert catalog.physical("auto") is None  # a virtual model has nothing to stream
    assert catalog.virtual("auto") is auto and catalog.virtual("fast") is None
    assert "auto" in catalog and "fast" in catalog and "nope" not in catalog
    assert catalog.ids() == ["auto", "fast", "smart"]


@pytest.mark.parametrize("first, second, message", [
    ("physical", "virtual", "model id 'fast' is taken by a physical model"),
    ("virtual", "physical", "model id 'fast' is taken by a virtual model"),
    ("physical", "physical", "model id 'fast' is taken by a physical model"),
], ids=["virtual-after-physical", "physical-after-virtual", "physical-twice"])
def test_catalog_refuses_an_id_that_is_taken(first, second, message):
    catalog = ModelCatalog()
    add = {"physical": lambda: catalog.add_physical("fast", ScriptedModel([])),
           "virtual": lambda: catalog.add_virtual(Counting("fast"))}
    add[first]()
    with pytest.raises(CatalogError) as raised:
        add[second]()
    assert str(raised.value) == message


def test_catalog_refuses_an_empty_id():
    with pytest.raises(CatalogError, match="a model id is a non-empty string, got ' '"):
        ModelCatalog().add_physical(" ", ScriptedModel([]))


def test_catalog_latest_reply_skips_failed_and_aborted_replies():
    good = reply("fast", "ok")
    calling = reply("smart", "calling", "toolUse", [CALL])
    messages = [user_message("a"), good, user_message("b"), failed("smart", "boom"),
                assistant_message([], "aborted", model="smart", provider="test", error_message="stop")]

    assert latest_reply(messages) is good
    assert latest_reply([*messages, calling]) is calling  # a reply that asks for tools answered
    assert latest_reply([user_message("only")]) is None


def test_catalog_resolve_route_asks_the_virtual_model_once_and_returns_a_physical_one():
    catalog, fast, smart = two_models()
    auto = Counting()
    catalog.add_virtual(auto)
    good, bad = reply("fast", "ok"), failed("fast", "HTTP 429: slow down")
    messages = [user_message("hi"), good, user_message("more"), bad]

    target, route = resolve_route(catalog, "auto", reason="retry", messages=messages, tokens=42,
                                  failed=bad, state={"count": 1})

    assert target.model is smart and route == Route("smart", {"count": 2})
    assert len(auto.seen) == 1
    request = auto.seen[0]
    assert (request.model_id, request.reason, request.tokens, request.state) == ("auto", "retry", 42, {"count": 1})
    assert request.messages == tuple(messages) and request.previous is good and request.failed is bad


class RoutesTo:
    def __init__(self, id, target):
        self.id, self.target = id, target

    def route(self, request):
        return Route(self.target)


@pytest.mark.parametrize("selected, message", [
    ("loop", "virtual model 'loop' routed to 'auto', another virtual model: a route names a physical model"),
    ("ghost", "virtual model 'ghost' routed to 'nope', which is not in the catalog"),
    ("broken", "virtual model 'broken' could not route: RuntimeError: router exploded"),
    ("missing", "model 'missing' is not in the catalog"),
], ids=["to-a-virtual-model", "to-an-unknown-id", "router-raises", "not-registered"])
def test_catalog_a_route_that_names_no_physical_model_is_one_routing_error(selected, message):
    catalog, _, _ = two_models()
    for virtual in [Counting(), RoutesTo("loop", "auto"), RoutesTo("ghost", "nope"),
                    Counting("broken", raises=RuntimeError("router exploded"))]:
        catalog.add_virtual(virtual)

    with pytest.raises(RoutingError) as raised:
        resolve_route(catalog, selected, reason="user", messages=[user_message("hi")])
    assert str(raised.value) == message


# Lab 18.2: the loop asks before every request ----------------------------------------------


PATCH = ToolsPatch(tools_added=({"name": "echo", "description": "d", "parameters": {"type": "object"}},))


@pytest.mark.parametrize("messages, reason", [
    ([user_message("go")], "user"),
    ([user_message("go"), reply("fast", "calling", "toolUse", [CALL]),
      ToolResultMessage("c1", "echo", (text("x"),), False, 0)], "continuation"),
    ([user_message("go"), reply("fast", "calling", "toolUse", [CALL]),
      ToolResultMessage("c1", "echo", (text("x"),), False, 0), PATCH], "continuation"),
    ([user_message("go"), failed("fast", "HTTP 429: slow down")], "retry"),
    ([user_message("go"), failed("fast", "HTTP 429: slow down"), user_message("again")], "user"),
    ([user_message("go"), assistant_message([], "aborted", model="fast", provider="test", error_message="stop")],
     "retry"),
    ([PATCH], "user"),
], ids=["first", "after-tool-results", "after-a-patch", "after-a-failed-reply", "failed-then-user",
        "after-an-aborted-reply", "no-user-message-or-reply"])
def test_loop_request_reason_is_read_from_the_newest_user_message_or_reply(messages, reason):
    found, failed_reply = request_reason(messages)
    assert found == reason
    assert failed_reply is (messages[-1] if reason == "retry" else None)


def test_loop_awaits_the_hook_before_every_request_and_only_its_model_is_called():
    configured = ScriptedModel([reply("configured", "never")])
    fast = ScriptedModel([reply("fast", "calling", "toolUse", [CALL]), reply("fast", "done")])
    asked = []

    async def prepare_request(request, signal):
        asked.append((request.reason, len(request.context.messages), [tool.name for tool in request.tools]))
        return fast

    async def main():
        context = AgentContext([user_message("go")])
        return await run_agent(configured, context, ToolRegistry([ECHO]), prepare_request=prepare_request)

    outcome = run(main)
    assert outcome.stop_reason == "stop"
    assert asked == [("user", 1, ["echo"]), ("continuation", 3, ["echo"])]
    assert configured.requests == [] and len(fast.requests) == 2
    assert [m.model for m in outcome.messages if m.role == "assistant"] == ["fast", "fast"]


def test_loop_the_hook_comes_after_the_declaration_patch():
    hidden = attrs.evolve(ECHO, name="hidden", exposure="deferred")  # exposure in use: the first request has a patch
    seen = []

    async def prepare_request(request, signal):
        seen.append((request.reason, request.context.messages[-1], [tool.name for tool in request.tools]))
        return ScriptedModel([reply("fast")])

    async def main():
        await run_agent(ScriptedModel([]), AgentContext([user_message("go")]), ToolRegistry([ECHO, hidden]),
                        prepare_request=prepare_request)

    run(main)
    reason, last, names = seen[0]
    assert reason == "user" and isinstance(last, ToolsPatch) and names == ["echo"]


@pytest.mark.parametrize("error, message", [
    (RoutingError("virtual model 'auto' routed to 'nope', which is not in the catalog"),
     "virtual model 'auto' routed to 'nope', which is not in the catalog"),
    (KeyError("x"), "prepare_request raised KeyError: 'x'"),
], ids=["routing-error", "any-other-error"])
def test_loop_a_hook_that_raises_ends_the_turn_with_an_error_reply_and_calls_no_model(error, message):
    untouched = ScriptedModel([reply("fast", "never")])
    events = []

    async def prepare_request(request, signal):
        raise error

    async def main():
        context = AgentContext([user_message("go")])
        return await run_agent(untouched, context, ToolRegistry(), prepare_request=prepare_request,
                               on_event=events.append)

    before = now_ms()
    outcome = run(main)
    assert untouched.requests == []
    assert outcome.stop_reason == "error" and outcome.turns == 1 and outcome.error_message == message
    [unrouted] = outcome.messages
    assert (unrouted.role, unrouted.stop_reason, unrouted.content) == ("assistant", "error", ())
    assert (unrouted.provider, unrouted.model, unrouted.error_message) == ("unrouted", "unrouted", message)
    assert before <= unrouted.timestamp <= now_ms()  # the time the reply was made
    assert [e.type for e in events] == ["agent_start", "turn_start", "start", "error", "turn_end", "agent_end"]


def run_lines(prepare_request=None):
    """The events of one run as chapter 13's JSON lines."""
    events = []

    async def main():
        context = AgentContext([user_message("Hi")])
        await run_agent(ScriptedModel([reply("fast", "Hello.")]), context, ToolRegistry(),
                        on_event=events.append, prepare_request=prepare_request)

    run(main)
    return [json.dumps(event_data(event)) for event in events], [event.type for event in events]


def test_loop_without_a_hook_the_events_are_chapter_09s_byte_for_byte():
    async def same_model(request, signal):
        return ScriptedModel([reply("fast", "Hello.")])

    lines, types = run_lines()
    assert types == ["agent_start", "turn_start", "start", "text_delta", "done", "turn_end", "agent_end"]
    assert run_lines(same_model)[0] == lines  # a hook adds no event, and changes none


def test_loop_the_hook_sees_this_request_and_its_signal_and_changes_no_message():
    signal = AbortSignal()
    seen = []
    messages = [user_message("go")]

    async def prepare_request(request, given):
        seen.append((given, list(request.context.messages), request.failed))
        return ScriptedModel([reply("smart")])

    async def main():
        return await run_agent(ScriptedModel([]), AgentContext(list(messages)), ToolRegistry(), signal=signal,
                               prepare_request=prepare_request)

    outcome = run(main)
    assert seen == [(signal, messages, None)]
    assert [m.model for m in outcome.messages] == ["smart"]


# Lab 18.3: the router, and its state on the session -----------------------------------------


def request_for(*messages, reason="user", failed=None):
    return ModelRequest(AgentContext(list(messages)), (), reason, failed)


def test_router_a_physical_selection_is_sent_as_it_is_and_no_router_is_asked():
    catalog, fast, _ = two_models()
    auto = Counting()
    catalog.add_virtual(auto)
    router = Router(catalog, "fast")

    model = run(router.prepare_request, request_for(user_message("a")), AbortSignal())
    assert model is fast and auto.seen == [] and router.unsaved == []


def test_router_state_is_handed_to_the_next_route_and_noted_only_when_it_changes():
    catalog, fast, smart = two_models()
    states = []

    class Capped:
        id = "auto"

        def route(self, request):
            states.append(request.state)
            turns = (request.state or {}).get("turns", 0)
            return Route("smart" if turns else "fast", {"turns": 1})

    catalog.add_virtual(Capped())
    router = Router(catalog, "auto")

    first = run(router.prepare_request, request_for(user_message("a")), AbortSignal())
    second = run(router.prepare_request, request_for(user_message("a"), reply("fast"), user_message("b")), AbortSignal())

    assert (first, second) == (fast, smart)
    assert states == [None, {"turns": 1}]
    assert router.take_unsaved() == [("auto", {"turns": 1})]  # the same state again: nothing new to save
    assert router.take_unsaved() == []


@pytest.mark.parametrize("state, message", [
    ({"seen": {1, 2}}, "virtual model 'auto' returned a state JSON cannot hold: Object of type set is not JSON serializable"),
    ({"score": float("nan")}, "virtual model 'auto' returned a state JSON cannot hold: Out of range float values"),
    ([1, 2], "virtual model 'auto' returned a state that is not a JSON object: [1, 2]"),
], ids=["a-set", "nan", "not-an-object"])
def test_router_a_state_json_cannot_hold_is_a_routing_error_and_nothing_is_kept(state, message):
    catalog, _, _ = two_models()

    class Odd:
        id = "auto"

        def route(self, request):
            return Route("fast", state)

    catalog.add_virtual(Odd())
    router = Router(catalog, "auto")
    with pytest.raises(RoutingError) as raised:
        run(router.prepare_request, request_for(user_message("a")), AbortSignal())
    assert str(raised.value).startswith(message)  # json's own words follow the colon
    assert router.states == {} and router.unsaved == []


def test_router_direct_calls_read_and_write_no_state():
    catalog, fast, _ = two_models(fast_turns=[reply("fast", "summarised")])
    auto = Counting()
    catalog.add_virtual(auto)
    router = Router(catalog, "auto", {"auto": {"count": 1}})

    assert router.route_direct([user_message("summary")]).id == "fast"  # no state: the first hop
    summary = run(summarise, DirectModel(router), [user_message("a"), reply("fast", "b")])

    assert [request.reason for request in auto.seen] == ["direct", "direct"]
    assert [request.state for request in auto.seen] == [None, None]
    assert router.states == {"auto": {"count": 1}} and router.unsaved == []
    assert "summarised" in summary and len(fast.requests) == 1  # the summary call reached a physical model


def test_router_direct_calls_with_a_physical_selection_ask_no_router():
    catalog, _, smart = two_models()
    auto = Counting()
    catalog.add_virtual(auto)
    router = Router(catalog, "smart", {"auto": {"count": 1}})

    assert router.route_direct([user_message("summary")]) is catalog.physical("smart")
    assert auto.seen == [] and router.unsaved == []


def routed_runtime(path, catalog, prompts, branch=None):
    """A Runtime on session `path`, routing with `catalog` from the selection "auto"; the outcomes."""
    outcomes = []

    async def main():
        session = open_session(path, branch, "auto")
        router = Router(catalog, "auto", session.router_states)
        async with trio.open_nursery() as nursery:
            runtime = Runtime(ScriptedModel([]), ToolRegistry(), nursery, session=session, router=router)
            for prompt in prompts:
                runtime.prompt(prompt)
                await runtime.flush()
                outcomes.append(runtime.last_outcome)
            await runtime.dispose()

    run(main)
    return outcomes


def described(path):
    entries = read_session(path).entries
    shown = []
    for entry in entries:
        if entry.type == "router_state":
            shown.append(f"router_state:{json.dumps(entry.state)}")
        elif entry.type == "message":
            shown.append(f"{entry.message.role}:{getattr(entry.message, 'model', '')}")
        else:
            shown.append(entry.type)
    return shown, entries


def test_router_through_the_runtime_state_follows_the_turns_messages_and_survives_a_reopen(tmp_path):
    path = tmp_path / "session.jsonl"
    catalog, _, _ = two_models([reply("fast", "one")], [reply("smart", "two")])
    catalog.add_virtual(Counting())
    routed_runtime(path, catalog, ["first", "second"])

    shown, entries = described(path)
    assert shown == ["model_change", "user:", "assistant:fast", 'router_state:{"count": 1}',
                     "user:", "assistant:smart", 'router_state:{"count": 2}']
    assert [entry.parent_id for entry in entries[1:]] == [entry.id for entry in entries[:-1]]

    catalog, _, _ = two_models([reply("fast", "three")])
    catalog.add_virtual(Counting())
    [third] = routed_runtime(path, catalog, ["third"])
    assert [m.model for m in third.messages if m.role == "assistant"] == ["fast"]  # count 2 restored: 3 is fast
    assert described(path)[0][-3:] == ["user:", "assistant:fast", 'router_state:{"count": 3}']


def test_router_state_is_restored_from_the_active_branch(tmp_path):
    path = tmp_path / "session.jsonl"
    catalog, _, _ = two_models([reply("fast", "one")], [reply("smart", "two")])
    catalog.add_virtual(Counting())
    routed_runtime(path, catalog, ["first", "second"])
    first_state = read_session(path).entries[3]  # router_state {"count": 1}, before the second prompt

    catalog, _, _ = two_models([], [reply("smart", "again")])
    catalog.add_virtual(Counting())
    [outcome] = routed_runtime(path, catalog, ["second, again"], branch=first_state.id)
    assert [m.model for m in outcome.messages if m.role == "assistant"] == ["smart"]  # count 1 on this branch: 2 next


def test_router_a_failed_route_writes_no_state_and_the_next_prompt_routes_again(tmp_path):
    path = tmp_path / "session.jsonl"
    catalog, fast, _ = two_models([reply("fast", "ok")])
    flaky = Counting(raises=RuntimeError("router exploded"))
    catalog.add_virtual(flaky)

    outcomes = []

    async def main():
        session = open_session(path, None, "auto")
        router = Router(catalog, "auto")
        async with trio.open_nursery() as nursery:
            runtime = Runtime(ScriptedModel([]), ToolRegistry(), nursery, session=session, router=router)
            runtime.prompt("first")
            await runtime.flush()
            outcomes.append(runtime.last_outcome)
            flaky.raises = None
            runtime.prompt("second")
            await runtime.flush()
            outcomes.append(runtime.last_outcome)
            await runtime.dispose()

    run(main)
    first, second = outcomes
    assert first.stop_reason == "error"
    assert first.error_message == "virtual model 'auto' could not route: RuntimeError: router exploded"
    assert second.stop_reason == "stop" and len(fast.requests) == 1
    shown, _ = described(path)
    assert shown == ["model_change", "user:", "assistant:unrouted", "user:", "assistant:fast",
                     'router_state:{"count": 1}']
    assert [request.reason for request in flaky.seen] == ["user", "user"]  # the new prompt is no retry


class Steps:
    """A virtual model that always names fast, and counts its routes in its state."""

    id = "auto"

    def route(self, request):
        return Route("fast", {"count": (request.state or {}).get("count", 0) + 1})


def runtime_with_writer(path, catalog, registry, change_writer):
    """One prompt through a Runtime whose session writer `change_writer` has altered; (outcome, runtime)."""
    found = []

    async def main():
        session = open_session(path, None, "auto")
        change_writer(session.writer)
        async with trio.open_nursery() as nursery:
            runtime = Runtime(ScriptedModel([]), registry, nursery, session=session, router=Router(catalog, "auto"))
            runtime.prompt("go")
            await runtime.flush()
            found.append((runtime.last_outcome, runtime))
            await runtime.dispose()

    run(main)
    return found[0]


def test_router_a_state_the_session_cannot_write_aborts_the_run_and_poisons_the_runtime(tmp_path):
    path = tmp_path / "session.jsonl"
    catalog, fast, _ = two_models([reply("fast", "calling", "toolUse", [CALL]), reply("fast", "never")])
    catalog.add_virtual(Steps())

    def refuse_states(writer):
        def append_router_state(model, state):
            raise SessionWriteError("disk full")
        writer.append_router_state = append_router_state

    outcome, runtime = runtime_with_writer(path, catalog, ToolRegistry([ECHO]), refuse_states)

    assert outcome.stop_reason == "aborted"  # the write at the second turn_start stopped the run
    assert runtime.failure == "disk full"
    with pytest.raises(RuntimeRefused, match="the session log failed, so the runtime takes no more prompts: disk full"):
        runtime.prompt("again")
    assert "router_state" not in [entry.type for entry in read_session(path).entries]


def test_router_without_a_session_the_states_are_taken_and_dropped():
    catalog, _, _ = two_models([reply("fast", "ok")])
    catalog.add_virtual(Steps())
    router = Router(catalog, "auto")

    async def main():
        async with trio.open_nursery() as nursery:
            runtime = Runtime(ScriptedModel([]), ToolRegistry(), nursery, router=router)
            runtime.prompt("go")
            await runtime.dispose()
        return runtime.last_outcome

    outcome = run(main)
    assert outcome.stop_reason == "stop"
    assert router.states == {"auto": {"count": 1}} and router.unsaved == []  # kept for routing, not for a file


def test_router_no_state_is_written_once_the_session_log_has_failed(tmp_path):
    path = tmp_path / "session.jsonl"
    catalog, _, _ = two_models([reply("fast", "ok")])
    catalog.add_virtual(Steps())
    states = []

    def fail_the_reply(writer):
        append_message = writer.append_message

        def failing(message):
            if message.role == "assistant":
                raise SessionWriteError("disk full")
            return append_message(message)

        def append_router_state(model, state):
            states.append((model, state))
        writer.append_message, writer.append_router_state = failing, append_router_state

    outcome, runtime = runtime_with_writer(path, catalog, ToolRegistry(), fail_the_reply)

    assert runtime.failure == "disk full"  # the recorder failed first, at agent_end
    assert states == []  # the route's state came after a failure: it is not written


def session_lines(*entries):
    header = {"type": "session", "version": 1, "id": "s1", "timestamp": 1}
    change = {"type": "model_change", "id": "a1", "parent_id": None, "model": "auto"}
    return "".join(json.dumps(line) + "\n" for line in [header, change, *entries])


def test_router_the_session_reader_takes_a_router_state_entry_in_its_exact_shape(tmp_path):
    path = tmp_path / "session.jsonl"
    entry = {"type": "router_state", "id": "b2", "parent_id": "a1", "model": "auto", "state": {"count": 1}}
    path.write_text(session_lines(entry), encoding="utf-8")

    [_, state] = read_session(path).entries
    assert state == RouterStateEntry("b2", "a1", 3, "auto", {"count": 1})
    assert open_session(path, None, "auto").router_states == {"auto": {"count": 1}}


@pytest.mark.parametrize("change, reason", [
    ({"state": [1, 2]}, "a router state is a JSON object, got [1, 2]"),
    ({"model": ""}, "a router state's model is a non-empty string, got ''"),
    ({"model": " "}, "a router state's model is a non-empty string, got ' '"),
    ({"note": "x"}, "unknown field 'note'"),
    ({"state": None}, "a router state is a JSON object, got None"),
], ids=["state-not-an-object", "empty-model", "blank-model", "unknown-field", "null-state"])
def test_router_the_session_reader_refuses_a_router_state_of_another_shape_by_its_line(tmp_path, change, reason):
    path = tmp_path / "session.jsonl"
    entry = {"type": "router_state", "id": "b2", "parent_id": "a1", "model": "auto", "state": {"count": 1}, **change}
    path.write_text(session_lines(entry), encoding="utf-8")
    with pytest.raises(SessionError) as raised:
        read_session(path)
    assert str(raised.value) == f"{path}:3: {reason}"


# Lab 18.4: fallback, against servers that fail -----------------------------------------------


@pytest.mark.parametrize("why, reason", [
    ("HTTP 429: Rate limit reached for requests", "rate limit"),
    ("HTTP 503: The server is overloaded", "server error"),
    ("HTTP 500: internal error", "server error"),
    ("HTTP 400: You have reached your usage limit for this plan", "usage limit"),
    ("HTTP 403: You exceeded your current quota", "usage limit"),
    ("HTTP 402: Usage Limit Reached", "usage limit"),
    ("transport error (RemoteProtocolError): peer closed connection", "connection dropped"),
    ("transport error (ConnectError): [Errno 111] Connection refused", "connection dropped"),
    ("HTTP 400: messages: field required", None),
    ("HTTP 401: Incorrect API key provided", None),
    ("the provider withheld the reply: finish_reason 'content_filter'", None),
], ids=["429", "503", "500", "usage-limit", "quota", "usage-limit-in-capitals", "dropped", "refused", "400", "401", "content-filter"])
def test_fallback_reason_says_which_failures_another_model_may_answer(why, reason):
    assert fallback_reason(failed("fast", why)) == reason


def test_fallback_reason_is_none_for_an_abort_or_an_answer():
    aborted = assistant_message([], "aborted", model="fast", provider="test", error_message="HTTP 429: late")
    assert fallback_reason(aborted) is None and fallback_reason(reply("fast")) is None


def fallback_catalog(windows=(None, None), say=None):
    catalog = ModelCatalog()
    for name, window in zip(["fast", "smart"], windows):
        catalog.add_physical(name, ScriptedModel([]), window)
    notices = [] if say is None else say
    catalog.add_virtual(FallbackModel("auto", ["fast", "smart"], catalog, say=notices.append))
    return catalog, notices


@pytest.mark.parametrize("reason, messages, failed_reply, chosen", [
    ("user", [user_message("a")], None, "fast"),
    ("continuation", [user_message("a"), reply("smart", "calling", "toolUse", [CALL])], None, "smart"),
    ("retry", [user_message("a"), failed("fast", "HTTP 429: x")], "fast", "smart"),
    ("retry", [user_message("a"), failed("other", "HTTP 429: x")], "other", "fast"),
    ("continuation", [user_message("a"), reply("other", "calling", "toolUse", [CALL])], None, "fast"),
    ("direct", [user_message("a"), reply("smart", "b")], None, "fast"),
], ids=["user-first", "continuation-stays", "retry-next", "retry-of-a-model-not-listed",
        "continuation-of-a-model-not-listed", "direct-first"])
def test_fallback_model_picks_first_the_same_or_the_next(reason, messages, failed_reply, chosen):
    catalog, _ = fallback_catalog()
    failed_message = messages[-1] if failed_reply else None
    target, _ = resolve_route(catalog, "auto", reason=reason, messages=messages, failed=failed_message)
    assert target.id == chosen


def test_fallback_retry_decision_goes_round_once_for_a_failure_another_model_may_answer():
    calling = reply("fast", "calling", "toolUse", [CALL])
    table = [  # (message, end, retried, turns_left) -> (end, retried)
        ((failed("fast", "HTTP 429: x"), "error", False, True), (None, True)),  # worth a retry
        ((failed("fast", "HTTP 429: x"), "error", True, True), ("error", False)),  # it was the retry
        ((failed("fast", "HTTP 429: x"), "error", False, False), ("error", False)),  # no turn left
        ((failed("fast", "HTTP 400: x"), "error", False, True), ("error", False)),  # any model would fail
        ((reply("fast"), "stop", False, True), ("stop", False)),  # an answer
        ((calling, None, True, True), (None, False)),  # tools after the retry: the next failure may go again
    ]
    assert [retry_decision(*given) for given, _ in table] == [decision for _, decision in table]


@pytest.mark.parametrize("window, chosen, notices", [
    (50, "fast", []),
    (49, "smart", ["fallback auto: skipping fast: its context window (49 tokens) is smaller than the context "
                   "(~50 tokens)"]),
], ids=["as-large-as-the-request", "one-token-short"])
def test_fallback_a_window_as_large_as_the_request_holds_it(window, chosen, notices):
    catalog, said = fallback_catalog(windows=(window, None))
    target, _ = resolve_route(catalog, "auto", reason="user", messages=[user_message("hi")], tokens=50)
    assert target.id == chosen and said == notices


def test_fallback_notices_come_in_the_order_the_models_are_tried():
    catalog = ModelCatalog()
    for name, window in [("fast", None), ("mid", 10), ("smart", None)]:
        catalog.add_physical(name, ScriptedModel([]), window)
    notices = []
    catalog.add_virtual(FallbackModel("auto", ["fast", "mid", "smart"], catalog, say=notices.append))
    messages = [user_message("a"), failed("fast", "HTTP 429: x")]

    target, _ = resolve_route(catalog, "auto", reason="retry", messages=messages, tokens=50, failed=messages[-1])
    assert target.id == "smart"
    assert notices == ["fallback auto: skipping mid: its context window (10 tokens) is smaller than the context "
                       "(~50 tokens)",
                       "fallback auto: fast failed (rate limit); retrying on smart"]


async def status_reply(stream, code, message):
    body = json.dumps({"error": {"message": message}}).encode()
    await stream.send_all(b"HTTP/1.1 %d Failed\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                          b"Connection: close\r\n\r\n%s" % (code, len(body), body))


async def dropped_reply(stream):
    await stream.send_all(STREAM_HEAD)
    await send_chunk(stream, sse(chunk({"role": "assistant", "content": "Hal"})))
    # no more chunks and no end of the body: the server goes away mid-reply


async def stream_reply(stream, words, finish="stop"):
    await stream.send_all(STREAM_HEAD)
    for payload in [chunk({"role": "assistant", "content": words}), chunk(finish_reason=finish)]:
        await send_chunk(stream, sse(payload))
    await send_chunk(stream, b"data: [DONE]\n\n")
    await stream.send_all(b"0\r\n\r\n")


FAILURES = {
    "429": lambda stream: status_reply(stream, 429, "Rate limit reached for requests"),
    "503": lambda stream: status_reply(stream, 503, "The server is overloaded"),
    "usage-limit": lambda stream: status_reply(stream, 400, "You have reached your usage limit for this plan"),
    "dropped": dropped_reply,
    "400": lambda stream: status_reply(stream, 400, "messages: field required"),
    "401": lambda stream: status_reply(stream, 401, "Incorrect API key provided"),
    "content-filter": lambda stream: stream_reply(stream, "I can", finish="content_filter"),
}


def against_servers(first, second, windows=(None, None), prompt="Hello"):
    """Run one prompt routed by a fallback over two loopback servers; (outcome, requests, notices, reasons)."""
    requests = {"fast": [], "smart": []}
    reasons = []
    notices = []

    def server(name, answer):
        async def reply(stream, body):
            requests[name].append(body)
            await answer(stream)
        return LoopbackServer(reply)

    async def main():
        async with trio.open_nursery() as nursery:
            fast = await server("fast", first).start(nursery)
            smart = await server("smart", second).start(nursery)
            catalog = ModelCatalog()
            catalog.add_physical("fast", OpenAICompatibleModel(fast.base_url, "fast"), windows[0])
            catalog.add_physical("smart", OpenAICompatibleModel(smart.base_url, "smart"), windows[1])
            catalog.add_virtual(FallbackModel("auto", ["fast", "smart"], catalog, say=notices.append))
            router = Router(catalog, "auto")

            async def prepare_request(request, signal):
                reasons.append(request.reason)
                return await router.prepare_request(request, signal)

            outcome = await run_agent(ScriptedModel([]), AgentContext([user_message(prompt)]), ToolRegistry(),
                                      prepare_request=prepare_request)
            nursery.cancel_scope.cancel()
            return outcome

    return run(main), requests, notices, reasons


def answers(words):
    return lambda stream: stream_reply(stream, words)


@pytest.mark.parametrize("kind", ["429", "503", "usage-limit", "dropped"])
def test_fallback_a_failure_another_model_may_answer_is_retried_once_on_the_next(kind):
    outcome, requests, notices, reasons = against_servers(FAILURES[kind], answers("Hello from smart."))

    assert outcome.stop_reason == "stop" and outcome.turns == 2
    assert [(m.model, m.stop_reason) for m in outcome.messages] == [("fast", "error"), ("smart", "stop")]
    assert text_of(outcome.messages[-1]) == "Hello from smart."
    assert reasons == ["user", "retry"]
    assert len(requests["fast"]) == 1 and len(requests["smart"]) == 1
    assert [m["role"] for m in requests["smart"][0]["messages"]] == ["user"]  # the failed reply is not replayed
    assert notices == [f"fallback auto: fast failed ({fallback_reason(outcome.messages[0])}); retrying on smart"]


@pytest.mark.parametrize("kind", ["400", "401", "content-filter"])
def test_fallback_a_failure_any_model_would_have_is_not_retried(kind):
    outcome, requests, notices, reasons = against_servers(FAILURES[kind], answers("never"))

    assert reasons == ["user"]
    assert outcome.stop_reason == "error" and outcome.turns == 1
    assert requests["smart"] == [] and notices == []


def test_fallback_retries_once_and_no_more():
    outcome, requests, notices, reasons = against_servers(FAILURES["429"], FAILURES["503"])

    assert reasons == ["user", "retry"]
    assert outcome.stop_reason == "error" and outcome.turns == 2
    assert outcome.error_message == "HTTP 503: The server is overloaded"
    assert len(requests["fast"]) == 1 and len(requests["smart"]) == 1


def test_fallback_skips_a_model_whose_context_window_is_smaller_than_the_context():
    prompt = "word " * 200  # 1000 characters: 250 tokens by chapter 11's estimate, and 1 for the empty tools list
    outcome, requests, notices, _ = against_servers(answers("never"), answers("Long read."), windows=(100, None),
                                                    prompt=prompt)

    assert outcome.stop_reason == "stop" and requests["fast"] == []
    assert [m.model for m in outcome.messages] == ["smart"]
    assert notices == ["fallback auto: skipping fast: its context window (100 tokens) is smaller than "
                       "the context (~251 tokens)"]


def test_fallback_a_retry_of_a_failure_with_no_reason_says_error():
    catalog, notices = fallback_catalog()
    aborted = assistant_message([], "aborted", model="fast", provider="test", error_message="stopped")
    target, _ = resolve_route(catalog, "auto", reason="retry", messages=[user_message("a"), aborted], failed=aborted)
    assert target.id == "smart"
    assert notices == ["fallback auto: fast failed (error); retrying on smart"]


def test_fallback_with_no_model_left_is_a_routing_error():
    catalog, notices = fallback_catalog(windows=(10, 10))
    with pytest.raises(RoutingError) as raised:
        resolve_route(catalog, "auto", reason="user", messages=[user_message("hi")], tokens=50)
    assert str(raised.value) == "fallback auto: no model of fast, smart is left for this request (~50 tokens)"
    assert len(notices) == 2


def test_fallback_with_no_model_after_the_failed_one_names_the_whole_list():
    catalog, notices = fallback_catalog()
    messages = [user_message("hi"), failed("smart", "HTTP 429: x")]
    with pytest.raises(RoutingError) as raised:
        resolve_route(catalog, "auto", reason="retry", messages=messages, tokens=50, failed=messages[-1])
    assert str(raised.value) == "fallback auto: no model of fast, smart is left for this request (~50 tokens)"
    assert notices == []  # no model was tried, so none was skipped


# Lab 18.5: models.toml, and the payoff -----------------------------------------------------------


def test_payoff_load_models_builds_the_catalog_from_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("SMALL_KEY", "sk-small")
    path = tmp_path / "models.toml"
    path.write_text('[models.auto]\nfallback = ["small", "large"]\n\n'
                    '[models.small]\nbase_url = "http://127.0.0.1:9/v1"\ncontext_window = 8192\n'
                    'api_key_env = "SMALL_KEY"\n\n'
                    '[models.large]\nbase_url = "http://127.0.0.1:10/v1"\n', encoding="utf-8")

    catalog = load_models(path)
    small = catalog.physical("small")
    assert catalog.ids() == ["auto", "large", "small"]
    assert (small.model.base_url, small.model.model, small.model.api_key, small.context_window) == (
        "http://127.0.0.1:9/v1", "small", "sk-small", 8192)
    assert catalog.physical("large").context_window is None
    assert catalog.virtual("auto").models == ("small", "large")


@pytest.mark.parametrize("text, line", [
    (None, "No such file or directory"),
    ("[models\n", "not TOML (Expected ']' at the end of a table declaration (at line 1, column 8))"),
    ("title = 'x'\n", "the file has no [models] table"),
    ("[models.a]\nbase_url = 'http://h/v1'\nfallback = ['a']\n",
     "model 'a': a model has exactly one of \"base_url\" (physical) and \"fallback\" (virtual)"),
    ("[models.a]\nbase_url = 'http://h/v1'\nurl = 'x'\n",
     "model 'a': unknown key 'url' (a physical model's keys are base_url, context_window, api_key_env)"),
    ("[models.a]\nbase_url = 'ftp://h'\n", "model 'a': \"base_url\" is an http:// or https:// URL, got 'ftp://h'"),
    ("[models.a]\nbase_url = 'http://h/v1'\ncontext_window = 0\n",
     "model 'a': \"context_window\" is a whole number above 0, got 0"),
    ("[models.a]\nbase_url = 'http://h/v1'\napi_key_env = 'NO_SUCH_KEY_18'\n",
     "model 'a': \"api_key_env\" names NO_SUCH_KEY_18, which is not set"),
    ("[models.auto]\nfallback = []\n", "model 'auto': \"fallback\" is a non-empty list of model ids, got []"),
    ("[models.auto]\nfallback = ['nope']\n",
     "model 'auto': \"fallback\" names 'nope', which is not a physical model of this file"),
    ("[models]\n", "the file has no [models] table"),
    ("[models]\na = 3\n", "model 'a': a model is a table of keys, got 3"),
    ("[models.a]\nbase_url = 'http://h/v1'\napi_key_env = 3\n",
     "model 'a': \"api_key_env\" is the name of an environment variable, got 3"),
    ("[models.a]\nbase_url = 'http://h/v1'\napi_key_env = 'EMPTY_KEY_18'\n",
     "model 'a': \"api_key_env\" names EMPTY_KEY_18, which is empty"),
    ("[models.a]\nbase_url = 'ftp://h'\nurl = 'x'\nfallback = ['a']\n",
     "model 'a': a model has exactly one of \"base_url\" (physical) and \"fallback\" (virtual)"),
    ("[models.a]\nbase_url = 'ftp://h'\nurl = 'x'\n",
     "model 'a': unknown key 'url' (a physical model's keys are base_url, context_window, api_key_env)"),
    ("[models.auto]\nfallback = ['nope']\n\n[models.b]\nbase_url = 'ftp://h'\n",
     "model 'b': \"base_url\" is an http:// or https:// URL, got 'ftp://h'"),
    ("[models.\" \"]\nbase_url = 'http://h/v1'\n", "a model id is a non-empty string, got ' '"),
], ids=["missing", "not-toml", "no-models", "both-kinds", "unknown-key", "bad-url", "bad-window", "unset-key",
        "empty-fallback", "unknown-fallback", "empty-models", "not-a-table", "key-variable-not-a-string",
        "empty-key", "kind-before-keys", "keys-before-values", "physical-models-before-fallbacks", "blank-id"])
def test_payoff_a_bad_models_file_is_one_line_that_says_where_and_why(tmp_path, monkeypatch, text, line):
    monkeypatch.setenv("EMPTY_KEY_18", "")
    path = tmp_path / "models.toml"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    with pytest.raises(ModelsConfigError) as raised:
        load_models(path)
    assert str(raised.value).startswith(f"--models {path}: ") and str(raised.value).endswith(line)
    assert "\n" not in str(raised.value)


def environment():
    env = {key: value for key, value in os.environ.items() if "proxy" not in key.lower()}
    env.pop("TINY_PI_API_KEY", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def agent(tmp_path, models, stdin, small, large):
    """Run python -m tiny_pi.agent --models against two loopback servers; the run, and each server's requests."""
    root = tmp_path / "project"
    root.mkdir(exist_ok=True)
    config = tmp_path / "models.toml"
    session = tmp_path / "session.jsonl"
    requests = {"small": [], "large": []}

    def server(name, answer):
        async def reply(stream, body):
            requests[name].append(body)
            await answer(stream, len(requests[name]))
        return LoopbackServer(reply)

    async def main():
        async with trio.open_nursery() as nursery:
            small_server = await server("small", small).start(nursery)
            large_server = await server("large", large).start(nursery)
            config.write_text(models.format(small=small_server.base_url, large=large_server.base_url), encoding="utf-8")
            command = [sys.executable, "-m", "tiny_pi.agent", "--models", str(config), "--model", "auto",
                       "--root", str(root), "--session", str(session)]
            done = await trio.run_process(command, cwd=PROJECT, env=environment(), stdin=stdin.encode(),
                                          capture_stdout=True, capture_stderr=True, check=False)
            nursery.cancel_scope.cancel()
        return done

    return run(main), requests, session


MODELS = '[models.small]\nbase_url = "{small}"\n\n[models.large]\nbase_url = "{large}"\n\n' \
         '[models.auto]\nfallback = ["small", "large"]\n'


def test_payoff_the_agent_falls_back_and_the_session_shows_which_model_answered_each_turn(tmp_path):
    async def small(stream, count):  # its usage limit is over for the first request only
        if count == 1:
            await status_reply(stream, 429, "Rate limit reached for requests")
        else:
            await stream_reply(stream, "Small here.")

    async def large(stream, count):
        await stream_reply(stream, "Large here.")

    done, requests, session = agent(tmp_path, MODELS, "Who are you?\nAnd now?\n", small, large)

    stderr = done.stderr.decode()
    assert done.returncode == 0, stderr
    assert "Large here." in done.stdout.decode() and "Small here." in done.stdout.decode()
    assert "fallback auto: small failed (rate limit); retrying on large" in stderr
    assert [body["model"] for body in requests["small"]] == ["small", "small"]
    assert [body["model"] for body in requests["large"]] == ["large"]
    shown = trio.run(partial(trio.run_process, [sys.executable, "-m", "tiny_pi.session", str(session)],
                             capture_stdout=True, check=True))
    lines = [line.split(" ", 1)[1] for line in shown.stdout.decode().splitlines()[1:]]
    assert lines == [
        "model_change: auto",
        "user: Who are you?",
        "assistant (small): [error] HTTP 429: Rate limit reached for requests",
        "assistant (large): Large here.",
        "user: And now?",
        "assistant (small): Small here.  <- last",
    ]


@pytest.mark.parametrize("models, line", [
    ("[models.auto]\nfallback = ['nope']\n",
     "\"fallback\" names 'nope', which is not a physical model of this file"),
    ('[models.small]\nbase_url = "{small}"\n', "--model auto: not a model of"),
], ids=["bad-file", "unknown-model"])
def test_payoff_a_bad_models_file_or_model_is_one_line_and_exit_2(tmp_path, models, line):
    async def never(stream, count):
        await stream_reply(stream, "never")

    done, requests, session = agent(tmp_path, models, "Hi\n", never, never)
    stderr = done.stderr.decode()
    assert done.returncode == 2 and line in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr
    assert requests == {"small": [], "large": []} and not session.exists()
