"""A pytest plugin: FastAPI's own test suite with MsgspecRouter wherever APIRouter is.

Loaded with `-p msgspec_drop_in` (run.py puts this folder on PYTHONPATH). At configure
time, before any test module is imported, it puts MsgspecRouter in place of APIRouter
where FastAPI and the tests reach it:

- `fastapi.APIRouter`, what `from fastapi import APIRouter` gives user code;
- `fastapi.routing.APIRouter`, what `from fastapi.routing import APIRouter` gives, and
  what `FastAPI.__init__` builds `app.router` (and `app.webhooks`) from. So the routes a
  test adds with `@app.get(...)` are MsgspecRoutes too: most of the suite declares its
  routes on the app, and a drop-in must hold there as much as on included routers.

Every application's OpenAPI document gets `install_openapi(app, app.router)` when it is
first built, as a user's would after including the routers: the app's router includes
every other router, and MsgspecRouter.include_router gathers their msgspec schemas.

With `--msgspec-dispatch`, every FastAPI application gets `install_dispatch` when it is
first called (by a TestClient, an ASGI transport, or a Mount above it), as a user's would
after including its routers, before serving; routes added afterwards are picked up. An
application whose router is not FastAPI's APIRouter (a subclass with its own route loop)
is left as it is, since install_dispatch refuses it (TypeError); it must take any other.
Without the option, routing is FastAPI's own loop over MsgspecRoutes: the two runs tell
the router's differences from install_dispatch's.

With `--msgspec-errors fastapi`, the router put in place of APIRouter is MsgspecRouter
with `errors="fastapi"` as its default, so that every route the suite adds answers a
failing request in FastAPI's vocabulary (a route the suite gives `errors=` itself keeps it).

FastAPI's tests that run in a child interpreter are skipped: those that
`tests/test_telemetry/_subprocess.py`'s `run_in_subprocess` wraps, and the CLI test that
runs `fastapi dev`. This plugin is not loaded there, so they test FastAPI alone; they cost
about 40% of the suite's CPU time, and the CLI one times out on a loaded machine.

At the end it prints how many of the route handlers built for routes without msgspec
types (FastAPI validates them with Pydantic alone) run on the direct tier, and how many
keep FastAPI's handler.

The twin is the one the package picked at import (MSGSPEC_FASTAPI_PURE=1 forces the pure
one); `outcomes` checks it is the one expected.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

import fastapi
import fastapi.routing
import pytest
from fastapi import FastAPI
from starlette.types import Receive, Scope, Send

import msgspec_fastapi
from msgspec_fastapi import MsgspecRouter, install_dispatch, install_openapi
from msgspec_fastapi._compat import building_context
from msgspec_fastapi._shared import DIRECT_ATTR
from msgspec_fastapi.router import MsgspecRoute

_ORIGINALS = {
    (fastapi, "APIRouter"): fastapi.APIRouter,
    (fastapi.routing, "APIRouter"): fastapi.routing.APIRouter,
}
_APIROUTER = fastapi.routing.APIRouter
_CALL = FastAPI.__call__
_OPENAPI = FastAPI.openapi
# Applications seen by the first call, and the router classes of those left as they are.
_SEEN: weakref.WeakSet[FastAPI] = weakref.WeakSet()
_LEFT: list[str] = []
_counts = {"dispatched": 0, "pydantic direct": 0, "pydantic delegated": 0}
_GET_ROUTE_HANDLER = MsgspecRoute.get_route_handler
# Where FastAPI's suite keeps the wrapper that runs a test in a child interpreter, and
# the tests that start one themselves.
_CHILD_RUNNER = os.path.join("tests", "test_telemetry", "_subprocess.py")
_CHILD_TESTS = {"tests/test_fastapi_cli.py::test_fastapi_cli"}
_IN_CHILD = pytest.mark.skip(reason="runs in a child interpreter, without msgspec_drop_in")


class FastAPIErrorsRouter(MsgspecRouter):
    """MsgspecRouter answering failures as FastAPI does unless told otherwise."""

    def __init__(self, *args: Any, errors: str = "fastapi", **kwargs: Any) -> None:
        super().__init__(*args, errors=errors, **kwargs)


async def _call(self: FastAPI, scope: Scope, receive: Receive, send: Send) -> None:
    if self not in _SEEN:
        _SEEN.add(self)
        router = self.router
        if isinstance(router, _APIROUTER) and type(router).app is _APIROUTER.app:
            install_dispatch(self)  # whatever it raises fails the test
            _counts["dispatched"] += 1
        else:
            _LEFT.append(type(router).__qualname__)
    await _CALL(self, scope, receive, send)


def _get_route_handler(self: MsgspecRoute) -> Any:
    """MsgspecRoute's, counting the tier of each handler built for a route without
    msgspec types (for the route itself, or an inclusion of it)."""
    handler = _GET_ROUTE_HANDLER(self)
    if self.msgspec_spec is None:
        context = building_context()
        built = context if context is not None and context.original_route is self else self
        tier = "direct" if getattr(built, DIRECT_ATTR, None) is not None else "delegated"
        _counts[f"pydantic {tier}"] += 1
    return handler


def _openapi(self: FastAPI) -> dict[str, Any]:
    if isinstance(self.router, MsgspecRouter) and not hasattr(self, "_msgspec_openapi_installed"):
        install_openapi(self, self.router)  # sets that attribute and `self.openapi`
        return self.openapi()
    return _OPENAPI(self)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--msgspec-dispatch",
        action="store_true",
        help="install_dispatch on every FastAPI application at its first call",
    )
    parser.addoption(
        "--msgspec-errors",
        choices=["msgspec", "fastapi"],
        default="msgspec",
        help="the default `errors=` of the router put in place of APIRouter",
    )


def pytest_configure(config: pytest.Config) -> None:
    fastapi_errors = config.getoption("--msgspec-errors") == "fastapi"
    for module, name in _ORIGINALS:
        setattr(module, name, FastAPIErrorsRouter if fastapi_errors else MsgspecRouter)
    FastAPI.openapi = _openapi  # type: ignore[method-assign]
    MsgspecRoute.get_route_handler = _get_route_handler  # type: ignore[method-assign]
    if config.getoption("--msgspec-dispatch"):
        FastAPI.__call__ = _call  # type: ignore[method-assign]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        function = getattr(item, "function", None)
        # A wrapper's code is where it was written, not where the test was.
        where = getattr(getattr(function, "__code__", None), "co_filename", "")
        wrapped = hasattr(function, "__wrapped__") and where.endswith(_CHILD_RUNNER)
        if wrapped or item.nodeid in _CHILD_TESTS:
            item.add_marker(_IN_CHILD)


def pytest_unconfigure(config: pytest.Config) -> None:
    for (module, name), original in _ORIGINALS.items():
        setattr(module, name, original)
    FastAPI.openapi = _OPENAPI  # type: ignore[method-assign]
    FastAPI.__call__ = _CALL  # type: ignore[method-assign]
    MsgspecRoute.get_route_handler = _GET_ROUTE_HANDLER  # type: ignore[method-assign]


def pytest_report_header(config: pytest.Config) -> str:
    routing = "install_dispatch" if config.getoption("--msgspec-dispatch") else "FastAPI's"
    errors = config.getoption("--msgspec-errors")
    return (
        f"msgspec_drop_in: MsgspecRouter (errors={errors!r}) in place of APIRouter, "
        f"{routing} routing, twin {msgspec_fastapi.IMPLEMENTATION}"
    )


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    direct, delegated = _counts["pydantic direct"], _counts["pydantic delegated"]
    terminalreporter.write_line(
        f"msgspec_drop_in: route handlers built for routes without msgspec types: "
        f"{direct} on the direct tier, {delegated} with FastAPI's handler"
    )
    if not config.getoption("--msgspec-dispatch"):
        return
    left = ", ".join(sorted(set(_LEFT))) or "none"
    terminalreporter.write_line(
        f"msgspec_drop_in: install_dispatch on {_counts['dispatched']} applications; "
        f"{len(_LEFT)} left as they are (their router classes: {left})"
    )
