"""The targets of Pydantic routes on MsgspecRouter: pydantic-compiled and pydantic-pure
(worker.PYDANTIC_ROUTER_VARIANTS) against the same models and endpoints on FastAPI's
APIRouter (pydantic), and against our msgspec route (compiled).

The city routes have the GET of one model (`GET /cities/{id}`, one city) and the validate
route (a body of 100 cities); the route table has the GET of one four-field model
(`GET /r0/items/{id}`) and the POST echoing one (`POST /r0/items`), judged in its app of
the fewest routers measured.
"""

from __future__ import annotations

from typing import Any, TextIO

from .ratio_targets import Target, Times, judged_json, print_judged
from .routetable import route_label, routers_phrase
from .routetable_plot import case_key

TITLE = "Pydantic routes on MsgspecRouter, targets"
OURS, PURE, FASTAPI, MSGSPEC = "pydantic-compiled", "pydantic-pure", "pydantic", "compiled"
# The most allowed ratios to FastAPI with Pydantic: the GET of one model, the POST of one
# model, the validate route, the pure twin's GET; and of the GET to our msgspec route.
GET_MOST, POST_MOST, VALIDATE_MOST, PURE_GET_MOST = 0.15, 0.2, 0.5, 0.3
GET_VS_MSGSPEC_MOST = 1.5


def _get_targets(get: str, label: str) -> list[Target]:
    return [
        Target(f"{OURS} / {FASTAPI}, {label}", (OURS, get), (FASTAPI, get), GET_MOST),
        Target(f"{OURS} / {MSGSPEC}, {label}", (OURS, get), (MSGSPEC, get), GET_VS_MSGSPEC_MOST),
        Target(f"{PURE} / {FASTAPI}, {label}", (PURE, get), (FASTAPI, get), PURE_GET_MOST),
    ]


def city_targets() -> list[Target]:
    validate = "POST /cities/validate (100 cities)"
    return [
        *_get_targets("get", "GET /cities/{id}"),
        Target(
            f"{OURS} / {FASTAPI}, {validate}",
            (OURS, "validate"),
            (FASTAPI, "validate"),
            VALIDATE_MOST,
        ),
    ]


def table_targets(sizes: list[int]) -> list[Target]:
    size = min(sizes)
    get, post = case_key(size, "get-first"), case_key(size, "post-first")
    where = f" ({routers_phrase(size)})"
    post_label = route_label(size, "post-first") + where
    return [
        *_get_targets(get, route_label(size, "get-first") + where),
        Target(f"{OURS} / {FASTAPI}, {post_label}", (OURS, post), (FASTAPI, post), POST_MOST),
    ]


def targets_for(sizes: list[int] | None) -> list[Target]:
    """The city routes' targets (sizes None) or the route table's."""
    return city_targets() if sizes is None else table_targets(sizes)


def print_targets(out: TextIO, times: Times, sizes: list[int] | None) -> None:
    print_judged(out, TITLE, times, targets_for(sizes))


def targets_json(times: Times, sizes: list[int] | None) -> list[dict[str, Any]]:
    return judged_json(times, targets_for(sizes))
