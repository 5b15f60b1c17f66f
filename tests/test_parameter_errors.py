"""Parameter errors carry FastAPI's `loc` and `input`.

The same request goes to a Pydantic APIRouter route and to a MsgspecRouter route with the
same parameters (on both twins and both tiers), and each error's `loc` and `input` must be
FastAPI's. Messages and types stay msgspec's by design (docs/differences.md).
"""

from typing import Annotated, Any

import msgspec
import pydantic
import pytest
from fastapi import APIRouter, Cookie, Header, Query
from support import assert_tier, client_for, tier_router
from twins import Twin


class Filter(msgspec.Struct, forbid_unknown_fields=True):
    limit: int
    tags: list[int] = []


class PydanticFilter(pydantic.BaseModel):
    model_config = {"extra": "forbid"}
    limit: int
    tags: list[int] = []


class Token(msgspec.Struct):
    x_token: int
    x_trace: str = ""


class PydanticToken(pydantic.BaseModel):
    x_token: int
    x_trace: str = ""


class Session(msgspec.Struct):
    session: int


class PydanticSession(pydantic.BaseModel):
    session: int


def add_routes(router: APIRouter, filter_: Any, token: Any, session: Any) -> None:
    @router.get("/items/{item_id}")
    def items(
        item_id: int,
        q: int,
        ids: Annotated[list[int], Query()] = [],  # noqa: B006 - FastAPI copies it
        flag: bool = False,
        h: Annotated[int | None, Header()] = None,
        c: Annotated[int | None, Cookie()] = None,
    ) -> str:
        return "ok"

    @router.get("/filtered")
    def filtered(f: Annotated[filter_, Query()]) -> str:  # type: ignore[valid-type]
        return "ok"

    @router.get("/token")
    def with_token(t: Annotated[token, Header()]) -> str:  # type: ignore[valid-type]
        return "ok"

    @router.get("/session")
    def with_session(s: Annotated[session, Cookie()]) -> str:  # type: ignore[valid-type]
        return "ok"


def located(
    router: APIRouter, target: str, headers: dict[str, str], cookies: dict[str, str]
) -> list[tuple[Any, Any]]:
    """(loc, input) of each error the route answers with."""
    client = client_for(router)
    for name, value in cookies.items():
        client.cookies.set(name, value)
    response = client.get(target, headers=headers)
    assert response.status_code == 422
    return [(error["loc"], error["input"]) for error in response.json()["detail"]]


CASES = {
    "scalars": ("/items/x?q=abc&flag=maybe", {"h": "z"}, {"c": "w"}),
    "list-item": ("/items/1?q=1&ids=1&ids=y&ids=2", {}, {}),
    "list-items": ("/items/1?q=1&ids=x&ids=2&ids=y&ids=%2B5&ids=1.5", {}, {}),
    "model-list-items": ("/filtered?limit=1&tags=x&tags=2&tags=y", {}, {}),
    "missing": ("/items/1", {}, {}),
    "model-missing-and-item": ("/filtered?tags=1&tags=x&other=5&other=6", {}, {}),
    "model-invalid": ("/filtered?limit=x", {}, {}),
    "header-model-invalid": ("/token", {"x-token": "a"}, {}),
    "header-model-missing": ("/token", {"x-trace": "t"}, {}),
    "cookie-model-missing": ("/session", {}, {"other": "1"}),
    "cookie-model-invalid": ("/session", {}, {"session": "s"}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_parameter_errors_have_fastapi_s_loc_and_input(twin: Twin, tier: str, case: str) -> None:
    target, headers, cookies = CASES[case]
    theirs = APIRouter()
    add_routes(theirs, PydanticFilter, PydanticToken, PydanticSession)
    ours = tier_router(twin, tier)
    add_routes(ours, Filter, Token, Session)
    assert_tier(ours, tier)

    assert located(ours, target, headers, cookies) == located(theirs, target, headers, cookies)


def test_an_invalid_item_of_a_list_parameter_is_located_by_its_index(twin: Twin, tier: str) -> None:
    router = tier_router(twin, tier)
    add_routes(router, Filter, Token, Session)

    [error] = client_for(router).get("/items/1?q=1&ids=1&ids=y").json()["detail"]

    assert error["loc"] == ["query", "ids", 1]
    assert error["input"] == "y"
    assert error["msg"] == "Expected `int`, got `str` - at `$[1]`"
    assert error["type"] == "value_error.msgspec"


def test_every_invalid_item_of_a_list_parameter_is_reported(twin: Twin, tier: str) -> None:
    router = tier_router(twin, tier)
    add_routes(router, Filter, Token, Session)

    errors = client_for(router).get("/items/1?q=1&ids=x&ids=2&ids=y").json()["detail"]

    assert [(e["loc"], e["input"], e["msg"]) for e in errors] == [
        (["query", "ids", 0], "x", "Expected `int`, got `str` - at `$[0]`"),
        (["query", "ids", 2], "y", "Expected `int`, got `str` - at `$[2]`"),
    ]


def test_a_model_s_missing_field_shows_every_key_received(twin: Twin, tier: str) -> None:
    router = tier_router(twin, tier)
    add_routes(router, Filter, Token, Session)

    errors = client_for(router).get("/filtered?tags=1&other=5&other=6").json()["detail"]

    assert errors[0] == {
        "type": "missing",
        "loc": ["query", "limit"],
        "msg": "Field required",
        "input": {"tags": ["1"], "other": ["5", "6"]},
    }
    # A forbidden key sent twice is reported with both values, as FastAPI reports it.
    assert errors[1]["loc"] == ["query", "other"]
    assert errors[1]["input"] == ["5", "6"]
