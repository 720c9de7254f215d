"""Fallback: which failed calls another model may answer, and a virtual model that tries its list in order.

A failed reply carries chapter 05's error text. Some failures belong to one
model or one server, and another model may well answer: a rate limit (HTTP
429), a server error (5xx), a usage limit or an exhausted quota (said in
words, whatever the status), a connection that dropped. Others would fail
the same way anywhere: a request the server calls bad (400), a key it
refuses (401, 403), a reply a content filter withheld. Only the first kind
is sent again.

`FallbackModel` is a virtual model (tiny_pi.model_catalog) with a list of
physical models. A user's request goes to the first of them; a continuation
stays with the model that gave the latest reply; a retry goes to the model
after the one that failed. A model whose context window is smaller than the
request is skipped, with a one-line notice.
"""

from __future__ import annotations

import re
import sys
from typing import Callable

from attrs import field, frozen

from tiny_pi.messages import AssistantMessage
from tiny_pi.model_catalog import ModelCatalog, Route, RouteRequest, RoutingError

USAGE_LIMIT_WORDS = ("usage limit", "quota")  # said in words, whatever the status
HTTP_STATUS = re.compile(r"HTTP (\d{3}):")  # how chapter 05 begins the text of a status >= 400
DROPPED = "transport error ("  # how chapter 05 begins the text of a failed exchange (httpx.HTTPError)

Say = Callable[[str], None]


def say_on_stderr(line: str) -> None:
    """The default notice: one line on stderr, where the agent's other notices go."""
    print(line, file=sys.stderr)


def fallback_reason(message: AssistantMessage) -> str | None:
    """Why another model may answer where this reply failed; None when it would fail the same way."""
    raise NotImplementedError("lab 18.4: write fallback_reason")


@frozen
class FallbackModel:
    """A virtual model over a list of physical models: the first that fits, and the next after a failure."""

    id: str
    models: tuple[str, ...] = field(converter=tuple)
    catalog: ModelCatalog = field(repr=False)
    say: Say = field(default=say_on_stderr, repr=False)

    def route(self, request: RouteRequest) -> Route:
        """The first model of `candidates` whose context window holds the request."""
        raise NotImplementedError("lab 18.4: write FallbackModel.route")

    def candidates(self, request: RouteRequest) -> tuple[str, ...]:
        """The models to try, in order: after the failed one on a retry; the latest reply's first on a continuation."""
        raise NotImplementedError("lab 18.4: write FallbackModel.candidates")
