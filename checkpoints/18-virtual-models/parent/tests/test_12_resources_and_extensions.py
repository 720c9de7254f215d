"""Chapter 12: resources and extensions.

Run alone with `python -m pytest tests/test_12_resources_and_extensions.py`.
The labs follow the lesson: context files and the skill catalog (12.1), skill
activation and prompt templates (12.2), loading extensions in isolation
(12.3), and the hooks around a tool call with `python -m tiny_pi.agent` over
real HTTP (12.4). Every file is a real file in a temporary directory, every
extension a real module written there.
"""

import json
import os
import queue
import subprocess
import sys
import textwrap
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio
from loopback_server import STREAM_HEAD, LoopbackServer, chunk, send_chunk, sse, tool_call_chunks

from tiny_pi import extensions as extensions_module
from tiny_pi.abort import AbortSignal
from tiny_pi.extensions import ExtensionRegistry, extension_paths, load_extensions
from tiny_pi.messages import ToolCall, text_of
from tiny_pi.resources import (
    SkillError,
    TemplateError,
    activate,
    context_files,
    expand_prompt,
    find_skills,
    find_templates,
    resource_roots,
    system_sections,
)
from tiny_pi.tool_execution import execute_tool_call
from tiny_pi.toolset import chosen_tools

TIME_LIMIT = 10.0  # a guard against hangs, not a speed test: the machine may be busy
PROCESS_TIME_LIMIT = 30.0  # a subprocess imports httpx and trio first
PROJECT = Path(__file__).resolve().parent.parent
README = "# tiny-pi\nA small agent runtime.\n"
SECRET = "sk-outside-the-root-12"  # what a file outside every root holds: it must never reach a model
LOOP = "leads through a symbolic link loop"


def write(path, content):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(content), encoding="utf-8")
    return path


def skill(root, name, description, body="Do it step by step."):
    """A SKILL.md under `root` (a resource root), with front matter and a body."""
    return write(root / "skills" / name / "SKILL.md", f"---\nname: {name}\ndescription: {description}\n---\n{body}\n")


def extension(directory, name, source):
    return write(directory / f"{name}.py", source)


def run_call(registry, name, arguments):
    call = ToolCall(id="call_1", name=name, arguments=arguments)
    return trio.run(lambda: execute_tool_call(call, registry, signal=AbortSignal()))


# Lab 12.1: context files and the skill catalog.


def test_catalog_context_files_go_outermost_first_each_under_its_path(tmp_path):
    outer = write(tmp_path / "work" / "AGENTS.md", "Use British spelling.\n")
    inner = write(tmp_path / "work" / "project" / "AGENTS.md", "Run the tests with pytest.\n")
    files = context_files(tmp_path / "work" / "project")
    assert [file.path for file in files[-2:]] == [outer, inner]
    context = system_sections(files[-2:], [])["context"]
    assert f"## {outer}\n\nUse British spelling." in context
    assert context.index(str(outer)) < context.index(str(inner)) < context.index("Run the tests with pytest.")


def test_catalog_a_context_file_that_is_not_text_is_skipped_with_one_warning(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    (root / "AGENTS.md").write_bytes(b"\xff\xfe not UTF-8")
    warnings = []
    files = context_files(root, warnings.append)
    agents = root.resolve() / "AGENTS.md"
    assert agents not in [file.path for file in files]  # the run goes on without it
    assert len(warnings) == 1 and warnings[0].startswith(f"{agents} skipped: ")


def test_catalog_a_context_file_that_leads_outside_its_directory_is_skipped_with_one_warning(tmp_path):
    root = (tmp_path / "project").resolve()
    outside = write(tmp_path / "outside" / "secret.txt", f"API_KEY={SECRET}\n")
    write(root / "docs" / "agents.md", "Run the tests with pytest.\n")
    (root / "AGENTS.md").symlink_to(root / "docs" / "agents.md")  # a link that stays inside: read
    (root / "sub").mkdir()
    (root / "sub" / "AGENTS.md").symlink_to(outside)  # as AGENTS.md -> /proc/self/environ would
    warnings = []
    files = context_files(root / "sub", warnings.append)
    assert [(file.path, file.text) for file in files if file.path.is_relative_to(root)] == [
        (root / "AGENTS.md", "Run the tests with pytest.\n")
    ]
    agents = root / "sub" / "AGENTS.md"
    assert warnings == [f"{agents} skipped: {agents} leads outside its resource root {root / 'sub'}"]


@pytest.mark.parametrize("link", ["outside", "loop"])
def test_catalog_a_project_tiny_pi_that_leads_outside_the_project_or_loops_is_skipped_with_one_warning(
    tmp_path, link
):
    root, user = tmp_path / "project", tmp_path / "user"
    project_resources = root / ".tiny_pi"
    skill(tmp_path / "outside", "review", f"Leak {SECRET}")
    root.mkdir()
    project_resources.symlink_to(tmp_path / "outside" if link == "outside" else project_resources)
    skill(user, "explain", "The user's explanation")
    warnings = []
    roots = resource_roots(root, user, warnings.append)
    assert roots == [user]  # the run goes on with the user's root alone
    reason = f"leads outside its resource root {root}" if link == "outside" else LOOP
    assert warnings == [f"{project_resources} skipped: {project_resources} {reason}"]
    assert [s.name for s in find_skills(roots)] == ["explain"]


def test_catalog_a_skill_file_that_is_a_symlink_loop_is_skipped_with_one_warning(tmp_path):
    root = tmp_path / ".tiny_pi"
    skill(root, "good", "A skill that works")
    looping = root / "skills" / "loop" / "SKILL.md"
    looping.parent.mkdir(parents=True)
    looping.symlink_to(looping)
    warnings = []
    assert [s.name for s in find_skills([root], warnings.append)] == ["good"]
    assert warnings == [f"skill {looping} skipped: {looping} {LOOP}"]


def test_catalog_without_context_files_or_skills_there_is_no_system_prompt(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    skills = find_skills(resource_roots(root, tmp_path / "user"))
    assert skills == []
    assert system_sections(context_files(root), skills) == {}  # no system message, as in chapters 07-11


def test_catalog_lists_skills_by_name_with_description_and_path_never_the_body(tmp_path):
    root = tmp_path / ".tiny_pi"
    zeta = skill(root, "zeta", "Write release notes", body="SECRET BODY of zeta")
    alpha = skill(root, "alpha", "Review a diff for bugs")
    skills = find_skills([root])
    assert [s.name for s in skills] == ["alpha", "zeta"]
    section = system_sections([], skills)["skills"]
    assert f"- alpha: Review a diff for bugs (file: {alpha})" in section
    assert f"- zeta: Write release notes (file: {zeta})" in section
    assert "SECRET BODY" not in section


@pytest.mark.parametrize(
    "content, reason",
    [
        ("# Just a body, no front matter\n", "no front matter (the first line is not ---)"),
        ("---\nname: broken\n---\nbody\n", "the front matter needs both name and description"),
        ("---\nname: other\ndescription: x\n---\nbody\n", "name 'other' is not its directory's name 'broken'"),
    ],
    ids=["no-front-matter", "no-description", "another-name"],
)
def test_catalog_a_skill_with_missing_or_broken_front_matter_is_skipped_with_one_warning(tmp_path, content, reason):
    root = tmp_path / ".tiny_pi"
    skill(root, "good", "A skill that works")
    broken = write(root / "skills" / "broken" / "SKILL.md", content)
    warnings = []
    skills = find_skills([root], warnings.append)
    assert [s.name for s in skills] == ["good"]
    assert warnings == [f"skill {broken} skipped: {reason}"]


def test_catalog_the_project_root_wins_a_name_clash_with_the_user_root(tmp_path):
    project, user = tmp_path / "project", tmp_path / "user"
    skill(project / ".tiny_pi", "review", "The project's review")
    skill(user, "review", "The user's review")
    skill(user, "explain", "The user's explanation")
    roots = resource_roots(project, user)
    assert roots == [project / ".tiny_pi", user]
    skills = find_skills(roots)
    assert [(s.name, s.description) for s in skills] == [
        ("explain", "The user's explanation"),
        ("review", "The project's review"),
    ]


# Lab 12.2: skill activation and prompt templates.


def test_activate_reads_the_body_only_when_the_skill_is_activated(tmp_path):
    root = tmp_path / ".tiny_pi"
    path = skill(root, "review", "Review a diff", body="First version.")
    (listed,) = find_skills([root])
    write(path, "---\nname: review\ndescription: Review a diff\n---\nSecond version.\n")
    assert activate(listed) == "Second version."  # read now, not when the catalog was made


def test_activate_refuses_a_skill_file_whose_real_path_leaves_its_root(tmp_path):
    root = tmp_path / ".tiny_pi"
    path = skill(root, "review", "Review a diff")
    (listed,) = find_skills([root])
    outside = write(tmp_path / "elsewhere" / "SKILL.md", "---\nname: review\ndescription: x\n---\nprivate notes\n")
    path.unlink()
    path.symlink_to(outside)
    with pytest.raises(SkillError, match="leads outside its resource root"):
        activate(listed)
    warnings = []
    assert find_skills([root], warnings.append) == []
    assert len(warnings) == 1 and "leads outside its resource root" in warnings[0]


def test_template_fills_every_placeholder_and_the_first_root_wins(tmp_path):
    project, user = tmp_path / "project" / ".tiny_pi", tmp_path / "user"
    write(project / "prompts" / "review.md", "Review {{file}}, looking for {{ focus }}. Then {{file}} again.")
    write(user / "prompts" / "review.md", "The user's review")
    write(user / "prompts" / "explain.md", "Explain {{topic}}.")
    templates = find_templates([project, user])
    assert list(templates) == ["explain", "review"]
    expanded = expand_prompt('/review file=app.py focus="error handling"', templates)
    assert expanded == "Review app.py, looking for error handling. Then app.py again."
    assert expand_prompt("What is this project?", templates) == "What is this project?"


def test_template_a_file_that_leads_outside_its_root_or_loops_is_skipped_with_one_warning(tmp_path):
    root = tmp_path / ".tiny_pi"
    write(root / "prompts" / "explain.md", "Explain {{topic}}.")
    outside = write(tmp_path / "outside" / "review.md", f"Send {SECRET} along.")
    leaking, looping = root / "prompts" / "review.md", root / "prompts" / "loop.md"
    leaking.symlink_to(outside)
    looping.symlink_to(looping)
    warnings = []
    assert list(find_templates([root], warnings.append)) == ["explain"]
    assert warnings == [
        f"{looping} skipped: {looping} {LOOP}",
        f"{leaking} skipped: {leaking} leads outside its resource root {root}",
    ]


def test_template_a_missing_argument_is_an_error_naming_it(tmp_path):
    templates = find_templates([write(tmp_path / "prompts" / "review.md", "Review {{file}} for {{focus}}.").parents[1]])
    with pytest.raises(TemplateError, match=r"prompt template /review is missing focus=\.\.\."):
        expand_prompt("/review file=app.py", templates)


def test_template_an_unknown_name_is_an_error_naming_the_templates(tmp_path):
    templates = find_templates([write(tmp_path / "prompts" / "review.md", "Review.").parents[1]])
    with pytest.raises(TemplateError, match=r"no prompt template /revew \(templates: /review\)"):
        expand_prompt("/revew file=app.py", templates)


# Lab 12.3: loading extensions in isolation.

TOOLS_EXTENSION = """
    import trio

    TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}

    def shout(arguments):
        return arguments["text"].upper()

    async def reverse(arguments):
        await trio.sleep(0)
        return arguments["text"][::-1]

    def register(api):
        api.add_tool("shout", "Say it louder.", TEXT, shout)
        api.add_tool("reverse", "Say it backwards.", TEXT, reverse)
"""


def test_load_an_extension_adds_tools_whose_function_may_be_sync_or_async(tmp_path):
    path = extension(tmp_path, "words", TOOLS_EXTENSION)
    (loaded,) = load_extensions([path], taken=["read", "ls"])
    registry = ExtensionRegistry(chosen_tools(tmp_path, ["read", "ls"]), [loaded])
    assert registry.names == ["read", "ls", "shout", "reverse"]
    assert text_of(run_call(registry, "shout", {"text": "hello"})) == "HELLO"
    assert text_of(run_call(registry, "reverse", {"text": "hello"})) == "olleh"


@pytest.mark.parametrize(
    "source, reason",
    [
        ("def register(api):\n    return (\n", "SyntaxError"),
        (TOOLS_EXTENSION + "        raise RuntimeError('half way')\n", "RuntimeError: half way"),
        ("import sys\nsys.exit('bye')\n", "SystemExit: bye"),
    ],
    ids=["syntax-error", "raises-after-add-tool", "exits-on-import"],
)
def test_load_a_failing_extension_is_named_in_one_line_and_leaves_nothing_registered(tmp_path, capsys, source, reason):
    broken = extension(tmp_path, "broken", source)
    good = extension(tmp_path, "good", "def register(api):\n    api.add_tool('ping', 'Pong.', {'type': 'object'}, lambda a: 'pong')\n")
    loaded = load_extensions([broken, good], taken=["read"])
    assert [e.name for e in loaded] == ["good"]  # the run goes on without it
    assert [t.name for e in loaded for t in e.tools] == ["ping"]  # none of the broken one's tools
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"extension {broken} not loaded: ") and reason in lines[0]


def test_load_a_tool_name_clash_refuses_the_whole_extension(tmp_path, capsys):
    source = TOOLS_EXTENSION.replace('"reverse", "Say', '"read", "Say')
    path = extension(tmp_path, "clash", source)
    assert load_extensions([path], taken=["read", "ls"]) == []
    assert capsys.readouterr().err == f"extension {path} not loaded: ExtensionError: the tool name 'read' is taken\n"


def test_load_project_extensions_are_skipped_unless_trusted_and_never_imported(tmp_path, capsys):
    root = tmp_path / "project"
    marker = tmp_path / "imported"
    source = f"from pathlib import Path\nPath({str(marker)!r}).write_text('yes')\ndef register(api):\n    pass\n"
    path = extension(root / ".tiny_pi" / "extensions", "local", source)
    assert load_extensions(extension_paths([], root, trusted=False), taken=[]) == []
    assert capsys.readouterr().err == (
        f"extension {path} skipped: project extensions load only with --trust-project-extensions\n"
    )
    assert not marker.exists()  # never imported: its code did not run
    assert [e.name for e in load_extensions(extension_paths([], root, trusted=True), taken=[])] == ["local"]
    assert marker.read_text() == "yes"


def test_load_a_project_extension_that_is_a_symlink_loop_is_one_line_trusted_or_not(tmp_path, capsys):
    root = tmp_path / "project"
    looping = root / ".tiny_pi" / "extensions" / "loop.py"
    looping.parent.mkdir(parents=True)
    looping.symlink_to(looping)
    assert load_extensions(extension_paths([], root, trusted=False), taken=[]) == []
    assert capsys.readouterr().err == (
        f"extension {looping} skipped: project extensions load only with --trust-project-extensions\n"
    )
    assert load_extensions(extension_paths([looping], root, trusted=True), taken=[]) == []  # given and found: once
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"extension {looping} not loaded: ")


def test_load_a_raising_extension_tool_becomes_an_error_result(tmp_path):
    source = """
        def explode(arguments):
            raise RuntimeError("boom")

        def register(api):
            api.add_tool("explode", "Fails.", {"type": "object"}, explode)
            api.add_tool("number", "Not text.", {"type": "object"}, lambda arguments: 42)
    """
    registry = ExtensionRegistry([], load_extensions([extension(tmp_path, "faulty", source)], taken=[]))
    exploded = run_call(registry, "explode", {})
    assert exploded.is_error and text_of(exploded) == "Tool 'explode' failed: RuntimeError: boom"
    number = run_call(registry, "number", {})
    assert number.is_error and "returned int, not text" in text_of(number)


# Lab 12.4: the hooks around a tool call, live over real HTTP.


async def send_stream(stream, payloads):
    await stream.send_all(STREAM_HEAD)
    for payload in payloads:
        await send_chunk(stream, sse(payload))
    await send_chunk(stream, b"data: [DONE]\n\n")
    await stream.send_all(b"0\r\n\r\n")


def calling_server(name, arguments):
    """A model that answers a user with one call of `name`, and a tool result with its text."""

    async def reply(stream, body):
        last = body["messages"][-1]
        if last["role"] == "tool":
            payloads = [chunk({"role": "assistant", "content": f"Result: {last['content']}"}), chunk(finish_reason="stop")]
        else:
            calls = tool_call_chunks("call_1", name, json.dumps(arguments))
            payloads = [chunk({"role": "assistant", "content": "On it."}), *calls, chunk(finish_reason="tool_calls")]
        await send_stream(stream, payloads)

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


def agent(server, root, *args):
    """`python -m tiny_pi.agent` in this process, with a user root of its own."""
    from tiny_pi.agent import main

    argv = ["--base-url", server.base_url, "--model", "loopback", "--root", str(root)]
    return main([*argv, "--user-root", str(root.parent / "user"), *args])


def sent_messages(server, index):
    return server.requests[index][1]["messages"]


GUARD = """
    def register(api):
        api.before_tool_call(check)

    def check(call):
        if call.name == "write":
            return "no writes today"
"""


def test_hook_a_denied_call_gets_a_paired_error_result_and_the_tool_never_runs(tmp_path, project):
    guard = extension(tmp_path, "guard", GUARD)
    with serving(calling_server("write", {"path": "notes.txt", "content": "hi"})) as server:
        status = agent(server, project, "--tools", "read,write", "--extension", str(guard), "Take a note.")
    assert status == 0
    assert not (project / "notes.txt").exists()
    tool_message = sent_messages(server, 1)[-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_1"
    assert tool_message["content"] == "Tool 'write' was blocked by extension 'guard': no writes today"


@pytest.mark.parametrize(
    "check, diagnostic",
    [
        ("def check(call):\n    raise RuntimeError('guard is broken')", "raised RuntimeError: guard is broken"),
        ("async def check(call):\n    await trio.sleep(30)", "did not answer within 0.2 s"),
    ],
    ids=["raises", "times-out"],
)
def test_hook_that_raises_or_times_out_fails_closed_with_a_diagnostic(
    tmp_path, project, capsys, monkeypatch, check, diagnostic
):
    monkeypatch.setattr(extensions_module, "HOOK_TIMEOUT", 0.2)
    guard = extension(tmp_path, "guard", f"import trio\ndef register(api):\n    api.before_tool_call(check)\n{check}\n")
    with serving(calling_server("write", {"path": "notes.txt", "content": "hi"})) as server:
        assert agent(server, project, "--tools", "write", "--extension", str(guard), "Take a note.") == 0
    assert not (project / "notes.txt").exists()
    assert f"extension guard: before_tool_call hook {diagnostic}; the call is denied" in capsys.readouterr().err
    assert sent_messages(server, 1)[-1]["content"] == f"Tool 'write' was blocked by extension 'guard': its hook {diagnostic}"


def test_hook_after_runs_once_per_result_and_cannot_replace_it(tmp_path, project):
    log = tmp_path / "results.log"
    source = f"""
        def register(api):
            api.after_tool_call(note)

        def note(call, result):
            with open({str(log)!r}, "a") as file:
                file.write(call.id + " " + result.tool_name + "\\n")
            return "REPLACED"
    """
    with serving(calling_server("read", {"path": "README.md"})) as server:
        assert agent(server, project, "--extension", str(extension(tmp_path, "audit", source)), "What is this?") == 0
    assert log.read_text() == "call_1 read\n"
    assert sent_messages(server, 1)[-1]["content"] == README


def test_hook_a_raising_listener_is_reported_once_and_removed(tmp_path, project, capsys):
    heard = tmp_path / "heard.log"
    source = f"""
        def register(api):
            api.subscribe(broken)
            api.subscribe(steady)

        def broken(event):
            raise ValueError("cannot listen")

        def steady(event):
            with open({str(heard)!r}, "a") as file:
                file.write(event.type + "\\n")
    """
    with serving(calling_server("read", {"path": "README.md"})) as server:
        assert agent(server, project, "--extension", str(extension(tmp_path, "watch", source)), "What is this?") == 0
    err = capsys.readouterr().err
    assert err.count("extension watch: listener raised ValueError: cannot listen; it is removed") == 1
    events = heard.read_text().split()
    assert events[0] == "agent_start" and events[-1] == "agent_end"


def test_live_context_files_and_skills_reach_the_model_and_read_activates_a_skill(tmp_path, project):
    write(project / "AGENTS.md", "Answer in one sentence.\n")
    user_skill = skill(tmp_path / "user", "summarise", "Summarise a file", body="Read the file, then write three bullets.")
    with serving(calling_server("read", {"path": str(user_skill)})) as server:
        assert agent(server, project, "Summarise the README.") == 0
    system = sent_messages(server, 0)[0]
    assert system["role"] == "system"
    assert f"## {project / 'AGENTS.md'}\n\nAnswer in one sentence." in system["content"]
    assert f"- summarise: Summarise a file (file: {user_skill})" in system["content"]
    assert "three bullets" not in system["content"]  # the body waits for its activation
    assert sent_messages(server, 1)[-1]["content"] == "Read the file, then write three bullets."


def test_live_the_default_user_root_is_tiny_pi_in_a_home_of_the_tests_own(project, empty_home):
    assert Path.home() == empty_home and not any(empty_home.iterdir())  # tests/conftest.py: never your home
    user_skill = skill(empty_home / ".tiny_pi", "summarise", "Summarise a file")
    env = {key: value for key, value in os.environ.items() if "proxy" not in key.lower()}  # HOME included
    with serving(calling_server("read", {"path": "README.md"})) as server:
        done = subprocess.run(
            [sys.executable, "-m", "tiny_pi.agent", "--base-url", server.base_url, "--model", "loopback",
             "--root", str(project), "Summarise the README."],  # no --user-root: the default
            cwd=PROJECT, env=env, capture_output=True, text=True, timeout=PROCESS_TIME_LIMIT, check=False,
        )
    assert done.returncode == 0, done.stderr
    system = sent_messages(server, 0)[0]
    assert system["role"] == "system"  # the skill of the test's home, and nothing else of any home
    assert [line for line in system["content"].splitlines() if line.startswith("- ")] == [
        f"- summarise: Summarise a file (file: {user_skill})"
    ]


def test_live_extension_tools_are_offered_besides_the_tools_picked(tmp_path, project, capsys):
    words = extension(tmp_path, "words", TOOLS_EXTENSION)
    broken = extension(tmp_path, "broken", "raise ImportError('no such thing')\n")
    with serving(calling_server("shout", {"text": "hello"})) as server:
        status = agent(server, project, "--extension", str(broken), "--extension", str(words), "Shout hello.")
    assert status == 0
    assert [tool["function"]["name"] for tool in server.requests[0][1]["tools"]] == ["read", "ls", "shout", "reverse"]
    assert sent_messages(server, 1)[-1]["content"] == "HELLO"
    assert f"extension {broken} not loaded: ImportError: no such thing" in capsys.readouterr().err


def test_live_nothing_outside_the_root_reaches_the_model_or_the_session(tmp_path, project, capsys):
    outside = tmp_path / "outside"
    (project / "AGENTS.md").symlink_to(write(outside / "secret.txt", f"TINY_PI_API_KEY={SECRET}\n"))
    template = project / ".tiny_pi" / "prompts" / "review.md"
    template.parent.mkdir(parents=True)
    template.symlink_to(write(outside / "review.md", f"Review this: {SECRET}"))
    skill_file = project / ".tiny_pi" / "skills" / "review" / "SKILL.md"
    skill_file.parent.mkdir(parents=True)
    skill_file.symlink_to(write(outside / "SKILL.md", f"---\nname: review\ndescription: {SECRET}\n---\n{SECRET}\n"))
    session = tmp_path / "session.jsonl"
    with serving(calling_server("read", {"path": "README.md"})) as server:
        assert agent(server, project, "--session", str(session), "Summarise the README.") == 0
        assert len(server.requests) == 2
        assert SECRET not in json.dumps(server.requests)  # in no request body, the system message included
        assert SECRET not in session.read_text(encoding="utf-8")
        assert agent(server, project, "--session", str(session), "/review") == 2  # no such template
    assert len(server.requests) == 2 and SECRET not in session.read_text(encoding="utf-8")
    resources, agents = project / ".tiny_pi", project.resolve() / "AGENTS.md"
    lines = capsys.readouterr().err.splitlines()
    for warning in [
        f"skill {skill_file} skipped: {skill_file} leads outside its resource root {resources}",
        f"{agents} skipped: {agents} leads outside its resource root {project.resolve()}",
        f"{template} skipped: {template} leads outside its resource root {resources}",
        "no prompt template /review (templates: none)",
    ]:
        assert warning in lines


def test_live_a_symlink_loop_in_tiny_pi_is_one_warning_and_the_run_goes_on(project, capsys):
    looping = project / ".tiny_pi"
    looping.symlink_to(looping)
    with serving(calling_server("read", {"path": "README.md"})) as server:
        assert agent(server, project, "Summarise the README.") == 0
    lines = capsys.readouterr().err.splitlines()
    assert [line for line in lines if not line.startswith("[stop]")] == [f"{looping} skipped: {looping} {LOOP}"]
    assert len(server.requests) == 2 and "system" not in json.dumps(sent_messages(server, 0))


def test_live_a_template_prompt_is_sent_expanded_and_a_broken_one_stops_with_exit_2(tmp_path, project, capsys):
    write(project / ".tiny_pi" / "prompts" / "review.md", "Review {{file}} for {{focus}}.")
    with serving(calling_server("read", {"path": "README.md"})) as server:
        assert agent(server, project, "/review file=README.md focus=typos") == 0
        assert sent_messages(server, 0)[-1] == {"role": "user", "content": "Review README.md for typos."}
        count = len(server.requests)
        assert agent(server, project, "/review file=README.md") == 2
    assert len(server.requests) == count  # nothing was sent
    assert "prompt template /review is missing focus=..." in capsys.readouterr().err
