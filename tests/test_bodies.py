"""Request bodies: decoded from the raw bytes into msgspec types, in strict mode.

Every test here that takes the `router` fixture runs twice: on the direct tier and on
the delegated tier (see conftest.py).
"""

import dataclasses
import functools
import threading
from typing import Annotated, Any, Literal, TypedDict

import msgspec
import pydantic
import pytest
from fastapi import APIRouter, Body, Depends, File, Form, Header, HTTPException
from fastapi.testclient import TestClient
from pydantic import AliasChoices, Field
from support import assert_validation_error_shape, client_for, delegating_dependency
from twins import Twin

from msgspec_fastapi import MsgspecRouter


class City(msgspec.Struct):
    name: str
    population: int


class Point(TypedDict):
    x: int
    y: int


@dataclasses.dataclass
class Size:
    width: int
    height: int


class Cat(msgspec.Struct, tag="cat"):
    lives: int


class Dog(msgspec.Struct, tag="dog"):
    good: bool


class Measured(msgspec.Struct):
    value: Annotated[int, msgspec.Meta(ge=0, le=10)]


class Note(pydantic.BaseModel):
    text: str


class Holder(msgspec.Struct):
    payload: Any


CITY = {"name": "Oslo", "population": 700000}


def deeply_nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


# -- decoding into msgspec types ----------------------------------------------------------------


def test_struct_body_is_decoded_into_an_instance_of_the_struct(router: MsgspecRouter) -> None:
    @router.post("/cities")
    async def create(city: City) -> dict[str, Any]:
        return {"type": type(city).__name__, "name": city.name, "population": city.population}

    response = client_for(router).post("/cities", json=CITY)

    assert response.status_code == 200
    assert response.json() == {"type": "City", "name": "Oslo", "population": 700000}


def test_list_of_structs_body_is_decoded(router: MsgspecRouter) -> None:
    @router.post("/cities")
    async def create(cities: list[City]) -> list[str]:
        assert all(type(city) is City for city in cities)
        return [city.name for city in cities]

    response = client_for(router).post("/cities", json=[CITY, {"name": "Bergen", "population": 1}])

    assert response.json() == ["Oslo", "Bergen"]


def test_dict_body_is_decoded(router: MsgspecRouter) -> None:
    @router.post("/counts")
    async def count(counts: dict[str, int]) -> int:
        return sum(counts.values())

    client = client_for(router)

    assert client.post("/counts", json={"a": 1, "b": 2}).json() == 3
    assert client.post("/counts", json={"a": "1"}).status_code == 422


def test_typeddict_body_is_decoded(router: MsgspecRouter) -> None:
    @router.post("/points")
    async def point(p: Point) -> int:
        return p["x"] * p["y"]

    client = client_for(router)

    assert client.post("/points", json={"x": 3, "y": 4}).json() == 12
    assert client.post("/points", json={"x": 3}).status_code == 422


def test_dataclass_body_is_decoded(router: MsgspecRouter) -> None:
    @router.post("/sizes")
    async def area(size: Size) -> dict[str, Any]:
        return {"type": type(size).__name__, "area": size.width * size.height}

    response = client_for(router).post("/sizes", json={"width": 2, "height": 5})

    assert response.json() == {"type": "Size", "area": 10}


def test_tagged_union_body_is_decoded_by_its_tag(router: MsgspecRouter) -> None:
    @router.post("/pets")
    async def pet(pet: Cat | Dog) -> str:
        return type(pet).__name__

    client = client_for(router)

    assert client.post("/pets", json={"type": "cat", "lives": 9}).json() == "Cat"
    assert client.post("/pets", json={"type": "dog", "good": True}).json() == "Dog"
    assert client.post("/pets", json={"type": "fish"}).status_code == 422


def test_union_of_container_types_body_is_decoded(router: MsgspecRouter) -> None:
    @router.post("/values")
    async def values(value: list[int] | dict[str, int]) -> str:
        return type(value).__name__

    client = client_for(router)

    assert client.post("/values", json=[1, 2]).json() == "list"
    assert client.post("/values", json={"a": 1}).json() == "dict"
    assert client.post("/values", json="a").status_code == 422


def test_annotated_meta_constraint_on_the_body_is_enforced(router: MsgspecRouter) -> None:
    @router.post("/tags")
    async def tags(tags: Annotated[list[str], msgspec.Meta(max_length=2)]) -> int:
        return len(tags)

    client = client_for(router)

    assert client.post("/tags", json=["a", "b"]).json() == 2
    assert client.post("/tags", json=["a", "b", "c"]).status_code == 422


def test_meta_constraint_on_a_struct_field_is_enforced(router: MsgspecRouter) -> None:
    @router.post("/measure")
    async def measure(m: Measured) -> int:
        return m.value

    client = client_for(router)

    assert client.post("/measure", json={"value": 10}).json() == 10
    assert client.post("/measure", json={"value": 11}).status_code == 422
    assert client.post("/measure", json={"value": -1}).status_code == 422


def test_literal_field_rejects_values_outside_the_literal(router: MsgspecRouter) -> None:
    class Order(msgspec.Struct):
        side: Literal["buy", "sell"]

    @router.post("/orders")
    async def order(order: Order) -> str:
        return order.side

    client = client_for(router)

    assert client.post("/orders", json={"side": "sell"}).json() == "sell"
    assert client.post("/orders", json={"side": "hold"}).status_code == 422


def test_explicit_body_marker_makes_a_scalar_a_json_body(router: MsgspecRouter) -> None:
    @router.post("/double")
    async def double(number: Annotated[int, Body()]) -> int:
        return number * 2

    client = client_for(router)

    assert client.post("/double", json=21).json() == 42
    assert client.post("/double", json="21").status_code == 422


# -- Body(embed=True, alias=..., default=...) ---------------------------------------------------


def test_embedded_body_is_read_from_a_key_named_after_the_parameter(
    router: MsgspecRouter,
) -> None:
    @router.post("/cities")
    async def create(city: Annotated[City, Body(embed=True)]) -> str:
        return city.name

    client = client_for(router)

    assert client.post("/cities", json={"city": CITY}).json() == "Oslo"
    assert client.post("/cities", json=CITY).status_code == 422


def test_embedded_body_is_read_from_the_alias_key(router: MsgspecRouter) -> None:
    @router.post("/cities")
    async def create(city: Annotated[City, Body(embed=True, alias="town")]) -> str:
        return city.name

    client = client_for(router)

    assert client.post("/cities", json={"town": CITY}).json() == "Oslo"
    assert client.post("/cities", json={"city": CITY}).status_code == 422


def test_embedded_body_is_read_from_the_validation_alias_key(router: MsgspecRouter) -> None:
    @router.post("/cities")
    async def create(city: Annotated[City, Body(embed=True, validation_alias="town")]) -> str:
        return city.name

    client = client_for(router)

    assert client.post("/cities", json={"town": CITY}).json() == "Oslo"
    assert client.post("/cities", json={"city": CITY}).status_code == 422


def test_validation_alias_is_read_instead_of_the_alias(router: MsgspecRouter) -> None:
    @router.post("/cities")
    async def create(
        city: Annotated[City, Body(embed=True, alias="town", validation_alias="place")],
    ) -> str:
        return city.name

    client = client_for(router)

    assert client.post("/cities", json={"place": CITY}).json() == "Oslo"
    assert client.post("/cities", json={"town": CITY}).status_code == 422


def test_missing_embedded_part_is_located_at_its_validation_alias(router: MsgspecRouter) -> None:
    @router.post("/cities")
    async def create(
        city: Annotated[City, Body(embed=True, alias="town", validation_alias="place")],
    ) -> str:
        return city.name

    response = client_for(router).post("/cities", json={"city": CITY})

    assert [error["loc"] for error in response.json()["detail"]] == [["body", "place"]]


def _answers(router: APIRouter, *requests: Any) -> list[tuple[int, Any]]:
    """The status of each JSON body's response, with its JSON or its errors' `loc`s."""
    client = client_for(router)
    answers = []
    for sent in requests:
        response = client.post("/", json=sent)
        payload = response.json()
        if response.status_code == 422:
            payload = [error["loc"] for error in payload["detail"]]
        answers.append((response.status_code, payload))
    return answers


def test_field_alias_beside_body_is_read_as_fastapi_reads_it(router: MsgspecRouter) -> None:
    # FastAPI 0.165 reads the Field's alias, 0.142.2 the parameter's name.
    def declare(target: Any) -> None:
        @target.post("/")
        def read(value: Annotated[int, Field(alias="wire"), Body(embed=True)]) -> int:
            return value

    declare(router)
    plain = APIRouter()
    declare(plain)
    sent = ({"wire": 5}, {"value": 5})

    ours = _answers(router, *sent)
    assert ours == _answers(plain, *sent)
    assert sorted(status for status, _ in ours) == [200, 422]


def test_field_alias_on_inferred_body_parts_is_read_as_fastapi_reads_it(
    router: MsgspecRouter,
) -> None:
    def declare(target: Any) -> None:
        @target.post("/")
        def read(
            first: Annotated[list[int], Field(alias="numbers")],
            second: Annotated[list[int], Field(alias="unused", validation_alias="more")],
        ) -> list[int]:
            return [*first, *second]

    declare(router)
    plain = APIRouter()
    declare(plain)
    sent = ({"numbers": [1], "more": [2]}, {"first": [1], "second": [2]})

    ours = _answers(router, *sent)
    assert ours == _answers(plain, *sent)
    assert sorted(status for status, _ in ours) == [200, 422]


def test_alias_choices_on_a_body_part_are_read_by_fastapi(twin: Twin) -> None:
    # FastAPI 0.165 reads any of the choices, 0.142.2 the parameter's name.
    def declare(target: Any) -> None:
        @target.post("/")
        def read(
            name: Annotated[str, Body(validation_alias=AliasChoices("name", "title"))],
            count: Annotated[int, Body()],
        ) -> str:
            return f"{name} {count}"

    router = twin.router_class()
    declare(router)
    plain = APIRouter()
    declare(plain)
    sent = ({"title": "Mayor", "count": 2}, {"name": "Mayor", "count": 2}, {"count": 2})

    ours = _answers(router, *sent)
    assert ours == _answers(plain, *sent)
    assert ours[1] == (200, "Mayor 2")


def test_bytes_body_without_a_content_type_is_handed_over_raw(twin: Twin) -> None:
    router = twin.router_class()

    @router.post("/")
    async def read(data: Annotated[bytes, Body()]) -> str:
        return data.hex()

    response = client_for(router).post("/", content=b"\x00ok")

    assert (response.status_code, response.json()) == (200, "006f6b")


def test_bytes_body_sent_as_a_json_string_is_its_utf8(twin: Twin) -> None:
    router = twin.router_class()

    @router.post("/")
    async def read(data: Annotated[bytes, Body(embed=True)]) -> str:
        return data.hex()

    response = client_for(router).post("/", json={"data": "b2s="})

    assert response.json() == b"b2s=".hex()  # not base64-decoded


def test_alias_choices_on_a_struct_body_part_are_refused_at_registration(twin: Twin) -> None:
    # FastAPI, which alone reads AliasChoices, cannot read a Struct.
    router = twin.router_class()

    with pytest.raises(TypeError, match="AliasChoices"):

        @router.post("/")
        def read(city: Annotated[City, Body(validation_alias=AliasChoices("a", "b"))]) -> None:
            pass


def test_embedded_body_with_default_uses_it_when_the_key_is_absent(
    router: MsgspecRouter,
) -> None:
    @router.post("/limit")
    async def limit(limit: Annotated[int, Body(embed=True)] = 10) -> int:
        return limit

    client = client_for(router)

    assert client.post("/limit", json={"limit": 3}).json() == 3
    assert client.post("/limit", json={}).json() == 10


def test_body_default_is_used_when_no_body_is_sent(router: MsgspecRouter) -> None:
    @router.post("/cities")
    async def create(city: City | None = Body(default=None)) -> str:
        return "none" if city is None else city.name

    client = client_for(router)

    assert client.post("/cities").json() == "none"
    assert client.post("/cities", json=CITY).json() == "Oslo"


def test_mutable_body_default_is_not_shared_between_requests(router: MsgspecRouter) -> None:
    @router.post("/items")
    async def items(items: Annotated[list[int], Body()] = [1]) -> list[int]:  # noqa: B006
        items.append(2)
        return items

    client = client_for(router)

    assert client.post("/items").json() == [1, 2]
    assert client.post("/items").json() == [1, 2]


# -- strict mode --------------------------------------------------------------------------------


def test_string_is_not_accepted_for_int_field_in_strict_body(router: MsgspecRouter) -> None:
    @router.post("/cities")
    async def create(city: City) -> str:
        return city.name

    response = client_for(router).post("/cities", json={"name": "Oslo", "population": "1"})

    assert response.status_code == 422
    assert_validation_error_shape(response.json(), "body")


@pytest.mark.parametrize(
    ("annotation", "value"),
    [(float, "1.5"), (bool, "true"), (bool, 1), (int, 1.5), (str, 1)],
    ids=["str-for-float", "str-for-bool", "int-for-bool", "float-for-int", "int-for-str"],
)
def test_strict_body_does_not_coerce_between_json_types(
    router: MsgspecRouter, annotation: type, value: Any
) -> None:
    @router.post("/value")
    async def read(value: Annotated[annotation, Body(embed=True)]) -> str:  # type: ignore[valid-type]
        return repr(value)

    assert client_for(router).post("/value", json={"value": value}).status_code == 422


def test_int_is_accepted_for_float_field_in_strict_body(router: MsgspecRouter) -> None:
    @router.post("/value")
    async def read(value: Annotated[float, Body(embed=True)]) -> float:
        return value * 2

    assert client_for(router).post("/value", json={"value": 2}).json() == 4.0


# -- content types ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        "application/json;charset=UTF-8",
        "Application/JSON",
        "APPLICATION/JSON; CHARSET=UTF-8",
        "application/vnd.api+json",
        "application/problem+json; charset=utf-8",
        "application/LD+JSON",
        " application/json ",
    ],
)
def test_json_content_type_is_accepted(router: MsgspecRouter, content_type: str) -> None:
    @router.post("/cities")
    async def create(city: City) -> str:
        return city.name

    response = client_for(router).post(
        "/cities", content=msgspec.json.encode(CITY), headers={"content-type": content_type}
    )

    assert response.status_code == 200
    assert response.json() == "Oslo"


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "text/json",
        "application/xml",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonp",
        "application/json-seq",
        "application/vnd.api+xml",
        "json",
    ],
)
def test_other_content_type_is_rejected_with_415(router: MsgspecRouter, content_type: str) -> None:
    @router.post("/cities")
    async def create(city: City) -> str:
        return city.name

    response = client_for(router).post(
        "/cities", content=msgspec.json.encode(CITY), headers={"content-type": content_type}
    )

    assert response.status_code == 415
    assert isinstance(response.json()["detail"], str)


def test_body_without_content_type_is_rejected_by_default(router: MsgspecRouter) -> None:
    @router.post("/cities")
    async def create(city: City) -> str:
        return city.name

    response = client_for(router).post("/cities", content=msgspec.json.encode(CITY))

    assert response.status_code == 415


def test_body_without_content_type_is_parsed_when_the_app_is_not_strict(
    router: MsgspecRouter,
) -> None:
    @router.post("/cities")
    async def create(city: City) -> str:
        return city.name

    client = client_for(router, strict_content_type=False)

    assert client.post("/cities", content=msgspec.json.encode(CITY)).json() == "Oslo"


def test_body_without_content_type_is_parsed_when_the_router_is_not_strict(
    tier: str, twin: Twin
) -> None:
    dependencies = [Depends(delegating_dependency)] if tier == "delegated" else []
    router = twin.router_class(strict_content_type=False, dependencies=dependencies)

    @router.post("/cities")
    async def create(city: City) -> str:
        return city.name

    client = client_for(router)

    assert client.post("/cities", content=msgspec.json.encode(CITY)).json() == "Oslo"


def test_body_without_content_type_is_parsed_when_the_route_is_not_strict(
    router: MsgspecRouter,
) -> None:
    async def create(city: City) -> str:
        return city.name

    router.add_api_route("/lenient", create, methods=["POST"], strict_content_type=False)
    router.add_api_route("/strict", create, methods=["POST"])
    client = client_for(router)

    assert client.post("/lenient", content=msgspec.json.encode(CITY)).json() == "Oslo"
    assert client.post("/strict", content=msgspec.json.encode(CITY)).status_code == 415


def test_strict_route_wins_over_a_lenient_app(router: MsgspecRouter) -> None:
    async def create(city: City) -> str:
        return city.name

    router.add_api_route("/cities", create, methods=["POST"], strict_content_type=True)
    client = client_for(router, strict_content_type=False)

    assert client.post("/cities", content=msgspec.json.encode(CITY)).status_code == 415


def test_strict_route_wins_over_a_lenient_router(tier: str, twin: Twin) -> None:
    dependencies = [Depends(delegating_dependency)] if tier == "delegated" else []
    router = twin.router_class(strict_content_type=False, dependencies=dependencies)

    async def create(city: City) -> str:
        return city.name

    router.add_api_route("/cities", create, methods=["POST"], strict_content_type=True)
    client = client_for(router)

    assert client.post("/cities", content=msgspec.json.encode(CITY)).status_code == 415


def test_lenient_router_wins_over_a_strict_app(tier: str, twin: Twin) -> None:
    dependencies = [Depends(delegating_dependency)] if tier == "delegated" else []
    router = twin.router_class(strict_content_type=False, dependencies=dependencies)

    @router.post("/cities")
    async def create(city: City) -> str:
        return city.name

    client = client_for(router, strict_content_type=True)

    assert client.post("/cities", content=msgspec.json.encode(CITY)).json() == "Oslo"


def test_non_json_content_type_is_rejected_even_when_not_strict(router: MsgspecRouter) -> None:
    @router.post("/cities")
    async def create(city: City) -> str:
        return city.name

    client = client_for(router, strict_content_type=False)
    response = client.post(
        "/cities", content=msgspec.json.encode(CITY), headers={"content-type": "text/plain"}
    )

    assert response.status_code == 415


# -- malformed, too deep, missing, invalid ------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [b"{", b"{'name': 'Oslo'}", b'{"name": "Oslo", "population": 1} trailing', b"nul", b"\xff"],
    ids=["truncated", "single-quotes", "trailing-data", "bad-literal", "not-utf8"],
)
def test_malformed_json_is_rejected_with_400(router: MsgspecRouter, raw: bytes) -> None:
    @router.post("/cities")
    async def create(city: City) -> str:
        return city.name

    response = client_for(router).post(
        "/cities", content=raw, headers={"content-type": "application/json"}
    )

    assert response.status_code == 400
    assert isinstance(response.json()["detail"], str)


def test_malformed_json_after_an_invalid_field_is_still_a_400(router: MsgspecRouter) -> None:
    @router.post("/cities")
    async def create(city: City) -> str:
        return city.name

    raw = b'{"name": 1, "population": '
    response = client_for(router).post(
        "/cities", content=raw, headers={"content-type": "application/json"}
    )

    assert response.status_code == 400


def test_too_deeply_nested_json_is_rejected_with_400(router: MsgspecRouter) -> None:
    @router.post("/holder")
    async def hold(holder: Holder) -> str:
        return "ok"

    # Deeper than msgspec decodes on every supported CPython (3.12+ go far deeper than 3.11).
    raw = b'{"payload": ' + deeply_nested(200_000) + b"}"
    response = client_for(router).post(
        "/holder", content=raw, headers={"content-type": "application/json"}
    )

    assert response.status_code == 400
    assert isinstance(response.json()["detail"], str)


def test_too_deeply_nested_json_of_the_wrong_type_is_rejected_with_400(
    router: MsgspecRouter,
) -> None:
    @router.post("/cities")
    async def create(city: City) -> str:
        return city.name

    response = client_for(router).post(
        "/cities", content=deeply_nested(5000), headers={"content-type": "application/json"}
    )

    assert response.status_code == 400


def test_moderately_nested_json_is_accepted(router: MsgspecRouter) -> None:
    @router.post("/holder")
    async def hold(holder: Holder) -> str:
        return "ok"

    raw = b'{"payload": ' + deeply_nested(100) + b"}"
    response = client_for(router).post(
        "/holder", content=raw, headers={"content-type": "application/json"}
    )

    assert response.status_code == 200


def test_missing_body_is_rejected_with_422(router: MsgspecRouter) -> None:
    @router.post("/cities")
    async def create(city: City) -> str:
        return city.name

    response = client_for(router).post("/cities")

    assert response.status_code == 422
    assert_validation_error_shape(response.json(), "body")
    assert response.json()["detail"][0]["type"] == "missing"


def test_empty_json_body_is_treated_as_missing(router: MsgspecRouter) -> None:
    @router.post("/cities")
    async def create(city: City) -> str:
        return city.name

    response = client_for(router).post(
        "/cities", content=b"", headers={"content-type": "application/json"}
    )

    assert response.status_code == 422
    assert response.json()["detail"][0]["type"] == "missing"


def test_invalid_body_is_rejected_with_422_in_fastapi_error_shape(router: MsgspecRouter) -> None:
    @router.post("/cities")
    async def create(city: City) -> str:
        return city.name

    response = client_for(router).post("/cities", json={"name": "Oslo"})

    assert response.status_code == 422
    assert_validation_error_shape(response.json(), "body")
    assert response.json()["detail"][0]["loc"] == ["body", "population"]


def test_null_body_is_invalid_for_a_required_struct(router: MsgspecRouter) -> None:
    @router.post("/cities")
    async def create(city: City) -> str:
        return city.name

    response = client_for(router).post("/cities", json=None)

    assert response.status_code == 422


# -- ordering against dependencies --------------------------------------------------------------


def counting_app(twin: Twin, *, failing_auth: bool = False) -> tuple[TestClient, list[str]]:
    """A route with a body behind a dependency that records each run."""
    runs: list[str] = []

    def dependency(authorization: Annotated[str | None, Header()] = None) -> None:
        runs.append("dependency")
        if failing_auth and authorization != "secret":
            raise HTTPException(401, "Not authenticated")

    router = twin.router_class(dependencies=[Depends(dependency)])

    @router.post("/cities")
    async def create(city: City) -> str:
        return city.name

    return client_for(router), runs


def test_415_is_sent_before_dependencies_run(twin: Twin) -> None:
    client, runs = counting_app(twin)

    response = client.post("/cities", content=b"{}", headers={"content-type": "text/plain"})

    assert response.status_code == 415
    assert runs == []


def test_400_is_sent_before_dependencies_run(twin: Twin) -> None:
    client, runs = counting_app(twin)

    response = client.post("/cities", content=b"{", headers={"content-type": "application/json"})

    assert response.status_code == 400
    assert runs == []


def test_too_deep_400_is_sent_before_dependencies_run(twin: Twin) -> None:
    client, runs = counting_app(twin)

    response = client.post(
        "/cities", content=deeply_nested(5000), headers={"content-type": "application/json"}
    )

    assert response.status_code == 400
    assert runs == []


def test_422_is_sent_after_dependencies_run(twin: Twin) -> None:
    client, runs = counting_app(twin)

    response = client.post("/cities", json={"name": "Oslo"})

    assert response.status_code == 422
    assert runs == ["dependency"]


def test_missing_body_422_is_sent_after_dependencies_run(twin: Twin) -> None:
    client, runs = counting_app(twin)

    response = client.post("/cities")

    assert response.status_code == 422
    assert runs == ["dependency"]


def test_failing_auth_dependency_wins_over_an_invalid_body(twin: Twin) -> None:
    client, _ = counting_app(twin, failing_auth=True)

    response = client.post("/cities", json={"name": "Oslo"})

    assert response.status_code == 401
    assert response.json() == {"detail": "Not authenticated"}


def test_failing_auth_dependency_wins_over_a_missing_body(twin: Twin) -> None:
    client, _ = counting_app(twin, failing_auth=True)

    assert client.post("/cities").status_code == 401


def test_passing_auth_dependency_lets_the_422_through(twin: Twin) -> None:
    client, _ = counting_app(twin, failing_auth=True)

    response = client.post("/cities", json={"name": "Oslo"}, headers={"authorization": "secret"})

    assert response.status_code == 422


def test_valid_body_behind_a_dependency_reaches_the_endpoint(twin: Twin) -> None:
    client, runs = counting_app(twin)

    response = client.post("/cities", json=CITY)

    assert response.json() == "Oslo"
    assert runs == ["dependency"]


# -- sync and async endpoints -------------------------------------------------------------------


def test_sync_endpoint_receives_the_decoded_body(router: MsgspecRouter) -> None:
    @router.post("/cities")
    def create(city: City) -> City:
        return msgspec.structs.replace(city, population=city.population + 1)

    response = client_for(router).post("/cities", json=CITY)

    assert response.json() == {"name": "Oslo", "population": 700001}


def test_sync_endpoint_runs_outside_the_event_loop_thread(router: MsgspecRouter) -> None:
    threads: dict[str, int] = {}

    @router.post("/async")
    async def on_loop(city: City) -> None:
        threads["async"] = threading.get_ident()

    @router.post("/sync")
    def in_pool(city: City) -> None:
        threads["sync"] = threading.get_ident()

    with client_for(router) as client:
        assert client.post("/async", json=CITY).status_code == 200
        assert client.post("/sync", json=CITY).status_code == 200

    assert threads["sync"] != threads["async"]


# -- registration -------------------------------------------------------------------------------


def test_failed_registration_leaves_the_router_unchanged() -> None:
    router = MsgspecRouter()

    with pytest.raises(TypeError, match="form model"):

        @router.post("/mixed")
        async def mixed(city: Annotated[City, Form()], note: Note) -> None: ...

    assert router.routes == []


@pytest.mark.parametrize(
    ("marker", "annotation"),
    [(File, City), (Form, list[City]), (Form, City | None)],
    ids=["File", "Form list", "Form optional"],
)
def test_struct_as_file_or_inside_a_form_parameter_is_rejected_naming_it(
    marker: Any, annotation: Any
) -> None:
    # A whole Struct with Form() is a form model (tests/test_form_models.py).
    router = MsgspecRouter()

    with pytest.raises(TypeError, match="upload"):

        @router.post("/form")
        async def form(upload: Annotated[annotation, marker()]) -> None: ...


# -- endpoints that are not plain functions -----------------------------------------------------


class Counter:
    def __init__(self) -> None:
        self.seen: list[str] = []

    async def __call__(self, city: City) -> City:
        self.seen.append(city.name)
        return city


def test_callable_object_endpoint_receives_the_body(router: MsgspecRouter) -> None:
    counter = Counter()
    router.add_api_route("/cities", counter, methods=["POST"])

    response = client_for(router).post("/cities", json=CITY)

    assert response.json() == CITY
    assert counter.seen == ["Oslo"]


def test_partial_endpoint_receives_the_body(router: MsgspecRouter) -> None:
    def create(prefix: str, city: City) -> City:
        return msgspec.structs.replace(city, name=prefix + city.name)

    router.add_api_route("/cities", functools.partial(create, "Big "), methods=["POST"])

    response = client_for(router).post("/cities", json=CITY)

    assert response.json() == {"name": "Big Oslo", "population": 700000}
    assert client_for(router).post("/cities", json={"name": "x"}).status_code == 422
