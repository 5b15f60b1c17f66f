"""Request bodies read from ASGI messages: limits, streaming and clients that leave.

`max_body_size` works on every supported FastAPI: from 0.164 FastAPI enforces it (and
the direct tier wraps itself in FastAPI's own limiter); before 0.164 MsgspecRouter and
its routes take the same argument and the request path enforces it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from fastapi import FastAPI
from raw_asgi import scope_for

from msgspec_fastapi import MsgspecRouter, install_openapi


class City(msgspec.Struct):
    name: str
    population: int


CITY = b'{"name":"Lyon","population":522250}'


class Recorder:
    """An ASGI client: feeds request messages, records what comes back and what was read."""

    def __init__(self, messages: list[dict[str, Any]], content_length: int | None = None):
        self.pending = list(messages)
        self.read = 0
        self.sent: list[dict[str, Any]] = []
        self.headers = [(b"content-type", b"application/json")]
        if content_length is not None:
            self.headers.append((b"content-length", str(content_length).encode()))

    async def receive(self) -> dict[str, Any]:
        self.read += 1
        if self.pending:
            return self.pending.pop(0)
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    def run(self, app: FastAPI, path: str = "/cities") -> None:
        scope = scope_for("POST", path.encode(), self.headers)
        asyncio.run(app(scope, self.receive, self.send))

    @property
    def status(self) -> int | None:
        starts = [m for m in self.sent if m["type"] == "http.response.start"]
        return starts[0]["status"] if starts else None

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body")


def chunks(body: bytes, size: int) -> list[dict[str, Any]]:
    pieces = [body[i : i + size] for i in range(0, len(body), size)] or [b""]
    return [
        {"type": "http.request", "body": piece, "more_body": i < len(pieces) - 1}
        for i, piece in enumerate(pieces)
    ]


def city_app(router: MsgspecRouter, calls: list[City], **route_options: Any) -> FastAPI:
    @router.post("/cities", **route_options)
    async def create(city: City) -> City:
        calls.append(city)
        return city

    app = FastAPI()
    app.include_router(router)
    return app


def test_body_split_into_one_byte_messages_decodes_as_one_message(router: MsgspecRouter) -> None:
    calls: list[City] = []
    app = city_app(router, calls)
    client = Recorder(chunks(CITY, 1))
    client.run(app)
    assert (client.status, client.body) == (200, CITY)


def test_empty_messages_between_chunks_change_nothing(router: MsgspecRouter) -> None:
    calls: list[City] = []
    app = city_app(router, calls)
    messages = []
    for message in chunks(CITY, 7):
        messages.append({"type": "http.request", "body": b"", "more_body": True})
        messages.append(message)
    client = Recorder(messages)
    client.run(app)
    assert (client.status, client.body) == (200, CITY)


def test_client_leaving_mid_body_gets_nothing_and_the_endpoint_is_not_called(
    router: MsgspecRouter,
) -> None:
    calls: list[City] = []
    app = city_app(router, calls)
    client = Recorder([{"type": "http.request", "body": CITY[:10], "more_body": True}])
    client.run(app)  # the request ends with http.disconnect; nothing may be raised
    assert client.sent == []
    assert calls == []


def test_body_over_the_route_limit_is_413_with_fastapis_payload(router: MsgspecRouter) -> None:
    calls: list[City] = []
    app = city_app(router, calls, max_body_size=len(CITY) - 1)
    client = Recorder(chunks(CITY, len(CITY)))
    client.run(app)
    assert (client.status, msgspec.json.decode(client.body)) == (
        413,
        {"detail": "Content Too Large"},
    )
    assert calls == []


def test_body_at_the_route_limit_is_accepted(router: MsgspecRouter) -> None:
    calls: list[City] = []
    app = city_app(router, calls, max_body_size=len(CITY))
    client = Recorder(chunks(CITY, 5))
    client.run(app)
    assert client.status == 200


def test_declared_content_length_over_the_limit_is_413_before_reading(
    router: MsgspecRouter,
) -> None:
    calls: list[City] = []
    app = city_app(router, calls, max_body_size=10)
    client = Recorder(chunks(CITY, 1), content_length=len(CITY))
    client.run(app)
    assert client.status == 413
    assert client.read == 0


def test_streamed_body_is_refused_as_soon_as_it_crosses_the_limit(router: MsgspecRouter) -> None:
    calls: list[City] = []
    app = city_app(router, calls, max_body_size=5)
    client = Recorder(chunks(CITY, 1))
    client.run(app)
    assert client.status == 413
    assert client.read == 6  # the sixth byte crossed the limit; the rest was never read


def test_limit_zero_allows_only_an_empty_body(router: MsgspecRouter) -> None:
    router_with_default = router

    @router_with_default.post("/empty", max_body_size=0)
    async def empty(city: City | None = None) -> dict[str, bool]:
        return {"empty": city is None}

    calls: list[City] = []
    app = city_app(router_with_default, calls, max_body_size=0)
    empty_client = Recorder([{"type": "http.request", "body": b""}])
    empty_client.run(app, "/empty")
    full_client = Recorder(chunks(CITY, 4))
    full_client.run(app, "/empty")
    assert (empty_client.status, full_client.status) == (200, 413)


def test_router_limit_applies_to_its_routes() -> None:
    calls: list[City] = []
    app = city_app(MsgspecRouter(max_body_size=8), calls)
    client = Recorder(chunks(CITY, 4))
    client.run(app)
    assert client.status == 413


def test_route_limit_overrides_the_router_limit() -> None:
    calls: list[City] = []
    app = city_app(MsgspecRouter(max_body_size=8), calls, max_body_size=1000)
    client = Recorder(chunks(CITY, 4))
    client.run(app)
    assert client.status == 200


def test_route_with_a_limit_documents_the_413() -> None:
    router = MsgspecRouter()
    app = city_app(router, [], max_body_size=100)
    install_openapi(app, router)
    responses = app.openapi()["paths"]["/cities"]["post"]["responses"]
    assert responses["413"] == {"description": "Content Too Large"}


@pytest.mark.parametrize("limit", [-1, 1.5, True, "10"])
def test_invalid_limit_is_refused(limit: Any) -> None:
    with pytest.raises(ValueError, match="max_body_size"):
        MsgspecRouter(max_body_size=limit)
