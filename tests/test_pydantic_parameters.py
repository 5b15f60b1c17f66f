"""Parameters FastAPI solves itself, on Pydantic routes on the direct tier.

On a route without msgspec types, a path, query, header or cookie parameter the request
path cannot convert (a Pydantic parameter model, a Pydantic type, `AliasChoices`, `Json`)
or whose default FastAPI makes (`default_factory`, `validate_default`) no longer keeps the
route on FastAPI's handler: that step's parameters are solved by FastAPI's own
`request_params_to_args`, the rest of the route runs on the direct tier. Each test
compares status, headers and body bytes with the same route on an APIRouter, and checks
FastAPI's solving never ran for ours.
"""

from __future__ import annotations

from typing import Annotated, Any

import pydantic
import pytest
from fastapi import Cookie, Depends, Header, Query
from pydantic_apps import answer, apps, assert_same
from twins import Twin


class Item(pydantic.BaseModel):
    name: str
    price: float


class Paging(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    page: int = pydantic.Field(1, ge=1)
    size: int = pydantic.Field(10, le=50)
    tags: list[str] = []


class Agent(pydantic.BaseModel):
    user_agent: str
    x_trace: str | None = None


def _query_model(router: Any) -> None:
    @router.get("/items")
    async def items(paging: Annotated[Paging, Query()]) -> Paging:
        return paging


@pytest.mark.parametrize(
    "url",
    ["/items", "/items?page=3&size=5&tags=a&tags=b", "/items?page=0&size=99", "/items?other=1"],
    ids=["defaults", "given", "out-of-range", "extra-forbidden"],
)
def test_a_pydantic_query_model_is_solved_as_fastapi_does(
    twin: Twin, solved: list[Any], url: str
) -> None:
    assert_same(twin, solved, _query_model, "GET", url)


def _header_model(router: Any) -> None:
    @router.get("/agent")
    async def agent(headers: Annotated[Agent, Header()]) -> Agent:
        return headers


@pytest.mark.parametrize(
    "headers", [{"user-agent": "me", "x-trace": "t1"}, {"user-agent": "me"}], ids=["both", "one"]
)
def test_a_pydantic_header_model_is_solved_as_fastapi_does(
    twin: Twin, solved: list[Any], headers: dict[str, str]
) -> None:
    assert_same(twin, solved, _header_model, "GET", "/agent", headers=headers)


def _pydantic_types(router: Any) -> None:
    @router.get("/link")
    async def link(
        url: Annotated[pydantic.HttpUrl, Query()],
        session: Annotated[pydantic.UUID4 | None, Cookie()] = None,
    ) -> Item:
        return Item(name=f"{url} {session}", price=1)


@pytest.mark.parametrize(
    ("url", "headers"),
    [
        ("/link?url=https://example.com/a", {}),
        ("/link?url=nowhere", {}),
        (
            "/link?url=https://example.com/",
            {"cookie": "session=7c9e6679-7425-40de-944b-e07fc1f90ae7"},
        ),
        ("/link?url=https://example.com/", {"cookie": "session=nope"}),
    ],
    ids=["valid", "bad-url", "with-cookie", "bad-cookie"],
)
def test_pydantic_typed_parameters_are_solved_as_fastapi_does(
    twin: Twin, solved: list[Any], url: str, headers: dict[str, str]
) -> None:
    assert_same(twin, solved, _pydantic_types, "GET", url, headers=headers)


CALLS: list[int] = []


def _first_page() -> int:
    CALLS.append(1)
    return 1


def paged(page: Annotated[int, Query(default_factory=_first_page)]) -> int:
    return page


def _factory_default(router: Any) -> None:
    @router.get("/x")
    async def endpoint(page: Annotated[int, Depends(paged)], limit: int = 3) -> Item:
        return Item(name=f"page {page}", price=limit)


@pytest.mark.parametrize("url", ["/x?page=4", "/x?limit=bad"], ids=["given", "bad-limit"])
def test_a_default_factory_is_called_when_fastapi_calls_it(
    twin: Twin, solved: list[Any], url: str
) -> None:
    assert_same(twin, solved, _factory_default, "GET", url)


def test_a_default_factory_is_called_as_often_as_fastapi_calls_it(
    twin: Twin, solved: list[Any]
) -> None:
    theirs, ours, router = apps(twin, _factory_default)
    assert [route.tier for route in router.routes] == ["direct"]
    CALLS.clear()
    expected = answer(theirs, "GET", "/x")
    calls = len(CALLS)
    CALLS.clear()
    solved.clear()
    assert answer(ours, "GET", "/x") == expected
    assert (expected[0], expected[2]) == (200, b'{"name":"page 1","price":3.0}')
    assert len(CALLS) == calls > 0
    assert not solved


def _validated_default(router: Any) -> None:
    @router.get("/x")
    async def endpoint(
        size: Annotated[int, Query(ge=5, validate_default=True)] = 1,
    ) -> Item:
        return Item(name="a", price=size)


@pytest.mark.parametrize("url", ["/x", "/x?size=7"], ids=["default", "given"])
def test_a_validated_default_is_validated_as_fastapi_does(
    twin: Twin, solved: list[Any], url: str
) -> None:
    assert_same(twin, solved, _validated_default, "GET", url)


def _alias_choices(router: Any) -> None:
    @router.get("/x")
    async def endpoint(
        q: Annotated[str, Query(validation_alias=pydantic.AliasChoices("q", "query"))],
    ) -> Item:
        return Item(name=q, price=1)


@pytest.mark.parametrize("url", ["/x?q=a", "/x?query=b", "/x"], ids=["first", "second", "none"])
def test_alias_choices_are_solved_as_fastapi_does(twin: Twin, solved: list[Any], url: str) -> None:
    assert_same(twin, solved, _alias_choices, "GET", url)
