"""The model catalog: physical models that answer, virtual models that choose.

A physical model is a provider behind chapter 05's protocol (anything with
`stream`), registered under the id its replies carry in their `model` field.
A virtual model has no `stream` at all, only `route`: given one request, it
names the physical model that should answer it. An id names one model of
the catalog, physical or virtual, never both; and only `physical` hands out
something that can stream, so a virtual model never reaches a provider.

Routing is one step. A route must name a physical model: a route to another
virtual model, to an id nobody registered, or a router that raises, is a
RoutingError whose message says which, and nothing else happens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable, Literal, Protocol, Sequence

from attrs import field, frozen

from tiny_pi.messages import ERROR_REASONS, AgentContext, AgentMessage, AssistantMessage, UserMessage, assistant_message, now_ms

if TYPE_CHECKING:  # the loop imports this module: a name for type hints only, no import cycle
    from tiny_pi.abort import AbortSignal
    from tiny_pi.agent_loop import ToolUsingModel
    from tiny_pi.tools import Tool

RequestReason = Literal["user", "continuation", "retry"]  # why the loop sends a request
RouteReason = Literal["user", "continuation", "retry", "direct"]  # direct: a call outside the loop
UNROUTED = "unrouted"  # the provider and model of a reply no model gave
NOT_IN_CATALOG = "model {id!r} is not in the catalog"
ROUTED_TO_VIRTUAL = "virtual model {id!r} routed to {target!r}, another virtual model: a route names a physical model"
ROUTED_NOWHERE = "virtual model {id!r} routed to {target!r}, which is not in the catalog"
ROUTER_RAISED = "virtual model {id!r} could not route: {kind}: {error}"


class CatalogError(ValueError):
    """A model that cannot join the catalog: an empty id, or one already taken."""


class RoutingError(RuntimeError):
    """This request has no physical model: the message says why. Nothing was sent."""


@frozen
class PhysicalModel:
    """A model that answers: its id (the name its replies carry), the provider, the tokens it reads at most."""

    id: str
    model: ToolUsingModel
    context_window: int | None = None  # None: unknown, never too small


@frozen
class RouteRequest:
    """What a virtual model is asked: which request, why, and what happened before it."""

    model_id: str  # the virtual model being asked
    reason: RouteReason  # user | continuation | retry | direct
    messages: tuple[AgentMessage, ...]
    tokens: int  # the request's size, estimated as chapter 11 does
    previous: AssistantMessage | None = None  # the latest successful reply
    failed: AssistantMessage | None = None  # on a retry: the reply that failed
    state: dict[str, Any] | None = None  # what this virtual model returned last on this branch


@frozen
class Route:
    """A virtual model's answer: the physical model for this request, and its new state (None: unchanged)."""

    model: str
    state: dict[str, Any] | None = field(default=None)


class VirtualModel(Protocol):
    """Anything with an id and a route; it chooses, it never streams."""

    id: str

    def route(self, request: RouteRequest) -> Route: ...


class ModelCatalog:
    """Physical and virtual models under ids unique across both."""

    def __init__(self) -> None:
        self._physical: dict[str, PhysicalModel] = {}
        self._virtual: dict[str, VirtualModel] = {}

    def add_physical(self, id: str, model: ToolUsingModel, context_window: int | None = None) -> PhysicalModel:
        """Register a model that answers; its replies must carry `id` as their model."""
        self.check_free(id)
        self._physical[id] = PhysicalModel(id, model, context_window)
        return self._physical[id]

    def add_virtual(self, virtual: VirtualModel) -> None:
        """Register a model that chooses."""
        self.check_free(virtual.id)
        self._virtual[virtual.id] = virtual

    def check_free(self, id: str) -> None:
        """A CatalogError unless `id` is a non-empty name no model of either kind has."""
        if not isinstance(id, str) or not id.strip():
            raise CatalogError(f"a model id is a non-empty string, got {id!r}")
        if id in self._physical:
            raise CatalogError(f"model id {id!r} is taken by a physical model")
        if id in self._virtual:
            raise CatalogError(f"model id {id!r} is taken by a virtual model")

    def physical(self, id: str) -> PhysicalModel | None:
        """The physical model `id`, or None (for a virtual id too: it has nothing to stream)."""
        return self._physical.get(id)

    def virtual(self, id: str) -> VirtualModel | None:
        return self._virtual.get(id)

    def ids(self) -> list[str]:
        """Every id, sorted: what an error message offers."""
        return sorted([*self._physical, *self._virtual])

    def __contains__(self, id: object) -> bool:
        return id in self._physical or id in self._virtual


def latest_reply(messages: Sequence[AgentMessage]) -> AssistantMessage | None:
    """The newest assistant message that did not fail: a failed or aborted one answered nothing."""
    for message in reversed(messages):
        if isinstance(message, AssistantMessage) and message.stop_reason not in ERROR_REASONS:
            return message
    return None


def resolve_route(
    catalog: ModelCatalog,
    model_id: str,
    *,
    reason: RouteReason,
    messages: Sequence[AgentMessage],
    tokens: int = 0,
    failed: AssistantMessage | None = None,
    state: dict[str, Any] | None = None,
) -> tuple[PhysicalModel, Route]:
    """Ask the virtual model `model_id` once; the physical model it named, and its route. A RoutingError otherwise."""
    virtual = catalog.virtual(model_id)
    if virtual is None:
        raise RoutingError(NOT_IN_CATALOG.format(id=model_id))
    request = RouteRequest(model_id, reason, tuple(messages), tokens, latest_reply(messages), failed, state)
    try:
        route = virtual.route(request)
    except RoutingError:
        raise  # already says which model and why
    except Exception as error:  # a router's bug ends this request, not the agent
        raise RoutingError(ROUTER_RAISED.format(id=model_id, kind=type(error).__name__, error=error)) from error
    target = catalog.physical(route.model)
    if target is None:
        template = ROUTED_TO_VIRTUAL if catalog.virtual(route.model) is not None else ROUTED_NOWHERE
        raise RoutingError(template.format(id=model_id, target=route.model))
    return target, route


# The loop's side: what it asks its prepare_request hook before each request.


@frozen
class ModelRequest:
    """One model request as the loop is about to send it: the context (live: copy it to keep it), its tools, why."""

    context: AgentContext
    tools: tuple[Tool, ...]
    reason: RequestReason
    failed: AssistantMessage | None = None  # on a retry: the reply that failed


PrepareRequest = Callable[[ModelRequest, "AbortSignal"], Awaitable["ToolUsingModel"]]
"""Awaited before each model request: the model that sends this one request."""


def request_reason(messages: Sequence[AgentMessage]) -> tuple[RequestReason, AssistantMessage | None]:
    """Why a request goes out, from the newest user message or reply; a failed reply is a retry of it.

    Tool results and tool patches come after a reply and change nothing:
    a request after them continues what that reply started.
    """
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            return "user", None
        if isinstance(message, AssistantMessage):
            if message.stop_reason in ERROR_REASONS:
                return "retry", message
            return "continuation", None
    return "user", None


def unrouted_reply(error: Exception) -> AssistantMessage:
    """The error reply of a request no model was found for: it ends the turn as a failed call does."""
    why = str(error) if isinstance(error, RoutingError) else f"prepare_request raised {type(error).__name__}: {error}"
    return assistant_message([], "error", provider=UNROUTED, model=UNROUTED, error_message=why, timestamp=now_ms())
