"""Scopes as the ASGI specification allows servers to build them, on both twins and tiers.

The specification types `headers` as an iterable of two-item iterables of byte strings,
so a server may hand over a tuple of pairs, or pairs that are lists; Starlette and the
pure twin read any of them. `query_string` must be a byte string: a server that passes
anything else is broken, and the request path must refuse it rather than read it as
bytes.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hostile_app import TIERS, build_app
from raw_asgi import scope_for

from msgspec_fastapi import _fastpath_py

compiled = pytest.importorskip("msgspec_fastapi._fastpath")

APPS = {"pure": build_app(_fastpath_py), "compiled": build_app(compiled)}


TWINS = ["pure", "compiled"]


def answer(twin: str, scope: dict[str, Any], body: bytes = b"") -> list[Any]:
    sent: list[Any] = []
    messages = [{"type": "http.request", "body": body}]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append((message.get("status"), message.get("body")))

    asyncio.run(APPS[twin](scope, receive, send))
    return sent


POINT = b'{"x":1,"y":2}'
POINT_REPLY = [(200, None), (None, b'{"point":{"x":1,"y":2}}')]
HEADERS = [(b"content-type", b"application/json"), (b"x-token", b"t")]


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("twin", TWINS)
def test_headers_as_a_tuple_of_pairs_are_read(twin: str, tier: str) -> None:
    scope = scope_for("POST", f"/{tier}/optional".encode(), HEADERS)
    scope["headers"] = tuple(scope["headers"])
    assert answer(twin, scope, POINT) == POINT_REPLY


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("twin", TWINS)
def test_header_pairs_as_lists_are_read(twin: str, tier: str) -> None:
    scope = scope_for("POST", f"/{tier}/optional".encode(), HEADERS)
    scope["headers"] = [list(pair) for pair in scope["headers"]]
    assert answer(twin, scope, POINT) == POINT_REPLY


@pytest.mark.parametrize("twin", TWINS)
def test_header_parameter_is_read_from_a_tuple_of_pairs(twin: str) -> None:
    scope = scope_for("GET", b"/direct/items/1", HEADERS)
    scope["headers"] = tuple(scope["headers"])
    (status, _), (_, body) = answer(twin, scope)
    assert (status, b'"x_token":"t"' in body) == (200, True)


@pytest.mark.parametrize("twin", TWINS)
def test_query_string_that_is_not_bytes_is_refused(twin: str) -> None:
    scope = scope_for("GET", b"/direct/items/1?q=x&n=2", [])
    scope["query_string"] = "q=x&n=2"
    with pytest.raises((TypeError, AttributeError)):
        answer(twin, scope)
