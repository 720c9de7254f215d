"""Helpers for the hostile-input tests: a short time limit, peak memory, leftover processes.

A hostile test proves two things at once: the verdict is clear, and the
machine is left as it was. "As it was" is checked from the outside, through
/proc: every process the `course` command starts inherits COURSE_ROOT (a
path unique to the test), so any live process that still carries it after
the command returned is a leftover.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from conftest import REPO

CHAPTER = Path("checkpoints/01-adder")

# Runs `course` as the learner does, and reports the peak RSS of the course
# process itself (VmHWM of its own address space, at exit). Neither
# RUSAGE_CHILDREN nor RUSAGE_SELF would do: the first counts pytest, which
# holds a test's 100 MB of output by design; the second carries over the
# high-water mark of the process image before exec (here: the test runner
# that forked us).
_RSS_WRAPPER = """\
import atexit, runpy, sys

def report():
    with open("/proc/self/status") as status:
        peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    sys.stderr.write("\\ncourse-peak-rss-kb=%s\\n" % peak)

atexit.register(report)
sys.argv = ["course", *sys.argv[1:]]
runpy.run_module("course", run_name="__main__", alter_sys=True)
"""
_PEAK = re.compile(r"course-peak-rss-kb=(\d+)")


def set_time_limit(root: Path, seconds: float) -> None:
    """Give the fixture chapter a time limit (replacing one it may already have)."""
    toml = root / CHAPTER / "chapter.toml"
    text = re.sub(r"(?m)^time_limit = .*\n", "", toml.read_text())
    toml.write_text(f"time_limit = {seconds}\n" + text)


def work_dir(root: Path, directory: Path) -> Path:
    """A learner's dir for `course test`, made from target (green until a test breaks it).

    Copied rather than made with `course practice`: these tests are about what
    `course test` does with misbehaving code, and a copy costs nothing.
    """
    shutil.copytree(root / CHAPTER / "target", directory)
    return directory


def run_course(
    root: Path, *args: str, warm: bool = True, timeout: float = 120, cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> tuple[subprocess.CompletedProcess[str], float, int]:
    """`course ARGS` against `root`: (result, seconds, peak RSS of the course process in kB)."""
    full_env = dict(os.environ)
    full_env.update({"COURSE_ROOT": str(root), "COURSE_WARM": "1" if warm else "0"})
    full_env.update(env or {})
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", _RSS_WRAPPER, *args],
        cwd=cwd or REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    elapsed = time.monotonic() - started
    match = _PEAK.search(result.stderr)
    peak = int(match.group(1)) if match else -1
    result.stderr = _PEAK.sub("", result.stderr).rstrip("\n")
    return result, elapsed, peak


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie (a killed orphan may wait for init to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def leftovers(marker: str) -> list[str]:
    """Live processes whose environment or command line mentions `marker` (a unique tmp path)."""
    found = []
    needle = marker.encode()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes()
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
        except OSError:
            continue
        if (needle in environ or needle in cmdline) and alive(int(name)):
            command = cmdline.replace(b"\0", b" ").decode(errors="replace")[:200]
            found.append(f"{name}: {command}")
    return found


def runs_started(marker: str) -> list[int]:
    """Pids of test runs under way whose environment mentions `marker`.

    A run is a child forked by a run host (course/runhost.py), itself forked
    by its keeper, so /proc shows the same command line three times over: a
    runhost.py process whose parent and grandparent are runhost.py processes too.
    """
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes()
            lineage = [Path(f"/proc/{name}/cmdline").read_bytes()]
            pid = name
            for _ in range(2):
                pid = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1].decode()
                lineage.append(Path(f"/proc/{pid}/cmdline").read_bytes())
        except (OSError, IndexError):
            continue
        if marker.encode() not in environ or not alive(int(name)):
            continue
        if all(b"runhost.py" in cmdline for cmdline in lineage):
            found.append(int(name))
    return found


def wait_until_gone(marker: str, within: float = 3.0) -> list[str]:
    """Leftovers still there after `within` seconds (SIGKILL is not instantaneous)."""
    deadline = time.monotonic() + within
    while True:
        found = leftovers(marker)
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def kill_pid_file(path: Path) -> None:
    """Clean up after a test that documents a process we cannot reach."""
    try:
        os.kill(int(path.read_text()), 9)
    except (OSError, ValueError):
        pass
