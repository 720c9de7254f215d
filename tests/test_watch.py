"""`course watch`: a save (in place or by rename) re-runs the tests; editor debris does not.

The end-to-end tests drive the real CLI on a real file system: they start
`course watch` as a subprocess with a short debounce, save files the ways
editors do, read its output until the expected result screen appears (each
wait bounded in time), then stop it with SIGTERM.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import trio

from conftest import mini
from course import hosts
from course.catalog import load_catalog
from course.errors import UsageError
from course.watch import WatchMode, WatchSession, choose_mode, filesystem_type, is_relevant, watch_saves
from loop_helpers import RIGHT, WRONG, LiveCourse, practice, save_by_rename, save_in_place

ROOT = Path("/home/learner/practice/02-event-stream")


@pytest.mark.parametrize(
    "relative, relevant",
    [
        ("tiny_pi/event_stream.py", True),
        ("tests/test_02_event_stream.py", True),
        ("notes.md", True),
        (".git/index", False),
        (".git/objects/ab/cdef", False),
        (".course/last-test.json", False),
        (".course/hints.json", False),
        ("tiny_pi/__pycache__/event_stream.cpython-311.pyc", False),
        (".pytest_cache/v/cache/nodeids", False),
        ("tiny_pi/.event_stream.py.swp", False),
        ("tiny_pi/.event_stream.py.swx", False),
        ("tiny_pi/4913", False),
        ("tiny_pi/event_stream.py~", False),
        ("tiny_pi/.#event_stream.py", False),
        ("tiny_pi/#event_stream.py#", False),
        ("tiny_pi/event_stream.py___jb_tmp___", False),
        ("tiny_pi/event_stream.py___jb_old___", False),
        ("tiny_pi/.goutputstream-XK3Q1Z", False),
        ("tiny_pi/event_stream.py.orig", False),
        ("tiny_pi/.course-reset-event_stream.py-x1", False),
        ("", False),
    ],
)
def test_which_changes_call_for_a_run(relative: str, relevant: bool) -> None:
    assert is_relevant(str(ROOT / relative) if relative else str(ROOT), ROOT) is relevant


def test_a_path_outside_the_watched_dir_is_not_relevant() -> None:
    assert not is_relevant("/elsewhere/tiny_pi/event_stream.py", ROOT)


MOUNTINFO = r"""22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
40 27 0:50 / /mnt/share rw,relatime - nfs4 server:/export rw,vers=4.2
41 27 0:51 / /mnt/my\040drive rw,relatime - cifs //pc/drive rw
42 27 0:52 / /workspace rw,relatime - virtiofs shared rw
"""


def test_the_file_system_of_a_path_is_read_from_mountinfo() -> None:
    assert filesystem_type(Path("/home/me/p"), MOUNTINFO) == "ext4"
    assert filesystem_type(Path("/mnt/share/course/practice/02"), MOUNTINFO) == "nfs4"
    assert filesystem_type(Path("/mnt/my drive/p"), MOUNTINFO) == "cifs"
    assert filesystem_type(Path("/mnt/shared"), MOUNTINFO) == "ext4", "a prefix of a name is not a parent"
    assert filesystem_type(Path("/x"), "garbage\n") is None


@pytest.mark.parametrize(
    "path, force, env, release, polling, reason",
    [
        ("/home/me/p", False, {}, "6.1.0", False, "native"),
        ("/home/me/p", True, {}, "6.1.0", True, "--poll"),
        ("/home/me/p", False, {"WATCHFILES_FORCE_POLLING": "1"}, "6.1.0", True, "WATCHFILES_FORCE_POLLING"),
        ("/home/me/p", False, {"WATCHFILES_FORCE_POLLING": "false"}, "6.1.0", False, "native"),
        ("/mnt/share/p", False, {}, "6.1.0", True, "nfs4 file system"),
        ("/workspace/p", False, {}, "6.1.0", True, "virtiofs file system"),
        ("/home/me/p", False, {}, "5.15.90.1-microsoft-standard-WSL2", True, "WSL"),
    ],
)
def test_polling_is_chosen_where_file_events_do_not_arrive(
    path: str, force: bool, env: dict[str, str], release: str, polling: bool, reason: str
) -> None:
    mode = choose_mode(Path(path), force, env=env, mountinfo=MOUNTINFO, kernel_release=release)
    assert mode.polling is polling
    assert reason in mode.reason


def test_a_native_watcher_that_cannot_start_falls_back_to_polling(tmp_path: Path) -> None:
    calls: list[bool] = []
    notes: list[str] = []
    seen: list[tuple[str, ...] | None] = []

    def source(root: Path, **options: Any) -> AsyncIterator[set[tuple[int, str]]]:
        calls.append(options["force_polling"])

        async def generate() -> AsyncIterator[set[tuple[int, str]]]:
            if not options["force_polling"]:
                raise OSError(28, "inotify watch limit reached")
            yield set()
            raw = {(2, str(root / "tiny_pi/x.py")), (1, str(root / "tiny_pi/.x.py.swp"))}
            yield {change for change in raw if options["watch_filter"](*change)}  # as watchfiles does

        return generate()

    async def handle(changed: tuple[str, ...] | None) -> bool:
        seen.append(changed)
        return changed is None

    async def main() -> WatchMode:
        return await watch_saves(tmp_path, WatchMode(False, "native"), handle, notes.append, source=source,
                                 debounce_ms=50)

    mode = trio.run(main)
    assert calls == [False, True]
    assert mode.polling and "inotify watch limit reached" in mode.reason
    assert notes and "falling back to polling" in notes[0]
    assert seen == [None, ("tiny_pi/x.py",)], "the swap file was filtered out"


def test_a_watcher_that_breaks_later_is_a_clear_error_not_a_traceback(mini_course: Path, tmp_path: Path) -> None:
    chapter = load_catalog(mini_course).resolve("1")
    lines: list[str] = []

    def source(root: Path, **options: Any) -> AsyncIterator[set[tuple[int, str]]]:
        async def generate() -> AsyncIterator[set[tuple[int, str]]]:
            yield set()
            raise OSError(2, "No such file or directory")

        return generate()

    session = WatchSession(chapter, None, tmp_path, once=True, echo=lines.append, source=source, debounce_ms=50)
    with pytest.raises(UsageError, match="stopped: .*No such file or directory"):
        trio.run(session.run, WatchMode(False, "native"))
    assert lines and lines[0].startswith("Watching")


def test_every_run_of_a_watch_session_is_served_by_one_host(
    mini_course: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A learner saves hundreds of times: a re-run must not pay for a new host each time."""
    chapter = load_catalog(mini_course).resolve("1")
    directory = practice(mini_course, tmp_path / "p")
    spawned: list[object] = []
    spawn = hosts.spawn
    monkeypatch.setattr(hosts, "spawn", lambda *args: spawned.append(spawn(*args)) or spawned[-1])

    def source(root: Path, **options: Any) -> AsyncIterator[set[tuple[int, str]]]:
        async def generate() -> AsyncIterator[set[tuple[int, str]]]:
            yield set()  # live: the first run
            for _ in range(2):
                yield {(2, str(root / "tiny_pi/adder.py"))}  # a save: another run

        return generate()

    lines: list[str] = []
    session = WatchSession(chapter, None, directory, once=False, echo=lines.append, source=source, debounce_ms=0)
    trio.run(session.run, WatchMode(False, "native"))
    assert len([line for line in lines if line.startswith("== run")]) == 3
    assert len(spawned) == 1, f"{len(spawned)} hosts for 3 runs"


KILLS_ITS_HOST = "import os, signal, time\nos.kill(os.getppid(), signal.SIGKILL)\ntime.sleep(30)\n" + WRONG


def test_a_save_after_code_that_killed_its_host_is_judged_on_a_live_host(
    mini_course: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session's pool keeps its host between saves, but never one its run broke.

    Saved code that kills the host running it gets a crash for a verdict; the
    next save (the code fixed) must get the verdict its tests earn, on a new host.
    Before: the dead host went back into the session's pool, and every later save was sent to it.
    """
    chapter = load_catalog(mini_course).resolve("1")
    directory = practice(mini_course, tmp_path / "p")
    spawned: list[object] = []
    spawn = hosts.spawn
    monkeypatch.setattr(hosts, "spawn", lambda *args: spawned.append(spawn(*args)) or spawned[-1])

    def source(root: Path, **options: Any) -> AsyncIterator[set[tuple[int, str]]]:
        async def generate() -> AsyncIterator[set[tuple[int, str]]]:
            yield set()  # live: the first run, on the dir as practice made it
            for text in (KILLS_ITS_HOST, RIGHT):
                (root / "tiny_pi/adder.py").write_text(text)
                yield {(2, str(root / "tiny_pi/adder.py"))}  # a save: a run

        return generate()

    lines: list[str] = []
    session = WatchSession(chapter, None, directory, once=False, echo=lines.append, source=source, debounce_ms=0)
    trio.run(session.run, WatchMode(False, "native"))
    starts = [index for index, line in enumerate(lines) if line.startswith("== run")]
    assert len(starts) == 3, lines
    killed, fixed = lines[starts[1]:starts[2]], lines[starts[2]:]
    assert any("did a test kill the process that supervises it?" in line for line in killed), killed
    assert fixed[1].startswith("Green: 3/3 checks passed"), fixed
    assert len(spawned) == 2, f"{len(spawned)} hosts for 3 runs: one for the first two, a new one after the kill"


def test_watch_reacts_to_a_save_and_to_an_atomic_rename_save(mini_course: Path, tmp_path: Path) -> None:
    directory = practice(mini_course, tmp_path / "p")
    adder = directory / "tiny_pi/adder.py"
    watch = LiveCourse(mini_course, "watch", "1", str(directory), "--debounce", "100")
    try:
        first = watch.wait_for("Watching")
        assert "== run 1" in first[0] and "(start)" in first[0]
        assert any("hint: create tiny_pi/adder.py" in line for line in first)

        save_in_place(adder, WRONG)
        second = watch.wait_for("Watching")
        assert second[0].startswith("== run 2") and "saved tiny_pi/adder.py" in second[0]
        assert second[1].startswith("Not yet")
        assert second[2].strip() == "first failure: tests/test_01_adder.py::test_add_small", "first failure first"
        assert any("assert 2 == 3" in line for line in second)

        # Editor debris and the tool's own state: no run.
        (directory / "tiny_pi/.adder.py.swp").write_text("swap")
        (directory / "tiny_pi/4913").write_text("")
        (directory / "tiny_pi/adder.py~").write_text(WRONG)
        (directory / ".course/notes.json").write_text("{}")
        (directory / "tiny_pi/__pycache__").mkdir()
        (directory / "tiny_pi/__pycache__/adder.cpython-311.pyc").write_bytes(b"\0")
        assert watch.quiet_for(1.5) == [], "a swap, backup, cache or .course/ file triggered a run"

        save_by_rename(adder, RIGHT)
        third = watch.wait_for("Watching")
        assert third[0].startswith("== run 3") and "saved tiny_pi/adder.py" in third[0]
        assert third[1].startswith("Green: 3/3 checks passed")
        assert "1.R1" in "\n".join(third), "green points at the red-light exercise"
    finally:
        code = watch.stop(signal.SIGTERM)
    assert code == 0
    assert "Stopped watching (SIGTERM) after 3 run(s)." in watch.text()
    assert "Traceback" not in watch.text()


@pytest.mark.parametrize("poll", [False, True], ids=["file-events", "polling"])
def test_a_teaching_file_replaced_by_a_folder_of_its_name_runs_again(mini_course: Path, tmp_path: Path,
                                                                    poll: bool) -> None:
    """Any change under tiny_pi/ is a run, a file that became a folder too: the last Green must not stay.

    Before: a change whose path is a directory was taken for a directory's
    mtime moving, so the watch showed the last "Green" for code that no longer
    existed (with file events and when polling alike).
    """
    directory = practice(mini_course, tmp_path / "p")
    adder = directory / "tiny_pi/adder.py"
    adder.write_text(RIGHT)
    watch = LiveCourse(mini_course, "watch", "1", str(directory), "--debounce", "100", *(["--poll"] if poll else []))
    try:
        first = watch.wait_for("Watching")
        assert first[1].startswith("Green"), first
        adder.unlink()
        adder.mkdir()
        second = watch.wait_for("Watching", timeout=60)  # a guard against a watch that never reruns; load can be heavy
        assert second[0].startswith("== run 2") and "saved tiny_pi/adder.py" in second[0], second
        assert second[1].startswith("Not yet"), second
        assert any("hint: create tiny_pi/adder.py" in line for line in second), second
    finally:
        watch.stop(signal.SIGTERM)


def test_watch_once_by_polling_runs_one_lab_and_exits_with_its_verdict(mini_course: Path, tmp_path: Path) -> None:
    directory = practice(mini_course, tmp_path / "p")
    watch = LiveCourse(mini_course, "watch", "1", str(directory), "--lab", "1.1", "--once", "--poll", "--debounce", "50")
    try:
        ready = watch.wait_for("Watching")
        assert "by polling every 300 ms (--poll)" in ready[-1]
        assert "the next save runs lab 1.1 once" in ready[-1]
        assert not any("== run" in line for line in ready), "--once waits for a save"
        save_by_rename(directory / "tiny_pi/adder.py", WRONG)
        screen = watch.wait_for("Next:")
        assert watch.process.wait(timeout=30) == 1
    finally:
        watch.stop()
    assert screen[0].startswith("== run 1") and "checks passed" in screen[1]
    assert "[FAIL] lab 1.1 Small - 0/1 passed" in watch.text()
    assert "lab 1.2" not in watch.text()


def test_watch_without_a_practice_dir_is_a_usage_error(mini_course: Path, tmp_path: Path) -> None:
    result = mini(mini_course, "watch", "1", str(tmp_path / "missing"), "--once")
    assert result.returncode == 2 and "does not exist" in result.stderr
    result = mini(mini_course, "watch", "1", str(tmp_path), "--lab", "7.7")
    assert result.returncode == 2 and "its labs are: 1.1, 1.2" in result.stderr
