"""tool_search: the model finds the tools it was not shown, and they are declared from its next request.

A registry with codemode or deferred tools declares them only once they are
active. `tool_search` is a model-only tool that ranks the inactive ones
against a query, activates the best and says which. Ranking: first the
number of query terms a tool's text shares with the query (its term
overlap), then BM25 over the same texts (k1 1.2, b 0.75), then registration
order. A tool's text is its name (also with `_` and `-` as spaces), its
description, and its schema's property names and descriptions. The search
tool's own description never names the searchable tools: it stays the same
whatever is registered, and shows the model nothing it was not declared.

`deferred_names` turns `--defer write,edit,bash` into names for
`python -m tiny_pi.agent`.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any, Sequence

from attrs import frozen

from tiny_pi.abort import AbortSignal
from tiny_pi.messages import TextContent, text
from tiny_pi.tool_exposure import MODEL_ONLY, activatable
from tiny_pi.tools import Tool, ToolRegistry
from tiny_pi.toolset import tool_names

TOOL_SEARCH = "tool_search"
DEFAULT_LIMIT = 5
K1 = 1.2
B = 0.75
STOP_WORDS = frozenset("a an and are as at be by for from in is it of on or the this to with".split())
SEARCH_DESCRIPTION = (
    "Find tools that are not declared to you yet by keywords, and declare the best matches: "
    "you can call them from your next request. Say what you want to do, e.g. 'replace text in a file'."
)
SEARCH_PARAMETERS = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "keywords for what the tool should do"},
        "limit": {"type": "integer", "description": f"how many tools to declare at most; default {DEFAULT_LIMIT}"},
    },
    "required": ["query"],
}


@frozen
class Match:
    """One ranked tool: how many query terms it shares, and its BM25 score."""

    name: str
    overlap: int
    score: float


def tokenize(value: str) -> list[str]:
    """Lower-case terms: split at camelCase and at anything not a letter or digit; no stop words; `files` is `file`."""
    raise NotImplementedError("lab 15.5: split a text into terms")


def search_text(tool: Tool) -> str:
    """What a search reads of `tool`: its name, its name's words, its description, its schema's names and descriptions."""
    raise NotImplementedError("lab 15.5: a tool's search text")


def schema_words(schema: Any, parts: list[str]) -> None:
    """Every property name and description of `schema`, nested ones too, appended to `parts`."""
    raise NotImplementedError("lab 15.5: the schema's words")


def bm25_scores(query: Sequence[str], documents: Sequence[Sequence[str]]) -> list[float]:
    """Okapi BM25 of each document (a list of terms) for the distinct query terms; k1 1.2, b 0.75."""
    raise NotImplementedError("lab 15.5: BM25 by hand")


def rank_tools(query: str, tools: Sequence[Tool], limit: int) -> list[Match]:
    """The tools sharing a term with `query`: most terms shared first, then BM25, then registration order."""
    raise NotImplementedError("lab 15.5: rank the tools")


def searchable(registry: ToolRegistry) -> list[Tool]:
    """The codemode and deferred tools not active yet, in registration order."""
    raise NotImplementedError("lab 15.5: the tools a search may find")


def tool_search_tool(registry: ToolRegistry) -> Tool:
    """The model-only search tool of `registry`: register it there (`registry.register(...)`)."""

    raise NotImplementedError("lab 15.5: the tool_search tool")


def search_report(query: str, activated: Sequence[str], registry: ToolRegistry) -> str:
    """What the model reads: the tools it may call from its next request, with their descriptions' first lines."""
    raise NotImplementedError("lab 15.5: what a search says")


def first_line(tool: Tool | None) -> str:
    """A description's first line, without its surrounding spaces."""
    raise NotImplementedError("lab 15.5: a description's first line")


def deferred_names(spec: str, direct: Sequence[str]) -> list[str]:
    """The names of `--defer read,edit`; a ValueError for an unknown tool or one that --tools names too."""
    raise NotImplementedError("lab 15.7: the names of --defer")
