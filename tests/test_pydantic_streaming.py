"""Generator endpoints with Pydantic items, on the direct tier, as FastAPI streams them.

A route FastAPI validates with Pydantic whose endpoint is a generator streams its items as
JSON Lines (no response class chosen) or as server-sent events (`EventSourceResponse`).
FastAPI validates each item with the route's stream item field and renders it with the
field's JSON serializer and the route's response_model_* options; without an item type it
writes the item with jsonable_encoder and json.dumps. On MsgspecRouter these routes run
on the direct tier with the same fields, and every test compares one request to the same
route on an APIRouter: status, headers, body bytes, the way the stream ends and what
escapes, on both twins, with FastAPI's routing and with install_dispatch.
"""

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Annotated, Any

import pydantic
import pytest
from fastapi import APIRouter, BackgroundTasks, Body, Depends, Response
from fastapi.exceptions import ResponseValidationError
from fastapi.responses import StreamingResponse
from fastapi.sse import EventSourceResponse, ServerSentEvent
from raw_asgi import Message, Reply, body_messages, scope_for, send_request
from test_streaming import Streamed, app_of, assert_same_stream, drive, leaves, stream
from twins import Twin


class City(pydantic.BaseModel):
    name: str
    population: Annotated[int, pydantic.Field(ge=0)]
    country: str = "NO"


OSLO = City(name="Oslo", population=700000)
BERGEN = {"name": "Bergen", "population": 290000}
LOG: list[str] = []


@pytest.fixture(params=[False, True], ids=["router", "dispatch"])
def dispatch(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def apps(twin: Twin, dispatch: bool, build: Callable[[APIRouter], None]) -> tuple[Any, Any]:
    """`build` on a MsgspecRouter on `twin` and on an APIRouter, each in an app of its own
    (install_dispatch on ours with `dispatch`): (ours, FastAPI's). Every route of ours
    must run on the direct tier."""
    ours, theirs = twin.router_class(), APIRouter()
    build(ours)
    build(theirs)
    assert [route.tier for route in ours.routes] == ["direct"] * len(ours.routes)
    app = app_of(ours)
    if dispatch:
        twin.install_dispatch(app)
    return app, app_of(theirs)


def compare(twin: Twin, dispatch: bool, build: Callable[[APIRouter], None]) -> Streamed:
    """GET /s on both apps; the same stream from both. Returns ours."""
    ours, theirs = apps(twin, dispatch, build)
    mine, fastapis = stream(ours), stream(theirs)
    assert_same_stream(mine, fastapis)
    return mine


def test_async_generator_of_models_streams_json_lines_as_fastapi_does(
    twin: Twin, dispatch: bool
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/s")
        async def cities() -> AsyncIterator[City]:
            yield OSLO
            yield City(name="Tromsø", population=77000, country="NO")

    streamed = compare(twin, dispatch, build)

    assert streamed.reply.body.count(b"\n") == 2


def test_sync_generator_of_models_streams_json_lines_as_fastapi_does(
    twin: Twin, dispatch: bool
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/s")
        def cities() -> Iterator[City]:
            yield OSLO
            yield OSLO

    compare(twin, dispatch, build)


def test_dict_item_is_validated_by_the_item_field_as_fastapi_does(
    twin: Twin, dispatch: bool
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/s")
        async def cities() -> AsyncIterator[City]:
            yield BERGEN  # type: ignore[misc]

    streamed = compare(twin, dispatch, build)

    assert streamed.reply.body == b'{"name":"Bergen","population":290000,"country":"NO"}\n'


def test_invalid_item_escapes_as_fastapis_response_validation_error_mid_stream(
    twin: Twin, dispatch: bool
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/s")
        async def cities() -> AsyncIterator[City]:
            yield OSLO
            yield {"name": "Nowhere", "population": -1}  # type: ignore[misc]

    ours, theirs = apps(twin, dispatch, build)
    mine, fastapis = stream(ours), stream(theirs)

    assert_same_stream(mine, fastapis)
    assert isinstance(mine.error, ResponseValidationError)
    assert mine.error.errors() == fastapis.error.errors()  # type: ignore[union-attr]
    # The request path it names. (Not the endpoint's file and line: FastAPI caches them by
    # the function's id(), which may still hold those of a freed endpoint of another test.)
    assert mine.error.endpoint_path == fastapis.error.endpoint_path == "GET /s"  # type: ignore[union-attr]
    assert not mine.reply.finished


def test_response_model_options_apply_to_each_item_as_fastapi_does(
    twin: Twin, dispatch: bool
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/s", response_model_exclude={"country"}, response_model_exclude_unset=True)
        async def cities() -> AsyncIterator[City]:
            yield OSLO
            yield City(name="Kiruna", population=22000, country="SE")

    streamed = compare(twin, dispatch, build)

    assert streamed.reply.body == (
        b'{"name":"Oslo","population":700000}\n{"name":"Kiruna","population":22000}\n'
    )


def test_items_without_an_item_field_are_written_by_json_dumps_as_fastapi_does(
    twin: Twin, dispatch: bool
) -> None:
    # response_model=None: FastAPI keeps no item field and writes each item untyped.
    def build(router: APIRouter) -> None:
        @router.get("/s", response_model=None)
        async def cities() -> AsyncIterator[City]:
            yield OSLO
            yield {"ratio": 1.5e-7, "limit": float("inf")}  # type: ignore[misc]

    streamed = compare(twin, dispatch, build)

    assert b'"ratio": 1.5e-07' in streamed.reply.body


def test_sse_items_of_models_are_events_as_fastapi_sends_them(twin: Twin, dispatch: bool) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/s", response_class=EventSourceResponse)
        async def cities() -> AsyncIterator[City]:
            yield OSLO
            yield BERGEN  # type: ignore[misc]

    streamed = compare(twin, dispatch, build)

    assert streamed.reply.body.startswith(b'data: {"name":"Oslo"')


def test_sse_events_with_model_and_dict_data_are_written_as_fastapi_writes_them(
    twin: Twin, dispatch: bool
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/s", response_class=EventSourceResponse)
        def cities() -> Iterator[City]:
            yield ServerSentEvent(data=OSLO, event="city", id="1")
            yield ServerSentEvent(data={"ratio": 1.5e-7, "nan": float("nan")}, retry=5)
            yield ServerSentEvent(raw_data="plain\ntext", comment="note")

    streamed = compare(twin, dispatch, build)

    assert b'"ratio": 1.5e-07' in streamed.reply.body


def test_sse_invalid_item_escapes_as_fastapis_response_validation_error(
    twin: Twin, dispatch: bool
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/s", response_class=EventSourceResponse)
        async def cities() -> AsyncIterator[City]:
            yield OSLO
            yield {"name": "Nowhere"}  # type: ignore[misc]

    ours, theirs = apps(twin, dispatch, build)
    mine, fastapis = stream(ours), stream(theirs)

    # FastAPI raises it from a task group, and may drop the event yielded just before.
    assert leaves(mine.error) == leaves(fastapis.error) == [ResponseValidationError]
    assert mine.reply.status == fastapis.reply.status == 200
    assert mine.reply.headers == fastapis.reply.headers
    assert not mine.reply.finished


def test_a_dependencys_status_headers_and_background_task_apply_to_the_stream(
    twin: Twin, dispatch: bool
) -> None:
    LOG.clear()

    def tag(response: Response, tasks: BackgroundTasks) -> None:
        response.status_code = 202
        response.headers["x-source"] = "live"
        tasks.add_task(LOG.append, "after")

    def build(router: APIRouter) -> None:
        @router.get("/s", dependencies=[Depends(tag)], response_class=EventSourceResponse)
        async def cities() -> AsyncIterator[City]:
            yield OSLO

    streamed = compare(twin, dispatch, build)

    assert streamed.reply.status == 202
    assert (b"x-source", b"live") in streamed.reply.headers
    assert LOG == ["after", "after"]  # ours, then FastAPI's


def test_a_generator_dependencys_teardown_runs_after_the_stream_as_in_fastapi(
    twin: Twin, dispatch: bool
) -> None:
    LOG.clear()

    async def session() -> AsyncIterator[str]:
        LOG.append("open")
        yield "db"
        LOG.append("close")

    def build(router: APIRouter) -> None:
        @router.get("/s")
        async def cities(db: Annotated[str, Depends(session)]) -> AsyncIterator[City]:
            LOG.append(f"item from {db}")
            yield OSLO

    compare(twin, dispatch, build)

    assert LOG == ["open", "item from db", "close"] * 2


def test_a_streaming_route_with_a_pydantic_body_answers_a_bad_body_with_fastapis_422(
    twin: Twin, dispatch: bool
) -> None:
    def build(router: APIRouter) -> None:
        @router.post("/s")
        async def echo(city: Annotated[City, Body()]) -> AsyncIterator[City]:
            yield city
            yield city

    ours, theirs = apps(twin, dispatch, build)
    for body in (b'{"name": "Oslo", "population": 1}', b'{"name": "Oslo"}', b"{"):
        mine, fastapis = post(ours, body), post(theirs, body)
        assert_same_stream(mine, fastapis)


@pytest.mark.parametrize("is_async", [True, False], ids=["async", "sync"])
def test_a_client_that_leaves_stops_the_stream_where_it_stops_fastapis(
    twin: Twin, dispatch: bool, is_async: bool
) -> None:
    # The client says http.disconnect as soon as the request is read: FastAPI's stream
    # lets the event loop run after each item, and stops after the first.
    def build(router: APIRouter) -> None:
        if is_async:

            @router.get("/s")
            async def cities() -> AsyncIterator[City]:
                for _ in range(40):
                    yield OSLO

        else:

            @router.get("/s")
            def cities() -> Iterator[City]:  # type: ignore[misc]
                for _ in range(40):
                    yield OSLO

    ours, theirs = apps(twin, dispatch, build)

    async def left(app: Any) -> Reply:
        return await send_request(app, "GET", b"/s")

    mine, fastapis = asyncio.run(left(ours)), asyncio.run(left(theirs))

    assert mine.sent == fastapis.sent
    assert mine.body.count(b"\n") < 40


def test_a_generator_given_to_a_chosen_response_class_keeps_fastapis_handler(
    twin: Twin,
) -> None:
    router = twin.router_class()

    @router.get("/s", response_class=StreamingResponse)
    async def chunks() -> AsyncIterator[bytes]:
        yield b"raw"

    assert [route.tier for route in router.routes] == ["delegated"]


def post(app: Any, body: bytes) -> Streamed:
    """One POST /s of a JSON `body`; the client stays connected until the app answers."""

    async def run() -> Streamed:
        pending = body_messages((body,))

        async def receive() -> Message:
            if pending:
                return pending.pop(0)
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        headers = ((b"content-type", b"application/json"),)
        return await drive(app, scope_for("POST", b"/s", headers), receive)

    return asyncio.run(run())
