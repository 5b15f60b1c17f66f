"""The two tiers: which routes bypass FastAPI's request handler, and that both look alike.

A route whose parameters and dependencies the request path can take (body, path, query,
header and cookie parameters, dependencies at any level, Request, Response,
BackgroundTasks, Security) runs on the direct tier; a dependency FastAPI must solve (a
Pydantic parameter model, say) keeps it on the delegated tier. Clients must not be able
to tell the tiers apart.
"""

from typing import Annotated, Any

import msgspec
import pytest
from fastapi import (
    BackgroundTasks,
    Cookie,
    Depends,
    FastAPI,
    Header,
    HTTPException,
    Request,
    Response,
    Security,
)
from fastapi.exceptions import ResponseValidationError
from fastapi.responses import PlainTextResponse
from fastapi.security import APIKeyHeader
from fastapi.testclient import TestClient
from starlette.requests import HTTPConnection
from support import delegating_dependency
from twins import Twin

from msgspec_fastapi import MsgspecRoute, MsgspecRouter


class City(msgspec.Struct):
    name: str
    population: Annotated[int, msgspec.Meta(ge=0)]


OSLO = {"name": "Oslo", "population": 1}


def no_op() -> None:
    pass


api_key = APIKeyHeader(name="x-key", auto_error=False)


def only_route(router: MsgspecRouter) -> MsgspecRoute:
    (route,) = router.routes
    assert isinstance(route, MsgspecRoute)
    return route


# -- which tier --------------------------------------------------------------------------------


def test_route_with_body_and_plain_parameters_runs_direct() -> None:
    router = MsgspecRouter()

    @router.post("/cities/{country}")
    async def create(
        country: str,
        city: City,
        dry_run: bool = False,
        x_trace: Annotated[str | None, Header()] = None,
        session: Annotated[str | None, Cookie()] = None,
    ) -> City:
        return city

    assert only_route(router).tier == "direct"


def test_route_without_parameters_runs_direct() -> None:
    router = MsgspecRouter()

    @router.get("/cities")
    def cities() -> list[City]:
        return []

    assert only_route(router).tier == "direct"


def test_untyped_route_runs_direct() -> None:
    router = MsgspecRouter()

    @router.get("/ping")
    async def ping():
        return {"pong": True}

    assert only_route(router).tier == "direct"


def test_route_whose_response_fastapi_renders_runs_delegated() -> None:
    # A custom response_class on an untyped route is FastAPI's to render, so FastAPI's
    # handler stays in the path even though nothing needs solving.
    router = MsgspecRouter()

    @router.post("/greet", response_class=PlainTextResponse)
    async def greet(city: City):
        return f"hello {city.name}"

    assert only_route(router).tier == "delegated"


async def with_depends(city: City, _: Annotated[None, Depends(no_op)]) -> City:
    return city


async def with_request(city: City, request: Request) -> City:
    return city


async def with_response(city: City, response: Response) -> City:
    return city


async def with_background_tasks(city: City, tasks: BackgroundTasks) -> City:
    return city


async def with_connection(city: City, connection: HTTPConnection) -> City:
    return city


async def with_security(city: City, key: Annotated[str | None, Security(api_key)]) -> City:
    return city


@pytest.mark.parametrize(
    "endpoint",
    [
        with_depends,
        with_request,
        with_response,
        with_background_tasks,
        with_connection,
        with_security,
    ],
)
def test_route_with_a_special_parameter_runs_direct(endpoint: Any) -> None:
    router = MsgspecRouter()

    router.add_api_route("/cities", endpoint, methods=["POST"])

    assert only_route(router).tier == "direct"


@pytest.mark.parametrize(
    "endpoint",
    [
        with_depends,
        with_request,
        with_response,
        with_background_tasks,
        with_connection,
        with_security,
    ],
)
def test_route_with_a_special_parameter_still_decodes_the_body(endpoint: Any, twin: Twin) -> None:
    router = twin.router_class()
    router.add_api_route("/cities", endpoint, methods=["POST"])
    app = FastAPI()
    app.include_router(router)
    client = TestClient(app)

    assert client.post("/cities", json=OSLO).json() == OSLO
    assert client.post("/cities", json={"name": "Oslo", "population": "1"}).status_code == 422


def test_route_with_a_route_dependency_runs_direct() -> None:
    router = MsgspecRouter()

    @router.post("/cities", dependencies=[Depends(no_op)])
    async def create(city: City) -> City:
        return city

    assert only_route(router).tier == "direct"


def test_routes_of_a_router_with_dependencies_run_direct() -> None:
    router = MsgspecRouter(dependencies=[Depends(no_op)])

    @router.post("/cities")
    async def create(city: City) -> City:
        return city

    assert only_route(router).tier == "direct"


def test_dependency_fastapi_must_solve_makes_the_route_delegated() -> None:
    router = MsgspecRouter()

    @router.post("/cities", dependencies=[Depends(no_op), Depends(delegating_dependency)])
    async def create(city: City) -> City:
        return city

    assert only_route(router).tier == "delegated"


# -- the tier used at request time -----------------------------------------------------------------


def test_direct_route_does_not_go_through_fastapi_dependency_solving(
    solved: list[Any], twin: Twin
) -> None:
    router = twin.router_class()

    @router.post("/cities")
    async def create(city: City) -> City:
        return city

    app = FastAPI()
    app.include_router(router)

    assert TestClient(app).post("/cities", json=OSLO).json() == OSLO
    assert solved == []


def test_delegated_route_goes_through_fastapi_dependency_solving(
    solved: list[Any], twin: Twin
) -> None:
    router = twin.router_class(dependencies=[Depends(delegating_dependency)])

    @router.post("/cities")
    async def create(city: City) -> City:
        return city

    app = FastAPI()
    app.include_router(router)

    assert TestClient(app).post("/cities", json=OSLO).json() == OSLO
    assert solved == [only_route(router).dependant.call]


def test_route_with_dependencies_does_not_go_through_fastapi_dependency_solving(
    solved: list[Any], twin: Twin
) -> None:
    router = twin.router_class(dependencies=[Depends(no_op)])

    @router.post("/cities")
    async def create(city: City, tasks: BackgroundTasks) -> City:
        return city

    app = FastAPI(dependencies=[Depends(no_op)])
    app.include_router(router, dependencies=[Depends(no_op)])

    assert TestClient(app).post("/cities", json=OSLO).json() == OSLO
    assert solved == []


def test_app_dependency_fastapi_must_solve_makes_a_route_delegated_where_it_is_included(
    solved: list[Any], twin: Twin
) -> None:
    router = twin.router_class()

    @router.post("/cities")
    async def create(city: City) -> City:
        return city

    app = FastAPI(dependencies=[Depends(delegating_dependency)])
    app.include_router(router)

    assert TestClient(app).post("/cities", json=OSLO).json() == OSLO
    assert solved == [only_route(router).dependant.call]


def test_each_inclusion_gets_its_own_tier(solved: list[Any], twin: Twin) -> None:
    router = twin.router_class()

    @router.post("/cities")
    async def create(city: City) -> City:
        return city

    app = FastAPI()
    app.include_router(router, prefix="/open")
    app.include_router(router, prefix="/guarded", dependencies=[Depends(delegating_dependency)])
    client = TestClient(app)

    assert client.post("/open/cities", json=OSLO).json() == OSLO
    assert solved == []
    assert client.post("/guarded/cities", json=OSLO).json() == OSLO
    assert solved == [only_route(router).dependant.call]


def test_nested_direct_route_does_not_go_through_fastapi_dependency_solving(
    solved: list[Any],
    twin: Twin,
) -> None:
    inner = twin.router_class(prefix="/inner")

    @inner.post("/cities/{city_id}")
    async def create(city_id: int, city: City) -> City:
        return city

    outer = twin.router_class(prefix="/outer")
    outer.include_router(inner)
    app = FastAPI()
    app.include_router(outer, prefix="/api")

    assert TestClient(app).post("/api/outer/inner/cities/1", json=OSLO).json() == OSLO
    assert solved == []


# -- clients cannot tell the tiers apart ---------------------------------------------------------


def twin_app(twin: Twin) -> TestClient:
    """The same endpoint at /direct/..., /planned/... (direct, with a dependency) and
    /delegated/..."""

    async def create(
        city_id: int,
        city: City,
        limit: Annotated[int, msgspec.Meta(ge=1)] = 10,
        x_flag: Annotated[bool, Header()] = False,
    ) -> City:
        if city.name == "conflict":
            raise HTTPException(409, "exists", headers={"x-reason": "duplicate"})
        if city.name == "invalid":
            return {"name": "invalid"}  # type: ignore[return-value]
        if city.name == "raw":
            return PlainTextResponse("raw", status_code=202)  # type: ignore[return-value]
        return city

    async def listing(city_id: int) -> list[City]:
        return [City(name="Oslo", population=city_id)]

    direct = twin.router_class(prefix="/direct")
    planned = twin.router_class(prefix="/planned", dependencies=[Depends(no_op)])
    delegated = twin.router_class(
        prefix="/delegated", dependencies=[Depends(delegating_dependency)]
    )
    for router in (direct, planned, delegated):
        router.add_api_route("/cities/{city_id}", create, methods=["POST"], status_code=201)
        router.add_api_route("/cities/{city_id}", listing, methods=["GET"])
    assert only_route_tiers(direct) == only_route_tiers(planned) == {"direct"}
    assert only_route_tiers(delegated) == {"delegated"}
    app = FastAPI()
    app.include_router(direct)
    app.include_router(planned)
    app.include_router(delegated)
    return TestClient(app)


def only_route_tiers(router: MsgspecRouter) -> set[str]:
    return {route.tier for route in router.routes}  # type: ignore[attr-defined]


def json_post(body: Any) -> dict[str, Any]:
    return {"content": msgspec.json.encode(body), "headers": {"content-type": "application/json"}}


REQUESTS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "created": ("POST", "/cities/1?limit=2", json_post(OSLO)),
    "listed": ("GET", "/cities/3", {}),
    "unsupported media type": (
        "POST",
        "/cities/1",
        {"content": b"{}", "headers": {"content-type": "text/plain"}},
    ),
    "no content type": ("POST", "/cities/1", {"content": msgspec.json.encode(OSLO)}),
    "malformed json": (
        "POST",
        "/cities/1",
        {"content": b'{"name": ', "headers": {"content-type": "application/json"}},
    ),
    "too deep": (
        "POST",
        "/cities/1",
        {"content": b"[" * 3000 + b"]" * 3000, "headers": {"content-type": "application/json"}},
    ),
    "missing body": ("POST", "/cities/1", {}),
    "invalid body": ("POST", "/cities/1", json_post({"name": "Oslo", "population": "1"})),
    "constraint in body": ("POST", "/cities/1", json_post({"name": "Oslo", "population": -1})),
    "invalid path": ("POST", "/cities/one", json_post(OSLO)),
    "invalid query": ("POST", "/cities/1?limit=0", json_post(OSLO)),
    "invalid header": (
        "POST",
        "/cities/1",
        {**json_post(OSLO), "headers": {"content-type": "application/json", "x-flag": "maybe"}},
    ),
    "invalid parameters and body": ("POST", "/cities/x?limit=x", json_post({"name": 1})),
    "http exception": ("POST", "/cities/1", json_post({"name": "conflict", "population": 1})),
    "returned response": ("POST", "/cities/1", json_post({"name": "raw", "population": 1})),
    "wrong method": ("PUT", "/cities/1", json_post(OSLO)),
}


@pytest.mark.parametrize("case", list(REQUESTS))
def test_both_tiers_give_the_same_response(case: str, twin: Twin) -> None:
    method, url, options = REQUESTS[case]
    client = twin_app(twin)

    direct = client.request(method, "/direct" + url, **options)
    planned = client.request(method, "/planned" + url, **options)
    delegated = client.request(method, "/delegated" + url, **options)

    for response in (planned, delegated):
        assert direct.status_code == response.status_code
        assert direct.headers.items() == response.headers.items()
        assert direct.content == response.content


def test_invalid_response_raises_the_same_response_validation_error_on_both_tiers(
    twin: Twin,
) -> None:
    client = twin_app(twin)
    body = json_post({"name": "invalid", "population": 1})
    errors = {}
    for prefix in ("/direct", "/planned", "/delegated"):
        with pytest.raises(ResponseValidationError) as raised:
            client.post(prefix + "/cities/1", **body)
        errors[prefix] = raised.value.errors()

    assert errors["/direct"] == errors["/planned"] == errors["/delegated"]
    assert [error["type"] for error in errors["/direct"]] == ["value_error.msgspec"]
