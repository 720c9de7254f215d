"""Red-light exercises in the learner's loop: break on purpose, see the predicted failure, restore.

A red-light exercise is done in two steps, and the course follows both:
a run that fails exactly as the exercise documents (its test fails and the
output shows its fragment) is *seen*; a green run after that makes it *done*.
The state lives in the practice dir's `.course/redlights.json`, beside the
last verdict, never under checkpoints/.

The learner breaks the code by hand, as the exercise's `by_hand` says:
the patches under redlight/ were written against the target and fit only
the target's lines, so they are the authors' proof (`course checkpoint`),
never applied to a practice dir. `course redlight` (course.redlight_loop)
says what to break and watches for the failure; `start` notes the exercise
it was asked about, so that failure counts even without a green run before.
"""

from __future__ import annotations

import json
from pathlib import Path

from attrs import frozen

from course.catalog import Chapter, RedLight
from course.errors import UsageError
from course.progress import read_state, write_state
from course.results import FAILED, RunResult

STATE_FILE = "redlights.json"
SEEN = "seen"
DONE = "done"


@frozen
class RedLightState:
    """Per exercise id: "seen" (broken as predicted, not yet green again) or "done"; the exercises
    `course redlight` was asked about (`applied`, the name from when it applied patches);
    and whether the last whole-chapter run was green (`course test --lab` runs leave that as it is)."""

    chapter: str
    states: dict[str, str]
    applied: tuple[str, ...] = ()
    green: bool = False

    def pending(self, chapter: Chapter) -> RedLight | None:
        """The first exercise not done yet."""
        return next((r for r in chapter.redlights if self.states.get(r.id) != DONE), None)

    def seen(self, chapter: Chapter) -> list[RedLight]:
        return [r for r in chapter.redlights if self.states.get(r.id) == SEEN]


def read(directory: Path, chapter: Chapter) -> RedLightState:
    try:
        data = json.loads(read_state(directory, STATE_FILE) or "")
    except ValueError:
        data = None
    if not isinstance(data, dict) or data.get("chapter") != chapter.name:
        return RedLightState(chapter.name, {})
    raw = data.get("states")
    states = {str(k): v for k, v in raw.items() if v in (SEEN, DONE)} if isinstance(raw, dict) else {}
    applied = data.get("applied")
    kept = tuple(str(a) for a in applied) if isinstance(applied, list) else ()
    return RedLightState(chapter.name, states, kept, data.get("green") is True)


def _write(directory: Path, state: RedLightState) -> None:
    document = {"chapter": state.chapter, "states": state.states, "applied": list(state.applied),
                "green": state.green}
    write_state(directory, STATE_FILE, json.dumps(document, indent=2))


def recognised(chapter: Chapter, run: RunResult) -> RedLight | None:
    """The red-light exercise this run shows: its test failed, showing its documented fragment."""
    return next((redlight for redlight in chapter.redlights if shows(redlight, run)), None)


def shows(redlight: RedLight, run: RunResult) -> bool:
    """Whether the run shows this exercise: its test failed, showing its documented fragment."""
    case = run.case(redlight.test)
    if case is None or case.outcome not in (FAILED, "error"):
        return False
    return redlight.fragment in "\n".join((case.message, case.details)) or redlight.fragment in run.output


def start(directory: Path, chapter: Chapter, redlight: RedLight) -> None:
    """Note that `course redlight` was asked about this exercise (kept under the key "applied", as before)."""
    state = read(directory, chapter)
    if redlight.id in state.applied:
        return
    _write(directory, RedLightState(chapter.name, dict(state.states), (*state.applied, redlight.id), state.green))


@frozen
class Update:
    """What one run changed: an exercise just seen, exercises just done."""

    seen: RedLight | None
    done: tuple[RedLight, ...]
    state: RedLightState


def record(directory: Path, chapter: Chapter, run: RunResult | None, green: bool, full: bool,
           was_green: bool = False) -> Update:
    """Note what the run says about the exercises; a green full run completes every one seen.

    A failure is taken for an exercise only when it can be one: the code was
    green before (the last whole-chapter run before this one passed, however
    many `--lab` runs came in between; `was_green` says so for a record kept
    before the state held it), `course redlight` was asked about it, or it (or
    another exercise: its code was green before that one) was already seen. A
    learner still writing lab 2.2 whose code fails the way 2.R2 documents has not
    broken anything on purpose, and is not told to "restore" it.

    The flag `green` is set and cleared by whole-chapter runs only (`full`): a
    green `--lab` run says nothing of the other labs, a red one does not undo
    the whole chapter's green. `course reset` of a file the verdict uses clears it.
    """
    state = read(directory, chapter)
    states = dict(state.states)
    seen = recognised(chapter, run) if run is not None and not green else None
    on_red_lights = any(value in (SEEN, DONE) for value in states.values())  # the labs were green to get there
    if seen is not None and not (was_green or state.green or seen.id in state.applied or on_red_lights):
        seen = None
    if seen is not None and states.get(seen.id) != DONE:
        states[seen.id] = SEEN
    done: tuple[RedLight, ...] = ()
    if green and full:
        done = tuple(r for r in chapter.redlights if states.get(r.id) == SEEN)
        for redlight in done:
            states[redlight.id] = DONE
    new = RedLightState(chapter.name, states, state.applied, green if full else state.green)
    if new != state:
        _write(directory, new)
    return Update(seen=seen, done=done, state=new)


def forget_green(directory: Path) -> None:
    """The code that was green is gone (`course reset` put back starting files): a failure now is no red light by that.

    What was seen and done stays; only a whole-chapter run that is green
    sets the flag again.
    """
    try:
        data = json.loads(read_state(directory, STATE_FILE) or "")
    except ValueError:
        return
    if isinstance(data, dict) and data.get("green") is True:
        data["green"] = False
        write_state(directory, STATE_FILE, json.dumps(data, indent=2))


def find(chapter: Chapter, exercise_id: str) -> RedLight:
    """`2.R1`, `02.R1`, `r1` or `R1` for chapter 02's first exercise."""
    wanted = exercise_id.strip().upper()
    number, dot, rest = wanted.partition(".")
    if dot and number.isdigit():
        wanted = f"{int(number)}.{rest}"  # `08.R1`, as chapter ids are written, is 8.R1
    for redlight in chapter.redlights:
        if wanted in (redlight.id.upper(), redlight.id.split(".", 1)[-1].upper()):
            return redlight
    choices = ", ".join(r.id for r in chapter.redlights) or "(none)"
    raise UsageError(f"chapter {chapter.name} has no red-light exercise {exercise_id!r}; its exercises are: {choices}")
