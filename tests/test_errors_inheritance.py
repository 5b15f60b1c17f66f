"""`errors=` through `include_router`, resolved as FastAPI resolves `strict_content_type`:
the route's own (or its router's), else the included router's, else the inclusion's
(`include_router(..., errors=)`, else the including router's), else the enclosing
inclusions', else "msgspec". Each test sends a body that fails (`{"n": "x"}` for an
`int`) and reads the error type: Pydantic's `int_parsing` with FastAPI's errors, msgspec's
`value_error.msgspec` without. Both tiers, both twins, FastAPI's routing and dispatch mode.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from fastapi import APIRouter, Depends, FastAPI
from fastapi.testclient import TestClient
from support import delegating_dependency
from twins import Twin

from msgspec_fastapi import include_router

FASTAPI = "int_parsing"
MSGSPEC = "value_error.msgspec"


class Body(msgspec.Struct):
    n: int


@pytest.fixture(params=["direct", "delegated"])
def tier(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["routing", "dispatch"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def leaf(twin: Twin, tier: str, route_errors: str | None = None, **options: Any) -> Any:
    """A MsgspecRouter with one route, POST /x, taking a Struct body."""
    router = twin.router_class(**options)
    dependencies = [Depends(delegating_dependency)] if tier == "delegated" else []

    def endpoint(body: Body) -> dict[str, bool]:
        return {"ok": True}

    router.add_api_route(
        "/x", endpoint, methods=["POST"], dependencies=dependencies, errors=route_errors
    )
    return router


def error_type(twin: Twin, app: FastAPI, mode: str, path: str) -> str:
    if mode == "dispatch":
        twin.install_dispatch(app)
    response = TestClient(app).post(path, json={"n": "x"})
    assert response.status_code == 422
    return str(response.json()["detail"][0]["type"])


def test_including_routers_errors_reach_an_included_routers_routes(
    twin: Twin, tier: str, mode: str
) -> None:
    outer = twin.router_class(errors="fastapi")
    outer.include_router(leaf(twin, tier))
    app = FastAPI()
    app.include_router(outer, prefix="/a")
    assert error_type(twin, app, mode, "/a/x") == FASTAPI


def test_included_routers_own_errors_win_over_the_including_routers(
    twin: Twin, tier: str, mode: str
) -> None:
    outer = twin.router_class(errors="fastapi")
    outer.include_router(leaf(twin, tier, errors="msgspec"))
    app = FastAPI()
    app.include_router(outer)
    assert error_type(twin, app, mode, "/x") == MSGSPEC


def test_routes_own_errors_win_over_an_inclusions(twin: Twin, tier: str, mode: str) -> None:
    outer = twin.router_class()
    outer.include_router(leaf(twin, tier, route_errors="msgspec"), errors="fastapi")
    app = FastAPI()
    app.include_router(outer)
    assert error_type(twin, app, mode, "/x") == MSGSPEC


def test_include_time_errors_win_over_the_including_routers(
    twin: Twin, tier: str, mode: str
) -> None:
    outer = twin.router_class(errors="msgspec")
    outer.include_router(leaf(twin, tier), errors="fastapi")
    app = FastAPI()
    app.include_router(outer)
    assert error_type(twin, app, mode, "/x") == FASTAPI


def test_include_router_gives_errors_from_an_application(twin: Twin, tier: str, mode: str) -> None:
    app = FastAPI()
    include_router(app, leaf(twin, tier), prefix="/a", errors="fastapi")
    assert error_type(twin, app, mode, "/a/x") == FASTAPI


def test_include_router_gives_errors_from_an_apirouter(twin: Twin, tier: str, mode: str) -> None:
    middle = APIRouter()
    include_router(middle, leaf(twin, tier), errors="fastapi")
    app = FastAPI()
    app.include_router(middle, prefix="/v1")
    assert error_type(twin, app, mode, "/v1/x") == FASTAPI


def test_include_router_passes_errors_to_a_msgspec_router(twin: Twin, mode: str) -> None:
    outer = twin.router_class(errors="msgspec")
    include_router(outer, leaf(twin, "direct"), errors="fastapi")
    app = FastAPI()
    app.include_router(outer)
    assert error_type(twin, app, mode, "/x") == FASTAPI


def test_errors_pass_through_an_apirouter_between(twin: Twin, tier: str, mode: str) -> None:
    middle = APIRouter()
    middle.include_router(leaf(twin, tier))
    outer = twin.router_class(errors="fastapi")
    outer.include_router(middle, prefix="/m")
    app = FastAPI()
    app.include_router(outer)
    assert error_type(twin, app, mode, "/m/x") == FASTAPI


def test_the_nearest_inclusions_errors_win(twin: Twin, tier: str, mode: str) -> None:
    middle = twin.router_class(errors="msgspec")
    middle.include_router(leaf(twin, tier))
    outer = twin.router_class(errors="fastapi")
    outer.include_router(middle)
    app = FastAPI()
    app.include_router(outer)
    assert error_type(twin, app, mode, "/x") == MSGSPEC


def test_one_router_included_twice_answers_per_inclusion(twin: Twin, tier: str, mode: str) -> None:
    shared = leaf(twin, tier)
    v1 = twin.router_class(errors="fastapi")
    v1.include_router(shared)
    v2 = twin.router_class()
    v2.include_router(shared)
    app = FastAPI()
    app.include_router(v1, prefix="/v1")
    app.include_router(v2, prefix="/v2")
    if mode == "dispatch":
        twin.install_dispatch(app)
    client = TestClient(app)
    first = client.post("/v1/x", json={"n": "x"}).json()["detail"][0]["type"]
    second = client.post("/v2/x", json={"n": "x"}).json()["detail"][0]["type"]
    assert (first, second) == (FASTAPI, MSGSPEC)


def test_an_inclusion_made_after_the_routes_were_read_still_inherits(twin: Twin, mode: str) -> None:
    outer = twin.router_class(errors="fastapi")
    middle = APIRouter()
    app = FastAPI()
    app.include_router(outer, prefix="/a")
    app.include_router(middle, prefix="/b")
    app.openapi()  # builds the inclusions' route contexts before the routers below exist
    outer.include_router(leaf(twin, "direct"))
    include_router(middle, leaf(twin, "direct"), errors="fastapi")
    assert error_type(twin, app, mode, "/a/x") == FASTAPI
    assert error_type(twin, app, mode, "/b/x") == FASTAPI


def test_without_any_choice_the_errors_are_msgspecs(twin: Twin, tier: str, mode: str) -> None:
    outer = twin.router_class()
    outer.include_router(leaf(twin, tier))
    app = FastAPI()
    app.include_router(outer)
    assert error_type(twin, app, mode, "/x") == MSGSPEC


@pytest.mark.parametrize(("value", "error"), [("pydantic", ValueError), (1, TypeError)])
def test_include_time_errors_refuse_an_unknown_value(twin: Twin, value: Any, error: type) -> None:
    with pytest.raises(error):
        twin.router_class().include_router(leaf(twin, "direct"), errors=value)
    with pytest.raises(error):
        include_router(FastAPI(), leaf(twin, "direct"), errors=value)


def test_include_router_into_an_apirouter_keeps_paths_and_documentation(twin: Twin) -> None:
    def build(with_option: bool) -> FastAPI:
        router = twin.router_class()

        @router.post("")
        def root(body: Body) -> dict[str, bool]:
            return {"ok": True}

        @router.post("/x", tags=["own"])
        def other(body: Body) -> dict[str, bool]:
            return {"ok": True}

        middle = APIRouter(prefix="/api")
        options: dict[str, Any] = {"prefix": "/items", "tags": ["items"]}
        if with_option:
            include_router(middle, router, errors="fastapi", **options)
        else:
            middle.include_router(router, **options)
        app = FastAPI()
        app.include_router(middle)
        return app

    with_option, without = build(True), build(False)
    assert with_option.openapi() == without.openapi()
    client = TestClient(with_option)
    assert client.post("/api/items", json={"n": 1}).status_code == 200
    assert client.post("/api/items", json={"n": "x"}).json()["detail"][0]["type"] == FASTAPI
