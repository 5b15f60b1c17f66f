"""Pydantic routes on the direct tier.

A route FastAPI validates with Pydantic alone (a Pydantic body, response model or return
annotation, no msgspec type) runs on a MsgspecRouter without FastAPI's route handler,
where nothing between the request and the endpoint needs FastAPI's solving. Its answers
are those of the same route on an APIRouter: each test here builds one app of each and
compares status, headers and body bytes, and checks that our route was served by the
direct tier (FastAPI's solving never ran for it).
"""

from __future__ import annotations

import asyncio
import datetime
import decimal
from typing import Annotated, Any, Literal

import pydantic
import pytest
from fastapi import APIRouter, Body, FastAPI, Request
from fastapi.exceptions import RequestValidationError, ResponseValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse
from pydantic_apps import answer, apps, assert_same
from support import tier_router
from twins import Twin
from typing_extensions import TypedDict

from msgspec_fastapi._endpoint.pydantic_route import validates_json_alike


class Item(pydantic.BaseModel):
    name: str
    price: float
    tags: list[str] = []


class Shown(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(populate_by_name=True)
    full_name: str = pydantic.Field(alias="fullName")
    note: str | None = None
    secret: str = "hidden"


VALIDATED_ON_THE_LOOP: list[bool] = []


class Checked(pydantic.BaseModel):
    """Notes, each time it is validated, whether that ran on the event loop's thread."""

    name: str

    @pydantic.field_validator("name")
    @classmethod
    def note_thread(cls, value: str) -> str:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            VALIDATED_ON_THE_LOOP.append(False)
        else:
            VALIDATED_ON_THE_LOOP.append(True)
        return value


def item_routes(router: APIRouter) -> None:
    @router.post("/items")
    async def create(item: Item) -> Item:
        return item

    @router.get("/items/{item_id}", response_model=Item)
    async def read(item_id: int, q: str = "", limit: int = 10) -> Any:
        return {"name": f"é{item_id}{q}", "price": limit / 3}


def test_a_valid_body_is_validated_and_echoed_as_fastapi_does(
    twin: Twin, solved: list[Any]
) -> None:
    status, _, body = assert_same(
        twin, solved, item_routes, "POST", "/items", json={"name": "pen", "price": "2"}
    )
    assert (status, body) == (200, b'{"name":"pen","price":2.0,"tags":[]}')


def test_path_and_query_parameters_are_converted_as_fastapi_does(
    twin: Twin, solved: list[Any]
) -> None:
    status, _, body = assert_same(twin, solved, item_routes, "GET", "/items/7?q=x&limit=4")
    assert status == 200
    assert body == '{"name":"é7x","price":1.3333333333333333,"tags":[]}'.encode()


def test_a_bad_parameter_gets_pydantics_error_as_fastapi_gives_it(
    twin: Twin, solved: list[Any]
) -> None:
    status, _, body = assert_same(twin, solved, item_routes, "GET", "/items/seven?limit=many")
    assert status == 422
    assert b'"int_parsing"' in body


def test_malformed_json_is_fastapis_json_invalid_422(twin: Twin, solved: list[Any]) -> None:
    status, _, body = assert_same(
        twin, solved, item_routes, "POST", "/items", content=b'{"name": "pen",', headers=JSON
    )
    assert status == 422
    assert b'"json_invalid"' in body


def test_a_body_that_is_not_utf8_is_fastapis_400(twin: Twin, solved: list[Any]) -> None:
    status, _, _ = assert_same(
        twin, solved, item_routes, "POST", "/items", content=b'{"name": "\xff"}', headers=JSON
    )
    assert status == 400


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/problem+json", "application/json; charset=utf-8"]
)
def test_the_content_type_decides_whether_the_body_is_read_as_json(
    twin: Twin, solved: list[Any], content_type: str
) -> None:
    headers = {"content-type": content_type}
    assert_same(twin, solved, item_routes, "POST", "/items", content=PEN, headers=headers)


@pytest.mark.parametrize("strict", [True, False])
def test_a_body_without_content_type_is_json_only_where_the_router_is_not_strict(
    twin: Twin, solved: list[Any], strict: bool
) -> None:
    theirs, ours, router = apps(twin, item_routes, strict_content_type=strict)
    assert [route.tier for route in router.routes] == ["direct", "direct"]
    expected = answer(theirs, "POST", "/items", content=PEN)
    solved.clear()
    assert answer(ours, "POST", "/items", content=PEN) == expected
    assert not solved
    assert expected[0] == (422 if strict else 200)


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"null",
        b"[]",
        b'{"name": NaN, "price": Infinity}',
        b'{"name": "a", "name": "b"}',
        b'{"name": "a", "price": 1' + b"0" * 400 + b"}",
        b'{"name": "\\ud800", "price": 1}',
    ],
)
def test_unusual_json_bodies_get_fastapis_answer(twin: Twin, solved: list[Any], raw: bytes) -> None:
    assert_same(twin, solved, item_routes, "POST", "/items", content=raw, headers=JSON)


def test_an_optional_body_takes_its_default_when_empty(twin: Twin, solved: list[Any]) -> None:
    def define(router: APIRouter) -> None:
        @router.post("/items")
        async def create(item: Item | None = None) -> Item | None:
            return item

    status, _, body = assert_same(twin, solved, define, "POST", "/items")
    assert (status, body) == (200, b"null")


def test_embedded_and_several_body_parameters_are_read_by_key(
    twin: Twin, solved: list[Any]
) -> None:
    def define(router: APIRouter) -> None:
        @router.post("/embedded")
        async def embedded(item: Annotated[Item, Body(embed=True)]) -> Item:
            return item

        @router.post("/several")
        async def several(item: Item, shown: Shown) -> list[Item]:
            return [item, Item(name=shown.full_name, price=0)]

    pen = {"name": "pen", "price": 1}
    assert_same(twin, solved, define, "POST", "/embedded", json={"item": pen})
    assert_same(twin, solved, define, "POST", "/embedded", json=pen)
    both = {"item": pen, "shown": {"fullName": "Ada"}}
    status, _, _ = assert_same(twin, solved, define, "POST", "/several", json=both)
    assert status == 200
    assert_same(twin, solved, define, "POST", "/several", json={"item": pen, "shown": 3})


def test_parameter_and_body_errors_are_reported_together_in_fastapis_order(
    twin: Twin, solved: list[Any]
) -> None:
    def define(router: APIRouter) -> None:
        @router.post("/items/{item_id}")
        async def update(item_id: int, item: Item) -> Item:
            return item

    status, _, body = assert_same(twin, solved, define, "POST", "/items/x", json={"name": 1})
    assert status == 422
    assert body.index(b'"path"') < body.index(b'"body"')


def test_response_model_options_shape_the_response_as_fastapi_does(
    twin: Twin, solved: list[Any]
) -> None:
    def define(router: APIRouter) -> None:
        @router.get("/none", response_model=Shown, response_model_exclude_none=True)
        async def exclude_none() -> Any:
            return {"fullName": "Ada"}

        @router.get("/unset", response_model=Shown, response_model_exclude_unset=True)
        async def exclude_unset() -> Any:
            return Shown(full_name="Ada", note=None)

        @router.get("/include", response_model=Shown, response_model_include={"note"})
        async def include() -> Any:
            return {"fullName": "Ada", "note": "n"}

        @router.get("/by-name", response_model=Shown, response_model_by_alias=False)
        async def by_name() -> Any:
            return {"fullName": "Ada"}

    for url in ("/none", "/unset", "/include", "/by-name"):
        status, _, _ = assert_same(twin, solved, define, "GET", url)
        assert status == 200


def test_an_invalid_result_raises_fastapis_response_validation_error(
    twin: Twin, solved: list[Any]
) -> None:
    seen: list[Any] = []

    def define(router: APIRouter) -> None:
        @router.get("/bad")
        async def bad() -> Item:
            return {"name": ["not", "a", "name"]}  # type: ignore[return-value]

    theirs, ours, _ = apps(twin, define)
    for app in (theirs, ours):

        @app.exception_handler(ResponseValidationError)
        async def record(request: Request, exc: ResponseValidationError) -> JSONResponse:
            # Not str(exc): FastAPI caches endpoint contexts by id(), which a later
            # function may reuse, so the text can name another function on either side.
            seen.append((exc.errors(), exc.body))
            return JSONResponse({"failed": True}, status_code=500)

    assert answer(ours, "GET", "/bad") == answer(theirs, "GET", "/bad")
    assert seen[0] == seen[1]


def test_an_unhandled_response_validation_error_is_a_500(twin: Twin, solved: list[Any]) -> None:
    def define(router: APIRouter) -> None:
        @router.get("/bad")
        def bad() -> Item:
            return {"price": "free"}  # type: ignore[return-value]

    status, _, _ = assert_same(twin, solved, define, "GET", "/bad")
    assert status == 500


def test_a_sync_endpoints_result_is_validated_in_a_worker_thread(
    twin: Twin, solved: list[Any]
) -> None:
    def define(router: APIRouter) -> None:
        @router.get("/checked")
        def checked() -> Checked:
            return {"name": "a"}  # type: ignore[return-value]

    VALIDATED_ON_THE_LOOP.clear()
    assert_same(twin, solved, define, "GET", "/checked")
    assert VALIDATED_ON_THE_LOOP == [False, False]


def test_a_chosen_response_class_renders_the_validated_result(
    twin: Twin, solved: list[Any]
) -> None:
    def define(router: APIRouter) -> None:
        @router.get("/json", response_class=JSONResponse, response_model_exclude={"tags"})
        async def json_class() -> Item:
            return Item(name="é", price=float("1e16"))

        @router.post("/text", response_class=PlainTextResponse, status_code=203)
        async def text_class(item: Item):  # type: ignore[no-untyped-def]
            return item.name

    assert assert_same(twin, solved, define, "GET", "/json")[0] == 200
    text = assert_same(twin, solved, define, "POST", "/text", content=PEN, headers=JSON)
    assert text[0] == 203


def test_a_result_without_response_model_is_made_json_ready_by_fastapi(
    twin: Twin, solved: list[Any]
) -> None:
    def define(router: APIRouter) -> None:
        @router.post("/items")
        async def create(item: Item):  # type: ignore[no-untyped-def]
            return {"item": item, "when": datetime.date(2024, 1, 2), "ratio": 0.1}

    # FastAPI's JSONResponse renders the routes of this router: no msgspec type is left.
    theirs, ours, router = apps(twin, define, default_response_class=JSONResponse)
    assert [route.tier for route in router.routes] == ["direct"]
    expected = answer(theirs, "POST", "/items", content=PEN, headers=JSON)
    solved.clear()
    assert answer(ours, "POST", "/items", content=PEN, headers=JSON) == expected
    assert not solved
    assert expected[0] == 200


def test_a_redirect_class_keeps_its_own_status_where_the_route_sets_none(
    twin: Twin, solved: list[Any]
) -> None:
    def define(router: APIRouter) -> None:
        @router.get("/away", response_class=RedirectResponse)
        async def away():  # type: ignore[no-untyped-def]
            return "/elsewhere"

    options = {"follow_redirects": False}
    assert assert_same(twin, solved, define, "GET", "/away", **options)[0] == 307


def test_a_returned_response_is_sent_as_it_is(twin: Twin, solved: list[Any]) -> None:
    def define(router: APIRouter) -> None:
        @router.get("/text", response_model=Item)
        async def text() -> Any:
            return PlainTextResponse("plain", headers={"x-kind": "text"})

    status, _, body = assert_same(twin, solved, define, "GET", "/text")
    assert (status, body) == (200, b"plain")


@pytest.mark.parametrize("status_code", [201, 202, 299])
def test_the_routes_status_code_is_sent_with_fastapis_headers(
    twin: Twin, solved: list[Any], status_code: int
) -> None:
    def define(router: APIRouter) -> None:
        @router.get("/status", status_code=status_code)
        async def status() -> Item:
            return Item(name="a", price=1)

    assert_same(twin, solved, define, "GET", "/status")


def test_a_validation_error_handler_sees_the_body_fastapi_parsed(
    twin: Twin, solved: list[Any]
) -> None:
    seen: list[Any] = []
    theirs, ours, _ = apps(twin, item_routes)
    for app in (theirs, ours):

        @app.exception_handler(RequestValidationError)
        async def record(request: Request, exc: RequestValidationError) -> JSONResponse:
            seen.append((exc.errors(), exc.body))  # not str(exc): see above
            return JSONResponse({"invalid": True}, status_code=422)

    for raw in (b'{"name": 3}', b'{"name"', b""):
        seen.clear()
        mine = answer(ours, "POST", "/items", content=raw, headers=JSON)
        assert answer(theirs, "POST", "/items", content=raw, headers=JSON) == mine
        assert seen[1] == seen[0]


class _OwnHandler(APIRouter):
    pass


JSON = {"content-type": "application/json"}
PEN = b'{"name": "pen", "price": 1}'


class Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(strict=True)
    when: datetime.datetime


class StrictField(pydantic.BaseModel):
    when: Annotated[datetime.datetime, pydantic.Field(strict=True)]


class Priced(pydantic.BaseModel):
    price: decimal.Decimal


class Either(pydantic.BaseModel):
    value: datetime.date | str


class Raw(pydantic.BaseModel):
    data: bytes


class SeesInput(pydantic.BaseModel):
    name: str

    @pydantic.field_validator("name", mode="before")
    @classmethod
    def from_number(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) else value


class Stripped(pydantic.BaseModel):
    name: str

    @pydantic.field_validator("name")
    @classmethod
    def stripped(cls, value: str) -> str:
        return value.strip()


class Tree(pydantic.BaseModel):
    name: str
    children: list[Tree] = []
    scores: dict[str, float] = {}
    when: datetime.datetime | None = None
    kind: Literal["a", "b"] = "a"


@pytest.mark.parametrize("model", [Item, Shown, Stripped, Tree, list[Item], dict[str, Item]])
def test_types_json_reads_alike_are_validated_from_the_bytes(model: Any) -> None:
    assert validates_json_alike(pydantic.TypeAdapter(model).core_schema)


@pytest.mark.parametrize("model", [Strict, StrictField, Priced, Either, Raw, SeesInput])
def test_types_json_may_read_otherwise_take_fastapis_parse(model: Any) -> None:
    assert not validates_json_alike(pydantic.TypeAdapter(model).core_schema)


@pytest.mark.parametrize(
    ("model", "raw"),
    [
        (Strict, b'{"when": "2024-01-02T03:04:05"}'),
        (StrictField, b'{"when": "2024-01-02T03:04:05"}'),
        (Priced, b'{"price": 1.10000000000000000001}'),
        (Either, b'{"value": "2024-01-02"}'),
        (Raw, b'{"data": "YWJj"}'),
        (SeesInput, b'{"name": 12}'),
        (Stripped, b'{"name": " padded "}'),
        (Tree, b'{"name": "r", "children": [{"name": "c", "when": 0}], "scores": {"x": 1e400}}'),
    ],
)
def test_each_kind_of_body_gets_fastapis_answer(
    twin: Twin, solved: list[Any], model: Any, raw: bytes
) -> None:
    async def echo(body):  # type: ignore[no-untyped-def]
        return body

    echo.__annotations__ = {"body": model, "return": model}

    def define(router: APIRouter) -> None:
        router.post("/echo")(echo)

    assert_same(twin, solved, define, "POST", "/echo", content=raw, headers=JSON)


def test_routes_behind_install_dispatch_answer_as_on_an_api_router(
    twin: Twin, solved: list[Any]
) -> None:
    theirs, ours, router = apps(twin, item_routes)
    twin.install_dispatch(ours)
    assert [route.tier for route in router.routes] == ["direct", "direct"]
    for method, url, options in [
        ("GET", "/items/3?q=a", {}),
        ("GET", "/items/x", {}),
        ("POST", "/items", {"content": PEN, "headers": JSON}),
        ("POST", "/items", {"content": b"{", "headers": JSON}),
    ]:
        expected = answer(theirs, method, url, **options)
        solved.clear()
        assert answer(ours, method, url, **options) == expected
        assert not solved


def body_routes(router: APIRouter) -> None:
    @router.post("/items", status_code=201)
    async def create(item: Item):  # type: ignore[no-untyped-def]
        return {"name": item.name, "total": item.price * 2, "item": item}


@pytest.mark.parametrize(
    ("raw", "headers"),
    [
        (PEN, JSON),
        (b'{"name": 3}', JSON),
        (b'{"name"', JSON),
        (PEN, {"content-type": "text/plain"}),
        (b"", JSON),
        (PEN, {"content-type": "application/json", "accept": "application/msgpack"}),
    ],
)
def test_a_pydantic_body_with_a_msgspec_response_answers_as_on_the_delegated_tier(
    twin: Twin, solved: list[Any], raw: bytes, headers: dict[str, str]
) -> None:
    delegated = FastAPI()
    slow = tier_router(twin, "delegated", msgpack=True)
    body_routes(slow)
    delegated.include_router(slow)
    ours = FastAPI()
    router = twin.router_class(msgpack=True)
    body_routes(router)
    ours.include_router(router)
    assert [route.tier for route in router.routes] == ["direct"]
    expected = answer(delegated, "POST", "/items", content=raw, headers=headers)
    solved.clear()
    assert answer(ours, "POST", "/items", content=raw, headers=headers) == expected
    assert not solved


def test_a_pydantic_body_with_a_msgspec_response_answers_valid_json_as_fastapi_does(
    twin: Twin, solved: list[Any]
) -> None:
    status, _, body = assert_same(
        twin, solved, body_routes, "POST", "/items", json={"name": "é", "price": 1.5}
    )
    assert status == 201
    assert body == '{"name":"é","total":3.0,"item":{"name":"é","price":1.5,"tags":[]}}'.encode()


class Limits(TypedDict):
    count: Annotated[int, pydantic.Field(gt=0)]


def test_pydantic_constraints_on_a_typed_dicts_fields_are_applied_as_fastapi_does(
    twin: Twin, solved: list[Any]
) -> None:
    def define(router: APIRouter) -> None:
        @router.post("/limits")
        async def limits(body: Limits) -> Item:
            return Item(name="n", price=body["count"])

    status, _, _ = assert_same(
        twin, solved, define, "POST", "/limits", content=b'{"count": 0}', headers=JSON
    )
    assert status == 422


class Deferred(pydantic.BaseModel):
    """A model whose validator and serializer Pydantic builds on first use."""

    model_config = pydantic.ConfigDict(defer_build=True)
    name: str


def test_a_model_built_on_first_use_answers_as_on_an_api_router(twin: Twin) -> None:
    def define(router: APIRouter) -> None:
        @router.post("/deferred")
        async def deferred(body: Deferred) -> Deferred:
            return body

    theirs, ours, _ = apps(twin, define)
    for raw in (b'{"name": "a"}', b'{"name": 1}', b"{"):
        expected = answer(theirs, "POST", "/deferred", content=raw, headers=JSON)
        assert answer(ours, "POST", "/deferred", content=raw, headers=JSON) == expected
