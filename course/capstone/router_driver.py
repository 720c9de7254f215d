"""The router family's driver: a virtual model that keeps a state, routed by the learner's own Router.

    python -P router_driver.py SPEC.json      (PYTHONPATH: the frozen copy, which holds tiny_pi/)

Chapter 18's command line offers one kind of virtual model, the fallback,
and a fallback keeps no state; so this script builds the setup of the
lesson's section 4 from the names the lesson gives (ModelCatalog, Route,
Router, DirectModel, Runtime, open_session), the way its example does: a
catalog of physical models, each an OpenAICompatibleModel on one of the
capstone's servers (real HTTP on 127.0.0.1), and a virtual model that sends
its Nth request to the Nth model of a drawn order, counting in its state.
It opens the session (at a branch, when SPEC names one), answers the
prompts through a Runtime, and exits; the capstone then reads which server
each prompt reached, which says which state each route was handed.

It imports only the learner's tiny_pi and trio, never the course: `-P`
keeps this directory off sys.path. A problem is a traceback and a non-zero
exit status, which the capstone counts as a failed case.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import trio

from tiny_pi.model_catalog import ModelCatalog, Route
from tiny_pi.providers.openai_compatible import OpenAICompatibleModel
from tiny_pi.routing import DirectModel, Router
from tiny_pi.runtime import Runtime
from tiny_pi.session import open_session
from tiny_pi.tools import ToolRegistry


class Rotation:
    """Request N (counted in the state, from 1) goes to order[N % len(order)]."""

    def __init__(self, id: str, order: list[str]) -> None:
        self.id = id
        self.order = order

    def route(self, request: Any) -> Route:
        count = (request.state or {}).get("count", 0) + 1
        return Route(self.order[count % len(self.order)], {"count": count})


async def main(spec: dict[str, Any]) -> None:
    catalog = ModelCatalog()
    for id, url in spec["models"].items():
        catalog.add_physical(id, OpenAICompatibleModel(url, id))
    catalog.add_virtual(Rotation(spec["virtual"], spec["order"]))
    session = open_session(Path(spec["session"]), spec["branch"], spec["virtual"])
    router = Router(catalog, spec["virtual"], session.router_states)
    async with trio.open_nursery() as nursery:
        runtime = Runtime(DirectModel(router), ToolRegistry(), nursery, session=session, router=router)
        for prompt in spec["prompts"]:
            runtime.prompt(prompt)
        await runtime.dispose()
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    trio.run(main, json.loads(Path(sys.argv[1]).read_text(encoding="utf-8")))
