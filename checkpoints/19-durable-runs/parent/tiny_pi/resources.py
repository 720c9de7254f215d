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
    try:
        return real_path_inside(path, root).read_text(encoding="utf-8")
    except (OSError, ValueError) as error:  # unreadable, not UTF-8 text, or leading outside its root
        warn(f"{path} skipped: {error}")
        return None


def context_files(root: Path, warn: Warn = warn_on_stderr) -> list[ContextFile]:
    """Every AGENTS.md from the outermost parent of `root` down to `root` itself."""
    base = root.resolve()
    found = []
    for directory in [*reversed(base.parents), base]:
        path = directory / CONTEXT_FILE
        text = read_or_warn(path, directory, warn) if path.is_file() or path.is_symlink() else None
        if text is not None:
            found.append(ContextFile(path, text))
    return found


def resource_roots(root: Path, user_root: Path, warn: Warn = warn_on_stderr) -> list[Path]:
    """Where skills and templates are searched, in order: the project's, then the user's.

    The project's root counts only when its real path is inside the project;
    the user's may lead anywhere (it is theirs). One that leads outside, or
    through a symlink loop, is skipped with one warning.
    """
    roots: list[Path] = []
    reals: list[Path] = []
    for candidate, home in ((root / PROJECT_RESOURCES, root), (user_root, user_root)):
        try:
            real = real_path_inside(candidate, home)
        except (OSError, ValueError) as error:
            warn(f"{candidate} skipped: {error}")
            continue
        if real not in reals:  # the same directory twice is searched once
            roots.append(candidate)
            reals.append(real)
    return roots


def real_path_inside(path: Path, root: Path) -> Path:
    """The real location of `path`, refused when it is not inside the real location of `root`."""
    real = real_path(path)
    if not real.is_relative_to(real_path(root)):
        raise SkillError(f"{path} leads outside its resource root {root}")
    return real


def real_path(path: Path) -> Path:
    """Where `path` really leads, symlinks and `..` followed; a symlink loop is a SkillError.

    The strict realpath says ELOOP on every Python; Path.resolve() raises
    RuntimeError for a loop on 3.11 and 3.12, and nothing at all on 3.13.
    """
    try:
        return Path(os.path.realpath(path, strict=True))
    except FileNotFoundError:  # nothing there (yet): where it would be
        return path.resolve()
    except OSError as error:
        if error.errno != errno.ELOOP:
            raise
        raise SkillError(f"{path} {LOOP}") from None


def read_front_matter(path: Path) -> dict[str, str]:
    """The `key: value` lines between the first two `---` lines; the body after them is not read."""
    with path.open(encoding="utf-8") as file:
        if file.readline().strip() != "---":
            raise SkillError("no front matter (the first line is not ---)")
        fields = {}
        for line in file:
            if line.strip() == "---":
                return fields
            key, colon, value = line.partition(":")
            if not colon:
                raise SkillError(f"front matter line {line.strip()!r} is not 'key: value'")
            fields[key.strip()] = value.strip()
    raise SkillError("the front matter is never closed with ---")


def read_skill(path: Path, root: Path) -> Skill:
    """The catalog entry of one SKILL.md: its name must be its directory's, its description not empty."""
    fields = read_front_matter(real_path_inside(path, root))
    name, description = fields.get("name", ""), fields.get("description", "")
    if not name or not description:
        raise SkillError("the front matter needs both name and description")
    if name != path.parent.name:
        raise SkillError(f"name {name!r} is not its directory's name {path.parent.name!r}")
    return Skill(name, description, path, root)


def find_skills(roots: Sequence[Path], warn: Warn = warn_on_stderr) -> list[Skill]:
    """Every usable skill of every root, sorted by name; the first root wins a clash."""
    skills: dict[str, Skill] = {}
    for root in roots:
        for folder in sorted(root.glob("skills/*")):
            path = folder / SKILL_FILE
            if not (path.is_symlink() or path.exists()):
                continue  # not a skill's folder (a link that loops is one: it is said below)
            try:
                skill = read_skill(path, root)
            except (ValueError, OSError) as error:  # SkillError, and a file that is not UTF-8 text
                warn(f"skill {path} skipped: {error}")
                continue
            skills.setdefault(skill.name, skill)
    return [skills[name] for name in sorted(skills)]


def activate(skill: Skill) -> str:
    """The skill's body, read now: the text after its front matter, if its file is still inside its root."""
    real = real_path_inside(skill.path, skill.root)
    lines = real.read_text(encoding="utf-8").splitlines(keepends=True)
    closing = [index for index, line in enumerate(lines) if index > 0 and line.strip() == "---"]
    if not lines or lines[0].strip() != "---" or not closing:
        raise SkillError(f"{skill.path} has lost its front matter")
    return "".join(lines[closing[0] + 1 :]).strip()


def with_skills(tools: Sequence[Tool], skills: Sequence[Skill]) -> list[Tool]:
    """The tools, with `read` taught one thing more: a listed skill's path activates that skill."""
    by_path = {str(skill.path): skill for skill in skills}

    def skill_read(read: Tool) -> Tool:
        async def execute(arguments: dict[str, Any], *, signal: AbortSignal) -> list[TextContent]:
            skill = by_path.get(arguments["path"])
            if skill is None:
                return list(await read.execute(arguments, signal=signal))
            return [text(await trio.to_thread.run_sync(activate, skill))]

        return evolve(read, execute=execute)

    return [skill_read(tool) if tool.name == "read" else tool for tool in tools]


def find_templates(roots: Sequence[Path], warn: Warn = warn_on_stderr) -> dict[str, Template]:
    """Every `prompts/NAME.md` of every root, by name, sorted; the first root wins a clash."""
    templates: dict[str, Template] = {}
    for root in roots:
        for path in sorted(root.glob("prompts/*.md")):
            text = None if path.stem in templates else read_or_warn(path, root, warn)
            if text is not None:
                templates[path.stem] = Template(path.stem, path, text)
    return dict(sorted(templates.items()))


def template_arguments(words: str) -> dict[str, str]:
    """`file=a.py focus="error handling"` as a dict; quotes work as in a shell."""
    try:
        parts = shlex.split(words)
    except ValueError as error:
        raise TemplateError(f"cannot split the arguments: {error}") from None
    arguments = {}
    for part in parts:
        key, equals, value = part.partition("=")
        if not equals or not key:
            raise TemplateError(f"argument {part!r} is not key=value")
        arguments[key] = value
    return arguments


def fill(template: Template, arguments: Mapping[str, str]) -> str:
    """The template's text with every `{{key}}` replaced; a missing argument is an error naming it."""
    missing = [key for key in dict.fromkeys(PLACEHOLDER.findall(template.text)) if key not in arguments]
    if missing:
        needed = ", ".join(f"{key}=..." for key in missing)
        raise TemplateError(f"prompt template /{template.name} is missing {needed}")
    return PLACEHOLDER.sub(lambda match: arguments[match.group(1)], template.text)


def expand_prompt(prompt: str, templates: Mapping[str, Template]) -> str:
    """`/NAME key=value ...` as its template's filled-in text; any other prompt as it is."""
    if not prompt.startswith("/"):
        return prompt
    name, _, words = prompt[1:].partition(" ")
    template = templates.get(name)
    if template is None:
        known = ", ".join(f"/{known}" for known in templates) or "none"
        raise TemplateError(f"no prompt template /{name} (templates: {known})")
    return fill(template, template_arguments(words))


def expand_prompts(prompts: Iterator[str], templates: Mapping[str, Template]) -> Iterator[str]:
    """Each prompt expanded as it is read; a TemplateError ends the iteration."""
    for prompt in prompts:
        yield expand_prompt(prompt, templates)


def system_sections(files: Sequence[ContextFile], skills: Sequence[Skill]) -> dict[str, str]:
    """The system prompt's sections: the context files, then the skill catalog; none without them."""
    sections = {}
    if files:
        parts = [f"## {file.path}\n\n{file.text.strip()}" for file in files]
        sections["context"] = "\n\n".join([CONTEXT_INTRO, *parts])
    if skills:
        lines = [f"- {skill.name}: {skill.description} (file: {skill.path})" for skill in skills]
        sections["skills"] = "\n".join([SKILLS_INTRO, "", *lines])
    return sections


def load_resources(root: Path, user_root: Path, warn: Warn = warn_on_stderr) -> Resources:
    """Everything of `root` and its resource roots that a run needs, read once before it starts."""
    roots = resource_roots(root, user_root, warn)
    skills = find_skills(roots, warn)
    sections = system_sections(context_files(root, warn), skills)
    return Resources(sections, tuple(skills), find_templates(roots, warn))
