"""One value describes a run: where, which pytest arguments, which environment, which limits.

Every path that starts a run builds a RunSpec and hands it to a run host
(course/runhost.py), which applies all of it in the run's process. Nothing
else decides how a run starts, so no two paths can drift apart. The
environment comes from course/run_env.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import attrs

from course.run_env import run_environment

@attrs.frozen
class Shown:
    """What a learner's run shows or reads: only those failures get pytest's full report.

    Always the run's first failure; the first of a lab's tests (`lab_words`
    and `lab_nodes`, the lab's selection as Lab.selects reads it); every
    failure of `tests` (the red-light tests, whose text a red light is
    recognised by). With a lab, only its tests and `tests` run. With `full`,
    every failure of those gets the full report (`course test --lab -v`).
    The run host applies it (ShownOnly in course/runhost.py).
    """

    lab_words: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    lab_nodes: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    tests: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    full: bool = False


def _frozen_env(value: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(value.items()))


@attrs.frozen
class RunSpec:
    """Everything that decides how one run behaves."""

    directory: Path = attrs.field(converter=Path)
    args: tuple[str, ...] = attrs.field(converter=tuple)
    env: tuple[tuple[str, str], ...] = attrs.field(converter=_frozen_env)
    time_limit: float = attrs.field(validator=attrs.validators.gt(0))
    memory_limit: float = attrs.field(validator=attrs.validators.gt(0))  # GiB
    shown: Shown | None = None  # None: pytest's full report for every failure

    @classmethod
    def for_pytest(
        cls,
        directory: Path,
        selection: Sequence[str],
        *,
        plugins: Sequence[str] = (),
        time_limit: float,
        memory_limit: float,
        env: Mapping[str, str] | None = None,
        shown: Shown | None = None,
    ) -> RunSpec:
        """A run of `selection` in `directory` with the snapshot's own config and nothing else."""
        directory = directory.resolve()
        args = [
            "-p", "no:cacheprovider",
            "--rootdir", str(directory),
            "-c", str(directory / "pytest.ini"),
            "--color=no",
            *[argument for plugin in plugins for argument in ("-p", plugin)],
            *selection,
        ]
        return cls(directory, args, run_environment() if env is None else env, time_limit, memory_limit, shown)

    def message(self) -> dict[str, object]:
        """The spec as the run host reads it."""
        return {
            "directory": str(self.directory),
            "args": list(self.args),
            "env": dict(self.env),
            "time_limit": self.time_limit,
            "memory_limit": self.memory_limit,
            "shown": None if self.shown is None else attrs.asdict(self.shown),
        }
