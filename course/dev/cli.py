"""`course dev`: the author's commands, one per tool, listed in the order an author works.

Each subcommand is the tool's own click command (its options, its help, its
exit statuses), imported only when it runs or when `course dev --help` lists
it, so the learner's commands never pay for loading the author's tools.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import click

# name: (module, attribute), in the order `course dev --help` lists them.
TOOLS: dict[str, tuple[str, str]] = {
    "verify": ("course.cli", "verify_command"),
    "checkpoint": ("course.cli", "checkpoint"),
    "depth": ("course.dev.depth", "main"),
    "cards": ("course.dev.cards", "main"),
    "target-diff": ("course.dev.target_diff", "main"),
    "carry": ("course.dev.carry", "main"),
    "scaffold": ("course.dev.scaffold", "main"),
    "fuzz": ("course.dev.fuzz_provider", "main"),
    "bench": ("course.dev.bench", "main"),
    "floors": ("course.dev.cli", "floors"),
}


class AuthorTools(click.Group):
    """The author's tools, loaded on demand, each listed with its whole first sentence."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(TOOLS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in TOOLS:
            return None
        module, attribute = TOOLS[cmd_name]
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command), f"{module}.{attribute} is not a click command"
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, command.get_short_help_str(limit=1_000))
                for name in self.list_commands(ctx)
                if (command := self.get_command(ctx, name)) is not None]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=AuthorTools, context_settings={"help_option_names": ["-h", "--help"]})
def dev() -> None:
    """The author's tools: prove, regenerate, carry, scaffold, measure.

    They work on the course that `course` finds: COURSE_ROOT, else the checkout
    you are in, else the installed course (read-only: the tools that write
    chapter files need a checkout).
    """


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("pyproject", required=False, type=click.Path(dir_okay=False, path_type=Path))
def floors(pyproject: Path | None) -> None:
    """Print pip constraints that pin every dependency of PYPROJECT to its floor.

    PYPROJECT defaults to pyproject.toml in the current directory. CI installs
    these versions (`pip install -c FILE`) to prove each floor holds. Exit
    status: 0 printed, 2 unreadable file or a dependency without a floor.
    """
    from course.dev.floors import main

    sys.exit(main([str(pyproject)] if pyproject is not None else []))
