"""MsgspecRouter inside real applications: routers, dependencies, middleware, handlers.

Tests taking the `router` fixture run on both the direct and the delegated tier.
"""

import inspect
from collections.abc import Iterator
from typing import Annotated, Any

import msgspec
import pydantic
import pytest
from fastapi import (
    APIRouter,
    BackgroundTasks,
    Depends,
    FastAPI,
    Header,
    HTTPException,
    Request,
)
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException as StarletteHTTPException
from support import client_for, delegating_dependency
from twins import Twin

from msgspec_fastapi import MsgspecRouter


class City(msgspec.Struct):
    name: str
    population: int


OSLO = {"name": "Oslo", "population": 1}


class Teapot(Exception):
    pass


def app_with(router: MsgspecRouter, **include_options: object) -> FastAPI:
    app = FastAPI()
    app.include_router(router, **include_options)  # type: ignore[arg-type]
    return app


# -- nested routers -----------------------------------------------------------------------------


def test_nested_routers_with_prefixes_serve_the_route(router: MsgspecRouter, twin: Twin) -> None:
    @router.post("/cities/{city_id}")
    async def create(city_id: int, city: City) -> dict[str, Any]:
        return {"id": city_id, "name": city.name}

    outer = twin.router_class(prefix="/outer")
    outer.include_router(router, prefix="/inner")
    api = APIRouter(prefix="/api")
    api.include_router(outer)
    app = FastAPI()
    app.include_router(api, prefix="/v1")

    response = TestClient(app).post("/v1/api/outer/inner/cities/7", json=OSLO)

    assert response.json() == {"id": 7, "name": "Oslo"}


def test_path_parameter_declared_in_a_prefix_is_extracted(router: MsgspecRouter) -> None:
    @router.get("/cities")
    async def cities(tenant: str) -> dict[str, str]:
        return {"tenant": tenant}

    app = app_with(router, prefix="/tenants/{tenant}")

    assert TestClient(app).get("/tenants/acme/cities").json() == {"tenant": "acme"}


def test_router_included_twice_serves_both_prefixes(router: MsgspecRouter) -> None:
    @router.post("/cities")
    async def create(city: City) -> City:
        return city

    app = FastAPI()
    app.include_router(router, prefix="/a")
    app.include_router(router, prefix="/b")
    client = TestClient(app)

    assert client.post("/a/cities", json=OSLO).json() == OSLO
    assert client.post("/b/cities", json=OSLO).json() == OSLO
    assert client.post("/b/cities", json={"name": "Oslo"}).status_code == 422


def test_route_in_a_mounted_sub_application_is_served(router: MsgspecRouter) -> None:
    @router.post("/cities/{city_id}")
    async def create(city_id: int, city: City) -> dict[str, Any]:
        return {"id": city_id, "name": city.name}

    main = FastAPI()
    main.mount("/sub", app_with(router))

    response = TestClient(main).post("/sub/cities/3", json=OSLO)

    assert response.json() == {"id": 3, "name": "Oslo"}


def test_wrong_method_is_a_405_as_in_fastapi(router: MsgspecRouter) -> None:
    @router.get("/cities")
    async def cities() -> list[City]:
        return []

    response = client_for(router).post("/cities", json=OSLO)

    assert response.status_code == 405


def test_routes_for_two_methods_on_one_path_are_both_served(router: MsgspecRouter) -> None:
    @router.get("/cities")
    async def cities() -> list[City]:
        return [City(name="Oslo", population=1)]

    @router.post("/cities")
    async def create(city: City) -> City:
        return city

    client = client_for(router)

    assert client.get("/cities").json() == [OSLO]
    assert client.post("/cities", json=OSLO).json() == OSLO


@pytest.mark.parametrize(
    "path", ["/cities", "/cities%0A", "/cities%0A%0A", "/cities/", "/Cities", "/cities%20"]
)
def test_path_of_a_route_without_parameters_matches_as_in_fastapi(
    router: MsgspecRouter, path: str
) -> None:
    async def cities() -> dict[str, int]:
        return {"cities": 1}

    plain = APIRouter()
    plain.add_api_route("/cities", cities)
    router.add_api_route("/cities", cities)
    fastapi_app, our_app = FastAPI(), FastAPI()
    fastapi_app.include_router(plain, prefix="/v1")
    our_app.include_router(router, prefix="/v1")

    theirs = TestClient(fastapi_app).get("/v1" + path, follow_redirects=False)
    ours = TestClient(our_app).get("/v1" + path, follow_redirects=False)

    def seen(response: Any) -> tuple[Any, ...]:
        body = response.json() if response.status_code == 200 else response.content
        return response.status_code, response.headers.get("location"), body

    assert seen(ours) == seen(theirs)


# -- dependencies -------------------------------------------------------------------------------


def recorder() -> tuple[list[str], object]:
    calls: list[str] = []

    def make(name: str):
        def dependency() -> None:
            calls.append(name)

        return Depends(dependency)

    return calls, make


def test_route_router_include_and_app_dependencies_all_run(twin: Twin) -> None:
    calls, make = recorder()
    router = twin.router_class(dependencies=[make("router")])  # type: ignore[operator]

    @router.post("/cities", dependencies=[make("route")])  # type: ignore[operator]
    async def create(city: City) -> City:
        return city

    app = FastAPI(dependencies=[make("app")])  # type: ignore[operator]
    app.include_router(router, dependencies=[make("include")])  # type: ignore[operator]

    response = TestClient(app).post("/cities", json=OSLO)

    assert response.json() == OSLO
    assert sorted(calls) == ["app", "include", "route", "router"]


def test_app_dependency_runs_for_a_route_with_no_dependency_of_its_own(twin: Twin) -> None:
    calls, make = recorder()
    router = twin.router_class()

    @router.post("/cities")
    async def create(city: City) -> City:
        return city

    app = FastAPI(dependencies=[make("app")])  # type: ignore[operator]
    app.include_router(router)

    assert TestClient(app).post("/cities", json=OSLO).json() == OSLO
    assert calls == ["app"]


def test_include_dependency_runs_only_for_that_inclusion(twin: Twin) -> None:
    calls, make = recorder()
    router = twin.router_class()

    @router.post("/cities")
    async def create(city: City) -> City:
        return city

    app = FastAPI()
    app.include_router(router, prefix="/guarded", dependencies=[make("guard")])  # type: ignore[operator]
    app.include_router(router, prefix="/open")
    client = TestClient(app)

    assert client.post("/open/cities", json=OSLO).json() == OSLO
    assert calls == []
    assert client.post("/guarded/cities", json=OSLO).json() == OSLO
    assert calls == ["guard"]


def test_failing_app_dependency_blocks_a_route_with_no_dependency_of_its_own(twin: Twin) -> None:
    def authenticate(authorization: Annotated[str | None, Header()] = None) -> None:
        if authorization != "secret":
            raise HTTPException(401, "Not authenticated", headers={"WWW-Authenticate": "Bearer"})

    router = twin.router_class()

    @router.post("/cities")
    async def create(city: City) -> City:
        return city

    app = FastAPI(dependencies=[Depends(authenticate)])
    app.include_router(router)
    client = TestClient(app)

    denied = client.post("/cities", json={"name": "Oslo"})
    allowed = client.post("/cities", json=OSLO, headers={"authorization": "secret"})

    assert denied.status_code == 401
    assert denied.headers["www-authenticate"] == "Bearer"
    assert allowed.json() == OSLO


def test_dependency_value_is_passed_to_the_endpoint(twin: Twin) -> None:
    def current_user(x_user: Annotated[str, Header()]) -> str:
        return x_user.upper()

    router = twin.router_class()

    @router.post("/cities")
    async def create(city: City, user: Annotated[str, Depends(current_user)]) -> dict[str, str]:
        return {"user": user, "city": city.name}

    response = client_for(router).post("/cities", json=OSLO, headers={"x-user": "ada"})

    assert response.json() == {"user": "ADA", "city": "Oslo"}


def test_dependency_override_replaces_the_dependency(twin: Twin) -> None:
    def real_user() -> str:
        return "real"

    router = twin.router_class()

    @router.post("/cities")
    async def create(city: City, user: Annotated[str, Depends(real_user)]) -> dict[str, str]:
        return {"user": user}

    app = app_with(router)
    app.dependency_overrides[real_user] = lambda: "override"

    assert TestClient(app).post("/cities", json=OSLO).json() == {"user": "override"}


def test_dependency_override_of_an_app_dependency_applies_to_msgspec_routes(twin: Twin) -> None:
    def guard() -> None:
        raise HTTPException(403, "Forbidden")

    router = twin.router_class()

    @router.post("/cities")
    async def create(city: City) -> City:
        return city

    app = FastAPI(dependencies=[Depends(guard)])
    app.include_router(router)
    client = TestClient(app)

    assert client.post("/cities", json=OSLO).status_code == 403
    app.dependency_overrides[guard] = lambda: None
    assert client.post("/cities", json=OSLO).json() == OSLO


def test_yield_dependency_teardown_runs(twin: Twin) -> None:
    events: list[str] = []

    def session() -> Iterator[str]:
        events.append("open")
        yield "session"
        events.append("close")

    router = twin.router_class()

    @router.post("/cities")
    async def create(city: City, s: Annotated[str, Depends(session)]) -> City:
        events.append(f"endpoint with {s}")
        return city

    response = client_for(router).post("/cities", json=OSLO)

    assert response.json() == OSLO
    assert events == ["open", "endpoint with session", "close"]


def test_yield_dependency_exit_on_an_invalid_body_is_as_in_fastapi(twin: Twin) -> None:
    events: list[str] = []

    def session() -> Iterator[None]:
        events.append("open")
        try:
            yield
        except Exception as exc:
            events.append(type(exc).__name__)
            raise
        finally:
            events.append("close")

    class CityModel(pydantic.BaseModel):
        name: str
        population: int

    plain = APIRouter(prefix="/plain", dependencies=[Depends(session)])

    @plain.post("/cities")
    async def plain_create(city: CityModel) -> None: ...

    ours = twin.router_class(prefix="/msgspec", dependencies=[Depends(session)])

    @ours.post("/cities")
    async def create(city: City) -> None: ...

    client = client_for(plain, ours)
    assert client.post("/plain/cities", json={"name": "Oslo"}).status_code == 422
    fastapi_events = events.copy()
    events.clear()

    response = client.post("/msgspec/cities", json={"name": "Oslo"})

    assert response.status_code == 422
    assert events == fastapi_events
    assert events[0] == "open"
    assert events[-1] == "close"


def test_yield_dependency_sees_the_endpoint_exception(twin: Twin) -> None:
    seen: list[str] = []

    def session() -> Iterator[None]:
        try:
            yield
        except HTTPException as exc:
            seen.append(f"rollback {exc.status_code}")
            raise

    router = twin.router_class(dependencies=[Depends(session)])

    @router.post("/cities")
    async def create(city: City) -> City:
        raise HTTPException(409, "exists")

    response = client_for(router).post("/cities", json=OSLO)

    assert response.status_code == 409
    assert seen == ["rollback 409"]


def test_sync_dependency_and_sync_endpoint(twin: Twin) -> None:
    def limit(limit: int = 10) -> int:
        return limit * 2

    router = twin.router_class()

    @router.post("/cities")
    def create(city: City, doubled: Annotated[int, Depends(limit)]) -> dict[str, int]:
        return {"doubled": doubled, "population": city.population}

    response = client_for(router).post("/cities?limit=4", json=OSLO)

    assert response.json() == {"doubled": 8, "population": 1}


def test_request_parameter_sees_the_request(twin: Twin) -> None:
    router = twin.router_class()

    @router.post("/cities")
    async def create(city: City, request: Request) -> dict[str, str]:
        return {"path": request.url.path, "agent": request.headers["user-agent"]}

    response = client_for(router).post("/cities", json=OSLO, headers={"user-agent": "tests"})

    assert response.json() == {"path": "/cities", "agent": "tests"}


# -- middleware ---------------------------------------------------------------------------------


def with_header_middleware(app: FastAPI) -> FastAPI:
    @app.middleware("http")
    async def add_header(request: Request, call_next):  # type: ignore[no-untyped-def]
        response = await call_next(request)
        response.headers["x-middleware"] = "seen"
        return response

    return app


def test_middleware_header_is_added_to_a_success(router: MsgspecRouter) -> None:
    @router.post("/cities")
    async def create(city: City) -> City:
        return city

    client = TestClient(with_header_middleware(app_with(router)))
    response = client.post("/cities", json=OSLO)

    assert response.json() == OSLO
    assert response.headers["x-middleware"] == "seen"


@pytest.mark.parametrize(
    ("content", "content_type", "status"),
    [
        (b"{}", "text/plain", 415),
        (b"{", "application/json", 400),
        (b'{"name": "Oslo"}', "application/json", 422),
    ],
    ids=["415", "400", "422"],
)
def test_middleware_header_is_added_to_an_error(
    router: MsgspecRouter, content: bytes, content_type: str, status: int
) -> None:
    @router.post("/cities")
    async def create(city: City) -> City:
        return city

    client = TestClient(with_header_middleware(app_with(router)))
    response = client.post("/cities", content=content, headers={"content-type": content_type})

    assert response.status_code == status
    assert response.headers["x-middleware"] == "seen"


def test_middleware_sees_the_route_in_the_scope(router: MsgspecRouter) -> None:
    @router.get("/cities/{city_id}")
    async def city(city_id: int) -> dict[str, int]:
        return {"id": city_id}

    app = app_with(router)
    seen: list[object] = []

    @app.middleware("http")
    async def record(request: Request, call_next):  # type: ignore[no-untyped-def]
        response = await call_next(request)
        seen.append(request.scope.get("route").path)  # type: ignore[union-attr]
        return response

    assert TestClient(app).get("/cities/5").json() == {"id": 5}
    assert seen == ["/cities/{city_id}"]


# -- exception handlers -------------------------------------------------------------------------


def with_handlers(app: FastAPI) -> FastAPI:
    @app.exception_handler(StarletteHTTPException)
    async def on_http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"handled": "http", "status": exc.status_code}, status_code=418)

    @app.exception_handler(RequestValidationError)
    async def on_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        locs = [list(error["loc"]) for error in exc.errors()]
        return JSONResponse({"handled": "validation", "locs": locs}, status_code=400)

    @app.exception_handler(Teapot)
    def on_teapot(request: Request, exc: Teapot) -> JSONResponse:
        return JSONResponse({"handled": "teapot"}, status_code=418)

    return app


def handled_client(router: MsgspecRouter) -> TestClient:
    @router.post("/cities/{city_id}")
    async def create(city_id: int, city: City) -> City:
        if city.name == "conflict":
            raise HTTPException(409, "exists")
        if city.name == "teapot":
            raise Teapot
        return city

    return TestClient(with_handlers(app_with(router)))


@pytest.mark.parametrize(
    ("content", "content_type", "status"),
    [(b"{}", "text/plain", 415), (b"{", "application/json", 400)],
    ids=["415", "400"],
)
def test_http_exception_handler_payload_is_sent_for_body_errors(
    router: MsgspecRouter, content: bytes, content_type: str, status: int
) -> None:
    client = handled_client(router)

    response = client.post("/cities/1", content=content, headers={"content-type": content_type})

    assert response.status_code == 418
    assert response.json() == {"handled": "http", "status": status}


def test_http_exception_handler_payload_is_sent_for_an_endpoint_exception(
    router: MsgspecRouter,
) -> None:
    client = handled_client(router)

    response = client.post("/cities/1", json={"name": "conflict", "population": 1})

    assert response.json() == {"handled": "http", "status": 409}


def test_validation_handler_payload_is_sent_for_an_invalid_body(router: MsgspecRouter) -> None:
    client = handled_client(router)

    response = client.post("/cities/1", json={"name": "Oslo"})

    assert response.status_code == 400
    assert response.json() == {"handled": "validation", "locs": [["body", "population"]]}


def test_validation_handler_payload_is_sent_for_a_missing_body(router: MsgspecRouter) -> None:
    client = handled_client(router)

    response = client.post("/cities/1")

    assert response.json() == {"handled": "validation", "locs": [["body"]]}


def test_validation_handler_payload_is_sent_for_an_invalid_parameter(
    router: MsgspecRouter,
) -> None:
    client = handled_client(router)

    response = client.post("/cities/x", json=OSLO)

    assert response.json() == {"handled": "validation", "locs": [["path", "city_id"]]}


def test_handler_for_a_custom_exception_is_used(router: MsgspecRouter) -> None:
    client = handled_client(router)

    response = client.post("/cities/1", json={"name": "teapot", "population": 1})

    assert response.status_code == 418
    assert response.json() == {"handled": "teapot"}


def test_status_code_handler_is_used_for_a_415(router: MsgspecRouter) -> None:
    @router.post("/cities")
    async def create(city: City) -> City:
        return city

    app = app_with(router)

    @app.exception_handler(415)
    async def on_415(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"accepted": ["application/json"]}, status_code=415)

    response = TestClient(app).post(
        "/cities", content=b"{}", headers={"content-type": "text/plain"}
    )

    assert response.status_code == 415
    assert response.json() == {"accepted": ["application/json"]}


def test_http_exception_headers_are_kept(router: MsgspecRouter) -> None:
    @router.get("/cities")
    async def cities() -> list[City]:
        raise HTTPException(429, "slow down", headers={"Retry-After": "5"})

    response = client_for(router).get("/cities")

    assert response.status_code == 429
    assert response.headers["retry-after"] == "5"
    assert response.json() == {"detail": "slow down"}


def test_unhandled_endpoint_exception_is_a_500(router: MsgspecRouter) -> None:
    @router.get("/cities")
    async def cities() -> list[City]:
        raise RuntimeError("boom")

    client = client_for(router, raise_server_exceptions=False)

    assert client.get("/cities").status_code == 500


def test_unhandled_endpoint_exception_reaches_the_test_client(router: MsgspecRouter) -> None:
    @router.get("/cities")
    async def cities() -> list[City]:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        client_for(router).get("/cities")


# -- background tasks ---------------------------------------------------------------------------


def test_background_tasks_parameter_runs_its_tasks(twin: Twin) -> None:
    done: list[str] = []
    router = twin.router_class()

    @router.post("/cities")
    async def create(city: City, tasks: BackgroundTasks) -> City:
        tasks.add_task(done.append, city.name)
        return city

    response = client_for(router).post("/cities", json=OSLO)

    assert response.json() == OSLO
    assert done == ["Oslo"]


def test_background_task_of_a_returned_response_runs(router: MsgspecRouter) -> None:
    done: list[str] = []

    @router.post("/cities")
    async def create(city: City) -> City:
        return JSONResponse(  # type: ignore[return-value]
            {"queued": city.name}, background=BackgroundTask(done.append, city.name)
        )

    response = client_for(router).post("/cities", json=OSLO)

    assert response.json() == {"queued": "Oslo"}
    assert done == ["Oslo"]


def test_background_tasks_in_a_dependency_run(twin: Twin) -> None:
    done: list[str] = []

    def audit(tasks: BackgroundTasks) -> None:
        tasks.add_task(done.append, "audited")

    router = twin.router_class(dependencies=[Depends(audit)])

    @router.post("/cities")
    async def create(city: City) -> City:
        return city

    assert client_for(router).post("/cities", json=OSLO).json() == OSLO
    assert done == ["audited"]


# -- request body limits (max_body_size) ----------------------------------------------------------

FASTAPI_HAS_BODY_LIMIT = "max_body_size" in inspect.signature(APIRouter.__init__).parameters
needs_fastapi_body_limit = pytest.mark.skipif(
    not FASTAPI_HAS_BODY_LIMIT, reason="this FastAPI has no max_body_size option (< 0.164)"
)
BIG_CITY = {"name": "x" * 200, "population": 1}


def test_router_body_limit_rejects_a_larger_body_with_413(tier: str, twin: Twin) -> None:
    dependencies = [Depends(delegating_dependency)] if tier == "delegated" else []
    router = twin.router_class(max_body_size=100, dependencies=dependencies)

    @router.post("/cities")
    async def create(city: City) -> City:
        return city

    client = client_for(router)

    assert client.post("/cities", json=BIG_CITY).status_code == 413
    assert client.post("/cities", json=OSLO).json() == OSLO


def test_route_body_limit_rejects_a_larger_body_with_413(router: MsgspecRouter) -> None:
    async def create(city: City) -> City:
        return city

    router.add_api_route("/cities", create, methods=["POST"], max_body_size=100)
    client = client_for(router)

    assert client.post("/cities", json=BIG_CITY).status_code == 413
    assert client.post("/cities", json=OSLO).json() == OSLO


def test_decorator_body_limit_rejects_a_larger_body_with_413(router: MsgspecRouter) -> None:
    @router.post("/cities", max_body_size=100)
    async def create(city: City) -> City:
        return city

    @router.post("/unlimited")
    async def unlimited(city: City) -> City:
        return city

    client = client_for(router)

    assert client.post("/cities", json=BIG_CITY).status_code == 413
    assert client.post("/unlimited", json=BIG_CITY).status_code == 200


def test_body_limit_413_is_sent_before_dependencies_run(twin: Twin) -> None:
    runs: list[str] = []
    router = twin.router_class(max_body_size=100, dependencies=[Depends(lambda: runs.append("x"))])

    @router.post("/cities")
    async def create(city: City) -> City:
        return city

    assert client_for(router).post("/cities", json=BIG_CITY).status_code == 413
    assert runs == []


@needs_fastapi_body_limit
def test_router_body_limit_answers_as_fastapi_does(tier: str, twin: Twin) -> None:
    dependencies = [Depends(delegating_dependency)] if tier == "delegated" else []
    ours = twin.router_class(prefix="/msgspec", max_body_size=100, dependencies=dependencies)
    plain = APIRouter(prefix="/plain", max_body_size=100)  # type: ignore[call-arg]

    class CityModel(pydantic.BaseModel):
        name: str
        population: int

    @ours.post("/cities")
    async def create(city: City) -> City:
        return city

    @plain.post("/cities")
    async def plain_create(city: CityModel) -> CityModel:
        return city

    client = client_for(ours, plain)
    fastapi_response = client.post("/plain/cities", json=BIG_CITY)
    response = client.post("/msgspec/cities", json=BIG_CITY)

    assert response.status_code == fastapi_response.status_code == 413
    assert response.headers.items() == fastapi_response.headers.items()
    assert response.content == fastapi_response.content


@needs_fastapi_body_limit
def test_include_body_limit_applies_to_that_inclusion(router: MsgspecRouter) -> None:
    @router.post("/cities")
    async def create(city: City) -> City:
        return city

    app = FastAPI()
    app.include_router(router, prefix="/small", max_body_size=100)  # type: ignore[call-arg]
    app.include_router(router, prefix="/large")
    client = TestClient(app)

    assert client.post("/small/cities", json=BIG_CITY).status_code == 413
    assert client.post("/large/cities", json=BIG_CITY).status_code == 200
