"""Every rebuild lesson from chapter 03 on ends with "How pi does it": upstream pi's code for the
same job, cited by repository, path and commit, and one transfer exercise.

The section names what pi does differently and why; the citation lets a reader open the very
file at the very commit the comparison was written against, so it must name a repository the
course follows, a file path and a full 40-hex commit.
"""

from __future__ import annotations

import re

import pytest

from conftest import REPO
from course.catalog import load_catalog

HEADING = "## How pi does it"
FIRST_CHAPTER = 3
# The repositories this edition follows: upstream pi itself, and the TypeScript course and its textbook.
UPSTREAM = ("badlogic/pi-mono", "unofn/pi", "unofn/pi-textbook")
COMMIT = re.compile(r"`[0-9a-f]{40}`")
PATH = re.compile(r"`[\w.-]+(?:/[\w.-]+)*/[\w-]+\.\w+`")
TRANSFER = "**Transfer exercise.**"

CHAPTERS = [chapter for chapter in load_catalog(REPO).chapters
            if chapter.mode == "rebuild" and int(chapter.nn) >= FIRST_CHAPTER]


def upstream_problems(lesson: str) -> list[str]:
    """What the lesson's "How pi does it" section lacks; [] when it is there, last, and cited."""
    headings = [line for line in lesson.splitlines() if line.startswith("## ")]
    if HEADING not in headings:
        return [f"no '{HEADING}' section"]
    problems = []
    if headings.count(HEADING) > 1:
        problems.append(f"'{HEADING}' appears {headings.count(HEADING)} times")
    if headings[-1] != HEADING:
        problems.append(f"'{HEADING}' is not the last section (it is followed by '{headings[-1]}')")
    section = lesson.split("\n" + HEADING + "\n", 1)[-1].split("\n## ", 1)[0]
    if not any(f"`{repo}`" in section for repo in UPSTREAM):
        problems.append(f"names none of the repositories {', '.join(UPSTREAM)} (in backticks)")
    if not PATH.search(section):
        problems.append("cites no file path (in backticks, such as `packages/agent/src/agent.ts`)")
    if not COMMIT.search(section):
        problems.append("cites no commit (40 hex digits, in backticks)")
    if TRANSFER not in section:
        problems.append(f"has no '{TRANSFER}'")
    return problems


def test_the_rebuild_chapters_from_03_on_are_checked() -> None:
    assert [chapter.nn for chapter in CHAPTERS][:1] == ["03"]
    assert len(CHAPTERS) >= 12


@pytest.mark.parametrize("chapter", CHAPTERS, ids=[chapter.nn for chapter in CHAPTERS])
def test_every_rebuild_lesson_ends_with_how_pi_does_it_cited_by_repo_path_and_commit(chapter) -> None:
    assert upstream_problems(chapter.lesson.read_text(encoding="utf-8")) == [], chapter.name


def test_a_lesson_without_a_cited_section_is_named_with_what_it_lacks() -> None:
    commit = "0123456789abcdef0123456789abcdef01234567"
    good = (f"# Chapter\n\n## Summary\n\nDone.\n\n{HEADING}\n\nPi's loop is `packages/agent/src/agent-loop.ts` "
            f"in `badlogic/pi-mono` at commit `{commit}`.\n\n{TRANSFER} Change it.\n")
    assert upstream_problems(good) == []
    assert upstream_problems("# Chapter\n\n## Summary\n\nDone.\n") == [f"no '{HEADING}' section"]
    assert upstream_problems(good + "\n## Summary\n\nAgain.\n") == [
        f"'{HEADING}' is not the last section (it is followed by '## Summary')"]
    bare = good.replace("`badlogic/pi-mono`", "pi").replace(f"`{commit}`", commit[:7])
    assert upstream_problems(bare.replace("`packages/agent/src/agent-loop.ts`", "the loop")) == [
        f"names none of the repositories {', '.join(UPSTREAM)} (in backticks)",
        "cites no file path (in backticks, such as `packages/agent/src/agent.ts`)",
        "cites no commit (40 hex digits, in backticks)",
    ]
    assert upstream_problems(good.replace(TRANSFER, "Try:")) == [f"has no '{TRANSFER}'"]
