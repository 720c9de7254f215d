"""The benchmark's arithmetic: medians after a warm-up, ratios, and the table it prints."""

from __future__ import annotations

from course.dev.bench import Row, median_time, median_times, table


def test_median_time_discards_the_warm_up_and_takes_the_median(monkeypatch) -> None:
    durations = iter([100.0, 3.0, 1.0, 2.0, 50.0, 4.0])  # the warm-up is not timed at all
    clock = [0.0]

    def perf_counter() -> float:
        return clock[0]

    def action() -> None:
        clock[0] += next(durations)

    monkeypatch.setattr("course.dev.bench.time.perf_counter", perf_counter)
    assert median_time(action, runs=5) == 3.0  # median of 3, 1, 2, 50, 4


def test_a_command_and_its_baseline_take_turns() -> None:
    """Load that changes mid-measurement must reach both sides of a ratio alike."""
    order: list[str] = []
    medians = median_times([lambda: order.append("plain"), lambda: order.append("course")], runs=3)
    assert order == ["plain", "course"] * 4  # the warm-up round, then three timed rounds
    assert len(medians) == 2


def test_rows_report_ratios_and_goals_as_a_markdown_table() -> None:
    rows = [
        Row("course test 02 DIR", 1.0, "plain pytest of target", 4.0, "ratio <= 0.5", True),
        Row("course verify (all chapters)", 3.5, "-", None, "< 3 s on 2 cores", False),
    ]
    assert rows[0].ratio == 0.25 and rows[1].ratio is None
    lines = table(rows, markdown=True).splitlines()
    assert lines[0].startswith("| measurement | median s |")
    assert lines[2] == "| course test 02 DIR | 1.000 | plain pytest of target | 4.000 | 0.25 | ratio <= 0.5 | yes |"
    assert lines[3].endswith("| - | < 3 s on 2 cores | NO |")


def test_green_rows_time_another_checkout_in_the_same_rounds(monkeypatch, tmp_path) -> None:
    """`--against` compares two versions of the course: each round runs lean, ours, theirs."""
    from types import SimpleNamespace

    from course.dev import bench

    calls: list[tuple[str, str | None]] = []

    def run(command, cwd, env=None, ok_codes=(0,)) -> None:  # type: ignore[no-untyped-def]
        who = "lean" if "pytest" in command else "course"
        calls.append((who, None if env is None or who == "lean" else env.get("COURSE_ROOT")))

    monkeypatch.setattr(bench, "_run", run)
    monkeypatch.setattr(bench, "green_practice_dir", lambda root, chapter, scratch: tmp_path)
    chapter = SimpleNamespace(nn="02", focused_tests=("tests/test_02_event_stream.py",))
    other = tmp_path / "before"
    rows = bench.green_rows(tmp_path, [chapter], runs=2, scratch=tmp_path, against=other)
    assert calls == [("lean", None), ("course", None), ("course", str(other))] * 3
    assert [row.what for row in rows] == ["course test 02 DIR", "course test 02 DIR, before's course"]
    assert all(row.baseline == "lean plain run in DIR" for row in rows)
