"""The route-table mode (--routers): N resources, each a router of its own, in one app.

Resource k is a router with the prefix /r{k} and two routes: GET /r{k}/items/{item_id}
answers one Item, POST /r{k}/items echoes the Item it is sent. Every variant includes the
routers in the order k = 0 .. N-1, and the requests go to the first router and to the
last, so that the tables show what each router in front of the target costs.
"""

from __future__ import annotations

import msgspec

from .asgi import Case
from .routetable_plot import case_key

ITEM_COUNT = 100
ITEM_ID = 42
ROUTE_KEYS = ("get-first", "get-last", "post-first", "post-last")
# Our twins without msgspec_fastapi.install_dispatch: FastAPI's loop over the included
# routers (each MsgspecRouter still indexes its own inclusions); the value is the twin.
LOOP_VARIANTS = {"compiled-loop": "compiled", "pure-loop": "pure"}


class Item(msgspec.Struct, kw_only=True):
    id: int
    name: str
    price: float
    tags: list[str] = []


# The POST body: what a client creates, echoed back by every variant.
NEW_ITEM = Item(id=1001, name="new item", price=19.5, tags=["new", "sale"])


def make_items() -> dict[int, Item]:
    """The same items in every worker and router; GET reads ITEM_ID from them."""
    return {
        i: Item(id=i, name=f"item {i}", price=i * 1.25, tags=[f"tag{i % 7}"] * (i % 3))
        for i in range(1, ITEM_COUNT + 1)
    }


def routers_phrase(size: int) -> str:
    return f"{size} router" + ("" if size == 1 else "s")


def route_label(size: int, route: str) -> str:
    method, where = route.split("-")
    k = 0 if where == "first" else size - 1
    return f"GET /r{k}/items/{{id}}" if method == "get" else f"POST /r{k}/items"


def make_cases(size: int) -> dict[str, Case]:
    """The four requests to an app of `size` routers, keyed by case_key()."""
    item = make_items()[ITEM_ID]
    cases = {}
    for route in ROUTE_KEYS:
        method, where = route.split("-")
        k = 0 if where == "first" else size - 1
        key, label = case_key(size, route), route_label(size, route)
        if method == "get":
            case = Case(key, "GET", f"/r{k}/items/{ITEM_ID}", b"", b"", item, label)
        else:
            body = msgspec.json.encode(NEW_ITEM)
            case = Case(key, "POST", f"/r{k}/items", b"", body, NEW_ITEM, label)
        cases[key] = case
    return cases
