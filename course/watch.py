"""`course watch`: re-run the learner's tests each time they save, one short screen per run.

Three things make watching trustworthy, and each is a bug someone hit:

- Editors save in different ways. Some write in place; many write a
  temporary file and rename it over the original (an atomic save); vim
  probes with a file named `4913` and keeps `.swp` files; emacs leaves `#x#`
  and `.#x`. A rename-save must trigger a run; the swap and backup files
  themselves, `.git/`, `.course/` (where the verdict is written: watching it
  would loop forever) and `__pycache__` must not.
- File events do not exist everywhere. On network drives, in containers and
  VM shares (NFS, SMB, 9p, virtiofs, ...) an edit made on the other side
  sends no inotify event, so watching "works" and never fires. There we
  poll, and say so; `--poll` forces it; a native watcher that fails to start
  falls back to polling by itself.
- Saves come in bursts (write, rename, chmod, a formatter's second write):
  changes are collected until the tree has been quiet for the debounce time,
  and changes made while the tests run trigger exactly one more run.

watchfiles does the watching (native events through Rust's notify crate, or
polling); it runs on trio through anyio. It is imported only by `course watch`.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import time
from pathlib import Path
import signal
from typing import Any, AsyncGenerator, Awaitable, Callable, Mapping

import trio
from attrs import frozen

from course.catalog import Chapter, Lab
from course.checklist import Check
from course.checks import check_practice
from course.runner import RunPool
from course.errors import CourseError, UsageError, handed_on_as_interrupt
from course.nextstep import next_step
from course.output import progress, result_lines
from course.progress import read_last_test, save_result
from course.redlights import Update
from course.redlights import record as record_redlights

POLL_INTERVAL_MS = 300
# How often the watcher thread comes back to trio with nothing: bounds the time
# Ctrl-C or SIGTERM waits, and the time before "watching" can be announced.
WAKE_MS = 250

IGNORED_DIRS = frozenset(
    {
        ".git",
        ".course",
        "__pycache__",
        ".pytest_cache",
        ".hypothesis",
        ".mypy_cache",
        ".ruff_cache",
        ".idea",
        ".vscode",
        ".venv",
        "node_modules",
    }
)

# Files editors and tools write next to the real one while saving or as a backup.
_SCRATCH_FILE = re.compile(
    r"""(
        \.sw[a-z]$ | \.swpx$    # vim swap files .swp .swo .swx ...
      | ^4913$                  # vim's probe: can I write in this directory?
      | ~$                      # vim/emacs/gedit backups
      | ^\.\#                   # emacs lock files
      | ^\#.*\#$                # emacs auto-save files
      | \.kate-swp$             # kate
      | ___jb_(tmp|old|bak)___$ # JetBrains "safe write"
      | ^\.goutputstream-       # GNOME/gedit temporary save
      | \.(tmp|temp|bak|orig|rej|part)$
      | \.py[cod]$              # bytecode
      | ^\.DS_Store$
      | ^\.course-              # our own temporary files (reset, hints)
    )""",
    re.VERBOSE,
)

# File system types where a change made elsewhere sends no event here.
NO_EVENT_FILESYSTEMS = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "9p",
        "virtiofs",
        "vboxsf",
        "drvfs",
        "fakeowner",
        "afs",
        "ncpfs",
        "davfs",
        "fuse.sshfs",
        "sshfs",
        "fuse.grpcfuse",
        "fuse.osxfs",
        "fuse.rclone",
        "fuse.s3fs",
        "glusterfs",
        "ceph",
        "lustre",
    }
)


class KnownDirectories:
    """The watched tree's directories, so that a path that became one (or stopped being one) is seen.

    A directory's own "modified" event only means an entry changed (and that
    entry says so itself, or is editor debris), so it calls for no run. But a
    file replaced by a directory of the same name reaches the watcher as just
    such an event when polling: only knowing what the path was tells the two apart.
    """

    def __init__(self, root: Path) -> None:
        self._dirs: set[str] = set()
        for top, folders, _ in os.walk(root):
            folders[:] = [name for name in folders if name not in IGNORED_DIRS]
            self._dirs.update(os.path.join(top, name) for name in folders
                              if not os.path.islink(os.path.join(top, name)))

    def kind_changed(self, path: str) -> bool:
        """Whether PATH is a directory now and was not, or the other way round (and remember which)."""
        now = os.path.isdir(path) and not os.path.islink(path)
        before = path in self._dirs
        if now:
            self._dirs.add(path)
        else:
            self._dirs.discard(path)
        return now != before


def is_relevant(path: str | Path, root: Path, known: KnownDirectories | None = None) -> bool:
    """Does a change at `path` (under `root`) call for a new test run?

    With `known`, a path that became a directory or stopped being one does:
    a teaching file replaced by a folder of the same name is a change of the code.
    """
    candidate = Path(path)
    try:
        relative = candidate.relative_to(root)
    except ValueError:
        try:
            relative = candidate.resolve().relative_to(root.resolve())
        except ValueError:
            return False
    parts = relative.parts
    if not parts:
        return False  # the directory itself: a child changed, and says so on its own
    if any(part in IGNORED_DIRS for part in parts[:-1]) or parts[-1] in IGNORED_DIRS:
        return False
    if _SCRATCH_FILE.search(parts[-1]):
        return False
    became = known is not None and known.kind_changed(str(path))
    if candidate.is_dir() and not candidate.is_symlink():
        return became  # else only its mtime changed, as it does whenever an entry does
    return True


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def filesystem_type(path: Path, mountinfo: str | None = None) -> str | None:
    """The type of the file system holding `path` (Linux), or None when unknown."""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    target = Path(os.path.abspath(path))
    try:
        target = target.resolve()
    except OSError:
        pass
    best: tuple[int, str] | None = None
    for line in mountinfo.splitlines():
        before, separator, after = line.partition(" - ")
        fields = before.split()
        if not separator or len(fields) < 5 or not after.split():
            continue
        mount_point = Path(_unescape(fields[4]))
        if target == mount_point or mount_point in target.parents:
            depth = len(mount_point.parts)
            if best is None or depth >= best[0]:
                best = (depth, after.split()[0])
    return best[1] if best else None


@frozen
class WatchMode:
    """How changes are noticed, and why: said to the learner, so a silent watch is explained."""

    polling: bool
    reason: str

    def describe(self, poll_ms: int = POLL_INTERVAL_MS) -> str:
        if self.polling:
            return f"by polling every {poll_ms} ms ({self.reason})"
        return "by file events"


def _is_wsl(release: str) -> bool:
    return "microsoft" in release.lower()


def choose_mode(
    directory: Path,
    force_poll: bool = False,
    *,
    env: Mapping[str, str] | None = None,
    mountinfo: str | None = None,
    kernel_release: str | None = None,
) -> WatchMode:
    """File events where they work, polling where they are known not to."""
    env = os.environ if env is None else env
    if force_poll:
        return WatchMode(True, "--poll")
    forced = env.get("WATCHFILES_FORCE_POLLING", "").strip().lower()
    if forced and forced not in ("0", "false", "no", "off"):
        return WatchMode(True, "WATCHFILES_FORCE_POLLING is set")
    fstype = filesystem_type(directory, mountinfo)
    if fstype in NO_EVENT_FILESYSTEMS:
        return WatchMode(True, f"{directory} is on a {fstype} file system, which sends no file events")
    release = platform.release() if kernel_release is None else kernel_release
    if _is_wsl(release):
        return WatchMode(True, "WSL: events for files edited from Windows do not arrive")
    return WatchMode(False, "native file-system notifications")


Handler = Callable[["tuple[str, ...] | None"], Awaitable[bool]]
Source = Callable[..., AsyncGenerator[Any, None]]


async def watch_saves(
    directory: Path,
    mode: WatchMode,
    handle: Handler,
    notify: Callable[[str], None],
    *,
    debounce_ms: int,
    poll_ms: int = POLL_INTERVAL_MS,
    source: Source | None = None,
) -> WatchMode:
    """Call `handle(None)` once the watcher is live, then `handle(changed)` per quiet burst.

    `changed` holds the paths (relative to `directory`) that call for a run.
    Stops when `handle` returns False. If native events cannot be set up,
    says so through `notify` and polls instead. Returns the mode that ran.
    """
    if source is None:
        import watchfiles  # imported here: only `course watch` pays for it

        source = watchfiles.awatch
    root = Path(os.path.abspath(directory))
    known = KnownDirectories(root)

    def keep(change: Any, path: str) -> bool:
        return is_relevant(path, root, known)

    while True:
        live = False
        # A poller may take its first snapshot only after its first wake (watchfiles 0.21 does, under
        # load): when polling, the watch is live from the second wake, so no change falls before it.
        wakes_before_live = 2 if mode.polling else 1
        batches = source(
            root,
            watch_filter=keep,
            step=max(1, debounce_ms),
            debounce=max(2000, 10 * debounce_ms),
            rust_timeout=WAKE_MS,
            yield_on_timeout=True,
            force_polling=mode.polling,
            poll_delay_ms=poll_ms,
            ignore_permission_denied=True,
        )
        try:
            # aclosing: leaving early must stop the watcher thread now, not at garbage collection.
            async with contextlib.aclosing(batches):
                async for batch in batches:
                    if not live:
                        wakes_before_live -= 1
                        if wakes_before_live and not batch:
                            continue
                        live = True
                        if not await handle(None):
                            return mode
                    changed = tuple(sorted({_relative(path, root) for _, path in batch}))
                    if changed and not await handle(changed):
                        return mode
        except (OSError, RuntimeError) as error:
            if live or mode.polling:
                raise UsageError(f"watching {directory} stopped: {error}") from None
            mode = WatchMode(True, f"file events are unavailable here: {error}")
            notify(f"File events could not be set up ({error}); falling back to polling every {poll_ms} ms.")
            continue
        return mode


def _relative(path: str, root: Path) -> str:
    try:
        return Path(path).relative_to(root).as_posix()
    except ValueError:
        return path


# The result screen -------------------------------------------------------------


def result_screen(
    number: int,
    chapter: Chapter,
    lab: Lab | None,
    checks: list[Check],
    duration: float,
    changed: tuple[str, ...] | None,
    update: Update,
    next_step: str,
) -> list[str]:
    """One short screen per run: a heading, the verdict and first failure, each check, the next step."""
    clock = time.strftime("%H:%M:%S")
    cause = "start" if changed is None else "saved " + ", ".join(changed[:3]) + (" ..." if len(changed) > 3 else "")
    return [f"== run {number} at {clock} ({cause}) ==", *result_lines(chapter, lab, checks, duration, update, next_step, verdict_first=True)]


# A learner's watch ---------------------------------------------------------------


class WatchSession:
    """One `course watch`: the runs, their screens and the verdict of the last one.

    A run is exactly a `course test` (same checks, and its verdict is saved
    the same way, so `course status` and `course hint` follow along). Output
    goes through `echo` so the CLI decides about colour; `clear` is given
    only when stdout is a terminal, so piped output keeps every screen.
    """

    def __init__(
        self,
        chapter: Chapter,
        lab: Lab | None,
        directory: Path,
        *,
        once: bool,
        echo: Callable[[str], None],
        clear: Callable[[], None] | None = None,
        debounce_ms: int,
        poll_ms: int = POLL_INTERVAL_MS,
        source: Source | None = None,
        dir_words: tuple[str, ...] = (),
        following: Chapter | None = None,
        following_dir_words: tuple[str, ...] = (),
    ) -> None:
        self.source = source
        self.dir_words = dir_words
        self.following = following
        self.following_dir_words = following_dir_words
        self.chapter = chapter
        self.lab = lab
        self.directory = directory
        self.once = once
        self.echo = echo
        self.clear = clear
        self.debounce_ms = debounce_ms
        self.poll_ms = poll_ms
        self.runs = 0
        self.last_ok: bool | None = None
        self.stopped_by: str | None = None
        self.mode: WatchMode | None = None
        # One pool for the whole session: a re-run after a save reuses its host (a fork, not a start-up).
        self.pool: RunPool | None = None

    def _footer(self) -> str:
        what = f"lab {self.lab.id}" if self.lab else "the focused tests"
        mode = self.mode.describe(self.poll_ms) if self.mode else ""
        if self.once:
            return f"Watching {self.directory} {mode}: the next save runs {what} once."
        return f"Watching {self.directory} {mode}: save a file to run {what} again (Ctrl-C stops)."

    async def _run(self, changed: tuple[str, ...] | None) -> None:
        started = time.monotonic()
        try:
            what = f"lab {self.lab.id}" if self.lab else "the focused tests"
            with progress(f"Running {what}", enabled=self.clear is not None, limit=self.chapter.time_limit):
                checks = await check_practice(self.chapter, self.directory, self.lab, self.pool, full_reports=False)
        except OSError as error:  # the dir vanished or cannot be read: say so, keep watching
            self.echo(f"Could not run the tests in {self.directory}: {error}")
            return
        duration = time.monotonic() - started
        before = read_last_test(self.directory)
        last = save_result(self.directory, self.chapter, self.lab, checks)
        run = next((check.run for check in checks if check.run is not None), None)
        was_green = before is not None and before.chapter == self.chapter.name and before.ok and before.lab is None
        update = record_redlights(self.directory, self.chapter, run, last.ok, self.lab is None, was_green)
        step = next_step(self.chapter, last, update.state, self.dir_words, self.following, "watch",
                         self.following_dir_words)
        self.runs += 1
        self.last_ok = last.ok
        if self.clear is not None:
            self.clear()
        for line in result_screen(self.runs, self.chapter, self.lab, checks, duration, changed, update, step):
            self.echo(line)

    async def handle(self, changed: tuple[str, ...] | None) -> bool:
        if changed is None:  # the watcher is live
            if self.once:
                self.echo(self._footer())
                return True
            await self._run(None)
            self.echo(self._footer())
            return True
        await self._run(changed)
        if self.once:
            return False
        self.echo(self._footer())
        return True

    async def _stop_on_signal(self, scope: trio.CancelScope) -> None:
        """Stop on Ctrl-C or SIGTERM, unless the command was started with that signal ignored.

        A shell without job control starts `course watch &` with SIGINT ignored, and
        nohup leaves what it ignores ignored: the Ctrl-C meant for the foreground is not for us.
        """
        wanted = [number for number in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(number) != signal.SIG_IGN]
        if not wanted:
            await trio.sleep_forever()
        with trio.open_signal_receiver(*wanted) as signals:
            async for number in signals:
                if number == signal.SIGINT:  # or a closed terminal's SIGHUP, handed on as Ctrl-C
                    number = handed_on_as_interrupt() or number
                self.stopped_by = signal.Signals(number).name
                scope.cancel()
                return

    async def run(self, mode: WatchMode) -> bool | None:
        """Watch until --once is done or SIGINT/SIGTERM; a run in flight is stopped cleanly."""
        self.mode = mode

        def fell_back(message: str) -> None:
            self.mode = WatchMode(True, "file events could not be set up")
            self.echo(message)

        try:
            async with RunPool(self.chapter.warm_imports) as self.pool, trio.open_nursery() as nursery:
                nursery.start_soon(self._stop_on_signal, nursery.cancel_scope)
                await watch_saves(
                    self.directory,
                    mode,
                    self.handle,
                    fell_back,
                    debounce_ms=self.debounce_ms,
                    poll_ms=self.poll_ms,
                    source=self.source,
                )
                nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The nursery wraps what its body raises; the course's own errors must
            # still reach the CLI as themselves: one paragraph and exit 2.
            errors, rest = group.split(CourseError)
            if errors is None or rest is not None:
                raise
            raise _first_leaf(errors) from None
        finally:
            self.pool = None
        return self.last_ok


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


# A red-light exercise's watch (`course redlight`) -----------------------------------


class RedLightWatch(WatchSession):
    """`course redlight` without --check: the same watching, runs and saved verdicts as `course watch`,
    but one line per run about one exercise (course.redlight_loop), and the watch ends by itself
    once the exercise is done: its failure seen, then the focused tests green again."""

    def __init__(self, chapter: Chapter, directory: Path, exercise: Any, restore_hint: str, **options: Any) -> None:
        super().__init__(chapter, None, directory, once=False, **options)
        self.exercise = exercise
        self.restore_hint = restore_hint
        self.seen = False
        self.finished_now = False

    async def _run(self, changed: tuple[str, ...] | None) -> None:
        from course.redlight_loop import SEEN, observe, stamped

        try:
            with progress("Running the focused tests", enabled=self.clear is not None, limit=self.chapter.time_limit):
                checks = await check_practice(self.chapter, self.directory, None, self.pool, full_reports=False)
        except OSError as error:
            self.echo(f"Could not run the tests in {self.directory}: {error}")
            return
        seen = observe(self.directory, self.chapter, self.exercise, checks, seen_before=self.seen)
        self.runs += 1
        self.last_ok = seen.ok
        self.seen = self.seen or seen.state == SEEN
        self.finished_now = seen.done
        cause = "" if changed is None else " (saved " + ", ".join(changed[:3]) + (" ..." if len(changed) > 3 else "") + ")"
        self.echo(stamped(seen.line(self.restore_hint)) + cause)

    async def handle(self, changed: tuple[str, ...] | None) -> bool:
        if changed is None:
            await self._run(None)
        else:
            await self._run(changed)
        if self.finished_now:
            return False
        if changed is None:
            self.echo(f"Watching {self.directory} {self.mode.describe(self.poll_ms) if self.mode else ''} (Ctrl-C stops).")
        return True
