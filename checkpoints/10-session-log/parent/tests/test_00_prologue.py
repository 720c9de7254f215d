"""Chapter 00: each test pins one prediction the lesson asks you to make about the trace.

The prologue runs its own `trio.run` inside `trace()`, so these tests are
plain functions; chapter 01 shows how the later chapters' tests run async
code themselves.
"""

import subprocess
import sys

import trio

from tiny_pi.prologue import QUESTION, README, readme_script, run_agent, trace

ROUND_TRIP = [
    "agent_start",
    "turn_start 1",
    "  start",
    "  text_delta I will read the README first.",
    '  toolcall_end call_1 read {"path": "README.md"}',
    "  done toolUse",
    "tool_execution_start call_1 read",
    "tool_execution_end call_1 ok",
    "turn_end 1",
    "turn_start 2",
    "  start",
    "  text_delta The project is called tiny-pi.",
    "  done stop",
    "turn_end 2",
    "agent_end",
]


# Lab 0.1: the order of the trace ---------------------------------------------


def test_order_of_the_readme_round_trip():
    lines, _ = trace()
    assert lines == ROUND_TRIP


def test_order_tools_run_after_the_model_is_done():
    lines, _ = trace()
    done = lines.index("  done toolUse")
    assert lines.index("tool_execution_start call_1 read") == done + 1
    assert lines.index("turn_end 1") > lines.index("tool_execution_end call_1 ok")


def test_order_printed_by_python_m_tiny_pi_prologue():
    finished = subprocess.run(
        [sys.executable, "-m", "tiny_pi.prologue"], capture_output=True, text=True, timeout=30
    )
    assert finished.returncode == 0, finished.stderr
    printed = finished.stdout.splitlines()
    assert printed[: len(ROUND_TRIP)] == ROUND_TRIP
    assert printed[len(ROUND_TRIP) :] == [
        "transcript: user assistant toolResult assistant",
        "answer: The project is called tiny-pi.",
    ]


# Lab 0.2: what the second model call receives --------------------------------


def test_second_call_receives_the_whole_transcript_so_far():
    model = readme_script()
    trio.run(run_agent, QUESTION, model, {"README.md": README}, lambda line: None)
    first, second = model.received
    assert [message.role for message in first] == ["user"]
    assert [message.role for message in second] == ["user", "assistant", "toolResult"]


def test_second_call_receives_the_readme_under_the_call_id():
    _, transcript = trace()
    call = transcript[1].tool_calls[0]
    result = transcript[2]
    assert (call.name, call.arguments) == ("read", {"path": "README.md"})
    assert (result.tool_call_id, result.text, result.is_error) == ("call_1", README, False)


# Lab 0.3: when the tool fails ------------------------------------------------


def test_failing_tool_ends_in_an_error_result_not_a_crash():
    lines, transcript = trace(files={})
    assert "tool_execution_end call_1 error" in lines
    result = transcript[2]
    assert (result.role, result.is_error) == ("toolResult", True)
    assert result.text == "no such file: README.md"


def test_failing_tool_still_gets_a_second_turn():
    lines, transcript = trace(files={})
    assert lines[-6:] == ["turn_start 2", "  start", "  text_delta The project is called tiny-pi.", "  done stop", "turn_end 2", "agent_end"]
    assert [message.role for message in transcript] == ["user", "assistant", "toolResult", "assistant"]
