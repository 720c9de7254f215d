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
    raise NotImplementedError("lab 18.5: write load_models")


def add_physical(catalog: ModelCatalog, id: str, entry: dict[str, Any]) -> None:
    """A model on an OpenAI-compatible server, asked for by its id."""
    raise NotImplementedError("lab 18.5: write add_physical")


def add_fallback(catalog: ModelCatalog, id: str, entry: dict[str, Any]) -> None:
    """A fallback virtual model over physical models of the same file."""
    raise NotImplementedError("lab 18.5: write add_fallback")


def check_keys(id: str, entry: dict[str, Any], keys: tuple[str, ...], kind: str) -> None:
    """Only the keys this kind of model has: a misspelt key would be a setting silently ignored."""
    raise NotImplementedError("lab 18.5: write check_keys")


def api_key(id: str, variable: Any) -> str | None:
    """The key in the environment variable `variable` names; None without one. Never in the file itself."""
    raise NotImplementedError("lab 18.5: write api_key")
