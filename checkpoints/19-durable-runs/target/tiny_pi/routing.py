"""The router: the selected model, resolved to a physical one before every request.

The selection is what the user chose (a `model_change` entry names it): a
physical model, or a virtual one. The Router is the loop's prepare_request:
a physical selection is sent as it is; a virtual one is asked to route this
one request (tiny_pi.model_catalog), and the physical model it names sends
it. Nothing else changes: the next request is routed afresh.

A virtual model may keep a state between requests (a counter, the model it
settled on). The Router keeps the latest state of each virtual model, as
restored from the session's active branch, hands it to the next route, and
notes a state that changed in `unsaved`: the Runtime writes it as a
`router_state` entry after the turn's messages. A route that fails writes
nothing, and a call outside the loop (chapter 11's summary) is routed with
reason `direct`, reading and writing no state.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from attrs import frozen

from tiny_pi.abort import AbortSignal
from tiny_pi.agent_loop import ToolUsingModel
from tiny_pi.compaction import context_tokens, fixed_tokens
from tiny_pi.messages import AgentContext, AgentMessage
from tiny_pi.model_catalog import ModelCatalog, ModelRequest, PhysicalModel, RoutingError, resolve_route, unrouted_reply
from tiny_pi.model_stream import ModelCallStream
from tiny_pi.projection import project

State = dict[str, Any]


class Router:
    """The selection, routed per request; each virtual model's latest state, and the changes not yet saved."""

    def __init__(self, catalog: ModelCatalog, selected: str, states: Mapping[str, State] | None = None) -> None:
        self.catalog = catalog
        self.selected = selected
        self.states: dict[str, State] = dict(states or {})  # the branch's latest state of each virtual model
        self.unsaved: list[tuple[str, State]] = []  # (virtual model, state), in the order they changed

    async def prepare_request(self, request: ModelRequest, signal: AbortSignal) -> ToolUsingModel:
        """The loop's hook: the model that sends this request. A RoutingError leaves every state as it was."""
        physical = self.catalog.physical(self.selected)
        if physical is not None:
            return physical.model  # a physical selection needs no router
        state = self.states.get(self.selected)
        target, route = resolve_route(
            self.catalog, self.selected, reason=request.reason, messages=request.context.messages,
            tokens=request_tokens(request.context, request.tools), failed=request.failed, state=state,
        )
        if route.state is not None:
            new = checked_state(self.selected, route.state)
            if new != state:
                self.states[self.selected] = new
                self.unsaved.append((self.selected, new))
        return target.model

    def route_direct(self, messages: Sequence[AgentMessage], tokens: int = 0) -> PhysicalModel:
        """The physical model for a call outside the loop: reason `direct`, no state given, none kept."""
        physical = self.catalog.physical(self.selected)
        if physical is not None:
            return physical
        target, _ = resolve_route(self.catalog, self.selected, reason="direct", messages=messages, tokens=tokens)
        return target

    def take_unsaved(self) -> list[tuple[str, State]]:
        """The states changed since the last call, oldest first; the Runtime saves them."""
        unsaved, self.unsaved = self.unsaved, []
        return unsaved


def checked_state(model_id: str, state: Any) -> State:
    """A copy of a route's state, made through JSON: a state the session could not hold is a RoutingError now."""
    if not isinstance(state, dict):
        raise RoutingError(f"virtual model {model_id!r} returned a state that is not a JSON object: {state!r}")
    try:
        return json.loads(json.dumps(state, allow_nan=False))
    except (TypeError, ValueError) as error:
        raise RoutingError(f"virtual model {model_id!r} returned a state JSON cannot hold: {error}") from None


def request_tokens(context: AgentContext, tools: Sequence[Any]) -> int:
    """The request's size as chapter 11 estimates it: the system prompt, the tools and the messages."""
    return context_tokens(context.messages, fixed_tokens(context.system_prompt, list(tools)))


@frozen
class DirectModel:
    """A model for calls outside the loop (chapter 11's summary): each call routed with reason `direct`."""

    router: Router

    def stream(self, context: AgentContext, *, signal: AbortSignal | None = None, tools: Any = None) -> ModelCallStream:
        """The physical model's stream; a failed route is a stream that plays the error reply."""
        try:
            physical = self.router.route_direct(context.messages, request_tokens(context, tools or ()))
        except RoutingError as error:
            events = project(unrouted_reply(error))

            async def produce(stream: ModelCallStream) -> None:
                for event in events:
                    stream.push(event)

            return ModelCallStream(produce)
        return physical.model.stream(context, signal=signal, tools=tools)
