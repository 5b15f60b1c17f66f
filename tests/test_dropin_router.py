"""MsgspecRouter in place of APIRouter: declarations FastAPI accepts run as FastAPI runs them.

Each behaviour is checked on both twins, on both tiers where a route can run on either,
and against an APIRouter given the same declaration (`answers`).
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

import msgspec
import pydantic
import pytest
from fastapi import APIRouter, Body, Depends, FastAPI, Query, Request, Response
from fastapi.exceptions import ResponseValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse
from fastapi.routing import APIRoute, iter_route_contexts
from fastapi.testclient import TestClient
from openapi_spec_validator import validate
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send
from support import app_including, tier_router
from twins import Twin

from msgspec_fastapi import MsgspecJSONResponse, MsgspecRouter, install_openapi
from msgspec_fastapi._shared import DIRECT_ATTR
from msgspec_fastapi.router import MsgspecRoute


class City(msgspec.Struct):
    name: str
    population: int


class PydanticCity(pydantic.BaseModel):
    name: str
    population: int


class Note(pydantic.BaseModel):
    text: str


OSLO = {"name": "Oslo", "population": 709_037}
JSON = {"content-type": "application/json"}


class LevelResponse(JSONResponse):
    media_type = "application/x-level"


class VendorResponse(MsgspecJSONResponse):
    media_type = "application/vnd.cities+json"


TIERS = ["direct", "delegated"]


def answers(response: Any) -> tuple[int, str, bytes]:
    return response.status_code, response.headers["content-type"], response.content


def client(app: FastAPI, twin: Twin, **options: Any) -> TestClient:
    twin.install_dispatch(app)
    return TestClient(app, **options)


# -- default_response_class from where the route is included -------------------------------------


@pytest.mark.parametrize(
    "response_class", [PlainTextResponse, HTMLResponse, LevelResponse], ids=lambda c: c.__name__
)
@pytest.mark.parametrize("tier", TIERS)
def test_untyped_route_answers_with_the_inclusions_default_response_class(
    twin: Twin, tier: str, response_class: type[Response]
) -> None:
    def build(router: APIRouter) -> FastAPI:
        @router.get("/greeting")
        async def greeting() -> Any:
            return "hello" if response_class is not LevelResponse else {"hello": True}

        return app_including(router, prefix="/api", default_response_class=response_class)

    ours = client(build(tier_router(twin, tier)), twin).get("/api/greeting")
    theirs = TestClient(build(APIRouter())).get("/api/greeting")

    assert answers(ours) == answers(theirs)
    assert ours.headers["content-type"].startswith(response_class.media_type or "")


@pytest.mark.parametrize("tier", TIERS)
def test_untyped_route_answers_with_an_enclosing_routers_default_response_class(
    twin: Twin, tier: str
) -> None:
    def build(router: APIRouter, parent: APIRouter) -> FastAPI:
        @router.get("/greeting")
        async def greeting() -> str:
            return "hello"

        parent.include_router(router, prefix="/inner")
        return app_including(parent, prefix="/api")

    ours = client(
        build(tier_router(twin, tier), tier_router(twin, default_response_class=HTMLResponse)),
        twin,
    ).get("/api/inner/greeting")
    theirs = TestClient(build(APIRouter(), APIRouter(default_response_class=HTMLResponse))).get(
        "/api/inner/greeting"
    )

    assert answers(ours) == answers(theirs)
    assert ours.text == "hello"


@pytest.mark.parametrize("tier", TIERS)
def test_one_route_included_twice_answers_with_each_inclusions_class_on_its_own_tier(
    twin: Twin, tier: str
) -> None:
    router = tier_router(twin, tier)

    @router.get("/greeting")
    async def greeting() -> str:
        return "hello"

    app = app_including(router, prefix="/json")
    app.include_router(router, prefix="/text", default_response_class=PlainTextResponse)
    test_client = client(app, twin)

    assert answers(test_client.get("/json/greeting")) == (200, "application/json", b'"hello"')
    assert answers(test_client.get("/text/greeting")) == (
        200,
        "text/plain; charset=utf-8",
        b"hello",
    )
    contexts = {context.path: context for context in iter_route_contexts(app.routes)}
    # The request path sends the JSON ones itself; FastAPI renders the class's.
    assert (getattr(contexts["/json/greeting"], DIRECT_ATTR, None) is not None) == (
        tier == "direct"
    )
    assert getattr(contexts["/text/greeting"], DIRECT_ATTR, None) is None


@pytest.mark.parametrize("tier", TIERS)
def test_inclusions_msgspec_response_class_labels_responses_with_its_media_type(
    twin: Twin, tier: str
) -> None:
    router = tier_router(twin, tier)

    @router.get("/city")
    async def city() -> City:
        return City(**OSLO)

    app = app_including(router, default_response_class=VendorResponse)
    response = client(app, twin).get("/city")

    assert answers(response) == (200, VendorResponse.media_type, msgspec.json.encode(OSLO))


def test_typed_route_is_rendered_by_the_inclusions_response_class_as_fastapi_does(
    twin: Twin,
) -> None:
    def build(router: APIRouter, city_type: Any) -> FastAPI:
        async def city() -> Any:
            return city_type(**OSLO)

        city.__annotations__["return"] = city_type
        router.add_api_route("/city", city)
        return app_including(router, default_response_class=LevelResponse)

    ours = client(build(tier_router(twin), City), twin).get("/city")
    theirs = TestClient(build(APIRouter(), PydanticCity)).get("/city")

    assert answers(ours) == answers(theirs)
    assert ours.headers["content-type"] == LevelResponse.media_type


def test_response_model_options_apply_before_the_response_class_renders(twin: Twin) -> None:
    class Town(msgspec.Struct):
        name: str
        mayor: str | None = None

    class PydanticTown(pydantic.BaseModel):
        name: str
        mayor: str | None = None

    def build(router: APIRouter, town_type: Any) -> FastAPI:
        async def town() -> Any:
            return town_type(name="Oslo")

        town.__annotations__["return"] = town_type
        router.add_api_route("/town", town, response_model_exclude_none=True)
        return app_including(router, default_response_class=LevelResponse)

    ours = client(build(tier_router(twin), Town), twin).get("/town")
    theirs = TestClient(build(APIRouter(), PydanticTown)).get("/town")

    assert answers(ours) == answers(theirs)
    assert ours.json() == {"name": "Oslo"}


def test_typed_route_result_is_checked_before_the_response_class_renders_it(twin: Twin) -> None:
    router = tier_router(twin)

    @router.get("/city")
    async def city() -> City:
        return {"name": "Oslo", "population": "many"}  # type: ignore[return-value]

    app = app_including(router, default_response_class=LevelResponse)

    with pytest.raises(ResponseValidationError):
        client(app, twin).get("/city")


def test_routes_own_response_class_wins_over_the_inclusions(twin: Twin) -> None:
    router = tier_router(twin)

    @router.get("/greeting", response_class=PlainTextResponse)
    async def greeting() -> str:
        return "hello"

    app = app_including(router, default_response_class=HTMLResponse)

    assert client(app, twin).get("/greeting").headers["content-type"].startswith("text/plain")


def test_typed_route_with_its_own_rendering_class_is_rendered_by_it(twin: Twin) -> None:
    class Rendering(MsgspecJSONResponse):
        def render(self, content: Any) -> bytes:
            return b"rendered:" + msgspec.json.encode(content)

    router = tier_router(twin)

    @router.get("/cities", response_class=Rendering)
    async def cities() -> list[City]:
        return [City(**OSLO)]

    app = app_including(router)

    assert client(app, twin).get("/cities").content == b"rendered:" + msgspec.json.encode([OSLO])


# -- custom route classes -------------------------------------------------------------------------


Handler = Callable[[Request], Coroutine[Any, Any, Response]]


def timed(handler: Handler) -> Handler:
    """`handler`, its responses marked with an `x-timed` header."""

    async def timed_handler(request: Request) -> Response:
        response = await handler(request)
        response.headers["x-timed"] = "yes"
        return response

    return timed_handler


class TimedRoute(APIRoute):
    """FastAPI's tutorial route class: a handler of its own around FastAPI's."""

    def get_route_handler(self) -> Handler:
        return timed(super().get_route_handler())


class GzipRequest(Request):
    async def body(self) -> bytes:
        if not hasattr(self, "_body"):
            body = await super().body()
            if "gzip" in self.headers.getlist("Content-Encoding"):
                body = gzip.decompress(body)
            self._body = body
        return self._body


class GzipRoute(APIRoute):
    """FastAPI's tutorial route class: a Request class of its own."""

    def get_route_handler(self) -> Handler:
        handler = super().get_route_handler()

        async def unzipping(request: Request) -> Response:
            return await handler(GzipRequest(request.scope, request.receive))

        return unzipping


@pytest.mark.parametrize("tier", TIERS)
def test_apiroute_subclass_as_route_class_keeps_its_handler_around_a_msgspec_body(
    twin: Twin, tier: str
) -> None:
    router = tier_router(twin, tier, route_class=TimedRoute)

    @router.post("/cities")
    async def create(city: City) -> City:
        return city

    app = app_including(router)
    response = client(app, twin).post("/cities", json=OSLO)

    assert (response.status_code, response.json()) == (200, OSLO)
    assert response.headers["x-timed"] == "yes"
    assert isinstance(router.routes[0], TimedRoute)
    assert isinstance(router.routes[0], twin.route_class)
    assert router.route_class is TimedRoute


def test_route_class_with_its_own_request_class_has_the_body_read_through_it(twin: Twin) -> None:
    router = tier_router(twin, route_class=GzipRoute)

    @router.post("/sum")
    async def total(numbers: Annotated[list[int], Body()]) -> int:
        return sum(numbers)

    app = app_including(router)
    response = client(app, twin).post(
        "/sum",
        content=gzip.compress(b"[1, 2, 3]"),
        headers={"content-type": "application/json", "content-encoding": "gzip"},
    )

    assert (response.status_code, response.json()) == (200, 6)


def test_route_class_with_its_own_handler_keeps_the_body_limit(twin: Twin) -> None:
    router = tier_router(twin, route_class=TimedRoute, max_body_size=8)

    @router.post("/sum")
    async def total(numbers: Annotated[list[int], Body()]) -> int:
        return sum(numbers)

    app = app_including(router)
    test_client = client(app, twin)

    assert test_client.post("/sum", content=b"[1,2,3]", headers=JSON).json() == 6
    assert test_client.post("/sum", content=b"[1,2,3,4,5]", headers=JSON).status_code == 413


@pytest.mark.parametrize("dispatch", [False, True], ids=["fastapi-loop", "dispatch"])
def test_route_class_with_its_own_matches_is_asked_for_every_request(
    twin: Twin, dispatch: bool
) -> None:
    class HeaderRoute(APIRoute):
        def matches(self, scope: Scope) -> tuple[Match, Scope]:
            if (b"x-match", b"yes") not in scope.get("headers", []):
                return Match.NONE, {}
            return super().matches(scope)

    router = tier_router(twin, route_class=HeaderRoute)

    @router.get("/items")
    async def items() -> list[int]:
        return [1]

    app = app_including(router, prefix="/api")
    test_client = client(app, twin) if dispatch else TestClient(app)

    assert test_client.get("/api/items").status_code == 404
    assert test_client.get("/api/items", headers={"x-match": "yes"}).json() == [1]


@pytest.mark.parametrize("dispatch", [False, True], ids=["fastapi-loop", "dispatch"])
@pytest.mark.parametrize("tier", TIERS)
def test_route_class_with_its_own_handle_is_called_for_its_requests(
    twin: Twin, tier: str, dispatch: bool
) -> None:
    handled: list[str] = []

    class TrackingRoute(APIRoute):
        async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
            handled.append(scope["path"])
            await super().handle(scope, receive, send)

    router = tier_router(twin, tier, route_class=TrackingRoute)

    @router.post("/cities")
    async def create(city: City) -> City:
        return city

    app = app_including(router, prefix="/api")
    test_client = client(app, twin) if dispatch else TestClient(app)

    assert test_client.post("/api/cities", json=OSLO).json() == OSLO
    assert handled == ["/api/cities"]
    assert router.routes[0].tier == tier  # type: ignore[attr-defined]


def test_msgspec_route_subclass_with_its_own_handler_runs_it_for_a_route_that_could_run_direct(
    twin: Twin,
) -> None:
    class TimedMsgspecRoute(twin.route_class):  # type: ignore[name-defined,misc]
        def get_route_handler(self) -> Handler:
            return timed(super().get_route_handler())

    router = twin.router_class(route_class=TimedMsgspecRoute)

    @router.post("/cities")
    async def create(city: City) -> City:
        return city

    app = app_including(router)
    response = client(app, twin).post("/cities", json=OSLO)

    assert (response.json(), response.headers["x-timed"]) == (OSLO, "yes")
    assert router.routes[0].tier == "delegated"  # type: ignore[attr-defined]


def test_route_class_override_may_be_an_apiroute_subclass(twin: Twin) -> None:
    router = tier_router(twin)

    async def create(city: City) -> City:
        return city

    router.add_api_route("/cities", create, methods=["POST"], route_class_override=TimedRoute)
    app = app_including(router)

    assert client(app, twin).post("/cities", json=OSLO).headers["x-timed"] == "yes"


def test_integration_wrapping_the_endpoint_while_the_handler_is_built_sees_every_call(
    twin: Twin, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fastapi.routing

    original = fastapi.routing.get_request_handler
    calls: list[str] = []

    def wrapping_get_request_handler(*args: Any, **kwargs: Any) -> Any:
        # As tracing integrations do: an async endpoint wrapped by an async one.
        call = kwargs["dependant"].call

        async def traced(**values: Any) -> Any:
            calls.append("traced")
            return await call(**values)

        kwargs["dependant"].call = traced
        return original(*args, **kwargs)

    monkeypatch.setattr(fastapi.routing, "get_request_handler", wrapping_get_request_handler)
    router = tier_router(twin)

    @router.post("/cities")
    async def create(city: City) -> City:
        return city

    app = app_including(router)

    assert client(app, twin).post("/cities", json=OSLO).json() == OSLO
    assert calls == ["traced"]


def test_route_class_that_is_no_apiroute_is_refused() -> None:
    with pytest.raises(TypeError, match="APIRoute subclass"):
        MsgspecRouter(route_class=object)  # type: ignore[arg-type]


# -- declarations FastAPI accepts that run delegated ----------------------------------------------


@pytest.mark.parametrize("url", ["https://example.com/hook", "not a url"])
def test_pydantic_only_parameter_type_is_validated_as_fastapi_does(twin: Twin, url: str) -> None:
    def build(router: APIRouter) -> FastAPI:
        @router.get("/hooks")
        async def hooks(callback_url: pydantic.AnyUrl) -> Any:
            return {"url": str(callback_url)}

        return app_including(router)

    router = tier_router(twin)
    ours = client(build(router), twin).get("/hooks", params={"callback_url": url})
    theirs = TestClient(build(APIRouter())).get("/hooks", params={"callback_url": url})

    assert (ours.status_code, ours.json()) == (theirs.status_code, theirs.json())
    assert router.routes[0].tier == "delegated"  # type: ignore[attr-defined]


@pytest.mark.parametrize("url", ["https://example.com/hook", "not a url"])
def test_pydantic_only_parameter_beside_a_msgspec_body_is_validated_as_fastapi_does(
    twin: Twin, url: str
) -> None:
    def build(router: APIRouter, city_type: Any) -> FastAPI:
        async def create(city: Any, callback_url: Annotated[pydantic.AnyUrl, Query()]) -> Any:
            return {"city": city.name, "url": str(callback_url)}

        create.__annotations__["city"] = city_type
        router.add_api_route("/cities", create, methods=["POST"])
        return app_including(router)

    query = {"callback_url": url}
    ours = client(build(tier_router(twin), City), twin).post("/cities", params=query, json=OSLO)
    theirs = TestClient(build(APIRouter(), PydanticCity)).post("/cities", params=query, json=OSLO)

    assert (ours.status_code, ours.json()) == (theirs.status_code, theirs.json())


def test_msgspec_body_beside_a_pydantic_body_reads_both_embedded_by_name(twin: Twin) -> None:
    router = tier_router(twin)

    @router.post("/cities")
    async def create(city: City, note: Note) -> Any:
        return {"city": city.name, "note": note.text}

    app = app_including(router)
    test_client = client(app, twin)

    response = test_client.post("/cities", json={"city": OSLO, "note": {"text": "cold"}})
    assert (response.status_code, response.json()) == (200, {"city": "Oslo", "note": "cold"})
    assert router.routes[0].tier == "delegated"  # type: ignore[attr-defined]


def test_mixed_body_errors_list_fastapis_and_ours_located_by_name(twin: Twin) -> None:
    router = tier_router(twin)

    @router.post("/cities")
    async def create(city: City, note: Note) -> None: ...

    app = app_including(router)

    response = client(app, twin).post("/cities", json={"city": {"name": "Oslo"}, "note": {}})
    assert response.status_code == 422
    locs = [error["loc"] for error in response.json()["detail"]]
    assert locs == [["body", "note", "text"], ["body", "city", "population"]]


def test_mixed_body_is_documented_as_fastapis_body_model_and_ours_in_one_object(
    twin: Twin,
) -> None:
    router = tier_router(twin)

    @router.post("/cities")
    async def create(city: City, note: Note) -> None: ...

    app = app_including(router, prefix="/api")
    install_openapi(app, router)
    document = TestClient(app).get("/openapi.json").json()
    validate(document)

    request_body = document["paths"]["/api/cities"]["post"]["requestBody"]
    schema = request_body["content"]["application/json"]["schema"]
    fastapi_model = schema["$ref"].removeprefix("#/components/schemas/")
    assert request_body["required"] is True
    assert list(document["components"]["schemas"][fastapi_model]["properties"]) == ["note"]
    assert schema["allOf"] == [
        {
            "type": "object",
            "properties": {"city": {"$ref": "#/components/schemas/City"}},
            "required": ["city"],
        }
    ]


def test_single_msgspec_body_beside_an_inclusions_body_dependency_is_read_by_name(
    twin: Twin,
) -> None:
    def note_text(note: Annotated[str, Body()]) -> str:
        return note

    router = tier_router(twin)

    @router.post("/cities")
    async def create(city: City, request: Request) -> Any:
        return {"city": city.name}

    app = app_including(router, dependencies=[Depends(note_text)])
    test_client = client(app, twin)

    response = test_client.post("/cities", json={"city": OSLO, "note": "cold"})
    assert (response.status_code, response.json()) == (200, {"city": "Oslo"})
    missing = test_client.post("/cities", json={"city": OSLO})
    assert [error["loc"] for error in missing.json()["detail"]] == [["body", "note"]]


# -- the endpoint is the user's -------------------------------------------------------------------


class RecordScope:
    """ASGI middleware keeping the last scope, as routing left it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.scope: Scope = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scope = scope
        await self.app(scope, receive, send)


@pytest.mark.parametrize("dispatch", [False, True], ids=["fastapi-loop", "dispatch"])
@pytest.mark.parametrize("tier", TIERS)
def test_route_context_and_scope_show_the_users_endpoint(
    twin: Twin, tier: str, dispatch: bool
) -> None:
    router = tier_router(twin, tier)

    async def create(city: City) -> City:
        return city

    router.add_api_route("/cities", create, methods=["POST"])
    app = app_including(router, prefix="/api")
    recorder = RecordScope(app)
    if dispatch:
        twin.install_dispatch(app)

    assert TestClient(recorder).post("/api/cities", json=OSLO).json() == OSLO
    assert recorder.scope["endpoint"] is create
    assert router.routes[0].endpoint is create  # type: ignore[attr-defined]
    [context] = [c for c in iter_route_contexts(app.routes) if c.path == "/api/cities"]
    assert context.endpoint is create
    assert [context.endpoint for context in iter_route_contexts(router.routes)] == [create]
    assert router.routes[0].tier == tier  # type: ignore[attr-defined]


def test_route_outside_an_inclusion_sets_the_users_endpoint_in_the_scope(twin: Twin) -> None:
    async def create(city: City) -> City:
        return city

    router = tier_router(twin)
    router.add_api_route("/cities", create, methods=["POST"])
    route = router.routes[0]
    app = FastAPI()
    app.router.routes.append(route)
    recorder = RecordScope(app)

    assert TestClient(recorder).post("/cities", json=OSLO).json() == OSLO
    assert recorder.scope["endpoint"] is create
    assert isinstance(route, MsgspecRoute)
