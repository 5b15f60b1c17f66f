"""Helpers for building small apps in tests."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient


def client_for(*routers: APIRouter, raise_server_exceptions: bool = True, **app_options: Any):
    """A TestClient for a new app that includes `routers` (without prefixes)."""
    app = FastAPI(**app_options)
    for router in routers:
        app.include_router(router)
    return TestClient(app, raise_server_exceptions=raise_server_exceptions)


def assert_validation_error_shape(payload: Any, first_loc: str) -> None:
    """FastAPI's 422 shape: {"detail": [{"loc": [...], "msg": str, "type": str}, ...]}."""
    assert isinstance(payload, dict)
    assert list(payload) == ["detail"]
    errors = payload["detail"]
    assert isinstance(errors, list)
    assert errors
    for error in errors:
        assert isinstance(error["loc"], list)
        assert error["loc"][0] == first_loc
        assert isinstance(error["msg"], str)
        assert isinstance(error["type"], str)


async def call_asgi(app: Any, path: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """POST `path` to `app` with the given request messages; return what was sent.

    Exceptions the app raises (as an ASGI server would see them) are swallowed: the test
    asserts on what reached the client and on the endpoint's side effects.
    """
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    pending = list(messages)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop(0)
        await asyncio.Event().wait()  # a client that never sends more
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    with contextlib.suppress(Exception):
        await asyncio.wait_for(app(scope, receive, send), timeout=10)
    return sent
