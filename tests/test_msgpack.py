"""MessagePack request bodies and responses, opt-in per router and per route.

`MsgspecRouter(msgpack=True)` turns MessagePack on for the router's routes, and
`msgpack=True` / `msgpack=False` on a route decorator or `add_api_route` overrides it.
On such a route a body sent as `application/msgpack` (or `application/x-msgpack`,
`application/vnd.msgpack`) is decoded strictly into the body's type, JSON bodies still
work, and the response is MessagePack when the client's `Accept` prefers it (JSON
otherwise), with `Vary: Accept`. Errors stay JSON and are sent where JSON's are.

Tests that take the `routers` fixture run four times: on each twin (`twin`) and each tier
(`tier`). The table at the end runs on both tiers of `msgpack_app`, on both twins, and
compares the twins byte for byte.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator, Sequence
from typing import Annotated, Any, Literal, TypedDict

import msgspec
import pytest
from fastapi import Body, Depends, FastAPI, Header, HTTPException, Response
from fastapi.responses import PlainTextResponse
from msgpack_app import APPS, CITY, RECORD, SMALL_LIMIT, TIERS, route_tiers
from openapi_spec_validator import validate
from raw_asgi import Reply, request
from support import delegating_dependency
from twins import Twin

from msgspec_fastapi import MsgspecRouter, install_openapi
from msgspec_fastapi._shared import UNSUPPORTED_MEDIA_TYPE_DETAIL

MSGPACK = b"application/msgpack"
JSON = b"application/json"
MSGPACK_TYPES = [b"application/msgpack", b"application/x-msgpack", b"application/vnd.msgpack"]
DEEP = 10_000


class City(msgspec.Struct):
    name: str
    population: int


class Point(TypedDict):
    x: int
    y: int


class Cat(msgspec.Struct, tag="cat"):
    lives: int


class Dog(msgspec.Struct, tag="dog"):
    good: bool


class Holder(msgspec.Struct):
    payload: Any


class Blob(msgspec.Struct):
    data: bytes
    when: datetime.datetime


OSLO = City("Oslo", 700000)


# -- helpers ----------------------------------------------------------------------------------


@pytest.fixture
def routers(twin: Twin, tier: str) -> Iterator[Callable[..., MsgspecRouter]]:
    """`routers(**options)`: a new MsgspecRouter on `twin` whose routes run on `tier`.

    After the test, every route of every router made must have run on `tier`.
    """
    made: list[MsgspecRouter] = []

    def new(**options: Any) -> MsgspecRouter:
        if tier == "delegated":
            options["dependencies"] = [
                Depends(delegating_dependency),
                *options.get("dependencies", []),
            ]
        router = twin.router_class(**options)
        made.append(router)
        return router

    yield new
    for router in made:
        assert [route.tier for route in router.routes] == [tier] * len(router.routes)


def body_endpoint(annotation: Any, result: Callable[[Any], Any]) -> Callable[..., Any]:
    """An endpoint whose one body parameter, `body`, is of `annotation` (chosen at run time:
    with postponed annotations a local name cannot be written in the signature)."""

    async def endpoint(body: Any) -> Any:
        return result(body)

    endpoint.__annotations__ = {"body": Annotated[annotation, Body()], "return": Any}
    return endpoint


def app_with(*routers: MsgspecRouter) -> FastAPI:
    app = FastAPI()
    for router in routers:
        app.include_router(router)
    return app


def city_app(router: MsgspecRouter, **route_options: Any) -> FastAPI:
    """`router` with POST /cities, which answers with the City it was sent."""

    @router.post("/cities", **route_options)
    async def create(city: City) -> City:
        return city

    return app_with(router)


def send(
    app: FastAPI,
    path: str,
    body: bytes = b"",
    content_type: bytes | None = None,
    accept: bytes | None = None,
    method: str = "POST",
    headers: Sequence[tuple[bytes, bytes]] = (),
) -> Reply:
    all_headers = list(headers)
    if content_type is not None:
        all_headers.append((b"content-type", content_type))
    if accept is not None:
        all_headers.append((b"accept", accept))
    return request(app, method, path.encode(), all_headers, body)


def send_msgpack(app: FastAPI, path: str, value: Any, **kw: Any) -> Reply:
    """`value` encoded as MessagePack, sent as application/msgpack."""
    return send(app, path, msgspec.msgpack.encode(value), content_type=MSGPACK, **kw)


def send_json(app: FastAPI, path: str, value: Any, **kw: Any) -> Reply:
    return send(app, path, msgspec.json.encode(value), content_type=JSON, **kw)


def header_values(reply: Reply, name: bytes) -> list[bytes]:
    return [value for key, value in reply.headers if key.lower() == name]


def varies_on_accept(reply: Reply) -> bool:
    tokens = [
        token.strip().lower()
        for value in header_values(reply, b"vary")
        for token in value.split(b",")
    ]
    return b"accept" in tokens or b"*" in tokens


def assert_msgpack_reply(reply: Reply, value: Any, status: int = 200) -> None:
    """A MessagePack response: its content type, the bytes msgpack gives `value`, a length."""
    assert reply.status == status, reply.body
    assert header_values(reply, b"content-type") == [MSGPACK]
    assert reply.body == msgspec.msgpack.encode(value)
    assert header_values(reply, b"content-length") == [str(len(reply.body)).encode()]


def assert_json_reply(reply: Reply, value: Any, status: int = 200) -> None:
    assert reply.status == status, reply.body
    assert header_values(reply, b"content-type") == [JSON]
    assert reply.body == msgspec.json.encode(value)
    assert header_values(reply, b"content-length") == [str(len(reply.body)).encode()]


def assert_json_error(reply: Reply, status: int) -> Any:
    """An error answered in JSON, FastAPI's {"detail": ...}; returns the detail."""
    assert reply.status == status, reply.body
    assert header_values(reply, b"content-type") == [JSON]
    payload = reply.json()
    assert isinstance(payload, dict)
    assert list(payload) == ["detail"]
    return payload["detail"]


def assert_json_error_in_4xx(reply: Reply) -> None:
    """A client error in JSON, never a 500 (an escaping exception fails in `request`)."""
    assert reply.status is not None
    assert 400 <= reply.status < 500, (reply.status, reply.body)
    assert_json_error(reply, reply.status)


def validation_errors(reply: Reply) -> list[tuple[Any, ...]]:
    """A 422's errors as (loc, type) pairs, to compare a JSON and a msgpack request."""
    detail = assert_json_error(reply, 422)
    assert isinstance(detail, list)
    assert detail
    for error in detail:
        assert error["loc"][0] in ("body", "query", "path", "header", "cookie")
        assert isinstance(error["msg"], str)
    return [(tuple(error["loc"]), error["type"]) for error in detail]


# -- turning it on and off ----------------------------------------------------------------------


def test_msgpack_is_off_by_default_so_a_msgpack_body_is_415_as_today(
    routers: Callable[..., MsgspecRouter],
) -> None:
    app = city_app(routers())

    reply = send_msgpack(app, "/cities", CITY)

    assert assert_json_error(reply, 415) == UNSUPPORTED_MEDIA_TYPE_DETAIL


@pytest.mark.parametrize("content_type", MSGPACK_TYPES)
def test_every_msgpack_content_type_is_415_on_a_route_without_msgpack(
    routers: Callable[..., MsgspecRouter], content_type: bytes
) -> None:
    app = city_app(routers())

    reply = send(app, "/cities", msgspec.msgpack.encode(CITY), content_type=content_type)

    assert assert_json_error(reply, 415) == UNSUPPORTED_MEDIA_TYPE_DETAIL


def test_router_msgpack_option_turns_msgpack_on_for_each_of_its_routes(
    routers: Callable[..., MsgspecRouter],
) -> None:
    router = routers(msgpack=True)

    @router.post("/one")
    async def one(city: City) -> str:
        return city.name

    @router.put("/two")
    async def two(city: City) -> int:
        return city.population

    app = app_with(router)

    assert_json_reply(send_msgpack(app, "/one", CITY), "Oslo")
    assert_json_reply(send_msgpack(app, "/two", CITY, method="PUT"), 700000)


def test_route_msgpack_true_turns_it_on_under_a_router_without_it(
    routers: Callable[..., MsgspecRouter],
) -> None:
    app = city_app(routers(), msgpack=True)

    assert_json_reply(send_msgpack(app, "/cities", CITY), CITY)


def test_route_msgpack_false_turns_it_off_under_a_msgpack_router(
    routers: Callable[..., MsgspecRouter],
) -> None:
    app = city_app(routers(msgpack=True), msgpack=False)

    reply = send_msgpack(app, "/cities", CITY, accept=MSGPACK)

    assert assert_json_error(reply, 415) == UNSUPPORTED_MEDIA_TYPE_DETAIL


def test_route_msgpack_false_under_a_msgpack_router_answers_json_to_a_msgpack_accept(
    routers: Callable[..., MsgspecRouter],
) -> None:
    app = city_app(routers(msgpack=True), msgpack=False)

    reply = send_json(app, "/cities", CITY, accept=MSGPACK)

    assert_json_reply(reply, CITY)
    assert header_values(reply, b"vary") == []


@pytest.mark.parametrize("router_option", [None, False, True])
@pytest.mark.parametrize("route_option", [False, True])
def test_add_api_route_msgpack_option_wins_over_the_router(
    routers: Callable[..., MsgspecRouter], router_option: bool | None, route_option: bool
) -> None:
    router = routers() if router_option is None else routers(msgpack=router_option)

    async def create(city: City) -> City:
        return city

    router.add_api_route("/cities", create, methods=["POST"], msgpack=route_option)
    reply = send_msgpack(app_with(router), "/cities", CITY, accept=MSGPACK)

    if route_option:
        assert_msgpack_reply(reply, CITY)
    else:
        assert_json_error(reply, 415)


@pytest.mark.parametrize("method", ["get", "put", "post", "patch", "delete"])
def test_every_route_decorator_takes_the_msgpack_option(
    routers: Callable[..., MsgspecRouter], method: str
) -> None:
    router = routers()

    @getattr(router, method)("/town", msgpack=True)
    async def town() -> City:
        return OSLO

    reply = send(app_with(router), "/town", method=method.upper(), accept=MSGPACK)

    assert_msgpack_reply(reply, OSLO)


def test_api_route_decorator_takes_the_msgpack_option(
    routers: Callable[..., MsgspecRouter],
) -> None:
    router = routers()

    @router.api_route("/cities", methods=["POST"], msgpack=True)
    async def create(city: City) -> City:
        return city

    assert_msgpack_reply(send_msgpack(app_with(router), "/cities", CITY, accept=MSGPACK), CITY)


# -- decoding -----------------------------------------------------------------------------------


def test_msgpack_body_is_decoded_into_an_instance_of_the_struct(
    routers: Callable[..., MsgspecRouter],
) -> None:
    router = routers(msgpack=True)

    @router.post("/cities")
    async def create(city: City) -> dict[str, Any]:
        return {"type": type(city).__name__, "name": city.name, "population": city.population}

    reply = send_msgpack(app_with(router), "/cities", CITY)

    assert_json_reply(reply, {"type": "City", "name": "Oslo", "population": 700000})


@pytest.mark.parametrize(
    "content_type",
    [
        b"application/msgpack",
        b"application/x-msgpack",
        b"application/vnd.msgpack",
        b"APPLICATION/MSGPACK",
        b"Application/X-MsgPack",
        b"application/VND.MSGPACK",
        b"application/msgpack; charset=binary",
        b"application/x-msgpack;version=5",
        b'application/vnd.msgpack; a="b"',
    ],
)
def test_msgpack_content_type_is_accepted_in_any_case_and_with_parameters(
    routers: Callable[..., MsgspecRouter], content_type: bytes
) -> None:
    app = city_app(routers(msgpack=True))

    reply = send(app, "/cities", msgspec.msgpack.encode(CITY), content_type=content_type)

    assert_json_reply(reply, CITY)


def test_json_body_still_works_on_a_msgpack_route(routers: Callable[..., MsgspecRouter]) -> None:
    app = city_app(routers(msgpack=True))

    assert_json_reply(send_json(app, "/cities", CITY), CITY)


@pytest.mark.parametrize(
    "content_type",
    [
        b"text/plain",
        b"application/xml",
        b"application/x-www-form-urlencoded",
        b"text/msgpack",
        b"application/msgpack2",
        b"application/x-msgpackx",
        b"application/msgpack, application/json",
        b"msgpack",
    ],
)
def test_other_content_type_on_a_msgpack_route_is_415_in_json(
    routers: Callable[..., MsgspecRouter], content_type: bytes
) -> None:
    app = city_app(routers(msgpack=True))

    reply = send(app, "/cities", msgspec.msgpack.encode(CITY), content_type=content_type)

    assert isinstance(assert_json_error(reply, 415), str)


def test_msgpack_body_without_a_content_type_is_415_on_a_msgpack_route(
    routers: Callable[..., MsgspecRouter],
) -> None:
    app = city_app(routers(msgpack=True))

    reply = send(app, "/cities", msgspec.msgpack.encode(CITY))

    assert isinstance(assert_json_error(reply, 415), str)


def test_string_is_not_accepted_for_an_int_field_in_a_msgpack_body(
    routers: Callable[..., MsgspecRouter],
) -> None:
    app = city_app(routers(msgpack=True))

    reply = send_msgpack(app, "/cities", {"name": "Oslo", "population": "1"})

    assert validation_errors(reply)[0][0] == ("body", "population")


@pytest.mark.parametrize(
    ("annotation", "value", "expected"),
    [
        (list[City], [CITY, {"name": "Bergen", "population": 1}], "list"),
        (dict[str, int], {"a": 1, "b": 2}, "dict"),
        (Point, {"x": 3, "y": 4}, "dict"),
        (Cat | Dog, {"type": "dog", "good": True}, "Dog"),
        (int, 7, "int"),
        (Annotated[list[int], msgspec.Meta(max_length=2)], [1, 2], "list"),
    ],
    ids=["list of structs", "dict", "typeddict", "tagged union", "scalar", "constrained"],
)
def test_msgpack_body_is_decoded_into_the_body_type(
    routers: Callable[..., MsgspecRouter], annotation: Any, value: Any, expected: str
) -> None:
    router = routers(msgpack=True)
    endpoint = body_endpoint(annotation, lambda body: type(body).__name__)
    router.add_api_route("/bodies", endpoint, methods=["POST"])

    assert_json_reply(send_msgpack(app_with(router), "/bodies", value), expected)


@pytest.mark.parametrize(
    ("annotation", "value"),
    [
        (list[City], [{"name": "Oslo"}]),
        (dict[str, int], {"a": "1"}),
        (Point, {"x": 3}),
        (Cat | Dog, {"type": "fish"}),
        (Annotated[list[int], msgspec.Meta(max_length=2)], [1, 2, 3]),
        (int, 1.5),
        (bool, 1),
    ],
    ids=["list of structs", "dict", "typeddict", "tagged union", "constrained", "float", "bool"],
)
def test_msgpack_body_of_the_wrong_shape_gets_the_errors_json_gets(
    routers: Callable[..., MsgspecRouter], annotation: Any, value: Any
) -> None:
    router = routers(msgpack=True)
    router.add_api_route("/bodies", body_endpoint(annotation, lambda body: "ok"), methods=["POST"])
    app = app_with(router)

    as_msgpack = validation_errors(send_msgpack(app, "/bodies", value))
    as_json = validation_errors(send_json(app, "/bodies", value))

    assert as_msgpack == as_json
    assert as_msgpack[0][0][0] == "body"


def test_msgpack_binary_is_decoded_into_a_bytes_field_and_a_timestamp_into_a_datetime(
    routers: Callable[..., MsgspecRouter],
) -> None:
    router = routers(msgpack=True)

    @router.post("/blobs")
    async def blob(blob: Blob) -> dict[str, Any]:
        return {"data": list(blob.data), "year": blob.when.year}

    when = datetime.datetime(2024, 5, 6, tzinfo=datetime.UTC)
    reply = send_msgpack(app_with(router), "/blobs", Blob(b"\x00\xff", when))

    assert_json_reply(reply, {"data": [0, 255], "year": 2024})


def test_several_body_parameters_are_read_from_a_msgpack_map_keyed_by_name(
    routers: Callable[..., MsgspecRouter],
) -> None:
    router = routers(msgpack=True)

    @router.post("/parts")
    async def parts(city: City, count: Annotated[int, Body()]) -> dict[str, Any]:
        return {"name": city.name, "count": count}

    reply = send_msgpack(app_with(router), "/parts", {"city": CITY, "count": 2})

    assert_json_reply(reply, {"name": "Oslo", "count": 2})


def test_single_embedded_body_parameter_is_read_from_the_msgpack_map(
    routers: Callable[..., MsgspecRouter],
) -> None:
    router = routers(msgpack=True)

    @router.post("/cities")
    async def create(city: Annotated[City, Body(embed=True)]) -> str:
        return city.name

    assert_json_reply(send_msgpack(app_with(router), "/cities", {"city": CITY}), "Oslo")


@pytest.mark.parametrize(
    "value",
    [{"city": {"name": "Oslo", "population": "1"}, "count": 2}, {"city": CITY}, [CITY, 2], 5],
    ids=["a wrong part", "a missing part", "an array", "a scalar"],
)
def test_wrong_parts_in_a_msgpack_map_get_the_errors_json_gets(
    routers: Callable[..., MsgspecRouter], value: Any
) -> None:
    router = routers(msgpack=True)

    @router.post("/parts")
    async def parts(city: City, count: Annotated[int, Body()]) -> str:
        return "ok"

    app = app_with(router)

    assert validation_errors(send_msgpack(app, "/parts", value)) == validation_errors(
        send_json(app, "/parts", value)
    )


def test_empty_msgpack_body_is_a_missing_body_as_for_json(
    routers: Callable[..., MsgspecRouter],
) -> None:
    app = city_app(routers(msgpack=True))

    as_msgpack = send(app, "/cities", b"", content_type=MSGPACK)
    as_json = send(app, "/cities", b"", content_type=JSON)

    assert validation_errors(as_msgpack) == validation_errors(as_json) == [(("body",), "missing")]


def test_empty_msgpack_body_takes_the_body_default(routers: Callable[..., MsgspecRouter]) -> None:
    router = routers(msgpack=True)

    @router.post("/optional")
    async def optional(city: City | None = None) -> bool:
        return city is None

    assert_json_reply(send(app_with(router), "/optional", b"", content_type=MSGPACK), True)


def test_msgpack_nil_is_none_for_an_optional_body(routers: Callable[..., MsgspecRouter]) -> None:
    router = routers(msgpack=True)

    @router.post("/optional")
    async def optional(city: City | None = None) -> bool:
        return city is None

    assert_json_reply(send_msgpack(app_with(router), "/optional", None), True)


# -- malformed, too deep, too large -------------------------------------------------------------

ENCODED_CITY = msgspec.msgpack.encode(CITY)


@pytest.mark.parametrize(
    "raw",
    [
        ENCODED_CITY[:-3],
        ENCODED_CITY[:1],
        ENCODED_CITY + b"\x00",
        ENCODED_CITY + ENCODED_CITY,
        b"\xc1",
        b"\x82\xa4name\xc1",
        b"\xdb\xff\xff\xff\xff",
    ],
    ids=[
        "truncated",
        "only the map header",
        "a trailing byte",
        "a second object",
        "the never-used byte 0xc1",
        "0xc1 inside a map",
        "a str32 claiming 4 GiB",
    ],
)
def test_malformed_msgpack_is_400_with_a_json_string_detail(
    routers: Callable[..., MsgspecRouter], raw: bytes
) -> None:
    app = city_app(routers(msgpack=True))

    reply = send(app, "/cities", raw, content_type=MSGPACK)

    assert isinstance(assert_json_error(reply, 400), str)


def test_malformed_msgpack_after_an_invalid_field_is_still_a_400(
    routers: Callable[..., MsgspecRouter],
) -> None:
    app = city_app(routers(msgpack=True))
    raw = msgspec.msgpack.encode({"name": 1, "population": 1})[:-1]

    reply = send(app, "/cities", raw, content_type=MSGPACK)

    assert isinstance(assert_json_error(reply, 400), str)


def test_json_bytes_sent_as_msgpack_are_not_decoded_as_json(
    routers: Callable[..., MsgspecRouter],
) -> None:
    app = city_app(routers(msgpack=True))

    reply = send(app, "/cities", msgspec.json.encode(CITY), content_type=MSGPACK)

    assert_json_error_in_4xx(reply)


def test_msgpack_bytes_sent_as_json_are_a_400(routers: Callable[..., MsgspecRouter]) -> None:
    app = city_app(routers(msgpack=True))

    reply = send(app, "/cities", ENCODED_CITY, content_type=JSON)

    assert isinstance(assert_json_error(reply, 400), str)


@pytest.mark.parametrize("annotation", [Holder, City, Any, list[int]])
def test_deeply_nested_msgpack_arrays_are_a_4xx_in_json(
    routers: Callable[..., MsgspecRouter], annotation: Any
) -> None:
    router = routers(msgpack=True)
    router.add_api_route("/deep", body_endpoint(annotation, lambda body: "ok"), methods=["POST"])
    nested = b"\x91" * DEEP + b"\x90"
    raw = b"\x81\xa7payload" + nested if annotation is Holder else nested

    assert_json_error_in_4xx(send(app_with(router), "/deep", raw, content_type=MSGPACK))


def test_moderately_nested_msgpack_is_accepted(routers: Callable[..., MsgspecRouter]) -> None:
    router = routers(msgpack=True)

    @router.post("/holder")
    async def hold(holder: Holder) -> str:
        return "ok"

    raw = b"\x81\xa7payload" + b"\x91" * 100 + b"\x90"

    assert_json_reply(send(app_with(router), "/holder", raw, content_type=MSGPACK), "ok")


def test_msgpack_body_over_the_route_limit_is_413_with_fastapis_payload(
    routers: Callable[..., MsgspecRouter],
) -> None:
    app = city_app(routers(msgpack=True), max_body_size=len(ENCODED_CITY) - 1)

    reply = send(app, "/cities", ENCODED_CITY, content_type=MSGPACK, accept=MSGPACK)

    assert assert_json_error(reply, 413) == "Content Too Large"


def test_msgpack_body_at_the_route_limit_is_accepted(
    routers: Callable[..., MsgspecRouter],
) -> None:
    app = city_app(routers(msgpack=True), max_body_size=len(ENCODED_CITY))

    assert_json_reply(send(app, "/cities", ENCODED_CITY, content_type=MSGPACK), CITY)


# -- where errors are sent: before or after dependencies, as for JSON ----------------------------


def counting_app(
    twin: Twin, *, failing_auth: bool = False, msgpack: bool = True
) -> tuple[FastAPI, list[str]]:
    """POST /cities with a body behind a dependency that records each run."""
    runs: list[str] = []

    def dependency(authorization: Annotated[str | None, Header()] = None) -> None:
        runs.append("dependency")
        if failing_auth and authorization != "secret":
            raise HTTPException(401, "Not authenticated")

    router = twin.router_class(dependencies=[Depends(dependency)], msgpack=msgpack)
    return city_app(router), runs


def runs_for(twin: Twin, body: bytes, content_type: bytes | None, **options: Any) -> list[str]:
    app, runs = counting_app(twin, **options)
    send(app, "/cities", body, content_type=content_type)
    return runs


def test_malformed_msgpack_400_is_sent_before_dependencies_run(twin: Twin) -> None:
    app, runs = counting_app(twin)

    assert_json_error(send(app, "/cities", ENCODED_CITY[:-3], content_type=MSGPACK), 400)
    assert runs == []


def test_415_for_text_on_a_msgpack_route_is_sent_before_dependencies_run(twin: Twin) -> None:
    app, runs = counting_app(twin)

    assert_json_error(send(app, "/cities", ENCODED_CITY, content_type=b"text/plain"), 415)
    assert runs == []


def test_415_for_msgpack_on_a_route_without_it_is_sent_before_dependencies_run(
    twin: Twin,
) -> None:
    app, runs = counting_app(twin, msgpack=False)

    assert_json_error(send(app, "/cities", ENCODED_CITY, content_type=MSGPACK), 415)
    assert runs == []


@pytest.mark.parametrize(
    "value",
    [{"name": "Oslo"}, {"name": "Oslo", "population": "1"}, [1, 2], None],
    ids=["missing field", "wrong field", "an array", "nil"],
)
def test_msgpack_422_is_sent_after_dependencies_run_as_for_json(twin: Twin, value: Any) -> None:
    as_msgpack = runs_for(twin, msgspec.msgpack.encode(value), MSGPACK)
    as_json = runs_for(twin, msgspec.json.encode(value), JSON)

    assert as_msgpack == as_json == ["dependency"]


def test_missing_msgpack_body_422_is_sent_after_dependencies_run_as_for_json(twin: Twin) -> None:
    assert runs_for(twin, b"", MSGPACK) == runs_for(twin, b"", JSON) == ["dependency"]


def test_valid_msgpack_body_behind_a_dependency_reaches_the_endpoint(twin: Twin) -> None:
    app, runs = counting_app(twin)

    assert_json_reply(send(app, "/cities", ENCODED_CITY, content_type=MSGPACK), CITY)
    assert runs == ["dependency"]


def test_failing_auth_dependency_wins_over_an_invalid_msgpack_body_as_over_json(
    twin: Twin,
) -> None:
    app, _ = counting_app(twin, failing_auth=True)
    value = {"name": "Oslo"}

    as_msgpack = send(app, "/cities", msgspec.msgpack.encode(value), content_type=MSGPACK)
    as_json = send(app, "/cities", msgspec.json.encode(value), content_type=JSON)

    assert assert_json_error(as_msgpack, 401) == assert_json_error(as_json, 401)


def test_passing_auth_dependency_lets_the_msgpack_422_through(twin: Twin) -> None:
    app, _ = counting_app(twin, failing_auth=True)
    raw = msgspec.msgpack.encode({"name": "Oslo"})

    reply = send(app, "/cities", raw, content_type=MSGPACK, headers=[(b"authorization", b"secret")])

    assert validation_errors(reply) == [(("body", "population"), "missing")]


# -- responses: Accept negotiation --------------------------------------------------------------


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (None, "json"),
        (b"application/json", "json"),
        (b"application/msgpack", "msgpack"),
        (b"application/x-msgpack", "msgpack"),
        (b"application/vnd.msgpack", "msgpack"),
        (b"APPLICATION/MSGPACK", "msgpack"),
        (b"Application/X-MsgPack", "msgpack"),
        (b"*/*", "json"),
        (b"application/*", "json"),
        (b"application/json;q=0.5, application/msgpack", "msgpack"),
        (b"application/msgpack, application/json;q=0.5", "msgpack"),
        (b"application/msgpack;q=0.1, application/json", "json"),
        (b"application/json, application/msgpack;q=0.1", "json"),
        (b"application/msgpack;q=0", "json"),
        (b"application/msgpack; q=0.0", "json"),
        (b"application/*;q=0.9, application/msgpack", "msgpack"),
        (b"application/msgpack;q=0.5, */*;q=0.1", "msgpack"),
        (b"application/json;q=0, application/msgpack;q=0.1", "msgpack"),
        (b"text/html, application/msgpack;q=0.8", "msgpack"),
        (b"text/html", "json"),
        (
            b"application/msgpack;q=0, application/x-msgpack;q=0, application/vnd.msgpack;q=0",
            "json",
        ),
        (b"garbage", "json"),
        (b"", "json"),
        (b",,,", "json"),
        (b";q=0.5", "json"),
        (b"\xff\xfe\x00", "json"),
        (b"*/*;q=", "json"),
        (b"text/html;;;;", "json"),
        (b"/", "json"),
    ],
)
def test_accept_header_picks_the_response_format(
    routers: Callable[..., MsgspecRouter], accept: bytes | None, expected: str
) -> None:
    app = city_app(routers(msgpack=True))

    reply = send_json(app, "/cities", CITY, accept=accept)

    if expected == "msgpack":
        assert_msgpack_reply(reply, OSLO)
    else:
        assert_json_reply(reply, CITY)
    assert varies_on_accept(reply)


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (b"application/msgpack, application/json", "msgpack"),
        (b"application/json, application/msgpack", "json"),
        (b"*/*, application/msgpack", "msgpack"),
        (b"application/msgpack;q=0.5, application/*;q=0.5", "msgpack"),
        (b"application/json;q=0.1, */*", "msgpack"),
        (
            b"application/msgpack;q=0.2, application/msgpack;q=0.9, application/json;q=0.5",
            "msgpack",
        ),
    ],
    ids=[
        "listed first wins a tie",
        "json listed first wins a tie",
        "named type beats a wildcard of equal quality",
        "named type beats application/* of equal quality",
        "json lowered below the wildcard msgpack matches",
        "highest quality among equally specific ranges",
    ],
)
def test_accept_ties_go_to_the_more_specific_range_then_to_the_one_listed_first(
    routers: Callable[..., MsgspecRouter], accept: bytes, expected: str
) -> None:
    app = city_app(routers(msgpack=True))

    reply = send_json(app, "/cities", CITY, accept=accept)

    if expected == "msgpack":
        assert_msgpack_reply(reply, OSLO)
    else:
        assert_json_reply(reply, CITY)


@pytest.mark.parametrize(
    "accept",
    [
        b"application/msgpack;q=abc",
        b"application/msgpack;q=2",
        b"application/msgpack;q=-1",
        b"application/msgpack;q=0.5000",
        b"application/msgpack;;q=0.5",
        b"application/msgpack\xff",
        b"application/msgpack, application/msgpack;q=0",
        b'application/msgpack;x="unclosed',
        b"application/json;q=0, */*;q=0",
        b"," * 100_000,
        b"application/msgpack;q=0.5, " * 5000,
    ],
    ids=[
        "q not a number",
        "q above 1",
        "negative q",
        "four decimals",
        "empty parameter",
        "non-ASCII byte",
        "listed twice",
        "unclosed quote",
        "nothing acceptable",
        "100,000 commas",
        "5,000 entries",
    ],
)
def test_odd_accept_header_gets_json_or_msgpack_never_an_error(
    routers: Callable[..., MsgspecRouter], accept: bytes
) -> None:
    app = city_app(routers(msgpack=True))

    reply = send_json(app, "/cities", CITY, accept=accept)

    if header_values(reply, b"content-type") == [MSGPACK]:
        assert_msgpack_reply(reply, OSLO)
    else:
        assert_json_reply(reply, CITY)


def test_msgpack_request_without_accept_gets_a_json_response(
    routers: Callable[..., MsgspecRouter],
) -> None:
    app = city_app(routers(msgpack=True))

    assert_json_reply(send_msgpack(app, "/cities", CITY), CITY)


def test_json_request_accepting_msgpack_gets_a_msgpack_response(
    routers: Callable[..., MsgspecRouter],
) -> None:
    app = city_app(routers(msgpack=True))

    assert_msgpack_reply(send_json(app, "/cities", CITY, accept=MSGPACK), OSLO)


def test_msgpack_response_of_a_msgpack_route_varies_on_accept(
    routers: Callable[..., MsgspecRouter],
) -> None:
    app = city_app(routers(msgpack=True))

    reply = send_msgpack(app, "/cities", CITY, accept=MSGPACK)

    assert_msgpack_reply(reply, OSLO)
    assert varies_on_accept(reply)


def test_json_response_of_a_msgpack_route_varies_on_accept(
    routers: Callable[..., MsgspecRouter],
) -> None:
    app = city_app(routers(msgpack=True))

    reply = send_msgpack(app, "/cities", CITY)

    assert_json_reply(reply, CITY)
    assert varies_on_accept(reply)


@pytest.mark.parametrize(
    "accept", [None, b"application/msgpack", b"application/vnd.msgpack", b"*/*"]
)
def test_route_without_msgpack_answers_json_with_no_vary_header(
    routers: Callable[..., MsgspecRouter], accept: bytes | None
) -> None:
    app = city_app(routers())

    reply = send_json(app, "/cities", CITY, accept=accept)

    assert_json_reply(reply, CITY)
    assert header_values(reply, b"vary") == []


def test_json_response_of_a_msgpack_route_is_the_json_of_a_route_without_msgpack(
    routers: Callable[..., MsgspecRouter],
) -> None:
    with_msgpack = city_app(routers(msgpack=True))
    without = city_app(routers())

    reply = send_json(with_msgpack, "/cities", CITY)
    plain = send_json(without, "/cities", CITY)

    assert (reply.status, reply.body) == (plain.status, plain.body)
    assert [(k, v) for k, v in reply.headers if k != b"vary"] == plain.headers


def injected_response_router(twin: Twin) -> MsgspecRouter:
    """A msgpack router on `twin` for routes that take an injected Response."""
    return twin.router_class(msgpack=True)


UNTYPED_RESULTS: list[Any] = [
    OSLO,
    [OSLO, {"name": "Bergen", "population": 1}],
    {"a": 1, "b": [1.5, None, True]},
    None,
    "text",
    12,
    [],
]


@pytest.mark.parametrize("index", range(len(UNTYPED_RESULTS)))
def test_untyped_route_result_is_encoded_with_msgpack(
    routers: Callable[..., MsgspecRouter], index: int
) -> None:
    router = routers(msgpack=True)

    @router.get("/result")
    async def result():
        return UNTYPED_RESULTS[index]

    reply = send(app_with(router), "/result", method="GET", accept=MSGPACK)

    assert_msgpack_reply(reply, UNTYPED_RESULTS[index])


def test_validated_dict_result_is_encoded_with_msgpack(
    routers: Callable[..., MsgspecRouter],
) -> None:
    router = routers(msgpack=True)

    @router.get("/cities")
    async def cities() -> list[City]:
        return [OSLO, {"name": "Bergen", "population": 1}]  # type: ignore[list-item]

    reply = send(app_with(router), "/cities", method="GET", accept=MSGPACK)

    assert_msgpack_reply(reply, [OSLO, City("Bergen", 1)])


def test_status_code_of_the_route_is_used_for_a_msgpack_response(
    routers: Callable[..., MsgspecRouter],
) -> None:
    app = city_app(routers(msgpack=True), status_code=201)

    assert_msgpack_reply(send_msgpack(app, "/cities", CITY, accept=MSGPACK), OSLO, status=201)


def test_status_and_headers_set_on_an_injected_response_are_kept_for_msgpack(twin: Twin) -> None:
    router = injected_response_router(twin)

    @router.post("/cities", status_code=201)
    async def create(city: City, response: Response) -> City:
        response.status_code = 202
        response.headers["x-request-id"] = "abc"
        response.set_cookie("session", "s1")
        return city

    reply = send_msgpack(app_with(router), "/cities", CITY, accept=MSGPACK)

    assert_msgpack_reply(reply, OSLO, status=202)
    assert header_values(reply, b"x-request-id") == [b"abc"]
    assert any(value.startswith(b"session=s1") for value in header_values(reply, b"set-cookie"))
    assert varies_on_accept(reply)


def test_injected_response_headers_are_the_same_for_json_and_msgpack(twin: Twin) -> None:
    router = injected_response_router(twin)

    @router.post("/cities")
    async def create(city: City, response: Response) -> City:
        response.headers["x-request-id"] = "abc"
        return city

    app = app_with(router)
    ignored = {b"content-type", b"content-length"}

    def kept(reply: Reply) -> list[tuple[bytes, bytes]]:
        return sorted((k.lower(), v) for k, v in reply.headers if k.lower() not in ignored)

    as_msgpack = send_msgpack(app, "/cities", CITY, accept=MSGPACK)
    as_json = send_msgpack(app, "/cities", CITY)

    assert kept(as_msgpack) == kept(as_json)


@pytest.mark.parametrize("status", [204, 205, 304])
def test_bodyless_status_stays_bodyless_when_the_client_accepts_msgpack(
    routers: Callable[..., MsgspecRouter], status: int
) -> None:
    router = routers(msgpack=True)

    @router.post("/nothing", status_code=status)
    async def nothing() -> None:
        return None

    reply = send(app_with(router), "/nothing", accept=MSGPACK)

    assert reply.status == status
    assert reply.body == b""
    assert header_values(reply, b"content-length") == []


@pytest.mark.parametrize("status", [204, 304])
def test_bodyless_status_set_on_an_injected_response_stays_bodyless_for_msgpack(
    twin: Twin, status: int
) -> None:
    router = injected_response_router(twin)

    @router.post("/cities")
    async def create(city: City, response: Response) -> City:
        response.status_code = status
        return city

    reply = send_msgpack(app_with(router), "/cities", CITY, accept=MSGPACK)

    assert reply.status == status
    assert reply.body == b""
    assert header_values(reply, b"content-length") == []


def test_returned_response_object_is_passed_through_when_the_client_accepts_msgpack(
    routers: Callable[..., MsgspecRouter],
) -> None:
    router = routers(msgpack=True)

    @router.get("/text")
    async def text() -> City:
        return PlainTextResponse("plain", status_code=203)  # type: ignore[return-value]

    reply = send(app_with(router), "/text", method="GET", accept=MSGPACK)

    assert (reply.status, reply.body) == (203, b"plain")
    assert header_values(reply, b"content-type")[0].startswith(b"text/plain")


# -- errors stay JSON ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "content_type", "status"),
    [
        (ENCODED_CITY[:-3], MSGPACK, 400),
        (b"{", JSON, 400),
        (ENCODED_CITY, b"text/plain", 415),
        (msgspec.msgpack.encode({"name": "Oslo"}), MSGPACK, 422),
        (b'{"name": "Oslo"}', JSON, 422),
        (b"", MSGPACK, 422),
        (msgspec.msgpack.encode({"name": "x" * 100, "population": 1}), MSGPACK, 413),
    ],
    ids=["400 msgpack", "400 json", "415", "422 msgpack", "422 json", "422 missing", "413"],
)
@pytest.mark.parametrize(
    "accept", [b"application/msgpack", b"application/vnd.msgpack;q=1, */*;q=0"]
)
def test_error_bodies_stay_json_when_the_client_prefers_msgpack(
    routers: Callable[..., MsgspecRouter],
    body: bytes,
    content_type: bytes,
    status: int,
    accept: bytes,
) -> None:
    app = city_app(routers(msgpack=True), max_body_size=64)

    reply = send(app, "/cities", body, content_type=content_type, accept=accept)

    assert_json_error(reply, status)


def test_http_exception_from_the_endpoint_stays_json_when_the_client_prefers_msgpack(
    routers: Callable[..., MsgspecRouter],
) -> None:
    router = routers(msgpack=True)

    @router.post("/cities")
    async def create(city: City) -> City:
        raise HTTPException(409, "Already there")

    reply = send_msgpack(app_with(router), "/cities", CITY, accept=MSGPACK)

    assert assert_json_error(reply, 409) == "Already there"


# -- OpenAPI ----------------------------------------------------------------------------------


def documented_app(router: MsgspecRouter) -> dict[str, Any]:
    @router.post("/cities", msgpack=True)
    async def with_msgpack(city: City) -> City:
        return city

    @router.post("/plain", msgpack=False)
    async def without(city: City) -> City:
        return city

    app = app_with(router)
    install_openapi(app, router)
    document = app.openapi()
    validate(document)
    return document


def test_msgpack_route_documents_its_body_as_json_and_msgpack_with_one_schema(
    routers: Callable[..., MsgspecRouter],
) -> None:
    document = documented_app(routers())

    content = document["paths"]["/cities"]["post"]["requestBody"]["content"]
    assert sorted(content) == ["application/json", "application/msgpack"]
    assert content["application/msgpack"]["schema"] == content["application/json"]["schema"]


def test_msgpack_route_documents_its_200_response_as_json_and_msgpack_with_one_schema(
    routers: Callable[..., MsgspecRouter],
) -> None:
    document = documented_app(routers())

    content = document["paths"]["/cities"]["post"]["responses"]["200"]["content"]
    assert sorted(content) == ["application/json", "application/msgpack"]
    assert content["application/msgpack"]["schema"] == content["application/json"]["schema"]


def test_route_without_msgpack_documents_only_json(routers: Callable[..., MsgspecRouter]) -> None:
    document = documented_app(routers())

    operation = document["paths"]["/plain"]["post"]
    assert list(operation["requestBody"]["content"]) == ["application/json"]
    assert list(operation["responses"]["200"]["content"]) == ["application/json"]


def test_msgpack_router_documents_every_route_with_both_media_types(
    routers: Callable[..., MsgspecRouter],
) -> None:
    router = routers(msgpack=True)

    @router.put("/cities/{name}")
    async def update(name: str, city: City) -> City:
        return city

    app = app_with(router)
    install_openapi(app, router)
    document = app.openapi()
    validate(document)

    operation = document["paths"]["/cities/{name}"]["put"]
    assert sorted(operation["requestBody"]["content"]) == [
        "application/json",
        "application/msgpack",
    ]
    assert sorted(operation["responses"]["200"]["content"]) == [
        "application/json",
        "application/msgpack",
    ]


# -- one table on msgpack_app: status, JSON errors, both twins alike ---------------------------


def mp(value: Any) -> bytes:
    return msgspec.msgpack.encode(value)


Expect = int | Literal["4xx"]


# (name, path, content type, accept, body, expected status or "4xx")
# fmt: off
TABLE: list[tuple[str, str, bytes | None, bytes | None, bytes, Expect]] = [
    ("valid city", "/city", MSGPACK, None, mp(CITY), 200),
    ("valid city, msgpack back", "/city", MSGPACK, MSGPACK, mp(CITY), 200),
    ("valid city as JSON, msgpack back", "/city", JSON, MSGPACK, msgspec.json.encode(CITY), 200),
    ("x-msgpack", "/city", b"application/x-msgpack", None, mp(CITY), 200),
    ("vnd.msgpack, upper case", "/city", b"APPLICATION/VND.MSGPACK", None, mp(CITY), 200),
    ("list of cities", "/cities", MSGPACK, MSGPACK, mp([CITY, CITY]), 200),
    ("record with binary and timestamp", "/record", MSGPACK, MSGPACK, mp(RECORD), 200),
    ("record with a str for bytes", "/record", MSGPACK, None, mp({**RECORD, "blob": "AP8="}), 422),
    ("record with an unknown field", "/record", MSGPACK, None, mp({**RECORD, "extra": 1}), 422),
    ("record with a wrong tag", "/record", MSGPACK, None, mp({**RECORD, "pet": {"type": 1}}), 422),
    ("anything: an ext value", "/anything", MSGPACK, None, b"\xd4\x05\x00", 200),
    ("anything: nil", "/anything", MSGPACK, None, b"\xc0", 200),
    ("anything: bin", "/anything", MSGPACK, None, b"\xc4\x02ab", 200),
    ("anything: 64-bit unsigned", "/anything", MSGPACK, None, b"\xcf" + b"\xff" * 8, 200),
    ("anything: map with an int key", "/anything", MSGPACK, None, b"\x81\x01\x02", 200),
    ("optional: empty", "/optional", MSGPACK, None, b"", 200),
    ("optional: nil", "/optional", MSGPACK, None, b"\xc0", 200),
    ("parts", "/parts", MSGPACK, MSGPACK, mp({"point": {"x": 1, "y": 2}, "count": 3}), 200),
    ("parts: a wrong part", "/parts", MSGPACK, None, mp({"point": {"x": 1, "y": "2"}, "count": 3}),
     422),
    ("parts: not a map", "/parts", MSGPACK, None, mp([1, 2]), 422),
    ("parts: truncated", "/parts", MSGPACK, None, mp({"point": {"x": 1, "y": 2}, "count": 3})[:-1],
     400),
    ("parts and a bad query parameter", "/parts?page=x", MSGPACK, None,
     mp({"point": {"x": 1, "y": 2}, "count": 3}), 422),
    ("created: status and header", "/created", MSGPACK, MSGPACK, mp(CITY), 201),
    ("nothing: 204", "/nothing", MSGPACK, MSGPACK, mp(CITY), 204),
    ("town: GET, msgpack back", "/town", None, MSGPACK, b"", 200),
    ("town: GET, q-values pick JSON", "/town", None, b"application/msgpack;q=0.1, application/json",
     b"", 200),
    ("plain: msgpack body", "/plain", MSGPACK, MSGPACK, mp(CITY), 415),
    ("plain: JSON body, msgpack accepted", "/plain", JSON, MSGPACK, msgspec.json.encode(CITY), 200),
    ("empty body", "/city", MSGPACK, None, b"", 422),
    ("str for an int", "/city", MSGPACK, None, mp({"name": "a", "population": "1"}), 422),
    ("non-map for a Struct", "/city", MSGPACK, None, mp([1, 2]), 422),
    ("scalar for a Struct", "/city", MSGPACK, None, mp(1), 422),
    ("truncated", "/city", MSGPACK, None, mp(CITY)[:-2], 400),
    ("trailing bytes", "/city", MSGPACK, None, mp(CITY) + b"\x90", 400),
    ("0xc1", "/city", MSGPACK, None, b"\xc1", 400),
    ("str32 claiming 4 GiB", "/city", MSGPACK, None, b"\xdb\xff\xff\xff\xff", 400),
    ("array32 claiming 4 billion items", "/anything", MSGPACK, None, b"\xdd\xff\xff\xff\xff", 400),
    ("map32 claiming 4 billion pairs", "/anything", MSGPACK, None, b"\xdf\xff\xff\xff\xff", 400),
    ("10,000 nested arrays, untyped", "/anything", MSGPACK, None, b"\x91" * DEEP + b"\x90", "4xx"),
    ("10,000 nested arrays in Any", "/holder", MSGPACK, None,
     b"\x81\xa7payload" + b"\x91" * DEEP + b"\x90", "4xx"),
    ("10,000 nested arrays for a Struct", "/city", MSGPACK, None, b"\x91" * DEEP + b"\x90", "4xx"),
    ("10,000 nested maps, untyped", "/anything", MSGPACK, None,
     b"\x81\xa1a" * DEEP + b"\xc0", "4xx"),
    ("10,000 unclosed arrays", "/anything", MSGPACK, None, b"\x91" * DEEP, "4xx"),
    ("body over the limit", "/small", MSGPACK, None, mp({"name": "x" * SMALL_LIMIT}), 413),
    ("text/plain on a msgpack route", "/city", b"text/plain", None, mp(CITY), 415),
    ("no content type", "/city", None, None, mp(CITY), 415),
]
# fmt: on


def table_params() -> list[Any]:
    return [pytest.param(row, id=row[0]) for row in TABLE]


def send_row(app: FastAPI, tier: str, row: tuple[Any, ...]) -> Reply:
    _, path, content_type, accept, body, _ = row
    method = "GET" if path == "/town" else "POST"
    return send(
        app, f"/{tier}{path}", body, content_type=content_type, accept=accept, method=method
    )


def test_every_msgpack_app_route_runs_on_the_tier_of_its_prefix(twin: Twin) -> None:
    tiers = route_tiers(APPS[twin.name])
    assert sorted(set(tiers.values())) == sorted(TIERS)
    for path, tier in tiers.items():
        assert path.startswith(f"/{tier}/")


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("row", table_params())
def test_msgpack_row_gets_its_status_and_errors_in_json(row: Any, tier: str, twin: Twin) -> None:
    expected = row[-1]
    reply = send_row(APPS[twin.name], tier, row)

    if expected == "4xx":
        assert_json_error_in_4xx(reply)
    elif expected >= 400:
        assert_json_error(reply, expected)
    else:
        assert reply.status == expected
    if reply.status in (200, 201) and row[1] != "/plain":
        assert varies_on_accept(reply)
        wanted = MSGPACK if row[3] == MSGPACK else JSON
        assert header_values(reply, b"content-type") == [wanted]
    if row[1] == "/plain":
        assert header_values(reply, b"vary") == []


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("row", table_params())
def test_msgpack_row_gets_the_same_bytes_from_both_twins(row: Any, tier: str) -> None:
    assert send_row(APPS["compiled"], tier, row).sent == send_row(APPS["pure"], tier, row).sent


@pytest.mark.parametrize("row", table_params())
def test_msgpack_row_gets_the_same_answer_on_both_tiers(row: Any, twin: Twin) -> None:
    direct, delegated = (send_row(APPS[twin.name], tier, row) for tier in TIERS)
    assert direct.sent == delegated.sent
