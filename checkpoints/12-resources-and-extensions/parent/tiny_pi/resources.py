"""Resources: what the agent is told about a project before the first prompt.

Three kinds, all plain files a person writes:

- context files: `AGENTS.md` in the root and in each of its parents, sent
  in the system prompt, outermost first, each under its path;
- skills: `RESOURCE_ROOT/skills/NAME/SKILL.md`, front matter `name` and
  `description`, then a body. The system prompt lists every skill's name,
  description and path; the body is read only when the model asks for it
  (`activate`, through the `read` tool), so a hundred skills cost a hundred
  lines, not a hundred files;
- prompt templates: `RESOURCE_ROOT/prompts/NAME.md` with `{{key}}`
  placeholders; the prompt `/NAME key=value ...` is sent as the filled-in text.

Skills and templates come from several resource roots, the project's
(`ROOT/.tiny_pi`) first, then the user's (`~/.tiny_pi`): the first root
wins a name clash, and every list is sorted by name.

Every resource file is read only when its real path (symlinks and `..`
followed) is inside the directory it was found in: an AGENTS.md inside its
own directory, the project's `.tiny_pi` inside the project, a skill or a
template inside its resource root. Anything else, a symlink loop included,
is skipped with one warning line, and the run goes on without it.
"""

from __future__ import annotations

import errno
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import trio
from attrs import evolve, frozen

from tiny_pi.abort import AbortSignal
from tiny_pi.messages import TextContent, text
from tiny_pi.tools import Tool

CONTEXT_FILE = "AGENTS.md"
PROJECT_RESOURCES = ".tiny_pi"
SKILL_FILE = "SKILL.md"
CONTEXT_INTRO = "Instructions for this project, from its AGENTS.md files, outermost first:"
SKILLS_INTRO = (
    "Skills: instructions for special tasks. When a task matches a skill's description, "
    "read the skill's file with the read tool before you start."
)
LOOP = "leads through a symbolic link loop"
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z0-9_-]+)\s*\}\}")

Warn = Callable[[str], None]


class SkillError(ValueError):
    """A resource file that cannot be used: a skill's broken front matter, or a real path that leaves its root."""


class TemplateError(ValueError):
    """A `/NAME ...` prompt that cannot be expanded; nothing is sent."""


@frozen
class ContextFile:
    """One AGENTS.md: where it is, and what it says."""

    path: Path
    text: str


@frozen
class Skill:
    """A skill as the catalog lists it: its body stays on disk until it is activated."""

    name: str
    description: str
    path: Path
    root: Path


@frozen
class Template:
    """A prompt template: `/name key=value ...` becomes `text` with its placeholders filled."""

    name: str
    path: Path
    text: str


@frozen
class Resources:
    """Everything one run loads: the system prompt's sections, the skills, the templates."""

    sections: dict[str, str]
    skills: tuple[Skill, ...]
    templates: dict[str, Template]


def warn_on_stderr(line: str) -> None:
    """The default for warnings: one line on stderr, and the run goes on."""
    print(line, file=sys.stderr)


def read_or_warn(path: Path, root: Path, warn: Warn) -> str | None:
    """The UTF-8 text of a resource file inside `root`, or None after one warning line: it is skipped, the run goes on."""
    raise NotImplementedError("lab 12.1: read a resource file, or warn and skip it")


def context_files(root: Path, warn: Warn = warn_on_stderr) -> list[ContextFile]:
    """Every AGENTS.md from the outermost parent of `root` down to `root` itself."""
    raise NotImplementedError("lab 12.1: the AGENTS.md files from the outermost parent to the root")


def resource_roots(root: Path, user_root: Path, warn: Warn = warn_on_stderr) -> list[Path]:
    """Where skills and templates are searched, in order: the project's, then the user's.

    The project's root counts only when its real path is inside the project;
    the user's may lead anywhere (it is theirs). One that leads outside, or
    through a symlink loop, is skipped with one warning.
    """
    raise NotImplementedError("lab 12.1: the resource roots, the project's first")


def real_path_inside(path: Path, root: Path) -> Path:
    """The real location of `path`, refused when it is not inside the real location of `root`."""
    raise NotImplementedError("lab 12.1: a real path inside a real root")


def real_path(path: Path) -> Path:
    """Where `path` really leads, symlinks and `..` followed; a symlink loop is a SkillError.

    The strict realpath says ELOOP on every Python; Path.resolve() raises
    RuntimeError for a loop on 3.11 and 3.12, and nothing at all on 3.13.
    """
    raise NotImplementedError("lab 12.1: a real path, a symlink loop refused")


def read_front_matter(path: Path) -> dict[str, str]:
    """The `key: value` lines between the first two `---` lines; the body after them is not read."""
    raise NotImplementedError("lab 12.1: read a skill's front matter")


def read_skill(path: Path, root: Path) -> Skill:
    """The catalog entry of one SKILL.md: its name must be its directory's, its description not empty."""
    raise NotImplementedError("lab 12.1: one skill's catalog entry")


def find_skills(roots: Sequence[Path], warn: Warn = warn_on_stderr) -> list[Skill]:
    """Every usable skill of every root, sorted by name; the first root wins a clash."""
    raise NotImplementedError("lab 12.1: the skill catalog")


def activate(skill: Skill) -> str:
    """The skill's body, read now: the text after its front matter, if its file is still inside its root."""
    raise NotImplementedError("lab 12.2: activate a skill")


def with_skills(tools: Sequence[Tool], skills: Sequence[Skill]) -> list[Tool]:
    """The tools, with `read` taught one thing more: a listed skill's path activates that skill."""
    raise NotImplementedError("lab 12.2: read activates a listed skill")


def find_templates(roots: Sequence[Path], warn: Warn = warn_on_stderr) -> dict[str, Template]:
    """Every `prompts/NAME.md` of every root, by name, sorted; the first root wins a clash."""
    raise NotImplementedError("lab 12.2: find the prompt templates")


def template_arguments(words: str) -> dict[str, str]:
    """`file=a.py focus="error handling"` as a dict; quotes work as in a shell."""
    raise NotImplementedError("lab 12.2: a template's key=value arguments")


def fill(template: Template, arguments: Mapping[str, str]) -> str:
    """The template's text with every `{{key}}` replaced; a missing argument is an error naming it."""
    raise NotImplementedError("lab 12.2: fill a template's placeholders")


def expand_prompt(prompt: str, templates: Mapping[str, Template]) -> str:
    """`/NAME key=value ...` as its template's filled-in text; any other prompt as it is."""
    raise NotImplementedError("lab 12.2: expand a /NAME prompt")


def expand_prompts(prompts: Iterator[str], templates: Mapping[str, Template]) -> Iterator[str]:
    """Each prompt expanded as it is read; a TemplateError ends the iteration."""
    raise NotImplementedError("lab 12.4: expand every prompt as it is read")


def system_sections(files: Sequence[ContextFile], skills: Sequence[Skill]) -> dict[str, str]:
    """The system prompt's sections: the context files, then the skill catalog; none without them."""
    raise NotImplementedError("lab 12.1: the system prompt's sections")


def load_resources(root: Path, user_root: Path, warn: Warn = warn_on_stderr) -> Resources:
    """Everything of `root` and its resource roots that a run needs, read once before it starts."""
    raise NotImplementedError("lab 12.4: load a run's resources")
