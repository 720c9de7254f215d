"""Scaffold the next chapter: `checkpoints/NN-slug/` after the last one, ready to fill in.

    course dev scaffold tool-contract --title "The tool contract"

A new chapter has to satisfy lineage and load with the catalog from its
first minute, or the author's first `course verify` drowns in noise about
the scaffolding instead of about the chapter. So the scaffold starts from
the previous target, adds exactly what chapter.toml declares, and fills
every required key with a placeholder that names itself (TODO) so the
verify checklist becomes the author's to-do list.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import click
from attrs import frozen

from course.cards import CARD_BEGIN, CARD_END, REDLIGHTS_BEGIN, REDLIGHTS_END, with_card, with_redlight_note
from course.catalog import DIR_PATTERN, Catalog, Chapter, chapter_name, chapter_nn, load_catalog, load_chapter
from course.dev import checkout_root
from course.errors import CourseError, UsageError
from course.schema import toml_document
from course.workspace import copy_snapshot

STUB_TEST = "test_write_the_focused_tests"
PLACEHOLDER_PATCH = "redlight/todo.patch"
FRESH_PYTEST_INI = "[pytest]\npythonpath = .\ntestpaths = tests\n"


@frozen
class Plan:
    """What the scaffold writes, decided before anything is written."""

    number: int
    slug: str
    title: str
    summary: str
    mode: str
    teaching_files: tuple[str, ...]
    previous_target: Path | None
    left_behind: tuple[str, ...] = ()  # what the previous chapter leaves behind: not copied

    @property
    def nn(self) -> str:
        return chapter_nn(self.number)

    @property
    def name(self) -> str:
        return chapter_name(self.number, self.slug)

    @property
    def focused_test(self) -> str:
        return f"tests/test_{self.nn}_{self.slug.replace('-', '_')}.py"

    @property
    def red_light_module(self) -> str | None:
        """The module the stub test imports, when the first teaching file is a new module.

        Importing it makes the parent's first red light a real one (the module
        does not exist yet), the same kind the finished chapters show.
        """
        first = self.teaching_files[0]
        exists = self.previous_target is not None and (self.previous_target / first).exists()
        if exists or not first.endswith(".py") or first.endswith("__init__.py"):
            return None
        return first[: -len(".py")].replace("/", ".")


def plan_chapter(
    catalog: Catalog, slug: str, title: str, summary: str, mode: str, teaching_files: tuple[str, ...]
) -> Plan:
    """Check the request against the course and decide number, files and red light."""
    number = catalog.chapters[-1].number + 1 if catalog.chapters else 0
    name = f"{number:02d}-{slug}"
    if DIR_PATTERN.match(name) is None:
        raise UsageError(f"{slug!r} is not a slug: use lowercase words joined by '-', e.g. tool-contract")
    if number > 99:
        raise UsageError("the course already has chapter 99; chapter numbers have two digits")
    taken = [chapter.name for chapter in catalog.chapters if chapter.slug == slug]
    if taken:
        raise UsageError(f"the slug {slug!r} is taken by {taken[0]}; chapter ids must stay unambiguous")
    for path in teaching_files:
        if path.startswith("/") or ".." in Path(path).parts or not path.strip():
            raise UsageError(f"teaching file {path!r} must be a relative path inside a snapshot")
    previous = catalog.chapters[-1].target if catalog.chapters else None
    left = catalog.chapters[-1].left_behind if catalog.chapters else ()
    return Plan(number, slug, title, summary, mode, teaching_files, previous, left)


def render_chapter_toml(plan: Plan) -> str:
    """The new chapter.toml: the plan's values, and every other key with its default (course.schema)."""
    node = f"{plan.focused_test}::{STUB_TEST}"
    module = plan.red_light_module
    if module is not None:
        red = ("collection-error", f"No module named '{module}'",
               f"The focused test imports {module}, which does not exist yet: writing it is this chapter.")
    else:
        red = ("failed", f"TODO chapter {plan.nn}",
               "TODO: one sentence on what the first red light means for the learner.")
    values = {
        "number": plan.number,
        "slug": plan.slug,
        "title": plan.title,
        "mode": plan.mode,
        "summary": plan.summary,
        "teaching_files": plan.teaching_files,
        "focused_tests": [plan.focused_test],
        "expected_passed": 1,
        "first_step": "TODO: what to do before looking at the target.",
        "first_red_light": {"kind": red[0], "fragments": [red[1]], "explanation": red[2]},
        "labs": [{
            "id": f"{plan.number}.1",
            "title": "TODO: the first lab",
            "nodes": [node],
            "expected_passed": 1,
            "goal": "TODO: what passing this lab proves.",
        }],
        "redlights": [{
            "id": f"{plan.number}.R1",
            "title": "TODO: the red-light exercise",
            "patch": PLACEHOLDER_PATCH,
            "test": node,
            "fragment": "TODO",
            "learn": "TODO: what the learner should take away.",
        }],
    }
    comments = {
        "expected_passed": "TODO: passed tests of the focused file on target",
        "labs.nodes": 'TODO: or select = "parts of test names joined by or"',
        "redlights.patch": "TODO: a unified diff against target (git apply -p1)",
    }
    return toml_document(Chapter, values, comments)


def render_focused_test(plan: Plan) -> str:
    module = plan.red_light_module
    files = ", ".join(plan.teaching_files)
    lines = [
        f'"""Focused tests of chapter {plan.nn}: {plan.title}.',
        "",
        "Scaffolded by `course dev scaffold`. Replace the stub below with the chapter's",
        "real tests, keep this file identical in parent/ and target/, then update",
        "expected_passed, [[labs]] and [[redlights]] in chapter.toml.",
        '"""',
        "",
    ]
    if module is not None:
        lines += [f"import {module}  # noqa: F401  (missing in parent/: the first red light)", ""]
    lines += [
        "",
        f"def {STUB_TEST}():",
        "    raise AssertionError(",
        f'        "TODO chapter {plan.nn}: write the focused tests of {files} "',
        f'        "in {plan.focused_test} (parent/ and target/)"',
        "    )",
        "",
    ]
    return "\n".join(lines)


def render_teaching_stub(plan: Plan, path: str) -> str:
    if path.endswith(".py"):
        return f'"""TODO chapter {plan.nn}: {plan.title}. The finished code the learner writes."""\n'
    return f"TODO chapter {plan.nn}: {plan.title}\n"


def render_placeholder_patch(plan: Plan) -> str:
    return (
        f"TODO chapter {plan.nn}: replace this text with the red-light exercise's patch,\n"
        "a unified diff against target/ with a/ and b/ prefixes (git diff output works).\n"
        "Until then `course verify` reports that this patch does not apply.\n"
    )


def render_lesson(plan: Plan) -> str:
    return "\n".join([
        f"# Chapter {plan.nn} · {plan.title}",
        "",
        "## What you will get",
        "",
        f"TODO: {plan.summary}",
        "",
        f"## Checkpoint {plan.nn}",
        "",
        CARD_BEGIN,
        CARD_END,
        "",
        "## Explanation",
        "",
        "TODO: the explanation, with small runnable examples (see checkpoints/README.md for the",
        "three kinds of python blocks).",
        "",
        "## Labs",
        "",
        f"### Lab {plan.number}.1 · TODO",
        "",
        "## Red-light exercises",
        "",
        REDLIGHTS_BEGIN,
        REDLIGHTS_END,
        "",
        f"### {plan.number}.R1 · TODO",
        "",
        "## Acceptance questions",
        "",
        "TODO",
        "",
        "## Summary",
        "",
        "TODO",
        "",
        "## How pi does it",
        "",
        "TODO: what upstream pi's code for the same job does differently, and why, cited by",
        "repository, path and 40-hex commit (tests/test_lesson_upstream.py checks it); then a",
        "**Transfer exercise.** the learner can try on their own code, and what they should observe.",
        "",
    ])


def build_chapter(plan: Plan, directory: Path) -> None:
    """Write the whole chapter into `directory` (a fresh, empty one)."""
    for side in ("parent", "target"):
        snapshot = directory / side
        if plan.previous_target is not None:
            copy_snapshot(plan.previous_target, snapshot)
            for name in plan.left_behind:
                (snapshot / name).unlink(missing_ok=True)
        else:
            (snapshot / "tiny_pi").mkdir(parents=True)
            (snapshot / "pytest.ini").write_text(FRESH_PYTEST_INI, encoding="utf-8")
            (snapshot / "tiny_pi" / "__init__.py").write_text('"""tiny_pi: a tiny agent runtime."""\n', encoding="utf-8")
        test = snapshot / plan.focused_test
        test.parent.mkdir(parents=True, exist_ok=True)
        test.write_text(render_focused_test(plan), encoding="utf-8")
    for path in plan.teaching_files:
        stub = directory / "target" / path
        if not stub.exists():
            stub.parent.mkdir(parents=True, exist_ok=True)
            stub.write_text(render_teaching_stub(plan, path), encoding="utf-8")
    (directory / "redlight").mkdir()
    (directory / PLACEHOLDER_PATCH).write_text(render_placeholder_patch(plan), encoding="utf-8")
    (directory / "chapter.toml").write_text(render_chapter_toml(plan), encoding="utf-8")
    (directory / "README.md").write_text(render_lesson(plan), encoding="utf-8")
    chapter = load_chapter(directory)
    lesson = with_redlight_note(with_card(render_lesson(plan), chapter), chapter)
    (directory / "README.md").write_text(lesson, encoding="utf-8")


def scaffold(root: Path, plan: Plan) -> Path:
    """Build the chapter beside its final place and rename it in: all or nothing."""
    checkpoints = root / "checkpoints"
    final = checkpoints / plan.name
    if final.exists():
        raise UsageError(f"{final} already exists; nothing was changed")
    staging = Path(tempfile.mkdtemp(prefix=f".scaffold-{plan.name}-", dir=checkpoints))
    try:
        build = staging / plan.name  # named NN-slug so load_chapter accepts it
        build.mkdir()
        build_chapter(plan, build)
        os.rename(build, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("slug")
@click.option("--title", required=True, help="The chapter's title, as the lesson and `course list` show it.")
@click.option("--summary", default="TODO: one line shown by `course list`.", show_default=True,
              help="The one-line summary.")
@click.option("--mode", type=click.Choice(["rebuild", "observe"]), default="rebuild", show_default=True,
              help="rebuild: practice starts from parent; observe: practice exports target.")
@click.option("--teaching-file", "teaching_files", multiple=True, metavar="PATH",
              help="A file the learner writes, relative to a snapshot (repeatable). "
                   "Default: tiny_pi/<slug with _>.py.")
def main(slug: str, title: str, summary: str, mode: str, teaching_files: tuple[str, ...]) -> None:
    """Scaffold chapter NN-SLUG after the last chapter of the course.

    \b
    What it writes, in checkpoints/NN-SLUG/:
      parent/   a copy of the previous target plus the focused test stub
      target/   the same plus a stub of each new teaching file
      chapter.toml, README.md (lesson skeleton, card generated), redlight/todo.patch

    The focused test stub (tests/test_NN_slug.py, identical in parent/ and
    target/) is one failing test that says what to write. When the first
    teaching file is a new module, the stub imports it, so the parent's first
    red light is the real "No module named ..." collection error; otherwise
    the red light is the stub's own failure ("TODO chapter NN").

    chapter.toml gets what the catalog requires, as placeholders: one lab
    selecting the stub test (expected_passed = 1) and one red-light exercise
    pointing at redlight/todo.patch, a text file that is not yet a patch.
    The chapter loads and its lineage holds at once; `course verify NN` then
    lists what is left: the target's tests fail until the stub is replaced,
    and the placeholder patch does not apply until it is written.

    Nothing is written when the slug is taken or invalid; a failure midway
    leaves no half-made chapter.
    """
    try:
        root = checkout_root("scaffold")
        catalog = load_catalog(root)
        files = teaching_files or (f"tiny_pi/{slug.replace('-', '_')}.py",)
        plan = plan_chapter(catalog, slug, title, summary, mode, tuple(files))
        directory = scaffold(root, plan)
    except CourseError as error:
        click.echo(f"scaffold: {error}", err=True)
        sys.exit(error.exit_code)
    click.echo(f"scaffolded {directory}")
    click.echo(f"  parent/ = {catalog.chapters[-1].name}/target + {plan.focused_test}" if catalog.chapters
               else f"  parent/ = a fresh snapshot + {plan.focused_test}")
    click.echo(f"  target/ = parent/ + {', '.join(plan.teaching_files)}")
    click.echo(f"next: write the tests and code, fill in the TODOs of chapter.toml, then "
               f"`course dev cards` and `course verify {plan.nn}`")


if __name__ == "__main__":
    main()
