"""Body validation errors name each invalid field as FastAPI does, and bodies can have parts.

A 422 lists every invalid field of the body with FastAPI's `loc` (`["body", "population"]`,
`["body", 1, "population"]`), msgspec's message with the full path, the type
`value_error.msgspec` (`missing` / "Field required" for an absent field) and the `input`.
Parameter errors come first, then the body's. Several body parameters are embedded under
their names, as in FastAPI. Every test runs on both tiers (the `router` fixture).
"""

from __future__ import annotations

import inspect
import sys
import time
from typing import Annotated, Any

import msgspec
import pytest
from fastapi import APIRouter, Body, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient
from pydantic import BaseModel, ConfigDict
from support import client_for
from twins import Twin

from msgspec_fastapi import MsgspecRouter, install_openapi
from msgspec_fastapi._errors import validation
from msgspec_fastapi._errors.validation import MAX_ERRORS, BodyErrors


class Point(msgspec.Struct):
    x: int


class City(msgspec.Struct):
    name: str
    population: int
    scores: dict[str, int] = {}
    point: Point | None = None
    tags: list[int] = []


class Renamed(msgspec.Struct, rename={"population": "pop"}):
    population: int


class Closed(msgspec.Struct, forbid_unknown_fields=True):
    a: int


class Tree(msgspec.Struct):
    value: int
    children: list[Tree] = []


class PointModel(BaseModel):
    x: int


class CityModel(BaseModel):
    name: str
    population: int
    scores: dict[str, int] = {}
    point: PointModel | None = None
    tags: list[int] = []


class ClosedModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
    a: int


def post(router: APIRouter, path: str, body: Any) -> Any:
    content = body if isinstance(body, bytes) else msgspec.json.encode(body)
    headers = {"content-type": "application/json"} if content else {}
    return client_for(router).post(path, content=content, headers=headers)


def put(router: APIRouter, path: str, body: Any) -> Any:
    return client_for(router).put(path, json=body)


def locs(response: Any) -> list[list[Any]]:
    assert response.status_code == 422, response.text
    return [error["loc"] for error in response.json()["detail"]]


@pytest.fixture
def cities(router: MsgspecRouter) -> MsgspecRouter:
    @router.post("/city")
    async def city(city: City) -> str:
        return city.name

    @router.post("/cities")
    async def many(cities: list[City]) -> int:
        return len(cities)

    return router


# -- where an error is ------------------------------------------------------------------------


def test_a_wrong_field_is_located_by_its_name(cities: MsgspecRouter) -> None:
    response = post(cities, "/city", {"name": "a", "population": "many"})

    assert response.json()["detail"] == [
        {
            "type": "value_error.msgspec",
            "loc": ["body", "population"],
            "msg": "Expected `int`, got `str` - at `$.population`",
            "input": "many",
        }
    ]


def test_a_wrong_item_of_a_list_body_is_located_by_its_index(cities: MsgspecRouter) -> None:
    body = [{"name": "a", "population": 1}, {"name": "b", "population": "x"}]

    assert locs(post(cities, "/cities", body)) == [["body", 1, "population"]]


def test_a_wrong_field_of_a_nested_struct_is_located_through_it(cities: MsgspecRouter) -> None:
    body = {"name": "a", "population": 1, "point": {"x": "y"}}

    assert locs(post(cities, "/city", body)) == [["body", "point", "x"]]


def test_a_wrong_dict_value_is_located_by_its_key(cities: MsgspecRouter) -> None:
    body = {"name": "a", "population": 1, "scores": {"ok": 1, "bad": "v"}}

    assert locs(post(cities, "/city", body)) == [["body", "scores", "bad"]]


def test_a_wrong_dict_key_is_located_at_key_under_it_with_the_key_as_input(
    router: MsgspecRouter,
) -> None:
    @router.post("/weights")
    async def weights(weights: dict[int, float]) -> int:
        return len(weights)

    response = post(router, "/weights", {"foo": 2.2, "3": 3.3})

    assert response.json()["detail"] == [
        {
            "type": "value_error.msgspec",
            "loc": ["body", "foo", "[key]"],
            "msg": "Expected `int`, got `str` - at `key` in `$`",
            "input": "foo",
        }
    ]


def test_a_wrong_dict_key_and_its_wrong_value_are_both_reported(router: MsgspecRouter) -> None:
    @router.post("/weights")
    async def weights(weights: dict[int, float]) -> int:
        return len(weights)

    response = post(router, "/weights", {"foo": "heavy", "3": 3.3})

    assert locs(response) == [["body", "foo", "[key]"], ["body", "foo"]]


def test_a_wrong_nested_dict_key_is_located_through_its_parents(router: MsgspecRouter) -> None:
    @router.post("/weights")
    async def weights(weights: dict[str, dict[int, float]]) -> int:
        return len(weights)

    response = post(router, "/weights", {"a": {"1": 1.0, "foo": 2.0}})

    assert [(e["loc"], e["input"]) for e in response.json()["detail"]] == [
        (["body", "a", "foo", "[key]"], "foo")
    ]


def test_a_renamed_field_is_located_by_its_encoded_name(router: MsgspecRouter) -> None:
    @router.post("/renamed")
    async def renamed(item: Renamed) -> int:
        return item.population

    assert locs(post(router, "/renamed", {"pop": "x"})) == [["body", "pop"]]


def test_an_embedded_body_is_located_under_its_key(router: MsgspecRouter) -> None:
    @router.post("/embedded")
    async def embedded(city: Annotated[City, Body(embed=True, alias="town")]) -> str:
        return city.name

    response = post(router, "/embedded", {"town": {"name": "a", "population": "x"}})

    assert locs(response) == [["body", "town", "population"]]


def test_a_body_of_the_wrong_shape_is_located_at_the_body(cities: MsgspecRouter) -> None:
    assert locs(post(cities, "/city", [])) == [["body"]]


def test_an_out_of_range_number_is_located_by_msgspec_path(cities: MsgspecRouter) -> None:
    response = post(cities, "/city", b'{"name": "a", "population": 1e400}')

    assert locs(response) == [["body", "population"]]


# -- every invalid field ----------------------------------------------------------------------


def test_every_invalid_field_is_listed_in_field_order(cities: MsgspecRouter) -> None:
    body = {"tags": [1, "a"], "name": 5, "population": "many", "point": {"x": "y"}}

    assert locs(post(cities, "/city", body)) == [
        ["body", "name"],
        ["body", "population"],
        ["body", "point", "x"],
        ["body", "tags", 1],
    ]


def test_every_invalid_item_of_a_list_body_is_listed(cities: MsgspecRouter) -> None:
    body = [{"name": "a", "population": "x"}, {"name": "b", "population": 2}, {"name": 3}]

    assert locs(post(cities, "/cities", body)) == [
        ["body", 0, "population"],
        ["body", 2, "name"],
        ["body", 2, "population"],
    ]


def test_a_missing_field_is_fastapis_missing_error(cities: MsgspecRouter) -> None:
    response = post(cities, "/city", {"name": "a"})

    assert response.json()["detail"] == [
        {
            "type": "missing",
            "loc": ["body", "population"],
            "msg": "Field required",
            "input": {"name": "a"},
        }
    ]


def test_an_unknown_field_is_located_by_its_name(router: MsgspecRouter) -> None:
    @router.post("/closed")
    async def closed(item: Closed) -> int:
        return item.a

    response = post(router, "/closed", {"a": 1, "b": 2})

    assert response.json()["detail"] == [
        {
            "type": "value_error.msgspec",
            "loc": ["body", "b"],
            "msg": "Object contains unknown field `b`",
            "input": 2,
        }
    ]


def test_errors_of_a_megabyte_of_bad_items_stop_at_the_cap(cities: MsgspecRouter) -> None:
    item = {"name": 1, "population": "x" * 20}
    body = msgspec.json.encode([item] * 25_000)
    assert len(body) > 1_000_000

    response = post(cities, "/cities", body)

    assert len(locs(response)) == MAX_ERRORS
    assert locs(response)[:2] == [["body", 0, "name"], ["body", 0, "population"]]


def test_a_report_spent_before_its_first_field_names_the_first_error_msgspec_found(
    cities: MsgspecRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first item's check spends the whole budget: its fields are not walked.
    monkeypatch.setattr(validation, "WORK_BUDGET", 0)
    item = {"name": 1, "population": "x"}

    response = post(cities, "/cities", [item, item])

    assert locs(response) == [["body", 0, "name"]]


def test_a_report_lists_the_same_errors_however_slow_the_machine(
    cities: MsgspecRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Clocks that run a second a reading: what a report lists must not depend on them.
    readings = iter(range(10**9))
    for clock in ("perf_counter", "monotonic", "time", "process_time", "thread_time"):
        monkeypatch.setattr(time, clock, lambda: float(next(readings)))
    item = {"name": 1, "population": "x"}

    response = post(cities, "/cities", [item] * 3)

    assert len(locs(response)) == 6


def test_a_report_stops_where_its_checks_use_up_the_work_budget(
    cities: MsgspecRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each bad item costs three checks: the item, then each of its two fields (their
    # values are shorter than the item's, so each field costs less than `one_check`).
    item = {"name": 1, "population": "x"}
    one_check = validation.CHECK_COST + len(msgspec.json.encode(item))
    monkeypatch.setattr(validation, "WORK_BUDGET", 5 * one_check)

    response = post(cities, "/cities", [item] * 10)

    assert locs(response) == [
        ["body", 0, "name"],
        ["body", 0, "population"],
        ["body", 1, "name"],
        ["body", 1, "population"],
    ]


def test_a_report_counts_the_size_of_what_it_checks_against_the_work_budget(
    cities: MsgspecRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The budget of ten small checks: long values use it up after the second item's
    # name, where ten checks of small values would reach the fourth item.
    monkeypatch.setattr(validation, "WORK_BUDGET", 10 * validation.CHECK_COST)
    item = {"name": 1, "population": "x" * 1000}

    response = post(cities, "/cities", [item] * 10)

    assert locs(response) == [["body", 0, "name"], ["body", 0, "population"], ["body", 1, "name"]]


def test_a_deeply_nested_recursive_body_is_located_at_its_depth(router: MsgspecRouter) -> None:
    @router.post("/tree")
    async def tree(root: Tree) -> int:
        return root.value

    depth = 300
    body = b'{"value":1,"children":[' * depth + b'{"value":"x"}' + b"]}" * depth

    assert locs(post(router, "/tree", body)) == [["body", *["children", 0] * depth, "value"]]


def test_a_walk_deeper_than_python_allows_falls_back_to_msgspecs_error() -> None:
    depth = 100
    raw = b'{"value":1,"children":[' * depth + b'{"value":"x"}' + b"]}" * depth
    with pytest.raises(msgspec.ValidationError) as caught:
        msgspec.json.Decoder(Tree).decode(raw)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack()) + 3 * depth)  # enough to decode, not to walk
    try:
        error = BodyErrors(Tree)(caught.value, raw)
    finally:
        sys.setrecursionlimit(limit)

    assert [e["loc"] for e in error.errors()] == [("body", *["children", 0] * depth, "value")]


# -- the same locations as FastAPI with Pydantic ----------------------------------------------

PYDANTIC_CASES = [
    {"name": 5, "population": "many"},
    {"name": "a"},
    {"name": "a", "population": 1, "point": {}},
    {"name": "a", "population": 1, "scores": {"k": "v"}, "tags": [1, "a", "b"]},
    {"population": 1, "point": {"x": "1.5"}},
]


@pytest.mark.parametrize("body", PYDANTIC_CASES, ids=[str(b) for b in PYDANTIC_CASES])
def test_locations_are_the_ones_fastapi_gives_for_pydantic_models(
    cities: MsgspecRouter, body: dict[str, Any]
) -> None:
    pydantic = APIRouter()

    @pydantic.post("/city")
    async def city(city: CityModel) -> str:
        return city.name

    assert locs(post(cities, "/city", body)) == locs(post(pydantic, "/city", body))


def test_unknown_fields_are_located_as_pydantic_forbids_extra(router: MsgspecRouter) -> None:
    pydantic = APIRouter()

    @router.post("/closed")
    async def closed(item: Closed) -> int:
        return item.a

    @pydantic.post("/closed")
    async def closed_model(item: ClosedModel) -> int:
        return item.a

    body = {"a": "x", "b": 2}

    assert locs(post(router, "/closed", body)) == locs(post(pydantic, "/closed", body))


# -- parameters and body together -------------------------------------------------------------


def test_parameter_and_body_errors_are_reported_together(router: MsgspecRouter) -> None:
    @router.post("/cities")
    async def create(city: City, page: Annotated[int, Query()]) -> str:
        return city.name

    response = post(router, "/cities?page=x", {"name": 5, "population": 1})

    assert locs(response) == [["query", "page"], ["body", "name"]]


# -- the body a validation handler sees --------------------------------------------------------


def body_seen_by_handler(router: MsgspecRouter, target: str, content: bytes) -> Any:
    app = FastAPI()
    app.include_router(router)

    @app.exception_handler(RequestValidationError)
    async def show_body(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"body": exc.body}, status_code=422)

    headers = {"content-type": "application/json"} if content else {}
    response = TestClient(app).post(target, content=content, headers=headers)
    assert response.status_code == 422
    return response.json()["body"]


@pytest.fixture
def with_page(router: MsgspecRouter) -> MsgspecRouter:
    @router.post("/cities")
    async def create(city: City, page: Annotated[int, Query()] = 1) -> str:
        return city.name

    return router


def test_the_handler_gets_the_received_json_of_an_invalid_body(with_page: MsgspecRouter) -> None:
    content = b'{"name": "a", "population": "x"}'

    body = body_seen_by_handler(with_page, "/cities", content)

    assert body == {"name": "a", "population": "x"}


def test_the_handler_gets_the_received_json_when_a_parameter_is_invalid(
    with_page: MsgspecRouter,
) -> None:
    content = b'{"name": "a", "population": 1}'

    body = body_seen_by_handler(with_page, "/cities?page=x", content)

    assert body == {"name": "a", "population": 1}


def test_the_handler_gets_no_body_when_none_was_sent(with_page: MsgspecRouter) -> None:
    assert body_seen_by_handler(with_page, "/cities", b"") is None


# -- several body parameters -------------------------------------------------------------------


@pytest.fixture
def parts(router: MsgspecRouter) -> MsgspecRouter:
    @router.post("/parts")
    async def combine(
        city: City, point: Point, note: Annotated[str, Body(alias="n")], size: int = Body(3)
    ) -> dict[str, Any]:
        return {"city": city.name, "x": point.x, "note": note, "size": size}

    return router


def test_several_body_parameters_are_embedded_under_their_names(parts: MsgspecRouter) -> None:
    body = {"city": {"name": "Oslo", "population": 1}, "point": {"x": 2}, "n": "hi", "size": 4}

    response = post(parts, "/parts", body)

    assert response.json() == {"city": "Oslo", "x": 2, "note": "hi", "size": 4}


def test_an_embedded_part_with_a_default_may_be_left_out(parts: MsgspecRouter) -> None:
    body = {"city": {"name": "Oslo", "population": 1}, "point": {"x": 2}, "n": "hi"}

    assert post(parts, "/parts", body).json()["size"] == 3


def test_missing_parts_are_each_reported_under_their_key(parts: MsgspecRouter) -> None:
    response = post(parts, "/parts", b"")

    assert response.json()["detail"] == [
        {"type": "missing", "loc": ["body", key], "msg": "Field required", "input": None}
        for key in ("city", "point", "n")
    ]


def test_a_wrong_part_is_located_under_its_key(parts: MsgspecRouter) -> None:
    body = {"city": {"name": "Oslo", "population": "x"}, "point": {"x": 2}, "n": 5}

    assert locs(post(parts, "/parts", body)) == [["body", "city", "population"], ["body", "n"]]


def test_a_missing_part_of_a_body_object_has_no_input(parts: MsgspecRouter) -> None:
    body = {"city": {"name": "Oslo", "population": 1}, "n": "hi"}

    assert post(parts, "/parts", body).json()["detail"] == [
        {"type": "missing", "loc": ["body", "point"], "msg": "Field required", "input": None}
    ]


@pytest.mark.parametrize("body", [[], [1], 5, "text"], ids=["empty-list", "list", "int", "str"])
def test_a_body_that_is_no_object_misses_every_part_even_defaulted_ones(
    parts: MsgspecRouter, body: Any
) -> None:
    assert post(parts, "/parts", body).json()["detail"] == [
        {"type": "missing", "loc": ["body", key], "msg": "Field required", "input": None}
        for key in ("city", "point", "n", "size")
    ]


def test_parts_are_reported_in_the_order_of_the_parameters(router: MsgspecRouter) -> None:
    @router.post("/ordered")
    async def ordered(
        *, size: Annotated[int, Body()] = 3, point: Point, name: Annotated[str, Body()]
    ) -> int:
        return size

    response = post(router, "/ordered", {"size": "x"})

    assert locs(response) == [["body", "size"], ["body", "point"], ["body", "name"]]


def test_parts_beside_a_pydantic_model_are_missing_from_a_list_body(twin: Twin) -> None:
    router = twin.router_class()

    @router.put("/items")
    async def update(item: PointModel, importance: Annotated[int, Body()]) -> int:
        return importance

    response = put(router, "/items", [])

    assert response.json()["detail"] == [
        {"type": "missing", "loc": ["body", key], "msg": "Field required", "input": None}
        for key in ("item", "importance")
    ]


def test_parts_beside_a_pydantic_model_have_no_input_when_missing(twin: Twin) -> None:
    router = twin.router_class()

    @router.put("/items")
    async def update(item: PointModel, importance: Annotated[int, Body()]) -> int:
        return importance

    response = put(router, "/items", {})

    assert [error["input"] for error in response.json()["detail"]] == [None, None]


def test_the_parts_are_documented_as_one_body_schema(parts: MsgspecRouter) -> None:
    app = FastAPI()
    app.include_router(parts)
    install_openapi(app, parts)

    document = app.openapi()

    request_body = document["paths"]["/parts"]["post"]["requestBody"]
    ref = request_body["content"]["application/json"]["schema"]["$ref"]
    name = ref.rsplit("/", 1)[-1]
    schema = document["components"]["schemas"][name]
    assert name.startswith("Body_combine")
    assert request_body["required"] is True
    assert set(schema["properties"]) == {"city", "point", "n", "size"}
    assert sorted(schema["required"]) == ["city", "n", "point"]


def test_one_body_parameter_beside_a_body_scalar_are_both_embedded(router: MsgspecRouter) -> None:
    @router.post("/tagged")
    async def tagged(city: City, tag: Annotated[str, Body()]) -> str:
        return f"{city.name}:{tag}"

    body = {"city": {"name": "Oslo", "population": 1}, "tag": "t"}

    assert post(router, "/tagged", body).json() == "Oslo:t"
