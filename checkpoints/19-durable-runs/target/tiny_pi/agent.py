"""Ask a question about a directory; the agent reads files to answer it.

    python -m tiny_pi.agent --base-url http://localhost:11434/v1 --model llama3.2 \\
        --root . "What is this project called?"

The reply streams to stdout with one line per tool call and per result; a
summary (how the run ended, turns, tokens) goes to stderr. The API key, if
the server wants one, comes from TINY_PI_API_KEY, never from the command
line (which other users of the machine can see). Exit status: 0 when the
model finished, 1 on an error or the turn limit, 2 for bad usage, 130 on
Ctrl-C, which aborts the running turn and keeps what it had produced;
`kill` (SIGTERM) and a closed terminal (SIGHUP) abort it the same way and
exit 143 and 129: 128 plus the signal's number, as a shell reports them.

Without a PROMPT, and with stdin not a terminal, every non-empty line of
stdin is a prompt of one conversation (one Agent), run in order:

    printf 'What is this project called?\nWhat does it do?\n' | python -m tiny_pi.agent ...

A summary follows each prompt. The first prompt that does not end in `stop`
ends the session with that prompt's exit status; the lines after it are not
sent. At the end of the input the status is 0.

With --session FILE the conversation lives in FILE, a JSON Lines log
(tiny_pi.session_log): a run resumes from its last entry, or from entry ID
with --branch ID, and every message is on disk before the next model call
(a model change that cannot be written exits 74, EX_IOERR, sending nothing).
A session that is not whole is refused (exit 2) before anything is sent.

A model call whose context would exceed --context-window N minus
--reserve-tokens R is preceded by a compaction (tiny_pi.compaction): the
older interactions are summarised and the summary is sent in their place,
before a prompt and between the tool round trips of a run. A session file
keeps every message and records the compaction. A failed summary call
before a prompt stops the session (exit 1); within a run, the context goes
as it is.

Resources (tiny_pi.resources): AGENTS.md files and the skill catalog go into
the system prompt, and a prompt `/NAME key=value ...` is a prompt template
(a template that cannot be filled stops the run with exit 2). Extensions
(tiny_pi.extensions): --extension FILE.py, repeatable, and the project's own
only with --trust-project-extensions; their tools are offered besides --tools.

With --codemode the model may also call codemode (tiny_pi.codemode): a
JavaScript script in a fresh sandboxed worker that calls the --tools and the
--defer tools with `await tools.NAME(args)`, in one model turn.

One Runtime (tiny_pi.runtime) answers every prompt; the mode only renders
it (tiny_pi.modes): --mode text (the default, as above), --mode json (every
agent event as one JSON object per line on stdout), or interactive (a
prompt loop; the default when stdin and stdout are both terminals and no
PROMPT is given, or with --interactive).

Tool exposure (tiny_pi.tool_exposure, chapter 15): --defer NAMES registers
those tools as deferred, and adds the model-only tool_search. The model is
shown tool_search and the --tools; a search declares the deferred tools it
finds from the next request on, and the session's tool patches keep them
declared when the session is resumed. A name --defer does not know, or one
--tools names too, is one line on stderr and exit 2.

MCP (tiny_pi.mcp_tools, chapter 17): --mcp-config FILE starts the servers
FILE lists ({"mcpServers": {NAME: {"command": ..., "args": [...]}}}) and
registers their tools as mcp__NAME__TOOL, deferred unless the server says
`"exposure": "direct"`, with tool_search to find them. A config that is not
valid, or a server that cannot start, is one line on stderr and exit 2; a
server that fails later is listed as failed in the system prompt, and the
agent goes on. Every server is closed (and gone) before the agent exits.

Models (tiny_pi.model_config, chapter 18): --models FILE instead of
--base-url names physical models (a server each) and virtual ones
({"fallback": [...]}), and --model picks one of them. Every request is routed
to a physical model (tiny_pi.routing); a failed call another model may
answer is sent once more, to the next model of a fallback list. A file that
is not valid, or a --model it does not name, is one line and exit 2.

Durable runs (tiny_pi.durable_cli, chapter 19): --durable FILE keeps the
conversation as tasks in a SQLite file, every step committed before it is
shown; killed at any point (even with kill -9), the same command without a
PROMPT takes the run up where the file says it stopped, and a tool that may
have run is never run twice unless it only looks. `python -m
tiny_pi.durable_view FILE` shows the run. A FILE that cannot be a store is
one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import os
import signal as signals
import sys
from pathlib import Path
from typing import Sequence

import attrs
import trio

from tiny_pi.agent_loop import DEFAULT_MAX_TURNS, ToolUsingModel
from tiny_pi.bash_tool import DEFAULT_TIMEOUT
from tiny_pi.codemode import CODEMODE, codemode_tool
from tiny_pi.compaction import DEFAULT_CONTEXT_WINDOW, ContextLimits, default_reserve
from tiny_pi.durable_cli import conflict, run_durable
from tiny_pi.extensions import Extension, ExtensionRegistry, extension_paths, load_extensions
from tiny_pi.mcp_tools import ConfigError, McpServers, McpStartError, load_config
from tiny_pi.model_catalog import ModelCatalog
from tiny_pi.model_config import ModelsConfigError, load_models
from tiny_pi.modes import MODES
from tiny_pi.modes.interactive import run_interactive
from tiny_pi.modes.json_mode import run_json
from tiny_pi.modes.text import read_prompts, run_text
from tiny_pi.providers.openai_compatible import OpenAICompatibleModel
from tiny_pi.resources import PROJECT_RESOURCES, Resources, expand_prompts, load_resources, with_skills
from tiny_pi.routing import DirectModel, Router
from tiny_pi.runtime import Runtime
from tiny_pi.session import OpenSession, open_session
from tiny_pi.session_log import SessionError
from tiny_pi.session_writer import SessionWriteError
from tiny_pi.tool_exposure import DEFERRED
from tiny_pi.tool_search import TOOL_SEARCH, deferred_names, tool_search_tool
from tiny_pi.tools import Tool, ToolRegistry
from tiny_pi.toolset import DEFAULT_TOOLS, chosen_tools, tool_names

API_KEY_VARIABLE = "TINY_PI_API_KEY"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line; argparse exits with status 2 and a usage line when it is wrong."""
    parser = argparse.ArgumentParser(
        prog="python -m tiny_pi.agent",
        description="Answer a question about a directory with the tools you allow.",
        epilog=f"The API key, if any, is read from ${API_KEY_VARIABLE}.",
    )
    parser.add_argument("--base-url", help="e.g. http://localhost:11434/v1")
    parser.add_argument("--model", required=True, help="the model name the server knows (or of --models)")
    parser.add_argument("--models", type=Path, metavar="FILE", help="models.toml: the models to route between")
    parser.add_argument("--root", type=Path, default=Path("."), help="the directory the tools work in")
    parser.add_argument("--max-turns", type=int, default=DEFAULT_MAX_TURNS, help="model calls per run")
    parser.add_argument(
        "--tools", metavar="NAMES", default=DEFAULT_TOOLS,
        help="some of read,ls,write,edit,bash; default read,ls",
    )
    parser.add_argument(
        "--defer", metavar="NAMES",
        help="tools the model finds with tool_search before it may call them, e.g. write,edit,bash",
    )
    parser.add_argument(
        "--codemode", action="store_true",
        help="also offer the model codemode: a script that calls the tools in a sandbox",
    )
    parser.add_argument(
        "--bash-timeout", metavar="S", type=float, default=DEFAULT_TIMEOUT,
        help="seconds per bash command; default 30",
    )
    parser.add_argument("prompt", nargs="?", help="the question; without it, one prompt per line of stdin")
    parser.add_argument("--session", type=Path, metavar="FILE", help="a JSON Lines log to resume and append to")
    parser.add_argument("--branch", metavar="ID", help="continue the session from entry ID")
    parser.add_argument(
        "--context-window", metavar="N", type=int, default=DEFAULT_CONTEXT_WINDOW,
        help="tokens the model reads at most; default 128000",
    )
    parser.add_argument(
        "--reserve-tokens", metavar="R", type=int,
        help="tokens kept for the reply; default min(16384, N // 4)",
    )
    parser.add_argument(
        "--extension", metavar="FILE.py", type=Path, action="append", default=[],
        help="load an extension (repeatable): its tools are offered besides --tools",
    )
    parser.add_argument(
        "--trust-project-extensions", action="store_true",
        help=f"also load ROOT/{PROJECT_RESOURCES}/extensions/*.py; without it they are skipped",
    )
    parser.add_argument(
        "--user-root", metavar="DIR", type=Path, default=Path.home() / PROJECT_RESOURCES,
        help=f"your own skills and prompt templates; default ~/{PROJECT_RESOURCES}",
    )
    parser.add_argument(
        "--mcp-config", type=Path, metavar="FILE", help="MCP servers to start: {\"mcpServers\": {NAME: {\"command\": ...}}}"
    )
    parser.add_argument("--mode", choices=MODES, help="text (the default), json or interactive")
    parser.add_argument("--interactive", action="store_true", help="the same as --mode interactive")
    parser.add_argument(  # chapter 19: a durable run
        "--durable", type=Path, metavar="FILE",
        help="keep the run in a SQLite file that survives a crash; without PROMPT, resume it",
    )
    args = parser.parse_args(argv)
    args.mode = choose_mode(parser, args)
    if args.mode != "interactive" and args.prompt is None and sys.stdin.isatty() and args.durable is None:
        parser.error("give a PROMPT, or pipe prompts into stdin, one a line")
    if args.durable is not None and conflict(args) is not None:  # chapter 19: what rules out --durable
        parser.error(conflict(args))
    if args.branch is not None and args.session is None:
        parser.error("--branch needs --session")
    if args.context_window < 1:
        parser.error(f"--context-window must be at least 1, got {args.context_window}")
    if args.reserve_tokens is None:
        args.reserve_tokens = default_reserve(args.context_window)
    if not 0 <= args.reserve_tokens < args.context_window:
        parser.error(f"--reserve-tokens must be at least 0 and below --context-window, got {args.reserve_tokens}")
    if args.max_turns < 1:
        parser.error(f"--max-turns must be at least 1, got {args.max_turns}")
    if not args.root.is_dir():
        parser.error(f"--root {args.root} is not a directory")
    if args.bash_timeout <= 0:
        parser.error(f"--bash-timeout must be above 0, got {args.bash_timeout:g}")
    try:
        args.tools = tool_names(args.tools)
    except ValueError as error:
        parser.error(f"--tools: {error}")
    args.defer = checked_defer(parser.prog, args.defer, args.tools)
    args.mcp_servers = checked_config(parser.prog, args.mcp_config)
    if (args.base_url is None) == (args.models is None):
        parser.error("give --base-url URL, or --models FILE (which names each model's server), not both")
    args.catalog = checked_models(parser.prog, args.models, args.model)
    return args


def checked_models(prog: str, path: Path | None, selected: str) -> ModelCatalog | None:
    """The --models catalog (None without the flag); a bad file or a --model it lacks is one line and exit 2."""
    if path is None:
        return None
    try:
        catalog = load_models(path)
        if selected not in catalog:
            raise ModelsConfigError(f"--model {selected}: not a model of {path} (its models: {', '.join(catalog.ids())})")
    except ModelsConfigError as error:
        print(f"{prog}: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    return catalog


def checked_config(prog: str, path: Path | None) -> list:
    """The --mcp-config servers ([] without the flag); a config that is not valid is one line and exit 2."""
    if path is None:
        return []
    try:
        return load_config(path)
    except ConfigError as error:
        print(f"{prog}: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def checked_defer(prog: str, spec: str | None, direct: list[str]) -> list[str]:
    """The --defer names ([] without the flag); a bad one is one line on stderr and exit 2."""
    if spec is None:
        return []
    try:
        return deferred_names(spec, direct)
    except ValueError as error:
        print(f"{prog}: --defer: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def choose_mode(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """--mode, or --interactive; without either, interactive on a terminal with no PROMPT, else text."""
    if args.interactive and args.mode not in (None, "interactive"):
        parser.error(f"--interactive contradicts --mode {args.mode}")
    mode = "interactive" if args.interactive else args.mode
    if mode is None:
        on_terminal = sys.stdin.isatty() and sys.stdout.isatty()
        mode = "interactive" if on_terminal and args.prompt is None else "text"
    if mode == "interactive" and args.prompt is not None:
        parser.error("interactive mode takes no PROMPT: type it at the prompt")
    return mode


async def run(
    args: argparse.Namespace, model: ToolUsingModel, registry: ToolRegistry, session: OpenSession | None,
    resources: Resources, received: list[int], extensions: Sequence[Extension] = (),
    servers: McpServers | None = None, router: Router | None = None,
) -> int | None:
    """One Runtime for the whole run, rendered by the chosen mode, and disposed at the end.

    `received` collects the stop signals; None: one of them cancelled the run before it was over.
    The MCP servers, if any, are started first and closed last, whatever happens in between.
    """
    limits = ContextLimits(args.context_window, args.reserve_tokens)
    status = None
    async with trio.open_nursery() as nursery:
        try:
            if servers is not None:
                try:
                    await servers.start(nursery)
                except McpStartError as error:  # nothing was sent
                    print(error, file=sys.stderr)
                    return 2
                await servers.wait_for_direct()  # the first request must declare their tools
            runtime = Runtime(
                model, registry, nursery, system_prompt=resources.sections, extensions=extensions,
                session=session, limits=limits, max_turns=args.max_turns, router=router,
            )
            if servers is not None:
                servers.attach(runtime.agent.set_system_section)
            prompts = expand_prompts(read_prompts(args.prompt, sys.stdin), resources.templates)
            if args.mode == "interactive":
                status = await run_interactive(runtime, args.session, resources.templates, received)
            elif args.mode == "json":
                status = await run_json(runtime, prompts, received, nursery.cancel_scope)
            else:
                status = await run_text(runtime, prompts, received, nursery.cancel_scope)
            await runtime.dispose()
        finally:
            if servers is not None:
                await servers.close()  # shielded inside: no server outlives the agent
        nursery.cancel_scope.cancel()  # the runtime's queue has ended
    return status


def exposed_tools(args: argparse.Namespace) -> list[Tool]:
    """The --tools as direct tools, then the --defer tools as deferred ones."""
    tools = chosen_tools(args.root, [*args.tools, *args.defer], args.bash_timeout)
    return [attrs.evolve(tool, exposure=DEFERRED) if tool.name in args.defer else tool for tool in tools]


def main(argv: list[str] | None = None) -> int:
    """Run the prompt, or every line of stdin; the exit status says how the session ended."""
    args = parse_args(argv)
    try:
        session = open_session(args.session, args.branch, args.model) if args.session else None
    except SessionWriteError as error:  # the model change did not reach the disk: send nothing
        print(f"{error}; nothing was sent", file=sys.stderr)
        return os.EX_IOERR
    except (SessionError, OSError) as error:  # refused before anything is sent or written
        print(error, file=sys.stderr)
        return 2
    router = None
    if args.catalog is not None:  # every request is routed; a call outside the loop too
        router = Router(args.catalog, args.model, session.router_states if session is not None else {})
        model: ToolUsingModel = DirectModel(router)
    else:
        model = OpenAICompatibleModel(
            base_url=args.base_url, model=args.model, api_key=os.environ.get(API_KEY_VARIABLE)
        )
    tools = exposed_tools(args)
    resources = load_resources(args.root, args.user_root)
    paths = extension_paths(args.extension, args.root, args.trust_project_extensions)
    searching = [TOOL_SEARCH] if args.defer or args.mcp_servers else []
    scripting = [CODEMODE] if args.codemode else []
    extensions = load_extensions(paths, [tool.name for tool in tools] + searching + scripting)
    registry = ExtensionRegistry(with_skills(tools, resources.skills), extensions)
    servers = McpServers(args.mcp_servers, registry) if args.mcp_servers else None
    if searching:
        search = tool_search_tool(registry)
        if servers is not None:  # a search waits for the servers still connecting
            search = attrs.evolve(search, execute=servers.searching(search.execute))
        registry.register(search)
    if args.codemode:  # last: its description lists every tool a script may call
        registry.register(codemode_tool(registry))
    if args.durable is not None:  # chapter 19: the run lives in a SQLite file, not in a Runtime
        return run_durable(args, model, registry, "\n\n".join(resources.sections.values()) or None)
    received: list[int] = []  # the stop signals that arrived, in order
    try:
        status = trio.run(run, args, model, registry, session, resources, received, extensions, servers, router)
    except KeyboardInterrupt:  # a Ctrl-C before the run could listen
        status, received = None, [signals.SIGINT]
    if status is None:
        print(f"\nstopped by {signals.Signals(received[0]).name}", file=sys.stderr)
    if received:
        return 128 + received[0]
    return status


if __name__ == "__main__":
    sys.exit(main())
