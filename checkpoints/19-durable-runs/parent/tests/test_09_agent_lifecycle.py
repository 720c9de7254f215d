"""Chapter 09: the stateful agent lifecycle.

Run alone with `python -m pytest tests/test_09_agent_lifecycle.py`. The labs
follow the lesson: the state as a pure reducer of a run's events (9.1), the
Agent's prompts, listeners and system prompt (9.2), steering and follow-ups
through the loop's new hook (9.3), abort (9.4), and `python -m tiny_pi.agent`
reading prompts from stdin into one conversation, over real HTTP (9.5).
Every async body runs under a short `trio.fail_after`; the one test that
needs the abort's grace period runs on trio's MockClock, so it waits no real second.
"""

import io
import os
import signal as signals
import subprocess
import sys
from functools import partial
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing
from loopback_server import LoopbackServer, readme_model

from tiny_pi.agent_events import AgentEndEvent, AgentOutcome, AgentStartEvent, ToolExecutionEndEvent, ToolExecutionStartEvent
from tiny_pi.agent_loop import run_agent
from tiny_pi.agent_state import AgentState, reduce_state
from tiny_pi.messages import AgentContext, ToolCall, ToolResultMessage, Usage, assistant_message, text, user_message
from tiny_pi.model_stream import ModelCallStream
from tiny_pi.projection import project
from tiny_pi.scripted_model import ScriptedFailure, ScriptedModel
from tiny_pi.stateful_agent import Agent, AgentError
from tiny_pi.tools import Tool, ToolRegistry

TIME_LIMIT = 5.0  # a guard against hangs, not a speed test: the machine may be busy
PROCESS_TIME_LIMIT = 30.0  # a subprocess imports httpx and trio first
PROJECT = Path(__file__).resolve().parent.parent
README = "# tiny-pi\nA small agent runtime.\n"
ONE_TURN = ["agent_start", "turn_start", "start", "text_delta", "done", "turn_end", "agent_end"]


async def read_readme(arguments, *, signal):
    return [text(README)]


READ = Tool("read", "Read a file.", {"type": "object"}, read_readme)
README_CALL = ToolCall(id="call_1", name="read", arguments={"path": "README.md"})
CALLS_READ = assistant_message([text("Reading."), README_CALL], "toolUse")


def reply(words):
    return assistant_message([text(words)])


def types(events):
    return [event.type for event in events]


def untimed(message):
    """Tool results carry the time they were made; compare them without it."""
    return attrs.evolve(message, timestamp=0) if isinstance(message, ToolResultMessage) else message


def roles(context):
    return [message.role for message in context.messages]


def with_agent(model, body, *, tools=(READ,), clock=None, **options):
    """Run `await body(agent)` in a fresh trio run, with an Agent on `model` in its own nursery."""

    async def main():
        with trio.fail_after(TIME_LIMIT):
            async with trio.open_nursery() as nursery:
                agent = Agent(model, ToolRegistry(tools), nursery, **options)
                return await body(agent)

    return trio.run(main, clock=clock)


def record_run(turns):
    """The events of one chapter 07 run of `turns`, each with the run number 1."""
    events = []

    async def main():
        context = AgentContext([user_message("Hi")])
        await run_agent(ScriptedModel(turns), context, ToolRegistry([READ]), on_event=events.append)

    trio.run(main)
    return events


# Lab 9.1: the state, reduced from events.


def test_state_follows_a_run_event_by_event_and_never_changes_its_input():
    states = [AgentState()]
    for event in record_run([CALLS_READ, reply("It is tiny-pi.")]):
        states.append(reduce_state(states[-1], 1, event))

    assert states[0] == AgentState()  # the reducer made new states; the first is as it was
    seen = [(s.running, s.turn, s.streaming_text, [c.id for c in s.pending_tool_calls]) for s in states]
    assert seen == [
        (False, 0, "", []),
        (True, 0, "", []),              # agent_start
        (True, 1, "", []),              # turn_start 1
        (True, 1, "", []),              # start
        (True, 1, "Reading.", []),      # text_delta
        (True, 1, "Reading.", []),      # toolcall_delta
        (True, 1, "Reading.", []),      # toolcall_end
        (True, 1, "", []),              # done: the text is in the transcript now
        (True, 1, "", ["call_1"]),      # tool_execution_start
        (True, 1, "", []),              # tool_execution_end
        (True, 1, "", []),              # turn_end 1
        (True, 2, "", []),              # turn_start 2
        (True, 2, "", []),              # start
        (True, 2, "It is tiny-pi.", []),
        (True, 2, "", []),              # done
        (True, 2, "", []),              # turn_end 2
        (False, 2, "", []),             # agent_end
    ]
    assert (states[-1].stop_reason, states[-1].outcome.turns) == ("stop", 2)
    assert states[1].stop_reason is None


def test_state_pending_calls_leave_as_their_results_arrive_in_any_order():
    calls = [ToolCall(id=f"call_{name}", name=name, arguments={}) for name in "abc"]
    state = reduce_state(AgentState(), 1, AgentStartEvent())
    for call in calls:
        state = reduce_state(state, 1, ToolExecutionStartEvent(call))
    result = ToolResultMessage("call_b", "b", (text("b"),), is_error=False, timestamp=0)
    state = reduce_state(state, 1, ToolExecutionEndEvent(calls[1], result))

    assert [call.id for call in state.pending_tool_calls] == ["call_a", "call_c"]


def test_state_a_late_event_of_an_earlier_run_changes_nothing():
    run_1 = record_run([reply("First answer.")])
    state = AgentState()
    for event in run_1[:4]:  # run 1 is streaming its answer...
        state = reduce_state(state, 1, event)
    state = reduce_state(state, 2, AgentStartEvent())  # ...when run 2 starts
    running = state

    for event in run_1[4:]:  # run 1's done, turn_end and agent_end arrive late
        state = reduce_state(state, 1, event)
    state = reduce_state(state, 1, AgentStartEvent())  # and an old start cannot restart it

    assert state is running
    assert (state.run, state.running, state.outcome) == (2, True, None)


# Lab 9.2: the Agent: prompts, listeners, wait_for_idle.


def test_agent_prompts_in_sequence_share_one_transcript():
    model = ScriptedModel([reply("Hello!"), reply("Still here.")])
    events = []

    async def body(agent):
        agent.subscribe(events.append)
        agent.prompt("Hi")
        await agent.wait_for_idle()
        agent.prompt("Are you there?")
        await agent.wait_for_idle()
        return agent

    agent = with_agent(model, body)

    assert types(events) == ONE_TURN + ONE_TURN
    assert [len(request.messages) for request in model.requests] == [1, 3]
    assert agent.messages == (user_message("Hi"), reply("Hello!"), user_message("Are you there?"), reply("Still here."))
    assert events[-1].outcome.messages == (reply("Still here."),)
    assert (agent.state.run, agent.state.running, agent.state.stop_reason) == (2, False, "stop")


def test_agent_a_prompt_while_running_is_refused_as_busy():
    model = ScriptedModel([reply("Hello!")])

    async def body(agent):
        agent.prompt("Hi")
        with pytest.raises(AgentError, match="busy: a run is in progress"):
            agent.prompt("Hi again")  # before the run's task has even started
        with pytest.raises(AgentError, match="busy: a run is in progress"):
            agent.continue_()
        await agent.wait_for_idle()
        return agent

    agent = with_agent(model, body)

    assert len(model.requests) == 1
    assert agent.messages == (user_message("Hi"), reply("Hello!"))


def test_agent_a_prompt_from_the_end_listener_starts_the_next_run():
    model = ScriptedModel([reply("Hello!"), reply("Again!")])
    events = []

    async def body(agent):
        def chain(event):
            events.append(event)
            if event.type == "agent_end" and len(model.requests) == 1:
                agent.prompt("Once more")  # the state already says idle: not busy

        agent.subscribe(chain)
        agent.prompt("Hi")
        await agent.wait_for_idle()  # waits for the run the listener started, too
        return agent, types(events)

    agent, seen_when_idle = with_agent(model, body)

    assert seen_when_idle == types(events) == ONE_TURN + ONE_TURN
    assert [len(request.messages) for request in model.requests] == [1, 3]
    assert agent.messages[-1] == reply("Again!")


def test_agent_state_is_updated_before_listeners_are_told():
    model = ScriptedModel([CALLS_READ, reply("Done.")])
    seen = []

    async def body(agent):
        agent.subscribe(lambda event: seen.append((event.type, agent.state)))
        agent.prompt("Read it")
        await agent.wait_for_idle()

    with_agent(model, body)

    by_type = {}
    for kind, state in seen:
        by_type.setdefault(kind, state)
    at_start = by_type["agent_start"]
    assert at_start.running, (
        f"the state was not updated before the listener ran: at agent_start, running={at_start.running}"
    )
    assert by_type["text_delta"].streaming_text == "Reading."
    assert [call.id for call in by_type["tool_execution_start"].pending_tool_calls] == ["call_1"]
    last_type, last = seen[-1]
    assert (last_type, last.running, last.stop_reason) == ("agent_end", False, "stop")


def test_agent_a_listener_that_raises_is_reported_and_the_others_still_run(capsys):
    model = ScriptedModel([reply("Hello!"), reply("Bye.")])
    first, second = [], []

    def broken(event):
        raise ValueError("listener bug")

    async def body(agent):
        agent.subscribe(first.append)
        stop_broken = agent.subscribe(broken)
        agent.subscribe(second.append)
        agent.prompt("Hi")
        await agent.wait_for_idle()
        stop_broken()
        stop_broken()  # twice is harmless
        agent.prompt("Bye")
        await agent.wait_for_idle()

    with_agent(model, body)

    assert types(first) == types(second) == ONE_TURN + ONE_TURN
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["listener test_agent_a_listener_that_raises_is_reported_and_the_others_still_run."
                     "<locals>.broken raised ValueError: listener bug"] * len(ONE_TURN)


def test_agent_what_it_hands_out_are_copies_nobody_can_change():
    earlier = [user_message("Remember 42.")]
    model = ScriptedModel([reply("Noted."), reply("42.")])
    kept = {}

    async def body(agent):
        earlier.append(user_message("Injected from outside"))
        agent.prompt("What number?")
        await agent.wait_for_idle()
        kept["state"], kept["messages"] = agent.state, agent.messages
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            agent.state.running = True
        with pytest.raises(AttributeError):
            agent.messages.append(user_message("Injected"))
        agent.prompt("Again?")
        await agent.wait_for_idle()
        return agent

    agent = with_agent(model, body, messages=earlier)

    assert [len(request.messages) for request in model.requests] == [2, 4]
    assert (kept["state"].run, len(kept["messages"])) == (1, 3)
    assert (agent.state.run, len(agent.messages)) == (2, 5)


def test_agent_the_system_prompt_is_made_of_named_sections():
    model = ScriptedModel([reply("One."), reply("Two.")])

    async def body(agent):
        agent.set_system_section("tools", "Use read to look at files.")
        agent.prompt("Hi")
        await agent.wait_for_idle()
        agent.set_system_section("role", "You are terse.")  # replaces the text, keeps the place
        agent.set_system_section("tools", None)  # removed
        agent.set_system_section("style", "Answer in one line.")
        agent.prompt("Hi again")
        await agent.wait_for_idle()
        return agent

    agent = with_agent(model, body, system_prompt={"role": "You are a helper."})

    assert [request.system_prompt for request in model.requests] == [
        "You are a helper.\n\nUse read to look at files.",
        "You are terse.\n\nAnswer in one line.",
    ]
    agent.set_system_section("role", None)
    agent.set_system_section("style", None)
    assert agent.system_prompt is None


def test_agent_continue_goes_on_after_an_error_and_is_refused_after_an_answer():
    model = ScriptedModel([ScriptedFailure("error", "rate limited"), reply("Here you are.")])
    errors = []

    async def body(agent):
        with pytest.raises(AgentError, match="nothing to continue: the transcript is empty"):
            agent.continue_()
        agent.prompt("Hi")
        await agent.wait_for_idle()
        failed = agent.state
        agent.continue_()
        await agent.wait_for_idle()
        with pytest.raises(AgentError) as refused:
            agent.continue_()
        errors.append(str(refused.value))
        return failed, agent

    failed, agent = with_agent(model, body)

    assert (failed.stop_reason, failed.outcome.error_message) == ("error", "rate limited")
    assert [m.role for m in agent.messages] == ["user", "assistant", "assistant"]
    assert [len(request.messages) for request in model.requests] == [1, 2]
    assert agent.state.stop_reason == "stop"
    assert errors == ["nothing to continue: the model has already answered; prompt with a new message"]


# Lab 9.3: steering and follow-ups.


def test_queue_run_agent_appends_what_take_queued_hands_over():
    asked = []
    waiting = [[], [user_message("Also: be brief.")], []]

    def take_queued(end):
        asked.append(end)
        return waiting[len(asked) - 1]

    model = ScriptedModel([CALLS_READ, reply("tiny-pi."), reply("tiny-pi, briefly.")])
    context = AgentContext([user_message("Name?")])

    async def main():
        with trio.fail_after(TIME_LIMIT):
            return await run_agent(model, context, ToolRegistry([READ]), take_queued=take_queued)

    outcome = trio.run(main)

    assert asked == [None, "stop", "stop"]
    assert roles(context) == ["user", "assistant", "toolResult", "assistant", "user", "assistant"]
    assert (outcome.stop_reason, outcome.turns, len(outcome.messages)) == ("stop", 3, 5)


def test_queue_steers_wait_for_every_result_of_the_turn_and_keep_their_order():
    a_steered = trio.Event()
    holder = {}
    calls = [ToolCall(id="call_a", name="a", arguments={}), ToolCall(id="call_b", name="b", arguments={})]

    async def steering_a(arguments, *, signal):
        holder["agent"].steer("second: skip the tests folder")
        a_steered.set()
        return [text("a")]

    async def slow_b(arguments, *, signal):
        await a_steered.wait()  # b is still running after the steer
        return [text("b")]

    tools = (Tool("a", "A.", {"type": "object"}, steering_a), Tool("b", "B.", {"type": "object"}, slow_b))
    model = ScriptedModel([assistant_message(calls, "toolUse"), reply("Done.")])
    events = []

    async def body(agent):
        holder["agent"] = agent

        def steer_while_streaming(event):
            events.append(event)
            if event.type == "toolcall_end" and event.tool_call.id == "call_a":
                agent.steer("first: look at docs/ too")

        agent.subscribe(steer_while_streaming)
        agent.prompt("Check both")
        await agent.wait_for_idle()

    with_agent(model, body, tools=tools)

    second = model.requests[1].messages
    assert [m.role for m in second] == ["user", "assistant", "toolResult", "toolResult", "user", "user"]
    assert [m.content[0].text for m in second[4:]] == ["first: look at docs/ too", "second: skip the tests folder"]
    assert types(events).count("agent_end") == 1
    assert types(events)[-6:] == ["turn_start", "start", "text_delta", "done", "turn_end", "agent_end"]


def test_queue_a_steer_during_a_text_answer_starts_one_more_request():
    model = ScriptedModel([reply("The answer is 4."), reply("In words: four.")])
    events = []

    async def body(agent):
        def steer_once(event):
            events.append(event)
            if event.type == "text_delta" and len(model.requests) == 1:
                agent.steer("Write it in words.")

        agent.subscribe(steer_once)
        agent.prompt("2 + 2?")
        await agent.wait_for_idle()
        return agent

    agent = with_agent(model, body)

    assert types(events) == ONE_TURN[:-1] + ONE_TURN[1:]  # one run, two turns
    assert [m.role for m in agent.messages] == ["user", "assistant", "user", "assistant"]
    assert agent.messages[2] == user_message("Write it in words.")
    assert (events[-1].outcome.turns, len(events[-1].outcome.messages)) == (2, 3)


def test_queue_follow_ups_wait_for_a_natural_stop_and_come_one_at_a_time():
    model = ScriptedModel([CALLS_READ, reply("tiny-pi."), reply("A runtime."), reply("Python.")])

    async def body(agent):
        def ask_more(event):
            if event.type == "tool_execution_start":
                agent.follow_up("What is it for?")
                agent.follow_up("Which language?")

        agent.subscribe(ask_more)
        agent.prompt("Name?")
        await agent.wait_for_idle()
        return agent

    agent = with_agent(model, body)

    assert [[m.role for m in request.messages] for request in model.requests] == [
        ["user"],
        ["user", "assistant", "toolResult"],  # after the tools: no follow-up yet
        ["user", "assistant", "toolResult", "assistant", "user"],
        ["user", "assistant", "toolResult", "assistant", "user", "assistant", "user"],
    ]
    assert model.requests[2].messages[-1] == user_message("What is it for?")
    assert (agent.state.run, agent.state.outcome.turns) == (1, 4)


def test_queue_steer_and_follow_up_outside_a_run_are_refused():
    model = ScriptedModel([reply("Hello!")])

    async def body(agent):
        with pytest.raises(AgentError, match="no run in progress: steer reaches only a running agent; use prompt"):
            agent.steer("faster")
        agent.prompt("Hi")
        await agent.wait_for_idle()
        with pytest.raises(AgentError, match="no run in progress: follow_up reaches only a running agent; use prompt"):
            agent.follow_up("and then?")
        return agent

    agent = with_agent(model, body)

    assert agent.messages == (user_message("Hi"), reply("Hello!"))


# Lab 9.4: abort.


def test_abort_one_signal_per_run_for_the_model_and_the_tools():
    seen = []

    class Recording:
        def __init__(self, turns):
            self.model = ScriptedModel(turns)

        def stream(self, context, *, signal=None, tools=None):
            seen.append(("model", signal))
            return self.model.stream(context, signal=signal)

    async def spy(arguments, *, signal):
        seen.append(("tool", signal))
        return [text("ok")]

    model = Recording([CALLS_READ, reply("One."), reply("Two.")])

    async def body(agent):
        agent.prompt("First")
        await agent.wait_for_idle()
        agent.prompt("Second")
        await agent.wait_for_idle()

    with_agent(model, body, tools=(Tool("read", "Read.", {"type": "object"}, spy),))

    assert [who for who, _ in seen] == ["model", "tool", "model", "model"]
    first_run = {id(signal) for _, signal in seen[:3]}
    assert len(first_run) == 1 and seen[3][1] is not seen[0][1]


def test_abort_before_anything_started_gives_one_end_event_and_no_model_call():
    model = ScriptedModel([reply("never sent"), reply("Hello!")])
    events = []

    async def body(agent):
        agent.subscribe(events.append)
        agent.prompt("Hi")
        agent.abort()  # the run's task has not started yet
        await agent.wait_for_idle()
        aborted = agent.state.outcome
        agent.continue_()  # the prompt is still in the transcript
        await agent.wait_for_idle()
        return aborted

    aborted = with_agent(model, body)

    assert types(events) == ["agent_start", "agent_end"] + ONE_TURN
    assert (aborted.stop_reason, aborted.turns, aborted.messages) == ("aborted", 0, ())
    assert aborted.error_message == "the run was aborted before it started"
    assert len(model.requests) == 1


def test_abort_aborting_is_true_from_abort_until_the_run_ends():
    model = ScriptedModel([reply("never sent"), reply("Hello!")])
    heard = []

    async def body(agent):
        agent.subscribe(lambda event: heard.append((event.type, agent.aborting)))
        seen = [agent.aborting]
        agent.abort()  # idle: nothing to abort
        seen.append(agent.aborting)
        agent.prompt("Hi")
        seen.append(agent.aborting)
        agent.abort()
        seen.append(agent.aborting)
        await agent.wait_for_idle()
        seen.append(agent.aborting)
        agent.continue_()  # a fresh run, a fresh signal
        seen.append(agent.aborting)
        await agent.wait_for_idle()
        return seen

    seen = with_agent(model, body)

    assert seen == [False, False, False, True, False, False]
    assert heard[:2] == [("agent_start", True), ("agent_end", False)]  # over once its end is told
    assert [aborting for _, aborting in heard[2:]] == [False] * len(ONE_TURN)


class IgnoresAbort:
    """Streams the first words of an answer, then hangs without ever looking at its signal."""

    def __init__(self):
        self.calls = 0

    def stream(self, context, *, signal=None, tools=None):
        self.calls += 1
        events = project(reply("Let me think"))

        async def produce(stream):
            for event in events[:-1]:  # start and text_delta; never the done
                stream.push(event)
            await trio.sleep_forever()

        return ModelCallStream(produce)


def test_abort_a_model_that_ignores_the_abort_still_ends_the_run_as_aborted():
    events = []

    async def body(agent):
        def stop_at_first_word(event):
            events.append(event)
            if event.type == "text_delta":
                agent.abort()

        agent.subscribe(stop_at_first_word)
        agent.prompt("Think hard")
        await agent.wait_for_idle()
        return agent, trio.current_time()

    clock = trio.testing.MockClock(autojump_threshold=0)
    agent, ended_at = with_agent(IgnoresAbort(), body, clock=clock)

    assert types(events) == ["agent_start", "turn_start", "start", "text_delta", "agent_end"]
    outcome = events[-1].outcome
    assert (outcome.stop_reason, outcome.turns, outcome.messages) == ("aborted", 1, ())
    assert outcome.error_message == "the run did not stop within 1.0 s of the abort and was cancelled"
    assert (agent.state.running, agent.state.streaming_text) == (False, "")  # the words are lost
    assert ended_at == pytest.approx(1.0)  # the grace, on the mock clock


def test_abort_and_errors_drop_the_queues():
    def queue_both(agent):
        def listener(event):
            if event.type == "text_delta" and agent.state.run == 1:
                agent.steer("steer me")
                agent.follow_up("follow me")

        return listener

    def aborting(agent):
        def listener(event):
            if event.type == "text_delta" and agent.state.run == 1:
                agent.abort()

        return listener

    for ending, first_turn in (("aborted", reply("Hello")), ("error", ScriptedFailure("error", "overloaded", "Hel"))):
        model = ScriptedModel([first_turn, reply("Fresh start.")])

        async def body(agent):
            agent.subscribe(queue_both(agent))
            agent.subscribe(aborting(agent) if ending == "aborted" else (lambda event: None))
            agent.prompt("Hi")
            await agent.wait_for_idle()
            stop = agent.state.stop_reason
            agent.prompt("New topic")
            await agent.wait_for_idle()
            return stop

        assert with_agent(model, body) == ending
        last_request = [m.role for m in model.requests[-1].messages]
        assert last_request == ["user", "assistant", "user"], ending  # no steer, no follow-up
        assert len(model.requests) == 2


# Lab 9.5: one conversation from stdin, over real HTTP.


def agent_env():
    """The agent process's environment: no proxy that could reroute 127.0.0.1."""
    env = {key: value for key, value in os.environ.items() if "proxy" not in key.lower()}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("TINY_PI_API_KEY", None)
    return env


def run_session(reply_with, stdin, tmp_path):
    """Start the loopback server, pipe `stdin` into `python -m tiny_pi.agent` (no PROMPT)."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "README.md").write_text(README, encoding="utf-8")
    command = [sys.executable, "-m", "tiny_pi.agent", "--model", "loopback", "--root", str(root)]

    async def main():
        with trio.fail_after(PROCESS_TIME_LIMIT):
            async with trio.open_nursery() as nursery:
                server = await LoopbackServer(reply_with).start(nursery)
                done = await trio.run_process(
                    [*command, "--base-url", server.base_url], stdin=stdin.encode(), cwd=PROJECT,
                    env=agent_env(), capture_stdout=True, capture_stderr=True, check=False,
                )
                nursery.cancel_scope.cancel()
        return server, done

    return trio.run(main)


def test_cli_reads_one_prompt_per_line_into_one_conversation(tmp_path):
    stdin = "What is this project called?\n\n   \nAnd what is it called again?\n"

    server, done = run_session(readme_model, stdin, tmp_path)

    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, stderr
    assert stdout == (
        "I will read the README first.\n"
        '[tool] read {"path": "README.md"}\n'
        "[ok] read: # tiny-pi A small agent runtime.\n"
        "The project is called tiny-pi.\n"
    ) * 2
    summary = "[stop] turns: 2, tokens: input 155, output 27, cache read 0, cache write 0\n"
    assert stderr == summary * 2
    assert len(server.requests) == 4
    third = server.requests[2][1]["messages"]
    assert [m["role"] for m in third] == ["user", "assistant", "tool", "assistant", "user"]
    assert (third[0]["content"], third[3]["content"], third[4]["content"]) == (
        "What is this project called?", "The project is called tiny-pi.", "And what is it called again?",
    )


def test_cli_a_prompt_that_fails_ends_the_session_with_its_status(tmp_path):
    async def fail_the_second(stream, body):
        if len(body["messages"]) < 3:
            return await readme_model(stream, body)
        payload = b'{"error": {"message": "overloaded"}}'
        await stream.send_all(
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(payload), payload)
        )

    stdin = "What is this project called?\nNever sent.\n"

    server, done = run_session(fail_the_second, stdin, tmp_path)

    assert done.returncode == 1
    assert done.stderr.decode().endswith("error: HTTP 503: overloaded\n")
    assert len(server.requests) == 2
    assert "Never sent." not in str(server.requests)


@pytest.mark.parametrize("number, status", [(signals.SIGINT, 130), (signals.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_cli_a_stop_signal_between_prompts_ends_the_session_in_one_line(tmp_path, number, status):
    root = tmp_path / "project"
    root.mkdir()
    (root / "README.md").write_text(README, encoding="utf-8")
    summary = b"[stop] turns: 2, tokens: input 155, output 27, cache read 0, cache write 0\n"

    async def main():
        with trio.fail_after(PROCESS_TIME_LIMIT):
            async with trio.open_nursery() as nursery:
                server = await LoopbackServer(readme_model).start(nursery)
                command = [sys.executable, "-m", "tiny_pi.agent", "--model", "loopback", "--root", str(root),
                           "--base-url", server.base_url]
                process = await nursery.start(partial(
                    trio.run_process, command, cwd=PROJECT, env=agent_env(), check=False,
                    stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                ))
                await process.stdin.send_all(b"What is this project called?\n")  # stdin stays open
                errors = b""
                async for piece in process.stderr:
                    errors += piece
                    if errors.endswith(summary):  # the first prompt is answered: the agent waits for a line
                        break
                process.send_signal(number)
                errors += b"".join([piece async for piece in process.stderr])
                await process.wait()
                nursery.cancel_scope.cancel()
        return server, process.returncode, errors.decode()

    server, returncode, stderr = trio.run(main)

    assert returncode == status, stderr
    assert stderr == summary.decode() + f"\nstopped by {number.name}\n"
    assert len(server.requests) == 2


def test_cli_no_prompt_with_stdin_a_terminal_is_bad_usage(monkeypatch, capsys):
    from tiny_pi.agent import main

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stdin", Terminal())
    with pytest.raises(SystemExit) as exit:
        main(["--base-url", "http://127.0.0.1:9/v1", "--model", "m"])  # never reached
    stderr = capsys.readouterr().err
    assert exit.value.code == 2
    assert "give a PROMPT, or pipe prompts into stdin, one a line" in stderr
    assert "Traceback" not in stderr
