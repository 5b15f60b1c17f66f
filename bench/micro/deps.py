"""--deps: routes whose work is dependencies, as a FastAPI service's routes are.

Three routes, each also sent to a second app of the same variant that has an unrelated
`app.dependency_overrides` entry set (the cases ending in "-override"):

- two-get, `GET /two/items/{item_id}`, and two-post, `POST /two/items`: two dependencies,
  a session from an `async` generator (a small object standing in for a database session)
  and the current user read from the `Authorization` header, which itself takes the
  session. GET answers one Struct built from the session's record and the user; POST
  echoes the small Struct it is sent, after adding it to the session.
- deep-get, `GET /deep/items/{item_id}`: six dependencies, three deep: a router-level
  `dependencies=[...]` check of the `X-Tenant` header; `Security` with the scope
  "items:read" over the current user, which takes the session; a class dependency (the
  item repository), which takes the same session (the shared sub-dependency); settings.

The variants (DEPS_VARIANTS) write these dependencies in their own framework's way
(deps_fastapi.py, deps_litestar.py) or call them by hand (deps_floor.py), on what
deps_common.py defines for all of them; this module holds the requests and the answers
every variant must give, load(), which picks a variant's app, and DepsBench, which a
worker process (worker.py --deps) runs for one variant. A class dependency is called in
the threadpool by FastAPI; every variant does the same, so that each does the same work.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import time
from collections.abc import Callable
from typing import Any

import msgspec
from common import ROUTER_VARIANTS, Unavailable, import_router_package, version

from .asgi import ASGIApp, Case, Response, WrongAnswer, call, http_scope
from .deps_common import (
    ITEM_ID,
    NEW_ITEM,
    RECORDS,
    SETTINGS,
    TENANT,
    TOKEN,
    USERS,
    Session,
    deep_view,
    item_view,
)
from .inprocess import InProcessBench

DEPS_VARIANTS = (
    "compiled",
    "pure",
    "upstream",
    "pydantic",
    "pydantic-compiled",
    "pydantic-pure",
    "litestar",
    "blacksheep",
    "floor",
    "bare",
)
# FastAPI's Pydantic app on MsgspecRouter + install_dispatch, on a twin (the value).
PYDANTIC_ROUTER_VARIANTS = {"pydantic-compiled": "compiled", "pydantic-pure": "pure"}
# Litestar and BlackSheep have no dependency overrides: they answer the routes without them
# only.
NO_OVERRIDES = frozenset({"litestar", "blacksheep"})
ROUTES = ("two-get", "two-post", "deep-get")
# The routes a variant answers where it is not all of them.
ROUTES_BY_VARIANT = {"blacksheep": ("two-get", "two-post")}
OVERRIDE_SUFFIX = "-override"
CASE_KEYS = (*ROUTES, *(route + OVERRIDE_SUFFIX for route in ROUTES))
# Variants whose bytes must equal msgspec's own encoding; Pydantic's answers are compared
# parsed.
BYTE_EXACT = frozenset(DEPS_VARIANTS) - {"pydantic", *PYDANTIC_ROUTER_VARIANTS}
PREVIEW = 300

_AUTH = (b"authorization", f"Bearer {TOKEN}".encode())
_RECORD = RECORDS[ITEM_ID]
_USER = USERS[TOKEN]
_REQUESTS: dict[str, tuple[str, str, bytes, tuple[tuple[bytes, bytes], ...], object, str]] = {
    "two-get": (
        "GET",
        f"/two/items/{ITEM_ID}",
        b"",
        (_AUTH,),
        item_view(_RECORD, _USER),
        "GET /two/items/{id}, two dependencies",
    ),
    "two-post": (
        "POST",
        "/two/items",
        msgspec.json.encode(NEW_ITEM),
        (_AUTH,),
        NEW_ITEM,
        "POST /two/items, two dependencies",
    ),
    "deep-get": (
        "GET",
        f"/deep/items/{ITEM_ID}",
        b"",
        (_AUTH, (b"x-tenant", TENANT.encode())),
        deep_view(_RECORD, _USER, SETTINGS),
        "GET /deep/items/{id}, six dependencies, three deep",
    ),
}


def _make_cases() -> dict[str, Case]:
    cases = {}
    for key in CASE_KEYS:
        route = key.removesuffix(OVERRIDE_SUFFIX)
        method, path, body, headers, expected, label = _REQUESTS[route]
        if key != route:
            label += ", an unrelated override set"
        cases[key] = Case(key, method, path, b"", body, expected, label, headers)
    return cases


CASES = _make_cases()
CASE_LABELS = {key: case.label for key, case in CASES.items()}


def is_override(key: str) -> bool:
    return key.endswith(OVERRIDE_SUFFIX)


def answers(variant: str, key: str) -> bool:
    """Whether `variant` has the case `key` (without overrides, or without the route, not)."""
    if is_override(key) and variant in NO_OVERRIDES:
        return False
    return key.removesuffix(OVERRIDE_SUFFIX) in ROUTES_BY_VARIANT.get(variant, ROUTES)


# A builder makes the variant's app, with the unrelated override set or without it.
Builder = Callable[[bool], ASGIApp]


def load(variant: str) -> tuple[Builder, dict[str, Any]]:
    """The variant's app builder and facts about what was imported.

    Call it before anything imports msgspec_fastapi (see common.import_router_package).
    """
    if variant in ROUTER_VARIANTS:
        _, package = import_router_package(variant)
        from . import deps_fastapi

        info = {
            "msgspec_fastapi": package,
            "route_index": deps_fastapi.route_index(),
            "executor": deps_fastapi.executor(variant),
        }
        return deps_fastapi.build_router_app, info
    if variant == "pydantic":
        from . import deps_fastapi

        return deps_fastapi.build_pydantic_app, {}
    if twin := PYDANTIC_ROUTER_VARIANTS.get(variant):
        ours, package = import_router_package(twin)
        from . import deps_fastapi

        build = functools.partial(
            deps_fastapi.build_pydantic_app, router_class=ours.MsgspecRouter, ours=True
        )
        return build, {"msgspec_fastapi": package, "route_index": True}
    if variant == "litestar":
        if importlib.util.find_spec("litestar") is None:
            raise Unavailable("litestar is not installed in this environment")
        from . import deps_litestar

        return deps_litestar.build_app, {"litestar": version("litestar")}
    if variant == "blacksheep":
        if importlib.util.find_spec("blacksheep") is None:
            raise Unavailable("blacksheep is not installed in this environment")
        from . import deps_blacksheep

        return deps_blacksheep.build_app, {"blacksheep": version("blacksheep")}
    from . import deps_floor

    if variant == "floor":
        return deps_floor.build_floor_app, {}
    if variant == "bare":
        return deps_floor.build_bare_app, {}
    raise ValueError(f"unknown variant {variant!r}")


def fingerprint() -> str:
    """The same for every worker: the requests and the answers they must get."""
    digest = hashlib.sha256()
    for key, case in sorted(CASES.items()):
        digest.update(key.encode() + case.path.encode() + case.body + case.expected_body)
        for name, value in case.headers:
            digest.update(name + b":" + value)
    return digest.hexdigest()


class DepsBench(InProcessBench[str]):
    """One variant's apps (without and with the override) and its cases, answers checked.

    The first answer to every case is checked against the expected one (status, JSON
    content type, body); every later answer must repeat its bytes, and after every batch
    every session the batch opened must have been closed.
    """

    def __init__(self, variant: str) -> None:
        super().__init__()
        self.variant = variant
        build, self.info = load(variant)
        overrides = variant not in NO_OVERRIDES
        self.cases = {k: c for k, c in CASES.items() if answers(variant, k)}
        self.start("plain", build(False))
        if overrides:
            self.start("override", build(True))
        self.scopes = {
            key: http_scope(case.method, case.path, case.query, case.body, case.headers)
            for key, case in self.cases.items()
        }
        self.reference: dict[str, bytes] = {}
        for key, case in self.cases.items():
            response = self.loop.run_until_complete(self._one(key))
            self._check_first(key, case, response)
            self.reference[key] = response.body
            self._check_closed(key)

    def fingerprint(self) -> str:
        return fingerprint()

    def _app(self, key: str) -> tuple[ASGIApp, dict[str, Any]]:
        return self.apps["override" if is_override(key) else "plain"]

    async def _one(self, key: str) -> Response:
        app, state = self._app(key)
        return await call(app, self.scopes[key], self.cases[key].body, state)

    def _check_first(self, key: str, case: Case, response: Response) -> None:
        expected = case.expected_body
        same = response.status == 200 and (
            response.body == expected
            if self.variant in BYTE_EXACT
            else msgspec.json.decode(response.body) == msgspec.json.decode(expected)
        )
        content_type = dict(response.headers).get(b"content-type")
        if not same or content_type != b"application/json":
            raise WrongAnswer(
                f"{self.variant} answered {case.label} wrongly: status {response.status},"
                f" content-type {content_type!r}, body {response.body[:PREVIEW]!r};"
                f" expected 200, application/json, {expected[:PREVIEW]!r}"
            )

    def _check_closed(self, key: str) -> None:
        if Session.live:
            raise WrongAnswer(f"{self.variant} left {Session.live} sessions open after {key}")

    async def _batch(self, key: str, count: int) -> tuple[int, int]:
        (app, state), scope = self._app(key), self.scopes[key]
        body, expected = self.cases[key].body, self.reference[key]
        wall, cpu = time.perf_counter_ns(), time.process_time_ns()
        for _ in range(count):
            response = await call(app, scope, body, state)
            # Checked inside the timed loop, as in the other modes: the same for everyone.
            if response.status != 200 or response.body != expected:
                raise WrongAnswer(
                    f"{self.variant} answered {key} with {response.status}"
                    f" {response.body[:PREVIEW]!r}, not its first answer"
                )
        elapsed = time.perf_counter_ns() - wall, time.process_time_ns() - cpu
        self._check_closed(key)
        return elapsed
