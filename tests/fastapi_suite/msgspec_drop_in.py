"""A pytest plugin: FastAPI's own test suite with MsgspecRouter wherever APIRouter is.

Loaded with `-p msgspec_drop_in` (run.py puts this folder on PYTHONPATH). At configure
time, before any test module is imported, it puts MsgspecRouter in place of APIRouter
where FastAPI and the tests reach it:

- `fastapi.APIRouter`, what `from fastapi import APIRouter` gives user code;
- `fastapi.routing.APIRouter`, what `from fastapi.routing import APIRouter` gives, and
  what `FastAPI.__init__` builds `app.router` (and `app.webhooks`) from. So the routes a
  test adds with `@app.get(...)` are MsgspecRoutes too: most of the suite declares its
  routes on the app, and a drop-in must hold there as much as on included routers.

Every FastAPI application handed to a TestClient gets `install_dispatch`, as a user's
application would after including its routers (routes added afterwards are picked up).

Every application's OpenAPI document gets `install_openapi(app, app.router)` when it is
first built, as a user's would after including the routers: the app's router includes
every other router, and MsgspecRouter.include_router gathers their msgspec schemas.

The twin is the one the package picked at import (MSGSPEC_FASTAPI_PURE=1 forces the pure
one); `outcomes` checks it is the one expected.
"""

from __future__ import annotations

import weakref
from typing import Any

import fastapi
import fastapi.routing
import pytest
import starlette.testclient
from fastapi import FastAPI

import msgspec_fastapi
from msgspec_fastapi import MsgspecRouter, install_dispatch, install_openapi

_ORIGINALS = {
    (fastapi, "APIRouter"): fastapi.APIRouter,
    (fastapi.routing, "APIRouter"): fastapi.routing.APIRouter,
}
_CLIENT_INIT = starlette.testclient.TestClient.__init__
_OPENAPI = FastAPI.openapi
_DISPATCHED: weakref.WeakSet[FastAPI] = weakref.WeakSet()


def _client_init(self: Any, app: Any, *args: Any, **kwargs: Any) -> None:
    if isinstance(app, FastAPI) and app not in _DISPATCHED:
        install_dispatch(app)
        _DISPATCHED.add(app)
    _CLIENT_INIT(self, app, *args, **kwargs)


def _openapi(self: FastAPI) -> dict[str, Any]:
    if isinstance(self.router, MsgspecRouter) and not hasattr(self, "_msgspec_openapi_installed"):
        install_openapi(self, self.router)  # sets that attribute and `self.openapi`
        return self.openapi()
    return _OPENAPI(self)


def pytest_configure(config: pytest.Config) -> None:
    for module, name in _ORIGINALS:
        setattr(module, name, MsgspecRouter)
    starlette.testclient.TestClient.__init__ = _client_init  # type: ignore[method-assign]
    FastAPI.openapi = _openapi  # type: ignore[method-assign]


def pytest_unconfigure(config: pytest.Config) -> None:
    for (module, name), original in _ORIGINALS.items():
        setattr(module, name, original)
    starlette.testclient.TestClient.__init__ = _CLIENT_INIT  # type: ignore[method-assign]
    FastAPI.openapi = _OPENAPI  # type: ignore[method-assign]


def pytest_report_header(config: pytest.Config) -> str:
    return (
        f"msgspec_drop_in: MsgspecRouter in place of APIRouter, "
        f"twin {msgspec_fastapi.IMPLEMENTATION}"
    )
