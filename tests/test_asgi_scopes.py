"""Scopes as the ASGI specification allows servers to build them, on both twins and tiers.

The specification types `headers` as an iterable of two-item iterables of byte strings,
so a server may hand over a tuple of pairs, or pairs that are lists; Starlette and the
pure twin read any of them. `query_string` must be a byte string: a server that passes
anything else is broken, and the direct tier's request path must refuse it (TypeError)
rather than read it as bytes.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from hostile_app import APPS, TIERS
from raw_asgi import body_messages, scope_for, send_messages
from twins import Twin


def answer(twin: Twin, scope: dict[str, Any], body: bytes = b"") -> tuple[int | None, bytes]:
    reply = asyncio.run(send_messages(APPS[twin.name], scope, body_messages([body])))
    return reply.status, reply.body


POINT = b'{"x":1,"y":2}'
POINT_REPLY = (200, b'{"point":{"x":1,"y":2}}')
HEADERS = [(b"content-type", b"application/json"), (b"x-token", b"t")]


@pytest.mark.parametrize("tier", TIERS)
def test_headers_as_a_tuple_of_pairs_are_read(twin: Twin, tier: str) -> None:
    scope = scope_for("POST", f"/{tier}/optional".encode(), HEADERS)
    scope["headers"] = tuple(scope["headers"])
    assert answer(twin, scope, POINT) == POINT_REPLY


@pytest.mark.parametrize("tier", TIERS)
def test_header_pairs_as_lists_are_read(twin: Twin, tier: str) -> None:
    scope = scope_for("POST", f"/{tier}/optional".encode(), HEADERS)
    scope["headers"] = [list(pair) for pair in scope["headers"]]
    assert answer(twin, scope, POINT) == POINT_REPLY


def test_header_parameter_is_read_from_a_tuple_of_pairs(twin: Twin) -> None:
    scope = scope_for("GET", b"/direct/items/1", HEADERS)
    scope["headers"] = tuple(scope["headers"])
    status, body = answer(twin, scope)
    assert (status, msgspec.json.decode(body)["x_token"]) == (200, "t")


def test_query_string_that_is_not_bytes_is_refused_with_a_type_error(twin: Twin) -> None:
    scope = scope_for("GET", b"/direct/items/1?q=x&n=2", [])
    scope["query_string"] = "q=x&n=2"
    with pytest.raises(TypeError):
        answer(twin, scope)
