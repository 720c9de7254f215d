"""`course redlight`: the learner breaks the code by hand; the course watches for the predicted failure.

A red-light exercise's patch was written against the chapter's target, and a
learner's own lines never match it (on trial learners' code it fitted none of
19 tries), so the course no longer changes the learner's code. It says what
to break, in the exercise's words (chapter.toml's `by_hand`), runs the
focused tests the way `course test` does (the verdict is saved, and the
exercise's state moves as it would there), and says in one line per run
whether the documented failure shows, and then whether the code is green again.

Each run ends in one of three states: `seen` (the exercise's test failed
showing its fragment), `green` (every focused test passed: with the failure
seen before, the exercise is now done), or `failing` (red, but not as the
exercise predicts). A line never names the test or the fragment before the
failure is seen: those are the prediction the exercise asks the learner to make.
The patches stay for authors: `course checkpoint` proves each one on the target.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from attrs import frozen

from course.catalog import Chapter, RedLight
from course.checklist import Check
from course.progress import read_last_test, save_result
from course.redlights import DONE, read, record, shows, start
from course.results import RunResult

SEEN = "seen"
GREEN = "green"
FAILING = "failing"


@frozen
class Observation:
    """What one run of the focused tests says about one red-light exercise."""

    exercise: RedLight
    state: str  # SEEN, GREEN or FAILING
    done: bool  # this run completed the exercise (green after it was seen)
    finished: bool  # the exercise is done, by this run or before
    summary: str  # pytest's counts, or why nothing ran

    @property
    def ok(self) -> bool:
        """`--check` succeeds when the predicted failure shows."""
        return self.state == SEEN

    def line(self, restore_hint: str) -> str:
        """One sentence for the learner; `restore_hint` says what tells them the code is green again."""
        red = self.exercise
        if self.state == SEEN:
            return (f"Red light {red.id} seen, as the lesson predicted: {red.test} failed showing {red.fragment!r}. "
                    f"Now put your code back; {restore_hint}.")
        if self.state == GREEN and self.done:
            return f"Red light {red.id} done: it failed as predicted, and your code is green again ({self.summary})."
        if self.state == GREEN and self.finished:
            return (f"Your code is green ({self.summary}); red light {red.id} is done. "
                    f"To see it again, break it by hand: {red.by_hand_instruction()}")
        if self.state == GREEN:
            return f"Not broken yet: your code is green ({self.summary}). Break it by hand: {red.by_hand_instruction()}"
        return (f"Red, but not the failure red light {red.id} predicts ({self.summary}): "
                f"compare your change with the exercise: {red.by_hand_instruction()}")

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "exercise": self.exercise.id, "title": self.exercise.title, "state": self.state,
            "seen": self.state == SEEN, "done": self.done, "finished": self.finished, "summary": self.summary,
        }
        if self.state == SEEN:  # named only once seen: before that they are the prediction's answer
            document.update(test=self.exercise.test, fragment=self.exercise.fragment)
        return document


def observe(directory: Path, chapter: Chapter, exercise: RedLight, lab_checks: list[Check],
            seen_before: bool = False) -> Observation:
    """Save the run's verdict as `course test` does, move the exercise's state, and say which state the run is in.

    `seen_before`: this watch saw the failure already, so green now completes the
    exercise again even when it was done before (a learner doing it a second time).
    """
    before = read_last_test(directory)
    start(directory, chapter, exercise)  # the learner said which break this is: a failure as documented counts
    last = save_result(directory, chapter, None, lab_checks)
    run: RunResult | None = next((check.run for check in lab_checks if check.run is not None), None)
    was_green = before is not None and before.chapter == chapter.name and before.ok and before.lab is None
    update = record(directory, chapter, run, last.ok, True, was_green)
    summary = run.summary() if run is not None else "no tests ran"
    if run is not None and not last.ok and shows(exercise, run):
        state = SEEN
    elif last.ok:
        state = GREEN
    else:
        state = FAILING
    done = exercise in update.done or (seen_before and state == GREEN)
    finished = update.state.states.get(exercise.id) == DONE
    return Observation(exercise, state, done, finished, summary)


def instruction_lines(chapter: Chapter, exercise: RedLight, command: Callable[..., str], watching: bool) -> list[str]:
    """What to break and how the course follows it; no test name, no failure text."""
    lines = [
        f"Red light {exercise.id} {exercise.title} (chapter {chapter.nn}).",
        f"Break your code by hand: {exercise.by_hand_instruction()}",
        "Predict which test fails and how before you save.",
    ]
    if watching:
        lines.append("Each save runs the focused tests; this says when the lesson's failure shows, then when your "
                     f"code is green again, and stops there. Once, without watching: `{command('redlight', '--id', exercise.id, '--check')}`")
    return lines


def stamped(line: str) -> str:
    return f"[{time.strftime('%H:%M:%S')}] {line}"
