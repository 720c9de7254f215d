"""Chapter 06: the tool contract.

Run alone with `python -m pytest tests/test_06_tool_contract.py`. The labs
follow the lesson: the schema checker (6.1), the tool record and its
registry (6.2), the closed contract of `execute_tool_call` (6.3), and abort
and cancellation (6.4). Every async body runs under a short
`trio.fail_after`, so a tool that is never stopped fails fast instead of
hanging the run.
"""

import tempfile
from pathlib import Path

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from tiny_pi.abort import AbortSignal
from tiny_pi.messages import ToolCall, ToolResultMessage, text
from tiny_pi.schema import schema_problems
from tiny_pi.tool_execution import execute_tool_call
from tiny_pi.tools import Tool, ToolRegistry

TIME_LIMIT = 2.0

# hypothesis caches what it learns under the working directory: keep it out of the project.
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "tiny-pi-hypothesis")

FILES = {"README.md": "# tiny-pi\nA small agent runtime.\n"}

READ_PARAMETERS = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "a file inside the project"},
        "limit": {"type": "integer"},
    },
    "required": ["path"],
    "additionalProperties": False,
}


async def read_file(arguments, *, signal):
    """A read tool over FILES: the README round trip without a disk."""
    path = arguments["path"]
    if path not in FILES:
        raise FileNotFoundError(f"no such file: {path}")
    return [text(FILES[path])]


async def list_files(arguments, *, signal):
    return [text("\n".join(sorted(FILES)))]


READ = Tool("read", "Read a UTF-8 text file.", READ_PARAMETERS, read_file)
LS = Tool("ls", "List a directory.", {"type": "object", "properties": {}}, list_files)


def call(arguments, name="read", call_id="call_1", raw_arguments=None):
    return ToolCall(id=call_id, name=name, arguments=arguments, raw_arguments=raw_arguments)


def run(tool_call, registry=None, signal=None):
    """execute_tool_call in a fresh trio run, under the time limit."""

    async def main():
        with trio.fail_after(TIME_LIMIT):
            return await execute_tool_call(
                tool_call, registry or ToolRegistry([READ, LS]), signal=signal or AbortSignal()
            )

    return trio.run(main)


def error_text(result):
    assert isinstance(result, ToolResultMessage)
    assert result.is_error is True
    (block,) = result.content
    return block.text


# Lab 6.1: the schema checker.


def test_schema_arguments_that_fit_have_no_problems():
    assert schema_problems(READ_PARAMETERS, {"path": "README.md"}) == []
    assert schema_problems(READ_PARAMETERS, {"path": "README.md", "limit": 10}) == []
    assert schema_problems({"type": "object"}, {"anything": [1, {"goes": None}]}) == []


def test_schema_json_types_follow_json_not_python():
    def problems(kind, value):
        return schema_problems({"type": kind}, value, "x")

    assert problems("integer", True) == ["x: expected integer, got boolean"]
    assert problems("boolean", 0) == ["x: expected boolean, got integer"]
    assert problems("integer", 2.0) == []
    assert problems("integer", 2.5) == ["x: expected integer, got number"]
    assert problems("string", 2.0) == ["x: expected string, got number"]  # a float is a number
    assert problems("number", 3) == []
    assert problems("null", None) == []
    assert problems("string", None) == ["x: expected string, got null"]
    assert problems("array", (1, 2)) == ["x: expected array, got tuple (not a JSON value)"]


def test_schema_missing_and_unknown_properties_name_their_path():
    assert schema_problems(READ_PARAMETERS, {"colour": "red"}) == [
        "arguments.path: required property is missing",
        "arguments.colour: unknown property (allowed: path, limit)",
    ]
    open_schema = {**READ_PARAMETERS, "additionalProperties": True}
    assert schema_problems(open_schema, {"path": "a", "colour": "red"}) == []


def test_schema_a_wrong_type_stops_the_check_of_that_value():
    assert schema_problems(READ_PARAMETERS, {"path": 7, "limit": "ten"}) == [
        "arguments.path: expected string, got integer",
        "arguments.limit: expected integer, got string",
    ]
    assert schema_problems(READ_PARAMETERS, ["README.md"]) == ["arguments: expected object, got array"]


def test_schema_enum_compares_json_values():
    mode = {"type": "object", "properties": {"mode": {"enum": ["fast", "slow"]}}}
    assert schema_problems(mode, {"mode": "slow"}) == []
    assert schema_problems(mode, {"mode": "medium"}) == [
        'arguments.mode: expected one of "fast", "slow", got "medium"'
    ]
    assert schema_problems({"enum": [1, 2]}, True, "flag") == ["flag: expected one of 1, 2, got true"]
    assert schema_problems({"enum": [1, 2]}, 1.0, "n") == []  # one JSON number, written two ways
    assert schema_problems({"enum": [1, 2]}, "1", "n") == ['n: expected one of 1, 2, got "1"']
    assert schema_problems({"enum": ["fast"]}, b"fast", "mode") == [
        "mode: expected one of \"fast\", got \"b'fast'\""  # no JSON for bytes: its repr, quoted
    ]


def test_schema_checks_the_type_then_the_enum_then_the_properties():
    assert schema_problems({"type": "string", "enum": ["fast"]}, 1, "mode") == [
        "mode: expected string, got integer"
    ]
    enum_first = {"enum": [{}], "required": ["path"]}
    assert schema_problems(enum_first, {"colour": "red"}, "x") == [
        'x: expected one of {}, got {"colour": "red"}'
    ]
    no_type = {"properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert schema_problems(no_type, {"n": "1"}) == ["arguments.n: expected integer, got string"]
    assert schema_problems(no_type, {}) == ["arguments.n: required property is missing"]
    assert schema_problems(no_type, "not an object") == []  # without `type`, anything else fits


def test_schema_nested_objects_report_the_full_path():
    schema = {
        "type": "object",
        "properties": {
            "options": {
                "type": "object",
                "properties": {"depth": {"type": "integer"}},
                "required": ["depth"],
            }
        },
    }
    assert schema_problems(schema, {"options": {"depth": "deep"}}) == [
        "arguments.options.depth: expected integer, got string"
    ]
    assert schema_problems(schema, {"options": {}}) == [
        "arguments.options.depth: required property is missing"
    ]


# Lab 6.2: the tool record and the registry.


def test_registry_finds_tools_by_name_and_lists_their_specs():
    registry = ToolRegistry([READ, LS])

    assert registry.get("read") is READ
    assert registry.get("write") is None
    assert registry.names == ["read", "ls"]
    assert [(spec.name, spec.description, spec.parameters) for spec in registry.specs()] == [
        ("read", "Read a UTF-8 text file.", READ_PARAMETERS),
        ("ls", "List a directory.", {"type": "object", "properties": {}}),
    ]
    assert "read_file" not in repr(READ)  # the code is not part of what a tool shows


def test_registry_refuses_two_tools_with_one_name():
    with pytest.raises(ValueError, match="two tools are named 'read'"):
        ToolRegistry([READ, LS, Tool("read", "Another reader.", READ_PARAMETERS, read_file)])


def test_registry_tool_records_refuse_names_and_schemas_providers_reject():
    with pytest.raises(ValueError, match="a tool name is 1-64 letters, digits, '_' or '-', got 'read file'"):
        Tool("read file", "Read.", READ_PARAMETERS, read_file)
    with pytest.raises(ValueError, match="a tool name is 1-64 letters"):
        Tool("r" * 65, "Read.", READ_PARAMETERS, read_file)
    with pytest.raises(ValueError, match="parameters must be a JSON Schema with type 'object'"):
        Tool("read", "Read.", {"type": "string"}, read_file)
    assert Tool("read-2_B", "Read.", {"type": "object"}, read_file).name == "read-2_B"


# Lab 6.3: the closed contract.


def test_contract_runs_a_valid_call_and_pairs_the_result_with_it():
    result = run(call({"path": "README.md"}))

    assert isinstance(result, ToolResultMessage)
    assert result.tool_call_id == "call_1"
    assert result.tool_name == "read"
    assert result.content == (text("# tiny-pi\nA small agent runtime.\n"),)
    assert result.is_error is False
    assert result.timestamp > 0


def test_contract_unknown_tool_is_an_error_result():
    result = run(call({"path": "README.md"}, name="write", call_id="call_9"))

    assert error_text(result) == "Tool 'write' not found (available tools: read, ls)"
    assert (result.tool_call_id, result.tool_name) == ("call_9", "write")
    assert error_text(run(call({}, name="ls"), ToolRegistry())) == (
        "Tool 'ls' not found (available tools: none)"
    )


def test_contract_invalid_arguments_are_never_run():
    ran = []

    async def spy(arguments, *, signal):
        ran.append(arguments)
        return [text("ran")]

    registry = ToolRegistry([Tool("read", "Read.", READ_PARAMETERS, spy)])
    result = run(call({"path": 7, "mode": "x"}), registry)

    assert error_text(result) == (
        "Invalid arguments for tool 'read': arguments.path: expected string, got integer; "
        "arguments.mode: unknown property (allowed: path, limit)"
    )
    assert ran == []


def test_contract_unparsed_arguments_are_never_run():
    cut_off = call(None, raw_arguments='{"path": "REA')

    assert error_text(run(cut_off)) == (
        "Tool 'read' was not run: its arguments are not a JSON object "
        "(raw text: '{\"path\": \"REA')"
    )
    assert error_text(run(call(None))) == (
        "Tool 'read' was not run: its arguments are not a JSON object (raw text: None)"
    )


def test_contract_tool_that_raises_becomes_an_error_result():
    result = run(call({"path": "missing.md"}))

    assert error_text(result) == "Tool 'read' failed: FileNotFoundError: no such file: missing.md"
    assert result.tool_call_id == "call_1"


def test_contract_tool_that_returns_no_text_blocks_becomes_an_error_result():
    async def sloppy(arguments, *, signal):
        return arguments["path"]  # a string, not a list of text blocks

    async def mixed(arguments, *, signal):
        return [text("ok"), {"type": "text", "text": "a dict"}]

    for execute, kind in ((sloppy, "str"), (mixed, "list")):
        registry = ToolRegistry([Tool("read", "Read.", READ_PARAMETERS, execute)])
        assert error_text(run(call({"path": "README.md"}), registry)) == (
            f"Tool 'read' returned {kind}, not a list of text blocks"
        )


def test_contract_an_empty_list_is_a_result_with_no_blocks():
    async def quiet(arguments, *, signal):
        return []  # nothing to say is still an answer

    registry = ToolRegistry([Tool("quiet", "Say nothing.", {"type": "object"}, quiet)])
    result = run(call({}, name="quiet"), registry)

    assert (result.is_error, result.content) == (False, ())


@pytest.mark.parametrize("escape", [KeyboardInterrupt, SystemExit])
def test_contract_what_is_not_an_exception_is_never_a_result(escape):
    async def interrupted(arguments, *, signal):
        raise escape("not the tool's failure: it belongs to whoever raised it")

    registry = ToolRegistry([Tool("stop", "Stop.", {"type": "object"}, interrupted)])
    try:
        result = run(call({}, name="stop"), registry)
    except* escape:
        result = None  # it passed through, as it must

    assert result is None, f"the {escape.__name__} was turned into a result: {error_text(result)}"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None, database=None, derandomize=True)
@given(name=st.sampled_from(["read", "ls", "write", ""]), arguments=st.none() | JSON)
def test_contract_any_call_ends_in_exactly_one_result_for_it(name, arguments):
    result = run(call(arguments, name=name, call_id="call_x"))

    assert isinstance(result, ToolResultMessage)
    assert (result.tool_call_id, result.tool_name) == ("call_x", name)
    assert len(result.content) == 1


# Lab 6.4: abort and cancellation.


def slow_tool(log, *, ignore_cancel=False):
    """A tool that never finishes on its own (and never looks at the signal)."""

    async def execute(arguments, *, signal):
        log.append("started")
        try:
            if ignore_cancel:
                with trio.CancelScope(shield=True):
                    await trio.sleep(0.05)
                return [text("finished anyway")]
            await trio.sleep_forever()
        finally:
            log.append("tool task gone")

    return Tool("slow", "Wait.", {"type": "object"}, execute)


def test_abort_before_the_call_never_runs_the_tool():
    log = []
    signal = AbortSignal()
    signal.abort()

    result = run(call({}, name="slow"), ToolRegistry([slow_tool(log)]), signal)

    assert error_text(result) == "Tool 'slow' was not run: the run was aborted"
    assert log == []


@pytest.mark.parametrize("ignore_cancel", [False, True], ids=["cooperative", "shielded"])
def test_abort_during_the_tool_ends_the_call_as_aborted(ignore_cancel):
    log = []
    signal = AbortSignal()
    registry = ToolRegistry([slow_tool(log, ignore_cancel=ignore_cancel)])

    async def main():
        with trio.fail_after(TIME_LIMIT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(abort_when_started, log, signal)
                result = await execute_tool_call(call({}, name="slow"), registry, signal=signal)
                log.append("result")
                return result

    result = trio.run(main)

    assert error_text(result) == "Tool 'slow' was aborted before it finished"
    assert log == ["started", "abort", "tool task gone", "result"]


async def abort_when_started(log, signal):
    await trio.testing.wait_all_tasks_blocked()
    assert log == ["started"]
    log.append("abort")
    signal.abort()


def test_abort_a_cancellation_from_outside_is_never_swallowed():
    log = []
    results = []

    async def main():
        with trio.fail_after(TIME_LIMIT):
            with trio.CancelScope() as outside:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(cancel_when_started, log, outside)
                    tool_call = call({}, name="slow")
                    registry = ToolRegistry([slow_tool(log)])
                    results.append(await execute_tool_call(tool_call, registry, signal=AbortSignal()))
            return outside.cancelled_caught

    assert trio.run(main) is True
    assert results == [], f"the cancellation was turned into a result: {results}"
    assert log == ["started", "cancel", "tool task gone"]


async def cancel_when_started(log, scope):
    await trio.testing.wait_all_tasks_blocked()
    log.append("cancel")
    scope.cancel()
