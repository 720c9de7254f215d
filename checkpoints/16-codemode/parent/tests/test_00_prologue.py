"""Chapter 00: each test pins one prediction the lesson asks you to make about the trace.

The `_prediction` tests read your predictions from predictions.toml, beside
tests/, and compare each one with what the run shows. The prologue runs its
own `trio.run` inside `trace()`, so these tests are plain functions; chapter
01 shows how the later chapters' tests run async code themselves.
"""

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
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

PREDICTIONS = Path(__file__).resolve().parent.parent / "predictions.toml"


def written_predictions():
    """Your predictions.toml as a dict; a missing or broken file fails with one clear line."""
    try:
        return tomllib.loads(PREDICTIONS.read_text(encoding="utf-8"))
    except FileNotFoundError:
        reset = "course reset 00 --file predictions.toml"
        pytest.fail(f"{PREDICTIONS.name} is missing: `{reset}` brings back the blank one", pytrace=False)
    except tomllib.TOMLDecodeError as error:
        pytest.fail(f"{PREDICTIONS.name} is not valid TOML: {error}", pytrace=False)


def as_text(value):
    """A value as TOML would spell it, so 2 and "2", or false and "False", compare equal."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(as_text(item) for item in value) + "]"
    if value is None:
        return "nothing"
    return str(value).strip()


def check_prediction(key, seen):
    """Fail with what you wrote and what the run shows, unless they agree."""
    wrote = written_predictions().get(key, "")
    if wrote == "":
        pytest.fail(f"prediction {key}: not written yet (in {PREDICTIONS.name})", pytrace=False)
    if as_text(wrote).casefold() != as_text(seen).casefold():
        pytest.fail(f"prediction {key}: you wrote {as_text(wrote)}, the run shows {as_text(seen)}", pytrace=False)


def second_call():
    """The messages the scripted model receives on its second call."""
    model = readme_script()
    trio.run(run_agent, QUESTION, model, {"README.md": README}, lambda line: None)
    return model.received[1]


def event_before_the_tools():
    """The kind of the trace line just before the first tool runs."""
    lines, _ = trace()
    return lines[lines.index("tool_execution_start call_1 read") - 1].split()[0]


def crashes_without_files():
    try:
        trace(files={})
    except Exception:
        return True
    return False


RUN_SHOWS = {  # what the run shows, for each prediction of predictions.toml
    "turns": lambda: sum(line.startswith("turn_start") for line in trace()[0]),
    "tools_start_after": event_before_the_tools,
    "second_call_roles": lambda: [message.role for message in second_call()],
    "readme_answers": lambda: next((m.tool_call_id for m in second_call() if m.text == README), None),
    "no_files_crashes": crashes_without_files,
    "no_files_is_error": lambda: any(m.role == "toolResult" and m.is_error for m in trace(files={})[1]),
    "no_files_second_turn": lambda: "turn_start 2" in trace(files={})[0],
}


# Lab 0.1: the order of the trace ---------------------------------------------


def test_order_of_the_readme_round_trip():
    lines, _ = trace()
    assert lines == ROUND_TRIP


def test_order_of_the_tool_lines():
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


@pytest.mark.parametrize("key", ["turns", "tools_start_after"])
def test_order_prediction(key):
    check_prediction(key, RUN_SHOWS[key]())


# Lab 0.2: what the second model call receives --------------------------------


def test_second_call_messages_by_role():
    model = readme_script()
    trio.run(run_agent, QUESTION, model, {"README.md": README}, lambda line: None)
    first, second = model.received
    assert [message.role for message in first] == ["user"]
    assert [message.role for message in second] == ["user", "assistant", "toolResult"]


def test_second_call_readme_message():
    _, transcript = trace()
    call = transcript[1].tool_calls[0]
    result = transcript[2]
    assert (call.name, call.arguments) == ("read", {"path": "README.md"})
    assert (result.tool_call_id, result.text, result.is_error) == ("call_1", README, False)


@pytest.mark.parametrize("key", ["second_call_roles", "readme_answers"])
def test_second_call_prediction(key):
    check_prediction(key, RUN_SHOWS[key]())


# Lab 0.3: when the tool fails ------------------------------------------------


def test_failing_tool_result():
    lines, transcript = trace(files={})
    assert "tool_execution_end call_1 error" in lines
    result = transcript[2]
    assert (result.role, result.is_error) == ("toolResult", True)
    assert result.text == "no such file: README.md"


def test_failing_tool_turns():
    lines, transcript = trace(files={})
    assert lines[-6:] == ["turn_start 2", "  start", "  text_delta The project is called tiny-pi.", "  done stop", "turn_end 2", "agent_end"]
    assert [message.role for message in transcript] == ["user", "assistant", "toolResult", "assistant"]


@pytest.mark.parametrize("key", ["no_files_crashes", "no_files_is_error", "no_files_second_turn"])
def test_failing_tool_prediction(key):
    check_prediction(key, RUN_SHOWS[key]())
