"""Pydantic routes with dependencies on the direct tier.

A route FastAPI validates with Pydantic alone whose endpoint has dependencies, or takes
the Request, the Response, background tasks or security scopes, runs from the dependency
plan: each step called as FastAPI's solving calls it, each step's Pydantic body fields
validated at its turn by FastAPI's own `request_body_to_args`, the response rendered as
FastAPI's handler renders it. Each test compares status, headers and body bytes with the
same route on an APIRouter, and checks FastAPI's solving never ran for ours.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

import pydantic
import pytest
from fastapi import (
    BackgroundTasks,
    Body,
    Depends,
    Header,
    HTTPException,
    Query,
    Request,
    Response,
    Security,
)
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer, SecurityScopes
from pydantic_apps import Define, answer, apps, assert_same
from twins import Twin


class Item(pydantic.BaseModel):
    name: str
    price: float


class Owner(pydantic.BaseModel):
    login: str


EVENTS: list[str] = []


async def current_user(x_user: Annotated[str, Header()]) -> str:
    return x_user


def sync_limit(limit: Annotated[int, Query(gt=0)] = 10) -> int:
    return limit


async def session() -> AsyncIterator[str]:
    EVENTS.append("open")
    try:
        yield "session"
    finally:
        EVENTS.append("close")


def sync_session() -> Iterator[str]:
    EVENTS.append("open sync")
    yield "sync session"
    EVENTS.append("close sync")


def two_dependency_routes(router: Any) -> None:
    @router.post("/items")
    async def create(
        item: Item,
        user: Annotated[str, Depends(current_user)],
        limit: Annotated[int, Depends(sync_limit)],
    ) -> Item:
        return Item(name=f"{item.name} by {user}", price=item.price * limit)

    @router.get("/items/{item_id}", response_model=Item)
    async def read(
        item_id: int,
        db: Annotated[str, Depends(session)],
        other: Annotated[str, Depends(sync_session)],
    ) -> Any:
        EVENTS.append("endpoint")
        return {"name": f"{db} {other} {item_id}", "price": item_id / 3}


def test_a_body_and_dependencies_answer_as_fastapi_does(twin: Twin, solved: list[Any]) -> None:
    status, _, body = assert_same(
        twin,
        solved,
        two_dependency_routes,
        "POST",
        "/items?limit=3",
        json={"name": "pen", "price": 1.5},
        headers={"x-user": "ann"},
    )
    assert (status, body) == (200, b'{"name":"pen by ann","price":4.5}')


def test_a_failing_dependency_parameter_and_body_give_fastapis_errors_in_its_order(
    twin: Twin, solved: list[Any]
) -> None:
    status, _, body = assert_same(
        twin, solved, two_dependency_routes, "POST", "/items?limit=0", json={"name": 3}
    )
    assert status == 422
    assert body.index(b'"x-user"') < body.index(b'"limit"') < body.index(b'"price"')


def test_malformed_json_on_a_route_with_dependencies_is_fastapis_422(
    twin: Twin, solved: list[Any]
) -> None:
    status, _, body = assert_same(
        twin,
        solved,
        two_dependency_routes,
        "POST",
        "/items",
        content=b'{"name"',
        headers={"content-type": "application/json", "x-user": "ann"},
    )
    assert status == 422
    assert b'"json_invalid"' in body


def test_an_empty_body_on_a_route_with_dependencies_is_fastapis_422(
    twin: Twin, solved: list[Any]
) -> None:
    status, _, _ = assert_same(
        twin, solved, two_dependency_routes, "POST", "/items", headers={"x-user": "ann"}
    )
    assert status == 422


def test_generator_dependencies_are_set_up_and_closed_around_the_endpoint(
    twin: Twin, solved: list[Any]
) -> None:
    theirs, ours, router = apps(twin, two_dependency_routes)
    assert [route.tier for route in router.routes] == ["direct", "direct"]
    EVENTS.clear()
    expected = answer(theirs, "GET", "/items/3")
    fastapi_events = list(EVENTS)
    EVENTS.clear()
    solved.clear()
    assert answer(ours, "GET", "/items/3") == expected
    assert fastapi_events == EVENTS
    assert EVENTS[-1] in ("close", "close sync") and "endpoint" in EVENTS
    assert not solved


def _sets_status_and_header(router: Any) -> None:
    def mark(response: Response) -> None:
        response.status_code = 202
        response.headers["x-marked"] = "yes"

    @router.get("/marked", response_model=Item, status_code=201, dependencies=[Depends(mark)])
    async def marked() -> Any:
        return {"name": "a", "price": 1}


def test_a_dependencys_response_sets_the_status_and_headers_as_in_fastapi(
    twin: Twin, solved: list[Any]
) -> None:
    status, headers, _ = assert_same(twin, solved, _sets_status_and_header, "GET", "/marked")
    assert status == 202
    assert (b"x-marked", b"yes") in headers


def _takes_the_response(router: Any) -> None:
    @router.get("/x")
    async def endpoint(response: Response) -> Item:
        response.headers["x-set"] = "1"
        response.status_code = 204
        return Item(name="a", price=1)


def test_an_endpoint_taking_the_response_answers_as_fastapi_does(
    twin: Twin, solved: list[Any]
) -> None:
    status, headers, body = assert_same(twin, solved, _takes_the_response, "GET", "/x")
    assert (status, body) == (204, b"")
    assert (b"x-set", b"1") in headers


def _takes_the_request(router: Any) -> None:
    @router.post("/x")
    async def endpoint(request: Request, item: Item) -> Item:
        raw = await request.body()
        return Item(name=f"{request.url.path} {len(raw)} {item.name}", price=item.price)


def test_an_endpoint_taking_the_request_reads_the_same_body(twin: Twin, solved: list[Any]) -> None:
    status, _, body = assert_same(
        twin, solved, _takes_the_request, "POST", "/x", json={"name": "a", "price": 2}
    )
    assert (status, body) == (200, b'{"name":"/x 22 a","price":2.0}')


TASKS: list[str] = []


def _runs_background_tasks(router: Any) -> None:
    def later(tasks: BackgroundTasks) -> None:
        tasks.add_task(TASKS.append, "dependency's")

    @router.post("/x", dependencies=[Depends(later)])
    async def endpoint(item: Item, tasks: BackgroundTasks) -> Item:
        tasks.add_task(TASKS.append, item.name)
        return item


def test_background_tasks_of_dependencies_and_endpoint_run_after_the_response(
    twin: Twin, solved: list[Any]
) -> None:
    theirs, ours, _ = apps(twin, _runs_background_tasks)
    TASKS.clear()
    expected = answer(theirs, "POST", "/x", json={"name": "pen", "price": 1})
    assert TASKS == ["dependency's", "pen"]
    TASKS.clear()
    solved.clear()
    assert answer(ours, "POST", "/x", json={"name": "pen", "price": 1}) == expected
    assert TASKS == ["dependency's", "pen"]
    assert not solved


async def owner_of(owner: Owner) -> str:
    return owner.login


def _body_parts_in_a_dependency(router: Any) -> None:
    @router.post("/x")
    async def endpoint(item: Item, login: Annotated[str, Depends(owner_of)]) -> dict[str, Any]:
        return {"item": item.name, "owner": login}


@pytest.mark.parametrize(
    "sent",
    [
        {"item": {"name": "a", "price": 1}, "owner": {"login": "ann"}},
        {"item": {"name": "a", "price": 1}, "owner": {"login": 3}},
        {"item": {"name": "a"}, "owner": {"login": "ann"}},
        {"item": {"name": "a"}},
        [1, 2],
    ],
    ids=["valid", "bad-owner", "bad-item", "owner-missing", "not-an-object"],
)
def test_a_dependency_taking_a_part_of_the_body_gets_it_as_in_fastapi(
    twin: Twin, solved: list[Any], sent: Any
) -> None:
    assert_same(twin, solved, _body_parts_in_a_dependency, "POST", "/x", json=sent)


def audited(reason: Annotated[str, Body(max_length=5)]) -> str:
    return reason


def _embedded_body_and_dependency(router: Any) -> None:
    @router.put("/x/{item_id}")
    def endpoint(
        item_id: int, item: Annotated[Item, Body(embed=True)], why: str = Depends(audited)
    ) -> dict[str, Any]:
        return {"id": item_id, "name": item.name, "why": why}


@pytest.mark.parametrize(
    "sent",
    [
        {"item": {"name": "a", "price": 1}, "reason": "ok"},
        {"item": {"name": "a", "price": 1}, "reason": "too long"},
        {"reason": "ok"},
    ],
    ids=["valid", "bad-reason", "item-missing"],
)
def test_a_sync_route_with_a_body_field_in_a_sync_dependency_answers_as_fastapi_does(
    twin: Twin, solved: list[Any], sent: Any
) -> None:
    assert_same(twin, solved, _embedded_body_and_dependency, "PUT", "/x/4", json=sent)


async def allowed(x_token: Annotated[str | None, Header()] = None) -> None:
    if x_token != "secret":
        raise HTTPException(status_code=403, detail="nope", headers={"x-why": "token"})


def _raises_in_a_dependency(router: Any) -> None:
    @router.get("/x", dependencies=[Depends(allowed)])
    async def endpoint() -> Item:
        return Item(name="a", price=1)


def test_an_http_exception_from_a_dependency_is_answered_by_fastapis_handler(
    twin: Twin, solved: list[Any]
) -> None:
    status, headers, _ = assert_same(twin, solved, _raises_in_a_dependency, "GET", "/x")
    assert status == 403
    assert (b"x-why", b"token") in headers


bearer = HTTPBearer()


def token(
    scopes: SecurityScopes,
    credentials: Annotated[HTTPAuthorizationCredentials, Depends(bearer)],
) -> str:
    return f"{credentials.credentials} {' '.join(scopes.scopes)}"


def _bearer_security(router: Any) -> None:
    @router.get("/me")
    async def me(who: Annotated[str, Security(token, scopes=["read"])]) -> Owner:
        return Owner(login=who)


@pytest.mark.parametrize(
    "headers",
    [{"authorization": "Bearer abc"}, {}, {"authorization": "Basic abc"}],
    ids=["bearer", "none", "other-scheme"],
)
def test_fastapis_security_dependencies_answer_as_in_fastapi(
    twin: Twin, solved: list[Any], headers: dict[str, str]
) -> None:
    assert_same(twin, solved, _bearer_security, "GET", "/me", headers=headers)


class Indented(JSONResponse):
    def render(self, content: Any) -> bytes:
        return json.dumps(content, indent=1).encode()


def _response_class_and_dependency(router: Any) -> None:
    @router.get("/x", response_class=Indented)
    async def endpoint(user: Annotated[str, Depends(current_user)]) -> Owner:
        return Owner(login=f"hello {user}")


def test_a_chosen_response_class_renders_the_content_as_in_fastapi(
    twin: Twin, solved: list[Any]
) -> None:
    status, _, body = assert_same(
        twin, solved, _response_class_and_dependency, "GET", "/x", headers={"x-user": "ann"}
    )
    assert (status, body) == (200, b'{\n "login": "hello ann"\n}')


def _invalid_response(router: Any) -> None:
    @router.get("/x", response_model=Item)
    def endpoint(user: Annotated[str, Depends(current_user)]) -> Any:
        return {"name": user}


def test_a_response_failing_its_model_is_fastapis_500(twin: Twin, solved: list[Any]) -> None:
    status, _, _ = assert_same(
        twin, solved, _invalid_response, "GET", "/x", headers={"x-user": "a"}
    )
    assert status == 500


def _limit(limit: Annotated[int, Query()] = 1) -> int:
    return limit


def _overridden(router: Any) -> None:
    @router.get("/x")
    async def endpoint(limit: Annotated[int, Depends(_limit)]) -> Item:
        return Item(name="a", price=limit)


def _strict_limit(strict: Annotated[int, Query(ge=5)]) -> int:
    return strict


@pytest.mark.parametrize("url", ["/x?strict=7", "/x?strict=2", "/x"])
def test_an_overriding_dependency_answers_its_failures_as_fastapi_does(
    twin: Twin, solved: list[Any], url: str
) -> None:
    theirs, ours, router = apps(twin, _overridden)
    assert [route.tier for route in router.routes] == ["direct"]
    for app in (theirs, ours):
        app.dependency_overrides[_limit] = _strict_limit
    expected = answer(theirs, "GET", url)
    solved.clear()
    assert answer(ours, "GET", url) == expected
    assert not solved


def test_routes_with_dependencies_take_the_direct_tier(twin: Twin) -> None:
    defines: list[Define] = [
        two_dependency_routes,
        _sets_status_and_header,
        _takes_the_response,
        _takes_the_request,
        _runs_background_tasks,
        _body_parts_in_a_dependency,
        _embedded_body_and_dependency,
        _bearer_security,
    ]
    for define in defines:
        _, _, router = apps(twin, define)
        assert {route.tier for route in router.routes} == {"direct"}, define.__name__


def _streams_raw_with_a_dependency(router: Any) -> None:
    @router.get("/x", response_class=StreamingResponse)
    async def endpoint(user: Annotated[str, Depends(current_user)]) -> AsyncIterator[bytes]:
        yield user.encode()


@pytest.mark.parametrize(
    ("define", "method", "options"),
    [
        (_streams_raw_with_a_dependency, "GET", {"headers": {"x-user": "ann"}}),
    ],
    ids=["raw stream"],
)
def test_a_dependency_only_fastapi_solves_keeps_fastapis_handler(
    twin: Twin, define: Define, method: str, options: dict[str, Any]
) -> None:
    theirs, ours, router = apps(twin, define)
    assert [route.tier for route in router.routes] == ["delegated"]
    assert answer(ours, method, "/x", **options) == answer(theirs, method, "/x", **options)
