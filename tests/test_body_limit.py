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
from fastapi import Depends, FastAPI
from raw_asgi import DISCONNECT, JSON, Message, Reply, body_messages, scope_for, send_messages
from twins import Twin

from msgspec_fastapi import MsgspecRouter, install_openapi
from msgspec_fastapi._compat import HAS_NATIVE_BODY_LIMIT


class City(msgspec.Struct):
    name: str
    population: int


CITY = b'{"name":"Lyon","population":522250}'
# From FastAPI 0.164 a declared length over the limit is refused by Starlette's limiter,
# before the route runs, in plain text; before 0.164 the request path sends FastAPI's JSON.
DECLARED_TOO_LARGE = (
    b"Content Too Large" if HAS_NATIVE_BODY_LIMIT else b'{"detail":"Content Too Large"}'
)


def chunks(body: bytes, size: int) -> list[Message]:
    """`body` in `http.request` messages of `size` bytes."""
    return body_messages([body[i : i + size] for i in range(0, len(body), size)])


def post(
    app: FastAPI,
    messages: list[Message],
    path: str = "/cities",
    content_length: int | None = None,
) -> Reply:
    """POST `messages` to `path`; once they run out the client waits, sending nothing."""
    headers = list(JSON)
    if content_length is not None:
        headers.append((b"content-length", str(content_length).encode()))
    scope = scope_for("POST", path.encode(), headers)
    return asyncio.run(send_messages(app, scope, messages, then="wait"))


async def no_op() -> None:
    return None


def city_app(
    router: MsgspecRouter, calls: list[City], dependency: bool = False, **route_options: Any
) -> FastAPI:
    """A POST route taking a City; with `dependency`, the route also has a dependency,
    which the dependency executor reads the body for."""
    if dependency:
        route_options["dependencies"] = [Depends(no_op)]

    @router.post("/cities", **route_options)
    async def create(city: City) -> City:
        calls.append(city)
        return city

    app = FastAPI()
    app.include_router(router)
    return app


@pytest.fixture(params=[False, True], ids=["a route", "a route with a dependency"])
def dependency(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def test_body_split_into_one_byte_messages_decodes_as_one_message(
    router: MsgspecRouter, dependency: bool
) -> None:
    calls: list[City] = []
    reply = post(city_app(router, calls, dependency), chunks(CITY, 1))
    assert (reply.status, reply.body) == (200, CITY)
    assert calls == [City("Lyon", 522250)]


def test_empty_messages_between_chunks_change_nothing(
    router: MsgspecRouter, dependency: bool
) -> None:
    calls: list[City] = []
    messages = []
    for message in chunks(CITY, 7):
        messages.append({"type": "http.request", "body": b"", "more_body": True})
        messages.append(message)
    reply = post(city_app(router, calls, dependency), messages)
    assert (reply.status, reply.body) == (200, CITY)
    assert calls == [City("Lyon", 522250)]


PART = {"type": "http.request", "body": CITY[:10], "more_body": True}
EMPTY_PART = {"type": "http.request", "body": b"", "more_body": True}


@pytest.mark.parametrize("max_body_size", [None, 1000], ids=["no limit", "a limit"])
@pytest.mark.parametrize(
    "messages",
    [[DISCONNECT], [PART, DISCONNECT], [PART, EMPTY_PART, DISCONNECT]],
    ids=["before the body", "mid-body", "after an empty message"],
)
def test_client_leaving_mid_body_gets_nothing_and_no_exception_reaches_the_server(
    router: MsgspecRouter, messages: list[Message], max_body_size: int | None, dependency: bool
) -> None:
    calls: list[City] = []
    app = city_app(router, calls, dependency, max_body_size=max_body_size)

    reply = post(app, messages)  # an exception escaping the app fails the test here

    assert reply.sent == ()
    assert reply.received == len(messages)  # nothing read after the disconnect
    assert calls == []


def test_body_over_the_route_limit_is_413_with_fastapis_payload(
    router: MsgspecRouter, dependency: bool
) -> None:
    calls: list[City] = []
    reply = post(
        city_app(router, calls, dependency, max_body_size=len(CITY) - 1), chunks(CITY, len(CITY))
    )
    assert (reply.status, reply.json()) == (413, {"detail": "Content Too Large"})
    assert calls == []


def test_body_at_the_route_limit_is_accepted(router: MsgspecRouter, dependency: bool) -> None:
    reply = post(city_app(router, [], dependency, max_body_size=len(CITY)), chunks(CITY, 5))
    assert (reply.status, reply.body) == (200, CITY)


def test_body_in_one_message_at_the_route_limit_is_accepted(
    router: MsgspecRouter, dependency: bool
) -> None:
    reply = post(city_app(router, [], dependency, max_body_size=len(CITY)), body_messages([CITY]))
    assert (reply.status, reply.body) == (200, CITY)
    assert reply.received == 1


def test_message_of_another_type_before_the_body_is_skipped(
    router: MsgspecRouter, dependency: bool
) -> None:
    messages = [{"type": "http.unknown"}, *body_messages([CITY])]
    reply = post(city_app(router, [], dependency, max_body_size=100), messages)
    assert (reply.status, reply.body) == (200, CITY)


def test_declared_content_length_over_the_limit_is_413_before_reading(
    router: MsgspecRouter, dependency: bool
) -> None:
    app = city_app(router, [], dependency, max_body_size=10)
    reply = post(app, chunks(CITY, 1), content_length=len(CITY))
    assert (reply.status, reply.body) == (413, DECLARED_TOO_LARGE)
    assert reply.received == 0


def test_streamed_body_is_refused_as_soon_as_it_crosses_the_limit(
    router: MsgspecRouter, dependency: bool
) -> None:
    reply = post(city_app(router, [], dependency, max_body_size=5), chunks(CITY, 1))
    assert (reply.status, reply.json()) == (413, {"detail": "Content Too Large"})
    assert reply.received == 6  # the sixth byte crossed the limit; the rest was never read


def test_limit_zero_allows_only_an_empty_body(router: MsgspecRouter) -> None:
    @router.post("/empty", max_body_size=0)
    async def empty(city: City | None = None) -> dict[str, bool]:
        return {"empty": city is None}

    app = city_app(router, [], max_body_size=0)
    empty_reply = post(app, body_messages([b""]), "/empty")
    full_reply = post(app, chunks(CITY, 4), "/empty")
    assert (empty_reply.status, empty_reply.json()) == (200, {"empty": True})
    assert full_reply.status == 413


def test_router_limit_applies_to_its_routes(twin: Twin) -> None:
    reply = post(city_app(twin.router_class(max_body_size=8), []), chunks(CITY, 4))
    assert reply.status == 413


def test_route_limit_overrides_the_router_limit(twin: Twin) -> None:
    app = city_app(twin.router_class(max_body_size=8), [], max_body_size=1000)
    reply = post(app, chunks(CITY, 4))
    assert (reply.status, reply.body) == (200, CITY)


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
