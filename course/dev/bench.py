"""Benchmark the course's feedback loop against plain pytest, in one run, side by side.

    course dev bench            # every measurement, median of 5 after a warm-up
    course dev bench --runs 9 --markdown

Absolute seconds depend on the machine, so every goal is a ratio against a
baseline measured in the same run (or, for `verify`, a wall-clock budget on
the reference 2-core machine). The teaching-code measurements run inside a
copy of the chapter's target, with the learner's own code.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Callable, Sequence

import attrs
import click

from course.catalog import Catalog, Chapter, find_root, load_catalog
from course.run_env import run_environment
from course.workspace import copy_snapshot


@attrs.frozen
class Row:
    """One line of the table: a measurement, its baseline and the goal for their ratio."""

    what: str
    seconds: float
    baseline: str
    baseline_seconds: float | None
    goal: str
    ok: bool

    @property
    def ratio(self) -> float | None:
        if self.baseline_seconds is None:
            return None
        return self.seconds / self.baseline_seconds


def median_times(actions: Sequence[Callable[[], object]], runs: int) -> list[float]:
    """Median wall time of each action over `runs` rounds, after one warm-up round.

    The actions take turns within every round (A B C, A B C, ...), so a change
    in the machine's load during the measurement reaches a command and its
    baseline alike instead of skewing their ratio.
    """
    for action in actions:
        action()
    samples: list[list[float]] = [[] for _ in actions]
    for _ in range(runs):
        for action, times in zip(actions, samples):
            started = time.perf_counter()
            action()
            times.append(time.perf_counter() - started)
    return [statistics.median(times) for times in samples]


def median_time(action: Callable[[], object], runs: int) -> float:
    """Median wall time of `runs` calls after one warm-up call."""
    return median_times([action], runs)[0]


def _run(command: list[str], cwd: Path, env: dict[str, str] | None = None, ok_codes: tuple[int, ...] = (0,)) -> None:
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    if result.returncode not in ok_codes:
        raise click.ClickException(f"{' '.join(command)} exited {result.returncode}:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")


def course_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "course", *args]


def plain_pytest(chapter: Chapter, scratch: Path) -> Callable[[], None]:
    """One plain `python -m pytest` of the target's focused file, default plugins and all."""
    copy = scratch / f"plain-{chapter.nn}"
    if not copy.exists():
        copy_snapshot(chapter.target, copy)
    env = dict(os.environ)
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    return lambda: _run([sys.executable, "-m", "pytest", "-q", *chapter.focused_tests], copy, env)


def green_practice_dir(root: Path, chapter: Chapter, scratch: Path) -> Path:
    directory = scratch / f"practice-{chapter.nn}"
    if not directory.exists():
        _run(course_command("practice", chapter.nn, str(directory)), root)
        for name in chapter.teaching_files:
            (directory / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(chapter.target / name, directory / name)
    return directory


def machine_check(runs: int, scratch: Path) -> str:
    """How fast this machine starts pytest: one trivial test, plugin autoload on and off.

    The design measured 0.9 s and 0.2 s on its reference machine; this line
    lets a reader scale the absolute seconds (the `verify` budget) to theirs.
    """
    copy = scratch / "trivial"
    (copy / "tests").mkdir(parents=True)
    (copy / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (copy / "tests" / "test_trivial.py").write_text("def test_nothing():\n    pass\n", encoding="utf-8")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
    autoload = dict(os.environ)
    autoload.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    with_plugins, without = median_times(
        [lambda: _run(command, copy, autoload),
         lambda: _run(command, copy, {**autoload, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})],
        runs,
    )
    return (f"machine check: a bare pytest run of one trivial test takes {with_plugins:.2f} s "
            f"with plugin autoload, {without:.2f} s without (design reference: 0.9 s and 0.2 s)")


def lean_pytest(chapter: Chapter, directory: Path) -> Callable[[], None]:
    """The leanest plain run a learner could type in their dir: no plugin autoload, no cache."""
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *chapter.focused_tests]
    return lambda: _run(command, directory, env)


def green_rows(root: Path, chapters: Sequence[Chapter], runs: int, scratch: Path, against: Path | None) -> list[Row]:
    """A green `course test` beside the lean plain run, chapter by chapter, without the slow rows.

    With `against` (another checkout of the course, say the commit before a
    change), its `course test` takes turns with this one's in the same
    rounds, so the two ratios come from one run of a shared machine.
    """
    rows = []
    for chapter in chapters:
        directory = green_practice_dir(root, chapter, scratch)
        actions = [lean_pytest(chapter, directory),
                   lambda: _run(course_command("test", chapter.nn, str(directory)), root)]
        if against is not None:
            other = {**os.environ, "PYTHONPATH": str(against), "COURSE_ROOT": str(against)}
            actions.append(lambda: _run(course_command("test", chapter.nn, str(directory)), against, other))
        lean, test, *theirs = median_times(actions, runs)
        rows.append(Row(f"course test {chapter.nn} DIR", test, "lean plain run in DIR", lean,
                        "ratio <= 1.0", test / lean <= 1.0))
        for seconds in theirs:
            rows.append(Row(f"course test {chapter.nn} DIR, {against.name}'s course", seconds,
                            "lean plain run in DIR", lean, "(for comparison)", True))
    return rows


def cli_rows(root: Path, catalog: Catalog, runs: int, scratch: Path) -> list[Row]:
    rows = []
    fresh_hosts = {**os.environ, "COURSE_WARM": "0"}
    for chapter in catalog.chapters:
        directory = green_practice_dir(root, chapter, scratch)
        plain, lean, checkpoint, test, fresh = median_times(
            [plain_pytest(chapter, scratch),
             lean_pytest(chapter, directory),
             lambda: _run(course_command("checkpoint", chapter.nn), root),
             lambda: _run(course_command("test", chapter.nn, str(directory)), root),
             lambda: _run(course_command("test", chapter.nn, str(directory)), root, fresh_hosts)],
            runs,
        )
        rows.append(Row(f"course checkpoint {chapter.nn}", checkpoint, "plain pytest of target", plain,
                        "ratio <= 1.0", checkpoint / plain <= 1.0))
        rows.append(Row(f"course test {chapter.nn} DIR", test, "plain pytest of target", plain,
                        "ratio <= 0.5", test / plain <= 0.5))
        rows.append(Row(f"course test {chapter.nn} DIR", test, "lean plain run in DIR", lean,
                        "ratio <= 1.0", test / lean <= 1.0))
        rows.append(Row(f"course test {chapter.nn} DIR, no early host", fresh, "lean plain run in DIR", lean,
                        "(for comparison)", True))
    rows += red_rows(root, catalog, runs, scratch)
    rows += startup_rows(root, catalog, runs, scratch)
    rows += verify_rows(root, catalog, runs, scratch)
    return rows


def red_rows(root: Path, catalog: Catalog, runs: int, scratch: Path) -> list[Row]:
    """A learner spends most runs red: the fresh practice dir of the chapter with the most tests.

    Every focused test fails there, so pytest has a report to make for each;
    the course shows one. The lab rows run the chapter's first lab, against
    the lean run of the file and of that lab's selection (`-k`).
    """
    chapter = max(catalog.chapters, key=lambda c: (c.expected_passed, c.nn))
    lab = chapter.labs[0]
    directory = scratch / f"red-{chapter.nn}"
    if not directory.exists():
        _run(course_command("practice", chapter.nn, str(directory)), root, ok_codes=(0, 1))
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    lean = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *chapter.focused_tests]
    test = course_command("test", chapter.nn, str(directory))
    lean_seconds, test_seconds, lean_lab, test_lab = median_times(
        [lambda: _run(lean, directory, env, ok_codes=(1,)),
         lambda: _run(test, root, ok_codes=(1,)),
         lambda: _run([*lean, *lab.pytest_args()], directory, env, ok_codes=(1,)),
         lambda: _run([*test, "--lab", lab.id], root, ok_codes=(1,))],
        runs,
    )
    return [
        Row(f"course test {chapter.nn} DIR, red (fresh dir)", test_seconds, "lean plain run in DIR", lean_seconds,
            "ratio <= 0.6", test_seconds / lean_seconds <= 0.6),
        Row(f"course test {chapter.nn} DIR --lab {lab.id}, red", test_lab, "lean plain run in DIR", lean_seconds,
            "ratio <= 0.6", test_lab / lean_seconds <= 0.6),
        Row(f"course test {chapter.nn} DIR --lab {lab.id}, red", test_lab, f"lean plain run of lab {lab.id} in DIR",
            lean_lab, "(for comparison)", True),
    ]


def startup_rows(root: Path, catalog: Catalog, runs: int, scratch: Path) -> list[Row]:
    """Commands that run no tests pay only for starting `course`: set beside a bare interpreter."""
    chapter = catalog.chapters[-1]
    directory = green_practice_dir(root, chapter, scratch)
    bare, listing, hint = median_times(
        [lambda: _run([sys.executable, "-c", "pass"], root),
         lambda: _run(course_command("list"), root),
         lambda: _run(course_command("hint", chapter.nn, str(directory)), root)],
        runs,
    )
    return [Row("course list", listing, "bare interpreter", bare, "(for comparison)", True),
            Row(f"course hint {chapter.nn} DIR", hint, "bare interpreter", bare, "(for comparison)", True)]


def verify_rows(root: Path, catalog: Catalog, runs: int, scratch: Path) -> list[Row]:
    """A full `verify --fresh`, and `verify` after a one-line edit of the last chapter's lesson.

    Both run on a copy of the course (COURSE_ROOT), so the edit never touches
    checkpoints/, with a verdict store of their own.
    """
    copy = scratch / "course-copy"
    if not copy.exists():
        shutil.copytree(root / "checkpoints", copy / "checkpoints")
        shutil.copyfile(root / "README.md", copy / "README.md")
    env = {**os.environ, "COURSE_ROOT": str(copy), "COURSE_CACHE": str(scratch / "verify-cache")}
    lesson = copy / "checkpoints" / catalog.chapters[-1].name / "README.md"
    original = lesson.read_text(encoding="utf-8")
    edits = iter(range(1_000_000))

    def after_lesson_edit() -> None:
        lesson.write_text(original + f"\n<!-- bench edit {next(edits)} -->\n", encoding="utf-8")
        _run(course_command("verify"), root, env, ok_codes=(0, 1))

    full, incremental = median_times(
        [lambda: _run(course_command("verify", "--fresh"), root, env, ok_codes=(0, 1)), after_lesson_edit], runs
    )
    return [
        Row("course verify --fresh (all chapters)", full, "-", None, "< 3 s on 2 cores", full < 3.0),
        Row("course verify after a lesson edit", incremental, "verify --fresh", full, "ratio <= 0.3",
            incremental / full <= 0.3),
    ]


def _teaching_time(chapter: Chapter, script: str, scratch: Path) -> float:
    """Seconds reported by `script` run inside a copy of the chapter's target."""
    copy = scratch / f"teach-{chapter.nn}"
    if not copy.exists():
        copy_snapshot(chapter.target, copy)
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], cwd=copy, env=run_environment(),
        capture_output=True, text=True,
    )
    if result.returncode != 0:
        raise click.ClickException(f"teaching benchmark failed (exit {result.returncode}):\n{result.stderr[-3000:]}")
    return float(result.stdout.strip().splitlines()[-1])


EVENT_STREAM_VS_CHANNEL = """
import statistics, sys, time, trio
sys.path.insert(0, ".")
from tiny_pi.event_stream import EventStream
N = 100_000
async def through_stream():
    stream = EventStream(lambda e: e == N - 1, lambda e: e)
    for i in range(N):
        stream.push(i)
    async for _ in stream:
        pass
async def through_channel():
    send, receive = trio.open_memory_channel(float("inf"))
    for i in range(N):
        send.send_nowait(i)
    send.close()
    async for _ in receive:
        pass
def best(fn):
    times = []
    for _ in range({runs}):
        t = time.perf_counter(); trio.run(fn); times.append(time.perf_counter() - t)
    return statistics.median(times)
print(best(through_{which}))
"""


PROVIDER_DECODE = """
import gc, json, statistics, sys, time, httpx, trio
sys.path.insert(0, ".")
from tiny_pi.messages import AgentContext, user_message
from tiny_pi.providers.openai_compatible import OpenAICompatibleModel
N = {n}
def chunk(delta):
    return {"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
lines = [b"data: " + json.dumps(chunk({"content": "word "})).encode() + b"\\n\\n" for _ in range(N)]
lines.append(b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\\n\\n')
lines.append(b"data: [DONE]\\n\\n")
body = b"".join(lines)
reads = [body[i:i + 16384] for i in range(0, len(body), 16384)]
def handler(request):
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=httpx.ByteStream(body) if False else Reads())
class Reads(httpx.AsyncByteStream):
    async def __aiter__(self):
        for read in reads:
            yield read
model = OpenAICompatibleModel("http://bench.test/v1", "m", transport=httpx.MockTransport(handler))
# The heap the imports and the fixture built is the same for every size, but each of the
# collector's full passes walks it, and 10x the deltas make about 10x as many passes: frozen,
# it stops turning a constant into a cost that looks superlinear. What the decoder keeps alive
# is still walked, so a decoder that hoards objects still shows.
del lines
gc.collect()
gc.freeze()
async def once():
    stream = model.stream(AgentContext([user_message("go")]))
    count = 0
    async with stream:
        async for event in stream:
            count += 1
        message = await stream.result()
    assert message.stop_reason == "stop" and count == N + 2, (message.error_message, count)
times = []
for _ in range({runs}):
    t = time.perf_counter(); trio.run(once); times.append(time.perf_counter() - t)
print(statistics.median(times))
"""


def teaching_rows(catalog: Catalog, runs: int, scratch: Path) -> list[Row]:
    rows = []
    streams = [c for c in catalog.chapters if (c.target / "tiny_pi/event_stream.py").is_file()]
    if streams:
        latest = streams[-1]
        channel = _teaching_time(latest, EVENT_STREAM_VS_CHANNEL.replace("{runs}", str(runs)).replace("{which}", "channel"), scratch)
        stream = _teaching_time(latest, EVENT_STREAM_VS_CHANNEL.replace("{runs}", str(runs)).replace("{which}", "stream"), scratch)
        rows.append(Row("EventStream, 100k events", stream, "trio memory channel, 100k", channel,
                        "ratio <= 2.0", stream / channel <= 2.0))
    providers = [c for c in catalog.chapters if (c.target / "tiny_pi/providers/openai_compatible.py").is_file()]
    for chapter in providers[-1:]:
        small = _teaching_time(chapter, PROVIDER_DECODE.replace("{runs}", str(runs)).replace("{n}", "10_000"), scratch)
        large = _teaching_time(chapter, PROVIDER_DECODE.replace("{runs}", str(runs)).replace("{n}", "100_000"), scratch)
        rows.append(Row("provider stream, 100k deltas", large, "10k deltas", small,
                        "ratio <= 12 (linear)", large / small <= 12))
    return rows


def table(rows: list[Row], markdown: bool) -> str:
    header = ("measurement", "median s", "baseline", "baseline s", "ratio", "goal", "met")
    lines = []
    for row in rows:
        lines.append((
            row.what, f"{row.seconds:.3f}", row.baseline,
            "-" if row.baseline_seconds is None else f"{row.baseline_seconds:.3f}",
            "-" if row.ratio is None else f"{row.ratio:.2f}", row.goal, "yes" if row.ok else "NO",
        ))
    if markdown:
        out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        out += ["| " + " | ".join(line) + " |" for line in lines]
        return "\n".join(out)
    widths = [max(len(str(x)) for x in column) for column in zip(header, *lines)]
    return "\n".join("  ".join(str(x).ljust(w) for x, w in zip(line, widths)) for line in (header, *lines))


@click.command()
@click.option("--runs", default=5, show_default=True, help="Timed runs per measurement (after one warm-up).")
@click.option("--markdown", is_flag=True, help="Print a Markdown table (for the README).")
@click.option("--only", type=click.Choice(["cli", "red", "green", "teaching"]),
              help="Measure one group only (red: the red-run rows of cli alone; green: its green "
                   "`course test` rows beside the lean run, nothing else).")
@click.option("--chapter", "chapter_ids", multiple=True, help="With --only green: this chapter only (repeatable).")
@click.option("--against", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="With --only green: also time the `course test` of this other checkout of the course.")
def main(runs: int, markdown: bool, only: str | None, chapter_ids: tuple[str, ...], against: Path | None) -> None:
    """Measure `course` against plain pytest and the teaching code against trio's own tools."""
    # Time the commands as a learner's machine runs them: Python keeps its bytecode caches (the
    # course's own modules, and the learner's tiny_pi/ and rewritten tests for a plain run).
    # A session that set PYTHONDONTWRITEBYTECODE would make every start recompile the course.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    root = find_root()
    catalog = load_catalog(root)
    if (chapter_ids or against) and only != "green":
        raise click.UsageError("--chapter and --against go with --only green")
    chapters = [catalog.resolve(chapter_id) for chapter_id in chapter_ids] or list(catalog.chapters)
    with tempfile.TemporaryDirectory(prefix="course-bench-") as scratch:
        check = machine_check(runs, Path(scratch))
        rows = []
        if only == "green":
            rows += green_rows(root, chapters, runs, Path(scratch), against and against.resolve())
        if only in (None, "cli"):
            rows += cli_rows(root, catalog, runs, Path(scratch))
        if only == "red":
            rows += red_rows(root, catalog, runs, Path(scratch))
        if only in (None, "teaching"):
            rows += teaching_rows(catalog, runs, Path(scratch))
    click.echo(f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, median of {runs} runs after a warm-up")
    click.echo(check)
    click.echo(table(rows, markdown))
    sys.exit(0 if all(row.ok for row in rows) else 1)


if __name__ == "__main__":
    main()
