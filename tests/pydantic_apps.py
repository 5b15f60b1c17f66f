"""The same routes served by FastAPI's APIRouter and by a MsgspecRouter, compared."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient
from twins import Twin

Define = Callable[[APIRouter], None]


def apps(twin: Twin, define: Define, **router_options: Any) -> tuple[FastAPI, FastAPI, Any]:
    """The same routes on an APIRouter's app and on a MsgspecRouter's (on `twin`), and the
    MsgspecRouter."""
    theirs, ours = FastAPI(), FastAPI()
    fastapi_router = APIRouter(**router_options)
    define(fastapi_router)
    theirs.include_router(fastapi_router)
    router = twin.router_class(**router_options)
    define(router)
    ours.include_router(router)
    return theirs, ours, router


def answer(app: FastAPI, method: str, url: str, **options: Any) -> tuple[int, list[Any], bytes]:
    client = TestClient(app, raise_server_exceptions=False)
    response = client.request(method, url, **options)
    return response.status_code, list(response.headers.raw), response.content


def assert_same(
    twin: Twin, solved: list[Any], define: Define, method: str, url: str, **options: Any
) -> tuple[int, list[Any], bytes]:
    """Our answer equals FastAPI's, and our routes ran on the direct tier."""
    theirs, ours, router = apps(twin, define)
    assert [route.tier for route in router.routes] == ["direct"] * len(router.routes)
    expected = answer(theirs, method, url, **options)
    solved.clear()
    assert answer(ours, method, url, **options) == expected
    assert not solved, "FastAPI's handler solved a route of ours"
    return expected
