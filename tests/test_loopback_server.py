"""The loopback server the lessons' payoffs start by hand ends in one line, never a traceback.

Chapter 07 introduces tests/loopback_server.py and every later snapshot carries
it; its lesson states the lines: Ctrl-C (exit status 0), a port another program
holds (3), and a PORT that is no port number (2).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CHECKPOINTS

SERVERS = sorted(CHECKPOINTS.glob("*/*/tests/loopback_server.py"))
STOPPED = "loopback server: stopped (Ctrl-C)\n"


def test_every_snapshot_from_chapter_07_on_has_the_server() -> None:
    chapters = {path.name[:2] for path in CHECKPOINTS.iterdir() if path.is_dir() and path.name[:2].isdigit()}
    assert SERVERS and {path.parts[-4][:2] for path in SERVERS} == {nn for nn in chapters if nn >= "07"}


def _start(server: Path, *arguments: str) -> subprocess.Popen[str]:
    # Ctrl-C as a terminal sends it, whatever this suite's own SIGINT disposition is.
    return subprocess.Popen([sys.executable, str(server), *arguments], cwd=server.parent.parent, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


@pytest.mark.parametrize("server", SERVERS, ids=lambda path: f"{path.parts[-4]}/{path.parts[-3]}")
def test_ctrl_c_a_busy_port_and_a_bad_port_each_end_in_one_line(server: Path) -> None:
    running = _start(server)
    try:
        assert (running.stdout.readline()).startswith("serving the README round trip at http://127.0.0.1:")  # type: ignore[union-attr]
        running.send_signal(signal.SIGINT)
        _, stderr = running.communicate(timeout=20)
    finally:
        running.kill()
    assert (running.returncode, stderr) == (0, STOPPED)

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        busy = _start(server, str(port))
        _, stderr = busy.communicate(timeout=20)
    assert busy.returncode == 3
    assert stderr == (f"loopback server: port {port} on 127.0.0.1 is in use by another program: "
                      "stop it, or pick another port (0 picks a free one)\n")

    bad = _start(server, "eighty")
    _, stderr = bad.communicate(timeout=20)
    assert bad.returncode == 2
    assert stderr == "loopback server: PORT is a whole number from 0 to 65535 (0: a free one), not 'eighty'\n"
