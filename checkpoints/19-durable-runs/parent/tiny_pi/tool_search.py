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
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", value).lower()
    terms = [term for term in re.split(r"[^a-z0-9]+", spaced) if term and term not in STOP_WORDS]
    return [term[:-1] if len(term) > 3 and term.endswith("s") and not term.endswith("ss") else term
            for term in terms]


def search_text(tool: Tool) -> str:
    """What a search reads of `tool`: its name, its name's words, its description, its schema's names and descriptions."""
    parts = [tool.name, tool.name.replace("_", " ").replace("-", " "), tool.description]
    schema_words(tool.parameters, parts)
    return " ".join(parts)


def schema_words(schema: Any, parts: list[str]) -> None:
    """Every property name and description of `schema`, nested ones too, appended to `parts`."""
    if not isinstance(schema, dict):
        return
    if isinstance(schema.get("description"), str):
        parts.append(schema["description"])
    for name, child in (schema.get("properties") or {}).items():
        parts.append(name)
        schema_words(child, parts)
    schema_words(schema.get("items"), parts)


def bm25_scores(query: Sequence[str], documents: Sequence[Sequence[str]]) -> list[float]:
    """Okapi BM25 of each document (a list of terms) for the distinct query terms; k1 1.2, b 0.75."""
    if not documents:
        return []
    average = sum(len(document) for document in documents) / len(documents) or 1.0
    holding = Counter(term for document in documents for term in set(document))
    scores = []
    for document in documents:
        counts = Counter(document)
        score = 0.0
        for term in dict.fromkeys(query):
            frequency = counts[term]
            if frequency == 0:
                continue
            idf = math.log(1 + (len(documents) - holding[term] + 0.5) / (holding[term] + 0.5))
            score += idf * frequency * (K1 + 1) / (frequency + K1 * (1 - B + B * len(document) / average))
        scores.append(score)
    return scores


def rank_tools(query: str, tools: Sequence[Tool], limit: int) -> list[Match]:
    """The tools sharing a term with `query`: most terms shared first, then BM25, then registration order."""
    terms = list(dict.fromkeys(tokenize(query)))
    documents = [tokenize(search_text(tool)) for tool in tools]
    scores = bm25_scores(terms, documents)
    matches = []
    for tool, document, score in zip(tools, documents, scores):
        overlap = len(set(terms) & set(document))
        if overlap > 0:
            matches.append(Match(tool.name, overlap, score))
    matches.sort(key=lambda match: (-match.overlap, -match.score))  # stable: registration order last
    return matches[: max(limit, 0)]


def searchable(registry: ToolRegistry) -> list[Tool]:
    """The codemode and deferred tools not active yet, in registration order."""
    tools = [registry.get(name) for name in registry.names]
    return [tool for tool in tools if tool is not None and activatable(tool.exposure) and not registry.is_active(tool.name)]


def tool_search_tool(registry: ToolRegistry) -> Tool:
    """The model-only search tool of `registry`: register it there (`registry.register(...)`)."""

    async def execute(arguments: dict[str, Any], *, signal: AbortSignal) -> list[TextContent]:
        query = arguments["query"]
        limit = arguments.get("limit", DEFAULT_LIMIT)
        if not query.strip():
            raise ValueError("the query is empty: say what the tool should do")
        if isinstance(limit, bool) or int(limit) < 1:
            raise ValueError(f"limit is a whole number of 1 or more, got {limit!r}")
        matches = rank_tools(query, searchable(registry), int(limit))
        activated = registry.activate(match.name for match in matches)
        return [text(search_report(query, activated, registry))]

    return Tool(TOOL_SEARCH, SEARCH_DESCRIPTION, SEARCH_PARAMETERS, execute, exposure=MODEL_ONLY)


def search_report(query: str, activated: Sequence[str], registry: ToolRegistry) -> str:
    """What the model reads: the tools it may call from its next request, with their descriptions' first lines."""
    if not activated:
        return f"No tool that is not declared yet matches {query!r}."
    lines = [f"- {name}: {first_line(registry.get(name))}" for name in activated]
    count = f"{len(activated)} tool" + ("s" if len(activated) > 1 else "")
    return f"Declared {count}; call them from your next request:\n" + "\n".join(lines)


def first_line(tool: Tool | None) -> str:
    """A description's first line, without its surrounding spaces."""
    return tool.description.strip().split("\n", 1)[0] if tool is not None else ""


def deferred_names(spec: str, direct: Sequence[str]) -> list[str]:
    """The names of `--defer read,edit`; a ValueError for an unknown tool or one that --tools names too."""
    names = tool_names(spec)
    for name in names:
        if name in direct:
            raise ValueError(f"{name} is in --tools too: a tool is either direct or deferred")
    return names
