"""The one rule for "Next:": what a learner should do after a verdict.

`course test`, `course watch`, `course status` and `course list` all print a
next step; they all get it here, from the same record (course.status.LastTest,
the verdict `course test` saves) and the red-light state. Every command in
a step carries the practice dir when the learner typed one, quoted for the
shell (course.locate.suggest), so it works when pasted where it was printed.
"""

from __future__ import annotations

from typing import Sequence

from course.catalog import Chapter
from course.locate import suggest
from course.redlights import RedLightState
from course.progress import LastTest


def next_step(
    chapter: Chapter,
    last: LastTest | None,
    redlights: RedLightState | None,
    dir_words: Sequence[str] = (),
    following: Chapter | None = None,
    runner: str = "test",
    following_dir_words: Sequence[str] = (),
) -> str:
    """One sentence, ending in the command to run. `runner` is "test" or "watch" (lab moves).

    `following_dir_words` is the DIR for the next chapter's practice dir, when
    it should not go to the default place (course.locate.beside).
    """
    nn = chapter.nn
    words = list(dir_words)

    def command(name: str, *extra: str) -> str:
        return f"`{suggest(name, nn, *words, *extra)}`"

    if last is None or last.chapter != chapter.name:
        return f"run the focused tests: {command('test')}"
    seen = redlights.seen(chapter) if redlights is not None else []
    if seen and not last.ok:
        ids = " and ".join(redlight.id for redlight in seen)
        return f"restore your code, then run {command('test')}: green again completes {ids}"
    for check in last.checks:
        if check.kind == "lab" and not check.ok and check.lab is not None and chapter.mode == "observe":
            # The learner writes predictions, not code: the way on is the lesson's reasoning, not an edit.
            return (f"lab {check.lab} is not green yet: write any prediction still missing; "
                    "for a wrong one, read the lesson's fold that explains it and change the value only once "
                    f"you see why, then run {command(runner, '--lab', check.lab)}")
        if check.kind == "lab" and not check.ok and check.lab is not None:
            return (f"make lab {check.lab} green: {command(runner, '--lab', check.lab)} "
                    f"(stuck? {command('hint', '--lab', check.lab)})")
    if not last.ok:
        return f"read the first failure above, fix it, then run {command(runner)}"
    if last.lab is not None:
        ids = [lab.id for lab in chapter.labs]
        position = ids.index(last.lab) if last.lab in ids else len(ids)
        if position + 1 < len(ids):
            following_lab = chapter.labs[position + 1]
            return f"lab {following_lab.id} {following_lab.title}: {command(runner, '--lab', following_lab.id)}"
        return f"every lab at once: {command(runner)}"
    pending = redlights.pending(chapter) if redlights is not None else (chapter.redlights[0] if chapter.redlights else None)
    if pending is not None:
        # `course redlight` changes no code: it says what to break by hand and watches for the failure.
        return (f"the red-light exercise {pending.id} {pending.title}: {command('redlight')} says what to break "
                f"by hand and watches for the failure (or break it as the lesson says and run {command('test')} "
                "while it is broken)")
    if following is not None:
        practice = suggest("practice", following.nn, *following_dir_words)
        return f"chapter {chapter.nn} is done; on to chapter {following.nn}: `{practice}`"
    return f"chapter {chapter.nn} is done, the last chapter of the course (`course status` shows any left open)"
