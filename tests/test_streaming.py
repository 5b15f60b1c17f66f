"""Streaming from generator endpoints: JSON Lines and Server-Sent Events, as FastAPI does.

A MsgspecRouter route whose endpoint is a generator function streams its items the way
FastAPI 0.165 streams them for Pydantic models (notes_streaming.md has the facts and the
FastAPI source lines): typed items (`AsyncIterator[City]`, `Iterator[City]`, ...) are
validated like a response and sent one JSON document per line as `application/jsonl`;
with `response_class=EventSourceResponse` each item is an SSE event. Where a test says
"as FastAPI does", the same endpoint on a plain APIRouter, with a Pydantic model for the
Struct, is the reference: status, headers, body bytes and the way the stream ends must be
the same.

Every test runs on both twins (the `twin` fixture) and, where the tier can matter, on
both tiers (`tier`: "delegated" gives every route a dependency only FastAPI solves, as
conftest's `router` fixture does; the reference router gets the same dependency). The apps are
driven with raw ASGI messages; the client stays connected (`then="wait"`) unless a test
disconnects it, because Starlette's StreamingResponse stops a stream as soon as
`receive` says `http.disconnect`.

FastAPI has both kinds of streaming since 0.134 (JSON Lines) and 0.135 (SSE), so the
lowest supported FastAPI, 0.142.2, runs these tests too.
"""

import asyncio
import math
import threading
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Callable,
    Generator,
    Iterable,
    Iterator,
)
from dataclasses import dataclass
from typing import Annotated, Any

import fastapi.routing
import msgspec
import pydantic
import pytest
from fastapi import APIRouter, BackgroundTasks, Depends, FastAPI, Query, Response
from fastapi.exceptions import ResponseValidationError
from fastapi.routing import iter_route_contexts
from fastapi.sse import EventSourceResponse, ServerSentEvent
from raw_asgi import Message, Reply, body_messages, scope_for
from support import delegating_dependency
from twins import TWIN_NAMES, PerTwin, Twin

from msgspec_fastapi import MsgspecRouter, install_openapi


class City(msgspec.Struct):
    name: str
    population: Annotated[int, msgspec.Meta(ge=0)]


class Capital(City):
    country: str


# The Pydantic equivalent of City, for the FastAPI reference (no docstring: it would be
# documented as the schema's description, which City's schema has not).
class CityModel(pydantic.BaseModel):
    name: str
    population: Annotated[int, pydantic.Field(ge=0)]


class CapitalModel(CityModel):
    country: str


OSLO = {"name": "Oslo", "population": 700000}
BERGEN = {"name": "Bergen", "population": 290000}


class OURS:
    """The models a test's `build(router, m)` gets for the MsgspecRouter."""

    City = City
    Capital = Capital


class THEIRS:
    """The same for the reference APIRouter: the Pydantic equivalents."""

    City = CityModel
    Capital = CapitalModel


Models = type[OURS] | type[THEIRS]
JSONL = (b"content-type", b"application/jsonl")


def routers(twin: Twin, tier: str) -> tuple[MsgspecRouter, APIRouter]:
    """A MsgspecRouter on `twin` and a plain APIRouter, both with `tier`'s dependencies."""
    dependencies = [Depends(delegating_dependency)] if tier == "delegated" else []
    return (
        twin.router_class(dependencies=dependencies),
        APIRouter(dependencies=dependencies),
    )


def app_of(router: APIRouter) -> FastAPI:
    app = FastAPI()
    app.include_router(router)
    list(iter_route_contexts(app.routes))  # build every included route now
    return app


@dataclass(frozen=True)
class Streamed:
    """Every message the app sent, and the exception that escaped it (None if none)."""

    reply: Reply
    error: BaseException | None

    @property
    def lines(self) -> list[Any]:
        """The JSON Lines body, each line decoded."""
        body = self.reply.body
        assert body.endswith(b"\n") or not body
        return [msgspec.json.decode(line) for line in body.splitlines()]

    @property
    def events(self) -> list[dict[str, Any]]:
        """The SSE body as events: field name -> value (data lines joined by newlines)."""
        events = []
        for block in self.reply.body.decode().split("\n\n")[:-1]:
            event: dict[str, Any] = {}
            for line in block.split("\n"):
                field, _, value = line.partition(": ")
                if field == "data" and "data" in event:
                    value = event["data"] + "\n" + value
                event[field] = value
            events.append(event)
        return events


async def drive(app: Any, scope: dict[str, Any], receive: Callable[..., Any]) -> Streamed:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    error: BaseException | None = None
    try:
        await asyncio.wait_for(app(scope, receive, send), 10)
    except BaseException as exc:  # an escaping exception is part of the answer
        if isinstance(exc, TimeoutError | KeyboardInterrupt):
            raise
        error = exc
    return Streamed(Reply(tuple(sent), 0), error)


def stream(app: Any, method: str = "GET", target: bytes = b"/s") -> Streamed:
    """One request; the client stays connected until the app has answered."""

    async def run() -> Streamed:
        pending = body_messages()

        async def receive() -> Message:
            if pending:
                return pending.pop(0)
            await asyncio.Event().wait()  # still connected, sending nothing more
            raise AssertionError("unreachable")

        return await drive(app, scope_for(method, target, ()), receive)

    return asyncio.run(run())


def stream_then_disconnect(app: Any, target: bytes = b"/s", delay: float = 0.05) -> Streamed:
    """One request; the client leaves `delay` seconds after the first body chunk."""

    async def run() -> Streamed:
        first_chunk = asyncio.Event()
        requested = False

        async def receive() -> Message:
            nonlocal requested
            if not requested:
                requested = True
                return body_messages()[0]
            await first_chunk.wait()
            await asyncio.sleep(delay)
            return {"type": "http.disconnect"}

        sent: list[Message] = []

        async def send(message: Message) -> None:
            sent.append(message)
            if message["type"] == "http.response.body":
                first_chunk.set()

        await asyncio.wait_for(app(scope_for("GET", target, ()), receive, send), 10)
        return Streamed(Reply(tuple(sent), 0), None)

    return asyncio.run(run())


def leaves(error: BaseException | None) -> list[type[BaseException]]:
    """The exception types inside `error`, exception groups flattened."""
    if error is None:
        return []
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [type(error)]


def both(
    twin: Twin,
    tier: str,
    build: Callable[[APIRouter, Models], None],
    method: str = "GET",
    target: bytes = b"/s",
) -> tuple[Streamed, Streamed]:
    """`build` on a MsgspecRouter (msgspec models) and on an APIRouter (Pydantic models),
    each in an app of its own, and the same request to both: (ours, FastAPI's)."""
    ours, theirs = routers(twin, tier)
    build(ours, OURS)
    build(theirs, THEIRS)
    return stream(app_of(ours), method, target), stream(app_of(theirs), method, target)


def assert_same_stream(ours: Streamed, theirs: Streamed) -> None:
    """The same status, headers and body bytes, finished (or not) alike, same exception."""
    assert ours.reply.status == theirs.reply.status
    assert ours.reply.headers == theirs.reply.headers
    assert ours.reply.body == theirs.reply.body
    assert ours.reply.finished == theirs.reply.finished
    assert type(ours.error) is type(theirs.error)


# -- JSON Lines: typed generators ------------------------------------------------------------------


def test_async_iterator_of_structs_streams_json_lines_as_fastapi_does(
    twin: Twin, tier: str
) -> None:
    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s")
        async def cities() -> AsyncIterator[m.City]:
            yield m.City(**OSLO)
            yield m.City(**BERGEN)

    ours, theirs = both(twin, tier, build)

    assert_same_stream(ours, theirs)
    assert ours.error is None
    assert ours.reply.headers == [JSONL]
    assert ours.reply.body == b'{"name":"Oslo","population":700000}\n' + (
        b'{"name":"Bergen","population":290000}\n'
    )


def test_each_item_is_sent_in_a_body_message_of_its_own(twin: Twin, tier: str) -> None:
    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s")
        async def cities() -> AsyncIterator[m.City]:
            for _ in range(3):
                yield m.City(**OSLO)

    ours, theirs = both(twin, tier, build)

    def chunks(streamed: Streamed) -> list[tuple[bytes, bool]]:
        return [(m["body"], m.get("more_body", False)) for m in streamed.reply.sent[1:]]

    assert chunks(ours) == chunks(theirs)
    assert [more for _, more in chunks(ours)] == [True, True, True, False]


@pytest.mark.parametrize(
    "annotate",
    [
        pytest.param(lambda t: AsyncIterator[t], id="AsyncIterator"),
        pytest.param(lambda t: AsyncIterable[t], id="AsyncIterable"),
        pytest.param(lambda t: AsyncGenerator[t, None], id="AsyncGenerator"),
    ],
)
def test_every_async_stream_annotation_streams_as_fastapi_does(
    twin: Twin, tier: str, annotate: Callable[[type], Any]
) -> None:
    def build(router: APIRouter, m: Models) -> None:
        async def cities():
            yield m.City(**OSLO)
            yield {"name": "Bergen", "population": 1}

        cities.__annotations__["return"] = annotate(m.City)
        router.get("/s")(cities)

    ours, theirs = both(twin, tier, build)

    assert_same_stream(ours, theirs)
    assert ours.lines == [OSLO, {"name": "Bergen", "population": 1}]


@pytest.mark.parametrize(
    "annotate",
    [
        pytest.param(lambda t: Iterator[t], id="Iterator"),
        pytest.param(lambda t: Iterable[t], id="Iterable"),
        pytest.param(lambda t: Generator[t, None, None], id="Generator"),
    ],
)
def test_every_sync_stream_annotation_streams_as_fastapi_does(
    twin: Twin, tier: str, annotate: Callable[[type], Any]
) -> None:
    def build(router: APIRouter, m: Models) -> None:
        def cities():
            yield m.City(**OSLO)
            yield m.City(**BERGEN)

        cities.__annotations__["return"] = annotate(m.City)
        router.get("/s")(cities)

    ours, theirs = both(twin, tier, build)

    assert_same_stream(ours, theirs)
    assert ours.lines == [OSLO, BERGEN]


def test_sync_generator_runs_in_a_worker_thread(twin: Twin, tier: str) -> None:
    threads: list[int] = []
    ours, _ = routers(twin, tier)

    @ours.get("/s")
    def cities() -> Iterator[City]:
        for _ in range(2):
            threads.append(threading.get_ident())
            yield City(**OSLO)

    streamed = stream(app_of(ours))  # asyncio.run: the event loop runs in this thread

    assert streamed.error is None
    assert streamed.lines == [OSLO, OSLO]
    assert len(threads) == 2
    assert threading.get_ident() not in threads


def test_item_that_is_exactly_the_declared_struct_is_sent_without_revalidation(
    twin: Twin, tier: str
) -> None:
    # Constructors do not check Meta; Pydantic does not revalidate an instance either.
    def build(router: APIRouter, m: Models) -> None:
        make = m.City if m is OURS else m.City.model_construct

        @router.get("/s")
        async def cities() -> AsyncIterator[m.City]:
            yield make(name="Nowhere", population=-5)

    ours, theirs = both(twin, tier, build)

    assert_same_stream(ours, theirs)
    assert ours.reply.body == b'{"name":"Nowhere","population":-5}\n'


def test_dict_item_is_validated_and_encoded_as_the_declared_struct(twin: Twin, tier: str) -> None:
    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s")
        async def cities() -> AsyncIterator[m.City]:
            yield {"population": 3, "name": "Tromsø", "mayor": "someone"}

    ours, theirs = both(twin, tier, build)

    assert_same_stream(ours, theirs)
    assert ours.reply.body == '{"name":"Tromsø","population":3}\n'.encode()


def test_valid_subclass_item_is_sent_with_the_declared_fields_only(twin: Twin, tier: str) -> None:
    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s")
        async def cities() -> AsyncIterator[m.City]:
            yield m.Capital(name="Oslo", population=1, country="NO")

    ours, theirs = both(twin, tier, build)

    assert_same_stream(ours, theirs)
    assert ours.lines == [{"name": "Oslo", "population": 1}]


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(lambda m: {"name": "Bergen"}, id="dict-missing-a-field"),
        pytest.param(
            lambda m: {"name": "Bergen", "population": -1}, id="dict-breaking-a-constraint"
        ),
        pytest.param(lambda m: "Bergen", id="string"),
    ],
)
def test_invalid_item_raises_response_validation_error_mid_stream_as_fastapi_does(
    twin: Twin, tier: str, bad: Callable[[Models], Any]
) -> None:
    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s")
        async def cities() -> AsyncIterator[m.City]:
            yield m.City(**OSLO)
            yield bad(m)
            yield m.City(**BERGEN)

    ours, theirs = both(twin, tier, build)

    assert_same_stream(ours, theirs)
    # The items before it were sent; the stream ends without its final message.
    assert isinstance(ours.error, ResponseValidationError)
    assert ours.reply.status == 200
    assert ours.lines == [OSLO]
    assert not ours.reply.finished


def test_invalid_subclass_item_is_validated_like_a_response(twin: Twin, tier: str) -> None:
    # As for a returned value (test_responses): an instance of a subclass is validated
    # against the declared Struct. (Pydantic trusts any instance of a subclass, so FastAPI
    # would send this one: no reference here.)
    ours, _ = routers(twin, tier)

    @ours.get("/s")
    async def cities() -> AsyncIterator[City]:
        yield City(**OSLO)
        yield Capital(name="Bergen", population=-1, country="NO")

    streamed = stream(app_of(ours))

    assert isinstance(streamed.error, ResponseValidationError)
    assert streamed.lines == [OSLO]
    assert not streamed.reply.finished


def test_invalid_item_error_is_the_routers_response_validation_error(twin: Twin, tier: str) -> None:
    """An item fails as a returned value of the router fails: at ("response",), with
    msgspec's message (FastAPI's Pydantic error locates the field)."""

    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s")
        async def cities() -> AsyncIterator[m.City]:
            yield {"name": "Bergen"}

    ours, _ = both(twin, tier, build)

    assert isinstance(ours.error, ResponseValidationError)
    [error] = ours.error.errors()
    assert error["loc"] == ("response",)
    assert error["type"] == "value_error.msgspec"
    assert "population" in error["msg"]


def test_an_item_msgspec_cannot_encode_under_any_is_a_response_validation_error(
    twin: Twin, tier: str
) -> None:
    # Any converts nothing, so the key msgspec cannot encode is only found by encoding:
    # it fails as an invalid item does, not as a TypeError.
    ours, _ = routers(twin, tier)

    @ours.get("/s")
    async def items() -> AsyncIterator[dict[str, Any]]:
        yield {"fine": 1}
        yield {"bad": {None: 1}}

    streamed = stream(app_of(ours))

    assert isinstance(streamed.error, ResponseValidationError)
    assert streamed.lines == [{"fine": 1}]
    assert not streamed.reply.finished


# -- JSON Lines: untyped generators ----------------------------------------------------------------


def test_untyped_async_generator_streams_structs_and_dicts(twin: Twin, tier: str) -> None:
    # FastAPI cannot encode a Struct (jsonable_encoder), so its reference yields its own
    # models; it also writes untyped items with json.dumps' spaces. The values, the
    # content type and the framing must be the same; the JSON spelling is ours (msgspec).
    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s")
        async def anything():
            yield m.City(**OSLO)
            yield {"city": m.City(**BERGEN), "rank": [1, 2.5, None, True, "x"]}
            yield 7

    ours, theirs = both(twin, tier, build)

    assert ours.error is None
    assert (ours.reply.status, ours.reply.headers) == (theirs.reply.status, theirs.reply.headers)
    assert ours.lines == theirs.lines
    assert ours.lines == [OSLO, {"city": BERGEN, "rank": [1, 2.5, None, True, "x"]}, 7]
    assert ours.reply.finished


def test_untyped_generator_item_is_encoded_with_msgspec(twin: Twin, tier: str) -> None:
    ours, _ = routers(twin, tier)

    @ours.get("/s")
    async def anything():
        yield {"city": City(**OSLO), "bytes": b"\x00\xff", "set": {1}}

    streamed = stream(app_of(ours))

    assert streamed.error is None
    assert (
        streamed.reply.body
        == msgspec.json.encode({"city": City(**OSLO), "bytes": b"\x00\xff", "set": {1}}) + b"\n"
    )


def test_untyped_sync_generator_streams_structs_in_a_worker_thread(twin: Twin, tier: str) -> None:
    threads: list[int] = []
    ours, _ = routers(twin, tier)

    @ours.get("/s")
    def anything():
        threads.append(threading.get_ident())
        yield City(**OSLO)

    streamed = stream(app_of(ours))

    assert streamed.lines == [OSLO]
    assert threads and threading.get_ident() not in threads


# -- JSON Lines: methods, status, headers ----------------------------------------------------------


def test_head_on_a_get_stream_route_is_method_not_allowed_as_fastapi_does(
    twin: Twin, tier: str
) -> None:
    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s")
        async def cities() -> AsyncIterator[m.City]:
            yield m.City(**OSLO)

    ours, theirs = both(twin, tier, build, method="HEAD")

    assert_same_stream(ours, theirs)
    assert ours.reply.status == 405


def test_route_declared_for_head_streams_on_head_as_fastapi_does(twin: Twin, tier: str) -> None:
    # Starlette's StreamingResponse sends the body on HEAD too; the server drops it.
    def build(router: APIRouter, m: Models) -> None:
        @router.api_route("/s", methods=["GET", "HEAD"])
        async def cities() -> AsyncIterator[m.City]:
            yield m.City(**OSLO)

    ours, theirs = both(twin, tier, build, method="HEAD")

    assert_same_stream(ours, theirs)
    assert ours.reply.status == 200


def test_post_route_streams_as_fastapi_does(twin: Twin, tier: str) -> None:
    def build(router: APIRouter, m: Models) -> None:
        @router.post("/s")
        async def cities(city: m.City) -> AsyncIterator[m.City]:
            yield city
            yield city

    ours, theirs = routers(twin, tier)
    build(ours, OURS)
    build(theirs, THEIRS)
    body = msgspec.json.encode(OSLO)

    def post(router: APIRouter) -> Streamed:
        async def run() -> Streamed:
            pending = [{"type": "http.request", "body": body, "more_body": False}]

            async def receive() -> Message:
                if pending:
                    return pending.pop(0)
                await asyncio.Event().wait()
                raise AssertionError("unreachable")

            headers = [(b"content-type", b"application/json")]
            return await drive(app_of(router), scope_for("POST", b"/s", headers), receive)

        return asyncio.run(run())

    mine, reference = post(ours), post(theirs)

    assert_same_stream(mine, reference)
    assert mine.lines == [OSLO, OSLO]


def test_request_validation_error_is_the_routers_422_before_any_stream(
    twin: Twin, tier: str
) -> None:
    # Parameters are checked before the generator starts: the same 422 as the same
    # parameter on a route of this router that returns one City.
    ours, _ = routers(twin, tier)

    @ours.get("/s")
    async def cities(limit: Annotated[int, Query(ge=1)]) -> AsyncIterator[City]:
        yield City(**OSLO)

    @ours.get("/one")
    async def one(limit: Annotated[int, Query(ge=1)]) -> City:
        return City(**OSLO)

    app = app_of(ours)
    streamed, single = stream(app, target=b"/s?limit=0"), stream(app, target=b"/one?limit=0")

    assert streamed.reply.status == 422
    assert streamed.reply.sent == single.reply.sent
    assert streamed.error is None


def test_route_status_code_is_used_as_fastapi_does(twin: Twin, tier: str) -> None:
    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s", status_code=201)
        async def cities() -> AsyncIterator[m.City]:
            yield m.City(**OSLO)

    ours, theirs = both(twin, tier, build)

    assert_same_stream(ours, theirs)
    assert ours.reply.status == 201


def test_status_and_headers_set_by_a_dependency_are_sent_as_fastapi_does(
    twin: Twin, tier: str
) -> None:
    def tagged(response: Response) -> None:
        response.status_code = 203
        response.headers["x-source"] = "cache"

    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s", dependencies=[Depends(tagged)])
        async def cities() -> AsyncIterator[m.City]:
            yield m.City(**OSLO)

    ours, theirs = both(twin, tier, build)

    assert_same_stream(ours, theirs)
    assert ours.reply.status == 203
    assert (b"x-source", b"cache") in ours.reply.headers


def test_changes_to_the_injected_response_inside_the_generator_come_too_late_as_in_fastapi(
    twin: Twin, tier: str
) -> None:
    # The generator body runs after the response has started: FastAPI ignores them.
    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s", status_code=201)
        async def cities(response: Response) -> AsyncIterator[m.City]:
            response.status_code = 202
            response.headers["x-late"] = "1"
            yield m.City(**OSLO)

    ours, theirs = both(twin, tier, build)

    assert_same_stream(ours, theirs)
    assert ours.reply.status == 201
    assert ours.reply.headers == [JSONL]


def test_background_task_runs_after_the_stream(twin: Twin, tier: str) -> None:
    done: list[str] = []
    ours, _ = routers(twin, tier)

    def schedule(tasks: BackgroundTasks) -> None:
        tasks.add_task(done.append, "task")

    @ours.get("/s", dependencies=[Depends(schedule)])
    async def cities() -> AsyncIterator[City]:
        done.append("item")
        yield City(**OSLO)

    streamed = stream(app_of(ours))

    assert streamed.lines == [OSLO]
    assert done == ["item", "task"]


# -- JSON Lines: errors and disconnects ------------------------------------------------------------


def test_error_raised_mid_stream_escapes_after_the_items_sent_as_fastapi_does(
    twin: Twin, tier: str
) -> None:
    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s")
        async def cities() -> AsyncIterator[m.City]:
            yield m.City(**OSLO)
            raise ValueError("boom")

    ours, theirs = both(twin, tier, build)

    assert_same_stream(ours, theirs)
    assert isinstance(ours.error, ValueError)
    assert ours.lines == [OSLO]
    assert not ours.reply.finished


def test_error_raised_by_a_sync_generator_escapes_as_fastapi_does(twin: Twin, tier: str) -> None:
    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s")
        def cities() -> Iterator[m.City]:
            yield m.City(**OSLO)
            raise ValueError("boom")

    ours, theirs = both(twin, tier, build)

    assert_same_stream(ours, theirs)
    assert isinstance(ours.error, ValueError)
    assert not ours.reply.finished


def test_error_raised_before_the_first_item_escapes_after_the_start_as_fastapi_does(
    twin: Twin, tier: str
) -> None:
    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s")
        async def cities() -> AsyncIterator[m.City]:
            raise ValueError("boom")
            yield m.City(**OSLO)  # pragma: no cover - makes it a generator

    ours, theirs = both(twin, tier, build)

    assert_same_stream(ours, theirs)
    assert isinstance(ours.error, ValueError)


def test_client_disconnect_cancels_the_generator_and_its_finally_runs(
    twin: Twin, tier: str
) -> None:
    events: list[str] = []
    ours, _ = routers(twin, tier)

    @ours.get("/s")
    async def cities() -> AsyncIterator[City]:
        try:
            yield City(**OSLO)
            await asyncio.Event().wait()  # waits for data that never comes
            events.append("resumed")
        finally:
            events.append("finally")

    streamed = stream_then_disconnect(app_of(ours))

    # The finally ran before the app returned, and the app returned without an error.
    assert events == ["finally"]
    assert streamed.lines == [OSLO]
    assert not streamed.reply.finished


def test_client_disconnect_stops_an_endless_generator(twin: Twin, tier: str) -> None:
    ours, _ = routers(twin, tier)

    @ours.get("/s")
    async def cities() -> AsyncIterator[City]:
        while True:
            yield City(**OSLO)
            await asyncio.sleep(0.005)

    streamed = stream_then_disconnect(app_of(ours), delay=0.03)

    assert streamed.reply.status == 200
    assert not streamed.reply.finished
    assert all(line == OSLO for line in streamed.lines)


# -- Server-Sent Events ---------------------------------------------------------------------------

SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


def test_sse_stream_of_structs_is_sent_as_fastapi_does(twin: Twin, tier: str) -> None:
    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s", response_class=EventSourceResponse)
        async def cities() -> AsyncIterator[m.City]:
            yield m.City(**OSLO)
            yield {"name": "Bergen", "population": 1}

    ours, theirs = both(twin, tier, build)

    assert_same_stream(ours, theirs)
    assert ours.reply.headers == SSE_HEADERS
    assert ours.reply.body == (
        b'data: {"name":"Oslo","population":700000}\n\ndata: {"name":"Bergen","population":1}\n\n'
    )


def test_sse_sync_generator_is_sent_as_fastapi_does(twin: Twin, tier: str) -> None:
    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s", response_class=EventSourceResponse)
        def cities() -> Iterator[m.City]:
            yield m.City(**OSLO)

    ours, theirs = both(twin, tier, build)

    assert_same_stream(ours, theirs)
    assert ours.events == [{"data": msgspec.json.encode(OSLO).decode()}]


def test_sse_untyped_generator_sends_bare_structs_as_json_data(twin: Twin, tier: str) -> None:
    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s", response_class=EventSourceResponse)
        async def cities():
            yield m.City(**OSLO)
            yield m.City(**BERGEN)

    ours, theirs = both(twin, tier, build)

    # FastAPI's untyped items are json.dumps'ed (with spaces): compare the decoded data.
    assert ours.error is None
    assert ours.reply.headers == theirs.reply.headers == SSE_HEADERS
    data = [msgspec.json.decode(event["data"]) for event in ours.events]
    assert data == [msgspec.json.decode(event["data"]) for event in theirs.events]
    assert data == [OSLO, BERGEN]


def test_sse_bare_string_item_is_sent_as_a_json_string_as_fastapi_does(
    twin: Twin, tier: str
) -> None:
    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s", response_class=EventSourceResponse)
        async def words() -> AsyncIterator[str]:
            yield "hello"
            yield "two\nlines"

    ours, theirs = both(twin, tier, build)

    assert_same_stream(ours, theirs)
    assert ours.reply.body == b'data: "hello"\n\ndata: "two\\nlines"\n\n'


def test_sse_event_with_struct_data_and_every_field_is_sent_as_fastapi_does(
    twin: Twin, tier: str
) -> None:
    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s", response_class=EventSourceResponse)
        async def events() -> AsyncIterator[ServerSentEvent]:
            yield ServerSentEvent(
                data=m.City(**OSLO), event="city", id="1", retry=2500, comment="first\nof two"
            )
            yield ServerSentEvent(data=m.City(**BERGEN), id="2")

    ours, theirs = both(twin, tier, build)

    assert_same_stream(ours, theirs)
    assert ours.reply.body == (
        b": first\n: of two\nevent: city\n"
        b'data: {"name":"Oslo","population":700000}\nid: 1\nretry: 2500\n\n'
        b'data: {"name":"Bergen","population":290000}\nid: 2\n\n'
    )


def test_sse_events_mixed_with_items_in_a_typed_route_are_sent_as_fastapi_does(
    twin: Twin, tier: str
) -> None:
    # ServerSentEvent items skip the item type's validation; the other items do not.
    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s", response_class=EventSourceResponse)
        async def cities() -> AsyncIterator[m.City]:
            yield m.City(**OSLO)
            yield ServerSentEvent(data=m.City(**BERGEN), event="extra")
            yield ServerSentEvent(comment="just a comment")
            yield ServerSentEvent(raw_data="<b>raw</b>\nsecond line", event="html")

    ours, theirs = both(twin, tier, build)

    assert_same_stream(ours, theirs)
    assert ours.reply.body.endswith(
        b": just a comment\n\nevent: html\ndata: <b>raw</b>\ndata: second line\n\n"
    )


def test_sse_invalid_item_raises_response_validation_error(twin: Twin, tier: str) -> None:
    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s", response_class=EventSourceResponse)
        async def cities() -> AsyncIterator[m.City]:
            yield m.City(**OSLO)
            yield {"name": "Bergen"}

    ours, theirs = both(twin, tier, build)

    # FastAPI raises it from a task group (an ExceptionGroup around it), and may drop the
    # items yielded just before; what must match is what escapes and the missing end.
    assert leaves(ours.error) == leaves(theirs.error) == [ResponseValidationError]
    assert ours.reply.status == theirs.reply.status == 200
    assert ours.reply.headers == SSE_HEADERS
    assert not ours.reply.finished


def test_sse_error_raised_mid_stream_escapes(twin: Twin, tier: str) -> None:
    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s", response_class=EventSourceResponse)
        async def cities() -> AsyncIterator[m.City]:
            yield m.City(**OSLO)
            raise ValueError("boom")

    ours, theirs = both(twin, tier, build)

    assert leaves(ours.error) == leaves(theirs.error) == [ValueError]
    assert not ours.reply.finished


def test_sse_status_and_dependency_headers_are_sent_as_fastapi_does(twin: Twin, tier: str) -> None:
    def tagged(response: Response) -> None:
        response.headers["x-source"] = "live"

    def build(router: APIRouter, m: Models) -> None:
        @router.post("/s", status_code=202, response_class=EventSourceResponse,
                     dependencies=[Depends(tagged)])  # fmt: skip
        async def cities() -> AsyncIterator[m.City]:
            yield m.City(**OSLO)

    ours, theirs = both(twin, tier, build, method="POST")

    assert_same_stream(ours, theirs)
    assert ours.reply.status == 202
    assert ours.reply.headers == [*SSE_HEADERS, (b"x-source", b"live")]


def test_sse_keep_alive_ping_is_sent_while_the_generator_is_idle(
    twin: Twin, tier: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # FastAPI reads the interval from fastapi.routing (imported there from fastapi.sse):
    # a value set there is the one both follow.
    monkeypatch.setattr(fastapi.routing, "_PING_INTERVAL", 0.05)

    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s", response_class=EventSourceResponse)
        async def cities() -> AsyncIterator[m.City]:
            yield m.City(**OSLO)
            await asyncio.sleep(0.13)
            yield m.City(**BERGEN)

    ours, theirs = both(twin, tier, build)

    for streamed in (ours, theirs):
        assert streamed.error is None
        chunks = [m["body"] for m in streamed.reply.sent[1:]]
        assert chunks[0] == b'data: {"name":"Oslo","population":700000}\n\n'
        assert chunks[-2:] == [b'data: {"name":"Bergen","population":290000}\n\n', b""]
        pings = chunks[1:-2]
        assert pings and set(pings) == {b": ping\n\n"}


def test_sse_client_disconnect_cancels_the_generator_and_its_finally_runs(
    twin: Twin, tier: str
) -> None:
    events: list[str] = []
    ours, _ = routers(twin, tier)

    @ours.get("/s", response_class=EventSourceResponse)
    async def cities() -> AsyncIterator[City]:
        try:
            yield City(**OSLO)
            await asyncio.Event().wait()
            events.append("resumed")
        finally:
            events.append("finally")

    streamed = stream_then_disconnect(app_of(ours))

    assert events == ["finally"]
    assert streamed.events == [{"data": msgspec.json.encode(OSLO).decode()}]
    assert not streamed.reply.finished


# -- OpenAPI ---------------------------------------------------------------------------------------


def documents(twin: Twin, build: Callable[[APIRouter, Models], None]) -> tuple[Any, Any]:
    """The OpenAPI responses of GET /s on a MsgspecRouter app and on FastAPI's, with every
    `$ref` replaced by the component it names (minus titles, which Pydantic adds)."""

    def responses(router: APIRouter, msgspec_router: bool) -> Any:
        app = app_of(router)
        if msgspec_router:
            install_openapi(app, router)
        document = app.openapi()
        schemas = document.get("components", {}).get("schemas", {})

        def inline(node: Any) -> Any:
            if isinstance(node, dict):
                if "$ref" in node:
                    return inline(schemas[node["$ref"].removeprefix("#/components/schemas/")])
                return {k: inline(v) for k, v in node.items() if k != "title"}
            if isinstance(node, list):
                return [inline(v) for v in node]
            return node

        return inline(document["paths"]["/s"]["get"]["responses"])

    ours, theirs = routers(twin, "direct")
    build(ours, OURS)
    build(theirs, THEIRS)
    return responses(ours, True), responses(theirs, False)


def test_jsonl_openapi_documents_the_item_schema_as_fastapi_does(twin: Twin) -> None:
    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s")
        async def cities() -> AsyncIterator[m.City]:
            yield m.City(**OSLO)

    ours, theirs = documents(twin, build)

    assert ours == theirs
    content = ours["200"]["content"]
    assert list(content) == ["application/jsonl"]
    assert set(content["application/jsonl"]) == {"itemSchema"}
    assert content["application/jsonl"]["itemSchema"]["required"] == ["name", "population"]


def test_jsonl_openapi_of_an_untyped_generator_has_an_empty_item_schema(twin: Twin) -> None:
    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s")
        async def anything():
            yield 1

    ours, theirs = documents(twin, build)

    assert ours == theirs
    assert ours["200"]["content"] == {"application/jsonl": {"itemSchema": {}}}


def test_sse_openapi_documents_the_event_schema_with_the_item_as_data_as_fastapi_does(
    twin: Twin,
) -> None:
    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s", response_class=EventSourceResponse)
        async def cities() -> AsyncIterator[m.City]:
            yield m.City(**OSLO)

    ours, theirs = documents(twin, build)

    assert ours == theirs
    item = ours["200"]["content"]["text/event-stream"]["itemSchema"]
    assert item["required"] == ["data"]
    assert item["properties"]["data"]["contentMediaType"] == "application/json"
    assert item["properties"]["data"]["contentSchema"]["required"] == ["name", "population"]


def test_sse_openapi_of_server_sent_events_has_the_plain_event_schema(twin: Twin) -> None:
    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s", response_class=EventSourceResponse)
        async def events() -> AsyncIterator[ServerSentEvent]:
            yield ServerSentEvent(data=1)

    ours, theirs = documents(twin, build)

    assert ours == theirs
    assert "required" not in ours["200"]["content"]["text/event-stream"]["itemSchema"]


# -- the twins -------------------------------------------------------------------------------------


def build_stream_app(twin: Twin) -> FastAPI:
    """A table of streaming endpoints, every one on `twin`, direct and delegated."""
    app = FastAPI()
    for prefix, dependencies in (("/direct", []), ("/delegated", [Depends(delegating_dependency)])):
        router = twin.router_class(dependencies=dependencies)

        @router.get("/typed")
        async def typed(n: int = 3) -> AsyncIterator[City]:
            for i in range(n):
                yield City(name=f"c{i}", population=i)
            yield {"name": "dict", "population": 9}
            yield Capital(name="cap", population=1, country="NO")

        @router.get("/sync")
        def sync(n: int = 3) -> Iterator[City]:
            for i in range(n):
                yield City(name=f"s{i}", population=i)

        @router.get("/untyped")
        async def untyped():
            yield City(**OSLO)
            yield {"nested": [City(**BERGEN)], "float": 1.5}
            yield "text"

        @router.get("/invalid")
        async def invalid() -> AsyncIterator[City]:
            yield City(**OSLO)
            yield {"name": "x", "population": -1}

        @router.get("/raises")
        async def raises() -> AsyncIterator[City]:
            yield City(**OSLO)
            raise ValueError("boom")

        @router.get("/sse", response_class=EventSourceResponse)
        async def sse() -> AsyncIterator[City]:
            yield City(**OSLO)
            yield ServerSentEvent(data=City(**BERGEN), event="e", id="7", retry=10)
            yield ServerSentEvent(comment="c", raw_data="raw")

        @router.get("/sse-untyped", response_class=EventSourceResponse)
        async def sse_untyped():
            yield City(**OSLO)
            yield "bare"
            yield [1, 2]

        app.include_router(router, prefix=prefix)
    list(iter_route_contexts(app.routes))
    return app


STREAM_APPS = PerTwin(build_stream_app)
STREAM_TARGETS = [
    (method, prefix + path)
    for prefix in (b"/direct", b"/delegated")
    for method, path in [
        ("GET", b"/typed"),
        ("GET", b"/typed?n=0"),
        ("GET", b"/typed?n=x"),
        ("GET", b"/sync"),
        ("GET", b"/untyped"),
        ("GET", b"/invalid"),
        ("GET", b"/raises"),
        ("GET", b"/sse"),
        ("GET", b"/sse-untyped"),
        ("HEAD", b"/typed"),
    ]
]


def comparable(streamed: Streamed) -> tuple[Any, ...]:
    error = streamed.error
    described = None if error is None else (leaves(error), str(error))
    return (streamed.reply.sent, described)


def test_both_twins_give_byte_identical_streams() -> None:
    for method, target in STREAM_TARGETS:
        answers = {
            name: comparable(stream(STREAM_APPS[name], method, target)) for name in TWIN_NAMES
        }
        assert answers["compiled"] == answers["pure"], (method, target)
        sent, _ = answers["pure"]
        assert sent, (method, target)


# -- regressions ---------------------------------------------------------------------------------


def test_sse_stream_goes_on_when_an_event_is_still_being_sent_at_the_keep_alive_deadline(
    twin: Twin, tier: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slow client: the first event's send outlasts the keep-alive interval."""
    monkeypatch.setattr(fastapi.routing, "_PING_INTERVAL", 0.05)
    ours, _ = routers(twin, tier)

    @ours.get("/s", response_class=EventSourceResponse)
    async def cities() -> AsyncIterator[City]:
        yield City(**OSLO)
        yield City(**BERGEN)

    app = app_of(ours)

    async def run() -> Streamed:
        pending = body_messages()
        sent: list[Message] = []

        async def receive() -> Message:
            if pending:
                return pending.pop(0)
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        async def send(message: Message) -> None:
            if message.get("body", b"").startswith(b"data: "):
                await asyncio.sleep(0.15)  # more than twice the interval
            sent.append(message)

        await asyncio.wait_for(app(scope_for("GET", b"/s", ()), receive, send), 10)
        return Streamed(Reply(tuple(sent), 0), None)

    streamed = asyncio.run(run())

    assert streamed.reply.finished
    assert [e["data"] for e in streamed.events if "data" in e] == [
        '{"name":"Oslo","population":700000}',
        '{"name":"Bergen","population":290000}',
    ]


class Limit(msgspec.Struct):
    limit: int = 10


def test_generator_with_pydantic_items_and_a_query_model_is_refused_at_registration() -> None:
    router = MsgspecRouter()

    with pytest.raises(TypeError, match="parameter model"):

        @router.get("/s")
        async def cities(f: Annotated[Limit, Query()]) -> AsyncIterator[CityModel]:
            yield CityModel(**OSLO)


def test_generator_of_pydantic_items_on_a_msgspec_router_is_fastapis_json_lines(twin: Twin) -> None:
    router = twin.router_class()

    @router.get("/s")
    async def cities() -> AsyncIterator[CityModel]:
        yield CityModel(**OSLO)

    streamed = stream(app_of(router))

    assert streamed.error is None
    assert (b"content-type", b"application/jsonl") in streamed.reply.headers
    assert streamed.lines == [OSLO]


@pytest.mark.parametrize("sse", [False, True], ids=["jsonl", "sse"])
def test_untyped_item_with_none_and_bool_keys_names_them_as_json_does(
    twin: Twin, tier: str, sse: bool
) -> None:
    ours, _ = routers(twin, tier)

    @ours.get("/s", **({"response_class": EventSourceResponse} if sse else {}))
    async def anything():
        yield {"keys": {None: "none", True: "yes", False: "no"}}

    streamed = stream(app_of(ours))

    assert streamed.error is None
    expected = b'{"keys":{"null":"none","true":"yes","false":"no"}}'
    assert streamed.reply.body == (b"data: " + expected + b"\n\n" if sse else expected + b"\n")


@pytest.mark.parametrize("sse", [False, True], ids=["jsonl", "sse"])
def test_untyped_item_with_non_finite_float_keys_names_them_as_json_dumps_does(
    twin: Twin, tier: str, sse: bool
) -> None:
    ours, _ = routers(twin, tier)

    @ours.get("/s", **({"response_class": EventSourceResponse} if sse else {}))
    async def anything():
        yield {"inf": [{math.inf: 1, -math.inf: 2, math.nan: 3, 1.5: 4}], "text": "inf"}

    streamed = stream(app_of(ours))

    assert streamed.error is None
    expected = b'{"inf":[{"Infinity":1,"-Infinity":2,"NaN":3,"1.5":4}],"text":"inf"}'
    assert streamed.reply.body == (b"data: " + expected + b"\n\n" if sse else expected + b"\n")


def test_sse_event_data_with_a_none_key_names_it_null(twin: Twin, tier: str) -> None:
    ours, _ = routers(twin, tier)

    @ours.get("/s", response_class=EventSourceResponse)
    async def events():
        yield ServerSentEvent(data={None: 1, math.inf: 2})

    streamed = stream(app_of(ours))

    assert streamed.error is None
    assert streamed.reply.body == b'data: {"null":1,"Infinity":2}\n\n'


class NanAsString(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(ser_json_inf_nan="strings")
    value: float


def test_sse_event_data_pydantic_model_is_dumped_with_its_own_serialization_config(
    twin: Twin, tier: str
) -> None:
    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s", response_class=EventSourceResponse)
        async def events():
            yield ServerSentEvent(data=NanAsString(value=math.nan))

    ours, theirs = both(twin, tier, build)

    assert_same_stream(ours, theirs)
    assert ours.reply.body == b'data: {"value":"NaN"}\n\n'


def test_typed_stream_item_is_validated_in_lax_mode_as_fastapi_does(twin: Twin, tier: str) -> None:
    def build(router: APIRouter, m: Models) -> None:
        @router.get("/s")
        async def cities() -> AsyncIterator[m.City]:
            yield {"name": "Oslo", "population": "700000"}

    ours, theirs = both(twin, tier, build)

    assert_same_stream(ours, theirs)
    assert ours.lines == [OSLO]
