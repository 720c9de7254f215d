"""models.toml: the catalog `python -m tiny_pi.agent --models FILE` routes with.

    [models.small]                           # a physical model: the name its server knows
    base_url = "http://127.0.0.1:8001/v1"
    context_window = 8192                    # optional: tokens it reads at most
    api_key_env = "SMALL_API_KEY"            # optional: the variable that holds its key

    [models.auto]                            # a virtual model: small first, large after a failure
    fallback = ["small", "large"]

Every problem is one ModelsConfigError line that starts with `--models PATH`,
found before anything is sent: agent.py prints it and exits 2.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from tiny_pi.fallback import FallbackModel
from tiny_pi.model_catalog import CatalogError, ModelCatalog
from tiny_pi.providers.openai_compatible import OpenAICompatibleModel

PHYSICAL_KEYS = ("base_url", "context_window", "api_key_env")
VIRTUAL_KEYS = ("fallback",)


class ModelsConfigError(ValueError):
    """A models file this agent cannot route with; the message is one line that says where and why."""


def load_models(path: Path) -> ModelCatalog:
    """The catalog the file at `path` describes: its physical models first, then its virtual ones."""
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ModelsConfigError(f"--models {path}: {error.strerror or error}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ModelsConfigError(f"--models {path}: not TOML ({error})") from None
    models = document.get("models")
    if not isinstance(models, dict) or not models:
        raise ModelsConfigError(f"--models {path}: the file has no [models] table")
    catalog = ModelCatalog()
    try:
        for id, entry in models.items():
            if not isinstance(entry, dict):
                raise ModelsConfigError(f"model {id!r}: a model is a table of keys, got {entry!r}")
            if ("base_url" in entry) == ("fallback" in entry):
                raise ModelsConfigError(f"model {id!r}: a model has exactly one of \"base_url\" (physical) "
                                        "and \"fallback\" (virtual)")
            if "base_url" in entry:
                add_physical(catalog, id, entry)
        for id, entry in models.items():
            if "fallback" in entry:
                add_fallback(catalog, id, entry)
    except (ModelsConfigError, CatalogError) as error:
        raise ModelsConfigError(f"--models {path}: {error}") from None
    return catalog


def add_physical(catalog: ModelCatalog, id: str, entry: dict[str, Any]) -> None:
    """A model on an OpenAI-compatible server, asked for by its id."""
    check_keys(id, entry, PHYSICAL_KEYS, "a physical")
    url = entry["base_url"]
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ModelsConfigError(f"model {id!r}: \"base_url\" is an http:// or https:// URL, got {url!r}")
    window = entry.get("context_window")
    if window is not None and (not isinstance(window, int) or isinstance(window, bool) or window < 1):
        raise ModelsConfigError(f"model {id!r}: \"context_window\" is a whole number above 0, got {window!r}")
    catalog.add_physical(id, OpenAICompatibleModel(url, id, api_key=api_key(id, entry.get("api_key_env"))), window)


def add_fallback(catalog: ModelCatalog, id: str, entry: dict[str, Any]) -> None:
    """A fallback virtual model over physical models of the same file."""
    check_keys(id, entry, VIRTUAL_KEYS, "a virtual")
    models = entry["fallback"]
    if not isinstance(models, list) or not models or not all(isinstance(model, str) for model in models):
        raise ModelsConfigError(f"model {id!r}: \"fallback\" is a non-empty list of model ids, got {models!r}")
    for model in models:
        if catalog.physical(model) is None:
            raise ModelsConfigError(f"model {id!r}: \"fallback\" names {model!r}, which is not a physical model of this file")
    catalog.add_virtual(FallbackModel(id, tuple(models), catalog))


def check_keys(id: str, entry: dict[str, Any], keys: tuple[str, ...], kind: str) -> None:
    """Only the keys this kind of model has: a misspelt key would be a setting silently ignored."""
    for key in entry:
        if key not in keys:
            raise ModelsConfigError(f"model {id!r}: unknown key {key!r} ({kind} model's keys are {', '.join(keys)})")


def api_key(id: str, variable: Any) -> str | None:
    """The key in the environment variable `variable` names; None without one. Never in the file itself."""
    if variable is None:
        return None
    if not isinstance(variable, str) or not variable:
        raise ModelsConfigError(f"model {id!r}: \"api_key_env\" is the name of an environment variable, got {variable!r}")
    if variable not in os.environ:
        raise ModelsConfigError(f"model {id!r}: \"api_key_env\" names {variable}, which is not set")
    if not os.environ[variable]:
        raise ModelsConfigError(f"model {id!r}: \"api_key_env\" names {variable}, which is empty")
    return os.environ[variable]
