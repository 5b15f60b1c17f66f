"""Query, header and cookie models: a Struct (TypedDict, dataclass) whose fields are the
parameters, as FastAPI's `Annotated[Model, Query()]` takes a Pydantic model.

Tests taking the `router` fixture run on both the direct and the delegated tier.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, NotRequired, TypedDict

import msgspec
import pydantic
import pytest
from fastapi import APIRouter, Body, Cookie, Depends, FastAPI, Header, Path, Query
from fastapi.testclient import TestClient
from support import client_for
from twins import Twin

from msgspec_fastapi import MsgspecRouter, install_openapi


class Filter(msgspec.Struct):
    limit: Annotated[int, msgspec.Meta(ge=1, le=100)] = 10
    offset: int = 0
    tags: list[str] = []
    q: str | None = None


class Strict(msgspec.Struct, forbid_unknown_fields=True):
    limit: int = 10


class Renamed(msgspec.Struct, rename="camel"):
    page_size: int = 10


class Required(msgspec.Struct):
    country: str
    limit: int


class Tokens(msgspec.Struct):
    x_token: str
    x_trace_id: str | None = None


class Session(msgspec.Struct):
    session_id: str


class TypedFilter(TypedDict):
    limit: int


class Flags(msgspec.Struct):
    on: bool
    ratio: float


class Point(msgspec.Struct):
    x: int


class Nested(msgspec.Struct):
    inner: Filter


@dataclasses.dataclass
class DataFilter:
    limit: int
    q: str = ""


def get_json(router: MsgspecRouter, url: str, **kwargs: Any) -> Any:
    return client_for(router).get(url, **kwargs).json()


def test_query_model_fields_come_from_the_query_string(router: MsgspecRouter) -> None:
    @router.get("/items")
    async def items(f: Annotated[Filter, Query()]) -> Filter:
        return f

    body = get_json(router, "/items?limit=5&offset=20&q=x")

    assert body == {"limit": 5, "offset": 20, "tags": [], "q": "x"}


def test_query_model_defaults_apply_to_absent_keys(router: MsgspecRouter) -> None:
    @router.get("/items")
    async def items(f: Annotated[Filter, Query()]) -> Filter:
        return f

    assert get_json(router, "/items") == {"limit": 10, "offset": 0, "tags": [], "q": None}


def test_query_model_list_field_is_filled_from_repeated_keys(router: MsgspecRouter) -> None:
    @router.get("/items")
    async def items(f: Annotated[Filter, Query()]) -> Filter:
        return f

    assert get_json(router, "/items?tags=a&tags=b")["tags"] == ["a", "b"]


def test_query_model_scalar_field_takes_the_last_repeated_key(router: MsgspecRouter) -> None:
    @router.get("/items")
    async def items(f: Annotated[Filter, Query()]) -> Filter:
        return f

    assert get_json(router, "/items?limit=2&limit=3")["limit"] == 3


def test_query_model_keys_are_the_msgspec_renamed_names(router: MsgspecRouter) -> None:
    @router.get("/items")
    async def items(f: Annotated[Renamed, Query()]) -> Renamed:
        return f

    assert get_json(router, "/items?pageSize=7") == {"pageSize": 7}


def test_query_model_invalid_field_is_a_422_at_its_query_key(router: MsgspecRouter) -> None:
    @router.get("/items")
    async def items(f: Annotated[Filter, Query()]) -> Filter:
        return f

    response = client_for(router).get("/items?limit=0")

    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["query", "limit"]
    assert error["input"] == "0"


def test_query_model_lists_every_invalid_and_missing_field(router: MsgspecRouter) -> None:
    @router.get("/items")
    async def items(f: Annotated[Required, Query()]) -> Required:
        return f

    response = client_for(router).get("/items?limit=x")

    errors = [(e["loc"], e["type"]) for e in response.json()["detail"]]
    assert errors == [
        (["query", "country"], "missing"),
        (["query", "limit"], "value_error.msgspec"),
    ]


def test_query_model_forbidding_unknown_fields_refuses_an_extra_key(router: MsgspecRouter) -> None:
    @router.get("/items")
    async def items(f: Annotated[Strict, Query()]) -> Strict:
        return f

    response = client_for(router).get("/items?limit=1&other=2")

    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["query", "other"]


def test_query_model_values_are_converted_with_lax_rules(router: MsgspecRouter) -> None:
    @router.get("/items")
    async def items(f: Annotated[Flags, Query()]) -> Flags:
        return f

    assert get_json(router, "/items?on=true&ratio=0.5") == {"on": True, "ratio": 0.5}


def test_typed_dict_and_dataclass_query_models_work_too(router: MsgspecRouter) -> None:
    @router.get("/typed")
    async def typed(f: Annotated[TypedFilter, Query()]) -> dict[str, Any]:
        return dict(f)

    @router.get("/data")
    async def data(f: Annotated[DataFilter, Query()]) -> dict[str, Any]:
        return dataclasses.asdict(f)

    client = client_for(router)

    assert client.get("/typed?limit=3").json() == {"limit": 3}
    assert client.get("/data?limit=3").json() == {"limit": 3, "q": ""}


def test_header_model_fields_are_read_with_underscores_as_hyphens(router: MsgspecRouter) -> None:
    @router.get("/items")
    async def items(h: Annotated[Tokens, Header()]) -> Tokens:
        return h

    body = get_json(router, "/items", headers={"X-Token": "t", "X-Trace-Id": "9"})

    assert body == {"x_token": "t", "x_trace_id": "9"}


def test_header_model_keeps_underscores_without_convert_underscores(
    router: MsgspecRouter,
) -> None:
    @router.get("/items")
    async def items(h: Annotated[Tokens, Header(convert_underscores=False)]) -> Tokens:
        return h

    response = client_for(router).get("/items", headers={"x_token": "t"})

    assert response.json() == {"x_token": "t", "x_trace_id": None}


class PydanticTokens(pydantic.BaseModel):
    x_token: str
    x_trace_id: str | None = None


def fastapi_header_loc() -> list[str]:
    """Where FastAPI locates the missing x_token of a header model: at the header's name
    (x-token) from some version up to 0.165, at the field's (x_token) in 0.142.2."""
    router = APIRouter()

    @router.get("/items")
    async def items(h: Annotated[PydanticTokens, Header()]) -> None:
        return None

    [error] = client_for(router).get("/items").json()["detail"]
    return error["loc"]  # type: ignore[no-any-return]


def test_missing_header_field_is_a_422_where_fastapi_locates_it(router: MsgspecRouter) -> None:
    @router.get("/items")
    async def items(h: Annotated[Tokens, Header()]) -> Tokens:
        return h

    response = client_for(router).get("/items")

    assert [e["loc"] for e in response.json()["detail"]] == [fastapi_header_loc()]


def test_cookie_model_fields_come_from_the_cookies(router: MsgspecRouter) -> None:
    @router.get("/items")
    async def items(c: Annotated[Session, Cookie()]) -> Session:
        return c

    response = client_for(router).get("/items", headers={"cookie": "session_id=abc"})

    assert response.json() == {"session_id": "abc"}


def test_model_errors_follow_scalar_parameter_errors_and_precede_body_errors(
    router: MsgspecRouter,
) -> None:
    @router.post("/items")
    async def items(
        point: Point, f: Annotated[Required, Query()], page: Annotated[int, Query()]
    ) -> Point:
        return point

    response = client_for(router).post("/items?page=x", json={"x": "no"})

    assert [e["loc"][0] for e in response.json()["detail"]] == ["query", "query", "query", "body"]
    assert response.json()["detail"][0]["loc"] == ["query", "page"]


def test_query_model_beside_a_body_and_scalar_parameters_gets_all_of_them(
    router: MsgspecRouter,
) -> None:
    @router.post("/items")
    async def items(
        point: Point, f: Annotated[Filter, Query()], page: int = 1, note: str = Body("")
    ) -> dict[str, Any]:
        return {"x": point.x, "limit": f.limit, "page": page, "note": note}

    response = client_for(router).post("/items?limit=4&page=2", json={"point": {"x": 1}})

    assert response.json() == {"x": 1, "limit": 4, "page": 2, "note": ""}


def test_query_model_fields_are_documented_as_parameters(router: MsgspecRouter) -> None:
    @router.get("/items")
    async def items(f: Annotated[Filter, Query()], h: Annotated[Tokens, Header()]) -> Filter:
        return f

    app = FastAPI()
    app.include_router(router)
    install_openapi(app, router)
    parameters = app.openapi()["paths"]["/items"]["get"]["parameters"]

    assert [(p["in"], p["name"], p["required"]) for p in parameters] == [
        ("query", "limit", False),
        ("query", "offset", False),
        ("query", "tags", False),
        ("query", "q", False),
        ("header", "x-token", True),
        ("header", "x-trace-id", False),
    ]
    assert parameters[0]["schema"] == {"type": "integer", "minimum": 1, "maximum": 100}


def test_path_model_is_refused_at_registration(router: MsgspecRouter) -> None:
    with pytest.raises(TypeError, match="not as path parameters"):

        @router.get("/items/{limit}")
        async def items(f: Annotated[Filter, Path()]) -> None: ...


def test_model_field_of_a_nested_struct_is_refused_naming_the_parameter(
    router: MsgspecRouter,
) -> None:
    with pytest.raises(TypeError, match=r"'f'.*'inner'"):

        @router.get("/items")
        async def items(f: Annotated[Nested, Query()]) -> None: ...


def page(limit: int = 10) -> int:
    return limit


def test_dependency_without_msgspec_types_is_fastapis_as_before(twin: Twin) -> None:
    router = twin.router_class()

    @router.get("/items")
    async def items(limit: Annotated[int, Depends(page)]) -> dict[str, int]:
        return {"limit": limit}

    assert get_json(router, "/items?limit=3") == {"limit": 3}


class StrictTokens(msgspec.Struct, forbid_unknown_fields=True):
    x_token: str


def test_header_model_ignores_an_unconverted_field_name_as_fastapi_does(twin: Twin) -> None:
    """`x_token: evil` is neither the field (its header is x-token) nor an extra to refuse."""
    router = twin.router_class()

    @router.get("/items")
    async def items(h: Annotated[StrictTokens, Header()]) -> StrictTokens:
        return h

    response = client_for(router).get("/items", headers={"x_token": "evil"})

    # Forbidding unknown fields refuses every other header (host, user-agent, ...), as
    # FastAPI's extra="forbid" does; the unconverted name is neither filled nor refused:
    # the one error about it is the field's, missing.
    about_the_field = [
        e for e in response.json()["detail"] if e["loc"][-1] in ("x-token", "x_token")
    ]
    assert [(e["loc"], e["type"]) for e in about_the_field] == [(fastapi_header_loc(), "missing")]


def test_model_error_keeps_the_received_body_on_both_tiers(router: MsgspecRouter) -> None:
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse

    @router.post("/items")
    async def items(point: Point, f: Annotated[Filter, Query()]) -> Point:
        return point

    app = FastAPI()

    @app.exception_handler(RequestValidationError)
    async def show_body(request: Any, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"body": exc.body}, status_code=422)

    app.include_router(router)
    response = TestClient(app).post("/items?limit=x", json={"x": 1})

    assert response.json() == {"body": {"x": 1}}


class Checkbox(msgspec.Struct):
    on: bool = False
    count: int = 0


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("on=on&count=1_0", {"on": True, "count": 10}),
        ("on=yes&count=%2B5", {"on": True, "count": 5}),
    ],
)
def test_query_model_reads_booleans_and_ints_as_fastapi_does(
    router: MsgspecRouter, query: str, expected: dict[str, Any]
) -> None:
    @router.get("/items")
    async def items(f: Annotated[Checkbox, Query()]) -> Checkbox:
        return f

    assert get_json(router, f"/items?{query}") == expected


def test_query_model_refuses_an_exponent_for_an_int_as_fastapi_does(router: MsgspecRouter) -> None:
    @router.get("/items")
    async def items(f: Annotated[Checkbox, Query()]) -> Checkbox:
        return f

    response = client_for(router).get("/items?count=1e3")
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert (error["loc"], error["input"]) == (["query", "count"], "1e3")


class OptionalKeys(TypedDict):
    limit: int
    q: NotRequired[str]


def test_query_model_typed_dict_with_a_not_required_field(router: MsgspecRouter) -> None:
    @router.get("/items")
    async def items(f: Annotated[OptionalKeys, Query()]) -> dict[str, Any]:
        return dict(f)

    assert get_json(router, "/items?limit=3") == {"limit": 3}
    assert client_for(router).get("/items?q=x").status_code == 422
