"""Reuse a chapter's proof when nothing it reads has changed.

An author usually edits one chapter, yet `course verify` used to run every
chapter's story again. A story (red parent, green labs, failing red-light
patches) reads the chapter's chapter.toml, parent/, target/ and redlight/,
the chapter.toml of every earlier chapter (their focused tests run on this
target, with their counts), the course tool's own code and the versions of
Python and the libraries a run imports. Its verdict is stored under a digest
of all of that, outside `checkpoints/`; the lesson is not part of it (lesson
checks read files only and always run). `--fresh` ignores the store.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from course.atomic import replace_text
from course.catalog import Catalog, Chapter
from course.lineage import is_ignored
from course.run_env import cache_home, directory_setting

STORY_PARTS = ("chapter.toml", "parent", "target", "redlight")
LIBRARIES = ("pytest", "pluggy", "trio", "attrs", "httpx", "hypothesis")
TOOL = Path(__file__).resolve().parent


def cache_dir() -> Path:
    """Where verdicts are kept: COURSE_CACHE (an absolute path, else one line), else the user's cache directory."""
    override = directory_setting(os.environ, "COURSE_CACHE")
    if override is not None:
        return Path(override)
    return Path(cache_home()) / "verify"


def _add_tree(digest: Any, root: Path, label: str) -> None:
    paths = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file() or p.is_symlink())
    for path in paths:
        relative = path.relative_to(root.parent).as_posix()
        if is_ignored(relative):
            continue
        digest.update(f"{label}:{relative}\0".encode())
        digest.update(os.readlink(path).encode() if path.is_symlink() else path.read_bytes())
        digest.update(b"\0")


def story_key(catalog: Catalog, chapter: Chapter) -> str:
    """A digest of everything the chapter's story reads."""
    digest = hashlib.sha256()
    for part in STORY_PARTS:
        if (chapter.root / part).exists():
            _add_tree(digest, chapter.root / part, "chapter")
    for earlier in catalog.earlier(chapter):
        _add_tree(digest, earlier.root / "chapter.toml", f"earlier-{earlier.nn}")
    _add_tree(digest, TOOL, "tool")
    digest.update(sys.version.encode())
    import importlib.metadata  # here, not at the top: `course test` loads this module but never keys a story

    for name in LIBRARIES:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = "absent"
        digest.update(f"{name}={version}\0".encode())
    return digest.hexdigest()


def load(key: str) -> list[dict[str, Any]] | None:
    """The stored checks of a story, or None (never stored, unreadable, or not a list)."""
    try:
        data = json.loads((cache_dir() / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, list) else None


def store(key: str, checks: list[dict[str, Any]]) -> None:
    """Keep a story's checks; a cache that cannot be written only costs time next run."""
    replace_text(cache_dir() / f"{key}.json", json.dumps(checks))
