"""Extensions: Python files that add tools, watch the agent and guard its tool calls.

An extension is a module with a `register(api)` function. `register` may
call `api.add_tool`, `api.subscribe`, `api.before_tool_call` and
`api.after_tool_call`; all of it is staged on the api object and committed
only when `register` returns, so an extension either loads whole or not at
all. An extension runs in the agent's own process with the user's rights:
the isolation below guards against its bugs, not against its intent, which
is why extensions found in a project load only when the user trusts them.

Isolation, rule by rule:
- an extension that fails to load is named in one line on stderr; the run
  goes on without it, and nothing of it is registered;
- a tool name that is already taken refuses the whole extension;
- its tool that raises becomes an error result (the tool contract, chapter 06);
- its listener that raises is reported once and removed;
- a before_tool_call hook that raises or does not answer in time denies the
  call (fails closed); an after_tool_call hook sees each result once and
  cannot replace it.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Awaitable, Callable, Collection, Iterable, Sequence

import trio
from attrs import frozen

from tiny_pi.abort import AbortSignal
from tiny_pi.agent_events import AgentEvent
from tiny_pi.messages import TextContent, ToolCall, ToolResultMessage, text
from tiny_pi.resources import PROJECT_RESOURCES
from tiny_pi.stateful_agent import Agent
from tiny_pi.tools import Execute, Tool, ToolRegistry

HOOK_TIMEOUT = 5.0  # seconds a before_tool_call hook has to answer
EXTENSIONS_DIR = "extensions"
NOT_LOADED = "extension {path} not loaded: {reason}"
SKIPPED = "extension {path} skipped: project extensions load only with --trust-project-extensions"
BLOCKED = "Tool {tool!r} was blocked by extension {name!r}: {reason}"
HOOK_FAILED = "extension {name}: before_tool_call hook {problem}; the call is denied"
AFTER_HOOK_RAISED = "extension {name}: after_tool_call hook raised {kind}: {error}; the result stands"
LISTENER_REMOVED = "extension {name}: listener raised {kind}: {error}; it is removed"

ToolFunction = Callable[[dict[str, Any]], "str | Awaitable[str]"]
Listener = Callable[[AgentEvent], None]
BeforeHook = Callable[[ToolCall], Any]
AfterHook = Callable[[ToolCall, ToolResultMessage], Any]


class ExtensionError(Exception):
    """An extension that cannot be loaded, and why."""


@frozen
class Extension:
    """A loaded extension: everything its register(api) added, committed at once."""

    name: str
    path: Path
    tools: tuple[Tool, ...]
    listeners: tuple[Listener, ...]
    before_hooks: tuple[BeforeHook, ...]
    after_hooks: tuple[AfterHook, ...]


class ExtensionAPI:
    """What `register(api)` may call; everything is staged here until register returns."""

    def __init__(self) -> None:
        self.tools: list[Tool] = []
        self.listeners: list[Listener] = []
        self.before_hooks: list[BeforeHook] = []
        self.after_hooks: list[AfterHook] = []

    def add_tool(self, name: str, description: str, parameters: dict[str, Any], function: ToolFunction) -> None:
        """A tool the model is offered; `function(arguments)` returns its text, or an awaitable of it."""
        self.tools.append(Tool(name, description, parameters, tool_execute(function)))

    def subscribe(self, listener: Listener) -> None:
        """`listener(event)` is told every agent event, as the agent's own listeners are."""
        self.listeners.append(listener)

    def before_tool_call(self, hook: BeforeHook) -> None:
        """`hook(call)` is asked before a checked call runs: None lets it run, any other answer is a reason to deny it."""
        self.before_hooks.append(hook)

    def after_tool_call(self, hook: AfterHook) -> None:
        """`hook(call, result)` is told each result once; what it returns is ignored."""
        self.after_hooks.append(hook)


def tool_execute(function: ToolFunction) -> Execute:
    """A tool's execute around an extension's function: text in, one text block out."""

    async def execute(arguments: dict[str, Any], *, signal: AbortSignal) -> list[TextContent]:
        reply = function(arguments)
        if inspect.isawaitable(reply):
            reply = await reply
        if not isinstance(reply, str):
            raise TypeError(f"the tool function returned {type(reply).__name__}, not text")
        return [text(reply)]

    return execute


def import_file(path: Path) -> ModuleType:
    """Run the module at `path` once, as a module of its own; whatever it raises goes to the caller."""
    spec = importlib.util.spec_from_file_location(f"tiny_pi_extension_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ExtensionError("not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_extension(path: Path, taken: Collection[str]) -> Extension:
    """Import `path`, call its register(api) and commit what it staged; an error commits nothing."""
    register = getattr(import_file(path), "register", None)
    if not callable(register):
        raise ExtensionError("it has no register(api) function")
    api = ExtensionAPI()
    register(api)
    names = [tool.name for tool in api.tools]
    for name in names:
        if name in taken or names.count(name) > 1:
            raise ExtensionError(f"the tool name {name!r} is taken")
    return Extension(
        path.stem, path, tuple(api.tools), tuple(api.listeners), tuple(api.before_hooks), tuple(api.after_hooks)
    )


def load_extensions(paths: Iterable[Path], taken: Collection[str]) -> list[Extension]:
    """Every extension that loads, in order; one that does not is named on stderr and left out."""
    loaded: list[Extension] = []
    names = set(taken)
    for path in paths:
        try:
            extension = load_extension(path, names)
        except (Exception, SystemExit) as error:  # its failure, even sys.exit(), must not end the run
            print(NOT_LOADED.format(path=path, reason=f"{type(error).__name__}: {error}"), file=sys.stderr)
            continue
        names.update(tool.name for tool in extension.tools)
        loaded.append(extension)
    return loaded


def extension_paths(given: Sequence[Path], root: Path, trusted: bool) -> list[Path]:
    """The command line's extensions, then the project's when trusted; the others are said and never imported."""
    found = sorted((root / PROJECT_RESOURCES / EXTENSIONS_DIR).glob("*.py"))
    chosen = [os.path.realpath(path) for path in given]  # never raises: a symlink loop fails at import, in one line
    project = [path for path in found if os.path.realpath(path) not in chosen]
    if not trusted:
        for path in project:
            print(SKIPPED.format(path=path), file=sys.stderr)
        project = []
    return [*given, *project]


class ExtensionRegistry(ToolRegistry):
    """The registry of chapter 06 with the extensions' tools, and their hooks around every call."""

    def __init__(self, tools: Iterable[Tool], extensions: Sequence[Extension]) -> None:
        super().__init__([*tools, *(tool for extension in extensions for tool in extension.tools)])
        self.extensions = tuple(extensions)

    async def before_tool_call(self, call: ToolCall) -> str | None:
        """The first denial of any extension's hook, in load order; None when all let the call run."""
        for extension in self.extensions:
            for hook in extension.before_hooks:
                denial = await ask_hook(extension.name, hook, call)
                if denial is not None:
                    return denial
        return None

    def after_tool_call(self, call: ToolCall, result: ToolResultMessage) -> None:
        """Tell every after-hook the result; one that raises is reported, and the result stands."""
        for extension in self.extensions:
            for hook in extension.after_hooks:
                try:
                    hook(call, result)
                except Exception as error:
                    kind = type(error).__name__
                    print(AFTER_HOOK_RAISED.format(name=extension.name, kind=kind, error=error), file=sys.stderr)


async def ask_hook(name: str, hook: BeforeHook, call: ToolCall) -> str | None:
    """One hook's answer as a denial message, or None; a hook that raises or is too slow denies."""
    try:
        with trio.fail_after(HOOK_TIMEOUT):
            answer = hook(call)
            if inspect.isawaitable(answer):
                answer = await answer
    except trio.TooSlowError:
        problem = f"did not answer within {HOOK_TIMEOUT:g} s"
    except Exception as error:
        problem = f"raised {type(error).__name__}: {error}"
    else:
        return None if answer is None else BLOCKED.format(tool=call.name, name=name, reason=answer)
    print(HOOK_FAILED.format(name=name, problem=problem), file=sys.stderr)
    return BLOCKED.format(tool=call.name, name=name, reason=f"its hook {problem}")


def subscribe_listeners(agent: Agent, extensions: Sequence[Extension]) -> None:
    """Every extension's listeners on `agent`, each removed after the first exception it raises."""
    for extension in extensions:
        for listener in extension.listeners:
            subscribe_guarded(agent, extension.name, listener)


def subscribe_guarded(agent: Agent, name: str, listener: Listener) -> None:
    """`listener` on `agent`; when it raises, one line on stderr, and it hears nothing more."""

    def guarded(event: AgentEvent) -> None:
        try:
            listener(event)
        except Exception as error:
            unsubscribe()
            print(LISTENER_REMOVED.format(name=name, kind=type(error).__name__, error=error), file=sys.stderr)

    unsubscribe = agent.subscribe(guarded)
