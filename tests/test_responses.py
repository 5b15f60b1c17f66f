"""Responses: typed ones encoded with msgspec (trusted or validated), untyped ones too.

Tests taking the `router` fixture run on both the direct and the delegated tier.
"""

import dataclasses
import datetime
import decimal
import math
import uuid
from typing import Annotated, Any, Generic, TypeVar

import msgspec
import pydantic
import pytest
from fastapi import BackgroundTasks, Depends, FastAPI, Request, Response
from fastapi.exceptions import ResponseValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse
from fastapi.testclient import TestClient
from support import assert_tier, client_for, tier_router
from twins import Twin

from msgspec_fastapi import MsgspecJSONResponse, MsgspecRouter

T = TypeVar("T")


class City(msgspec.Struct):
    name: str
    population: Annotated[int, msgspec.Meta(ge=0)]


class Capital(City):
    country: str


class Profile(msgspec.Struct, rename="camel", omit_defaults=True):
    first_name: str
    last_name: str = ""


class Reading(msgspec.Struct):
    value: float


class BoundedReading(msgspec.Struct):
    value: Annotated[float, msgspec.Meta(lt=1e308)]


class Price(msgspec.Struct):
    amount: decimal.Decimal


class Person(pydantic.BaseModel):
    full_name: str = pydantic.Field(alias="fullName")


OSLO = {"name": "Oslo", "population": 700000}


# -- typed responses ----------------------------------------------------------------------------


def test_return_annotation_struct_is_encoded_with_msgspec(router: MsgspecRouter) -> None:
    @router.get("/profile")
    async def profile() -> Profile:
        return Profile(first_name="Ada")

    response = client_for(router).get("/profile")

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"firstName": "Ada"}


def test_response_model_struct_is_encoded_with_msgspec(router: MsgspecRouter) -> None:
    @router.get("/profile", response_model=Profile)
    async def profile():
        return Profile(first_name="Ada", last_name="Lovelace")

    response = client_for(router).get("/profile")

    assert response.json() == {"firstName": "Ada", "lastName": "Lovelace"}


def test_response_model_wins_over_the_return_annotation(router: MsgspecRouter) -> None:
    @router.get("/city", response_model=City)
    async def city() -> dict[str, Any]:
        return {**OSLO, "mayor": "someone"}

    assert client_for(router).get("/city").json() == OSLO


def test_content_length_matches_the_encoded_body(router: MsgspecRouter) -> None:
    @router.get("/city")
    async def city() -> City:
        return City(name="Tromsø", population=1)

    response = client_for(router).get("/city")

    assert int(response.headers["content-length"]) == len(response.content)
    assert response.content == msgspec.json.encode(City(name="Tromsø", population=1))


@pytest.mark.parametrize("length", [2, 9, 10, 99, 100, 999, 1000, 65535, 100000])
def test_content_length_is_written_in_decimal_at_every_digit_count(
    router: MsgspecRouter, length: int
) -> None:
    """Lengths on both sides of each added digit: the compiled twin writes the header's
    digits itself."""

    @router.get("/text")
    async def text() -> str:
        return "x" * (length - 2)  # the JSON string's quotes make up the rest

    response = client_for(router).get("/text")

    assert len(response.content) == length
    assert response.headers["content-length"] == str(length)


def test_declared_struct_instance_is_encoded_without_revalidation(router: MsgspecRouter) -> None:
    @router.get("/city")
    async def city() -> City:
        return City(name="Nowhere", population=-5)  # constructors do not check Meta

    response = client_for(router).get("/city")

    assert response.status_code == 200
    assert response.json() == {"name": "Nowhere", "population": -5}


def test_struct_instance_with_wrong_field_type_passes_through_untouched(
    router: MsgspecRouter,
) -> None:
    @router.get("/city")
    async def city() -> City:
        return msgspec.structs.replace(City(name="Oslo", population=1), population="many")

    response = client_for(router).get("/city")

    assert response.status_code == 200
    assert response.json() == {"name": "Oslo", "population": "many"}


def test_dict_matching_the_declared_struct_is_validated_and_encoded(
    router: MsgspecRouter,
) -> None:
    @router.get("/city")
    async def city() -> City:
        return OSLO  # type: ignore[return-value]

    response = client_for(router).get("/city")

    assert response.status_code == 200
    assert response.json() == OSLO


def test_dict_not_matching_the_declared_struct_raises_response_validation_error(
    router: MsgspecRouter,
) -> None:
    @router.get("/city")
    async def city() -> City:
        return {"name": "Oslo"}  # type: ignore[return-value]

    with pytest.raises(ResponseValidationError):
        client_for(router).get("/city")


def test_invalid_response_is_a_500_for_the_client(router: MsgspecRouter) -> None:
    @router.get("/city")
    async def city() -> City:
        return {"name": "Oslo", "population": -1}  # type: ignore[return-value]

    response = client_for(router, raise_server_exceptions=False).get("/city")

    assert (response.status_code, response.text) == (500, "Internal Server Error")


def test_invalid_response_raises_response_validation_error(router: MsgspecRouter) -> None:
    @router.get("/city")
    async def city() -> City:
        return {"name": "Oslo", "population": -1}  # type: ignore[return-value]

    with pytest.raises(ResponseValidationError):
        client_for(router).get("/city")


def test_response_validation_error_reaches_a_custom_exception_handler(
    router: MsgspecRouter,
) -> None:
    @router.get("/city")
    async def city() -> City:
        return {"name": 5, "population": 1}  # type: ignore[return-value]

    app = FastAPI()
    app.include_router(router)

    @app.exception_handler(ResponseValidationError)
    async def on_bad_response(request: Request, exc: ResponseValidationError) -> JSONResponse:
        return JSONResponse({"bad_response": len(exc.errors())}, status_code=502)

    response = TestClient(app).get("/city")

    assert response.status_code == 502
    assert response.json() == {"bad_response": 1}


@pytest.mark.parametrize(
    ("response_model", "value"),
    [(Any, {None: 1}), (dict[str, Any], {"a": {(1, 2): 3}}), (list[Any], [{None: 1}])],
    ids=["Any", "dict-of-Any", "list-of-Any"],
)
def test_a_value_any_lets_through_that_msgspec_cannot_encode_is_a_response_validation_error(
    twin: Twin, tier: str, response_model: Any, value: Any
) -> None:
    # Upstream 0.0.4 raises the same; FastAPI's Pydantic serializer sends {"None": 1}.
    router = tier_router(twin, tier)
    router.add_api_route("/value", lambda: value, response_model=response_model)
    assert_tier(router, tier)

    with pytest.raises(ResponseValidationError) as raised:
        client_for(router).get("/value")

    assert raised.value.errors()[0]["loc"] == ("response",)


def test_a_value_any_lets_through_is_a_500_for_the_client(twin: Twin, tier: str) -> None:
    router = tier_router(twin, tier)
    router.add_api_route("/value", lambda: {None: 1}, response_model=Any)

    response = client_for(router, raise_server_exceptions=False).get("/value")

    assert response.status_code == 500


def test_subclass_instance_is_validated_against_the_declared_struct(
    router: MsgspecRouter,
) -> None:
    @router.get("/city")
    async def city() -> City:
        return Capital(name="Oslo", population=-1, country="NO")

    with pytest.raises(ResponseValidationError):
        client_for(router).get("/city")


def test_valid_subclass_instance_is_encoded_with_the_declared_fields_only(
    router: MsgspecRouter,
) -> None:
    @router.get("/city")
    async def city() -> City:
        return Capital(name="Oslo", population=1, country="NO")

    assert client_for(router).get("/city").json() == {"name": "Oslo", "population": 1}


def test_other_struct_class_with_the_same_fields_is_validated(router: MsgspecRouter) -> None:
    class Town(msgspec.Struct):
        name: str
        population: int

    @router.get("/city")
    async def city() -> City:
        return Town(name="Oslo", population=-1)  # type: ignore[return-value]

    with pytest.raises(ResponseValidationError):
        client_for(router).get("/city")


def test_scalar_response_type_is_validated(router: MsgspecRouter) -> None:
    @router.get("/count")
    async def count() -> int:
        return "three"  # type: ignore[return-value]

    with pytest.raises(ResponseValidationError):
        client_for(router).get("/count")


# -- lax validation, as FastAPI validates responses ---------------------------------------------


def test_string_of_digits_for_an_int_response_is_converted(router: MsgspecRouter) -> None:
    @router.get("/count", response_model=int)
    async def count() -> Any:
        return "1"

    response = client_for(router).get("/count")

    assert (response.status_code, response.json()) == (200, 1)


def test_numeric_string_for_a_float_field_is_converted(router: MsgspecRouter) -> None:
    @router.get("/reading")
    async def reading() -> Reading:
        return {"value": "1.0"}  # type: ignore[return-value]

    assert client_for(router).get("/reading").json() == {"value": 1.0}


def test_attribute_object_with_a_numeric_string_field_is_converted(
    router: MsgspecRouter,
) -> None:
    @router.get("/city")
    async def city() -> City:
        return CityRow("Oslo", "709037")  # type: ignore[arg-type, return-value]

    assert client_for(router).get("/city").json() == {"name": "Oslo", "population": 709037}


def test_nan_string_for_a_float_response_is_sent_as_null(router: MsgspecRouter) -> None:
    @router.get("/value", response_model=float)
    async def value() -> Any:
        return "nan"

    assert client_for(router).get("/value").text == "null"


def test_numeric_string_breaking_a_constraint_is_still_invalid(router: MsgspecRouter) -> None:
    @router.get("/city")
    async def city() -> City:
        return {"name": "Oslo", "population": "-1"}  # type: ignore[return-value]

    with pytest.raises(ResponseValidationError):
        client_for(router).get("/city")


# -- dataclasses: every field sent, as the declared type gives them -----------------------------


@dataclasses.dataclass
class Item:
    name: str
    price: float | None = None
    tags: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class FrozenItem:
    name: str
    price: float | None = None


class Order(msgspec.Struct):
    items: list[Item]


def test_dataclass_field_left_to_its_default_is_sent(router: MsgspecRouter) -> None:
    @router.get("/item", response_model=Item)
    async def item() -> Any:
        return {"name": "pen"}

    assert client_for(router).get("/item").json() == {"name": "pen", "price": None, "tags": []}


def test_frozen_dataclass_field_left_to_its_default_is_sent(router: MsgspecRouter) -> None:
    @router.get("/item", response_model=FrozenItem)
    async def item() -> Any:
        return {"name": "pen"}

    assert client_for(router).get("/item").json() == {"name": "pen", "price": None}


def test_dataclasses_nested_in_a_list_and_a_struct_get_their_defaults(
    router: MsgspecRouter,
) -> None:
    @router.get("/orders", response_model=list[Order])
    async def orders() -> Any:
        return [{"items": [{"name": "pen"}, {"name": "ink", "price": 2.5}]}]

    assert client_for(router).get("/orders").json() == [
        {
            "items": [
                {"name": "pen", "price": None, "tags": []},
                {"name": "ink", "price": 2.5, "tags": []},
            ]
        }
    ]


def test_attribute_object_validated_as_a_dataclass_gets_its_defaults(
    router: MsgspecRouter,
) -> None:
    class Row:  # not JSON: validated from its attributes
        def __init__(self) -> None:
            self.name = "pen"

    @router.get("/item", response_model=Item)
    async def item() -> Any:
        return Row()

    assert client_for(router).get("/item").json() == {"name": "pen", "price": None, "tags": []}


def test_dataclass_instance_returned_as_it_is_keeps_its_values(router: MsgspecRouter) -> None:
    @router.get("/item", response_model=Item)
    async def item() -> Any:
        return Item(name="pen", price=1.5, tags=["blue"])

    assert client_for(router).get("/item").json() == {"name": "pen", "price": 1.5, "tags": ["blue"]}


# -- non-finite numbers -------------------------------------------------------------------------


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
def test_non_finite_float_in_a_struct_instance_is_encoded_as_null(
    router: MsgspecRouter, value: float
) -> None:
    @router.get("/reading")
    async def reading() -> Reading:
        return Reading(value=value)

    assert client_for(router).get("/reading").json() == {"value": None}


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
def test_non_finite_float_in_a_validated_value_is_encoded_as_null(
    router: MsgspecRouter, value: float
) -> None:
    @router.get("/reading")
    async def reading() -> Reading:
        return {"value": value}  # type: ignore[return-value]

    response = client_for(router).get("/reading")

    assert response.status_code == 200
    assert response.json() == {"value": None}


def test_non_finite_float_in_a_validated_list_is_encoded_as_null(router: MsgspecRouter) -> None:
    @router.get("/values")
    async def values() -> list[float]:
        return [1.5, math.nan, math.inf]

    assert client_for(router).get("/values").json() == [1.5, None, None]


def test_constraint_rejecting_infinity_makes_the_response_invalid(
    router: MsgspecRouter,
) -> None:
    @router.get("/reading")
    async def reading() -> BoundedReading:
        return {"value": math.inf}  # type: ignore[return-value]

    with pytest.raises(ResponseValidationError):
        client_for(router).get("/reading")


def test_constraint_rejecting_nan_makes_the_response_invalid(router: MsgspecRouter) -> None:
    @router.get("/reading")
    async def reading() -> Annotated[list[float], msgspec.Meta(max_length=1)]:
        return [math.nan, 1.0]

    with pytest.raises(ResponseValidationError):
        client_for(router).get("/reading")


@pytest.mark.parametrize(
    ("value", "encoded"),
    [("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity")],
)
def test_non_finite_decimal_is_encoded_as_a_string(
    router: MsgspecRouter, value: str, encoded: str
) -> None:
    @router.get("/trusted")
    async def trusted() -> Price:
        return Price(amount=decimal.Decimal(value))

    @router.get("/validated")
    async def validated() -> Price:
        return {"amount": decimal.Decimal(value)}  # type: ignore[return-value]

    client = client_for(router)

    assert client.get("/trusted").json() == {"amount": encoded}
    assert client.get("/validated").json() == {"amount": encoded}


def test_finite_decimal_is_encoded_as_a_string(router: MsgspecRouter) -> None:
    @router.get("/price")
    async def price() -> Price:
        return Price(amount=decimal.Decimal("1.10"))

    assert client_for(router).get("/price").json() == {"amount": "1.10"}


# -- untyped responses --------------------------------------------------------------------------


def test_route_without_annotation_is_encoded_with_msgspec(router: MsgspecRouter) -> None:
    @router.get("/raw")
    async def raw():
        return {
            "bytes": b"\x00\xff",
            "decimal": decimal.Decimal("1.5"),
            "when": datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
            "id": uuid.UUID(int=1),
            "city": City(name="Oslo", population=1),
            "set": {1},
        }

    response = client_for(router).get("/raw")

    assert response.status_code == 200
    assert response.json() == {
        "bytes": "AP8=",
        "decimal": "1.5",
        "when": "2026-01-02T03:04:05Z",
        "id": "00000000-0000-0000-0000-000000000001",
        "city": {"name": "Oslo", "population": 1},
        "set": [1],
    }


def test_route_returning_none_annotation_is_encoded_with_msgspec(router: MsgspecRouter) -> None:
    @router.get("/raw")
    async def raw() -> None:
        return {"bytes": b"hi", "decimal": decimal.Decimal("2")}  # type: ignore[return-value]

    assert client_for(router).get("/raw").json() == {"bytes": "aGk=", "decimal": "2"}


def test_route_returning_none_sends_json_null(router: MsgspecRouter) -> None:
    @router.post("/fire")
    async def fire() -> None:
        return None

    response = client_for(router).post("/fire")

    assert response.status_code == 200
    assert response.content == b"null"


def test_pydantic_model_inside_an_untyped_response_is_dumped_with_aliases(
    router: MsgspecRouter,
) -> None:
    @router.get("/people")
    async def people():
        return {"people": [Person(fullName="Ada Lovelace")]}

    assert client_for(router).get("/people").json() == {"people": [{"fullName": "Ada Lovelace"}]}


def test_untyped_route_returning_an_unencodable_value_raises_type_error(
    router: MsgspecRouter,
) -> None:
    @router.get("/object")
    async def obj():
        return {"value": object()}

    with pytest.raises(TypeError, match="Encoding objects of type object is unsupported"):
        client_for(router).get("/object")


def test_untyped_response_names_none_and_bool_keys_as_json_does(router: MsgspecRouter) -> None:
    @router.get("/keys")
    async def keys():
        return {None: "none", True: "yes", False: "no"}

    assert client_for(router).get("/keys").json() == {"null": "none", "true": "yes", "false": "no"}


# -- returned Response objects, injected Response, status codes ---------------------------------


def test_returned_response_is_passed_through_untouched(router: MsgspecRouter) -> None:
    @router.get("/text")
    async def text() -> City:
        return PlainTextResponse("plain", status_code=203, headers={"x-kind": "text"})  # type: ignore[return-value]

    response = client_for(router).get("/text")

    assert response.status_code == 203
    assert response.text == "plain"
    assert response.headers["content-type"].startswith("text/plain")
    assert response.headers["x-kind"] == "text"


def test_returned_response_from_an_untyped_route_is_passed_through(router: MsgspecRouter) -> None:
    @router.get("/html")
    async def html():
        return HTMLResponse("<p>hi</p>")

    response = client_for(router).get("/html")

    assert response.text == "<p>hi</p>"
    assert response.headers["content-type"].startswith("text/html")


def test_status_code_of_the_route_is_used(router: MsgspecRouter) -> None:
    @router.post("/cities", status_code=201)
    async def create() -> City:
        return City(name="Oslo", population=1)

    response = client_for(router).post("/cities")

    assert response.status_code == 201
    assert response.json() == {"name": "Oslo", "population": 1}


def test_status_and_headers_set_on_an_injected_response_are_kept(twin: Twin) -> None:
    router = twin.router_class()

    @router.post("/cities", status_code=201)
    async def create(response: Response) -> City:
        response.status_code = 202
        response.headers["x-request-id"] = "abc"
        response.set_cookie("session", "s1")
        return City(name="Oslo", population=1)

    response = client_for(router).post("/cities")

    assert response.status_code == 202
    assert response.headers["x-request-id"] == "abc"
    assert response.cookies["session"] == "s1"
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"name": "Oslo", "population": 1}


def test_injected_response_without_changes_keeps_the_route_status(twin: Twin) -> None:
    router = twin.router_class()

    @router.post("/cities", status_code=201)
    async def create(response: Response) -> City:
        return City(name="Oslo", population=1)

    assert client_for(router).post("/cities").status_code == 201


@pytest.mark.parametrize("status", [204, 205, 304])
def test_bodyless_status_of_the_route_sends_no_body_and_no_content_length(
    router: MsgspecRouter, status: int
) -> None:
    @router.post("/nothing", status_code=status)
    async def nothing() -> None:
        return None

    response = client_for(router).post("/nothing")

    assert response.status_code == status
    assert response.content == b""
    assert "content-length" not in response.headers


@pytest.mark.parametrize("status", [204, 304])
def test_bodyless_status_set_on_an_injected_response_sends_no_body(status: int, twin: Twin) -> None:
    router = twin.router_class()

    @router.delete("/city")
    async def delete(response: Response) -> City:
        response.status_code = status
        return City(name="Oslo", population=1)

    response = client_for(router).delete("/city")

    assert response.status_code == status
    assert response.content == b""
    assert "content-length" not in response.headers


@pytest.mark.parametrize("status", [100, 103])
def test_informational_status_sends_no_body_and_no_content_length(
    router: MsgspecRouter, status: int
) -> None:
    @router.post("/info", status_code=status)
    async def info():
        return {"ignored": True}

    response = client_for(router).post("/info")

    assert response.status_code == status
    assert response.content == b""
    assert "content-length" not in response.headers


# -- custom response classes --------------------------------------------------------------------


def test_custom_response_class_is_kept_for_an_untyped_route(twin: Twin) -> None:
    router = twin.router_class()

    @router.get("/text", response_class=PlainTextResponse)
    async def text():
        return "hello"

    @router.get("/html", response_class=HTMLResponse)
    def html():
        return "<b>hi</b>"

    client = client_for(router)
    text_response = client.get("/text")
    html_response = client.get("/html")

    assert text_response.text == "hello"
    assert text_response.headers["content-type"].startswith("text/plain")
    assert html_response.text == "<b>hi</b>"
    assert html_response.headers["content-type"].startswith("text/html")


@pytest.mark.parametrize(
    "dependencies", [[], [Depends(lambda: None)]], ids=["no-dependency", "dependency"]
)
def test_custom_response_class_with_a_msgspec_body_is_kept_for_an_untyped_route(
    dependencies: list[Any],
    twin: Twin,
) -> None:
    router = twin.router_class(dependencies=dependencies)

    @router.post("/greet", response_class=PlainTextResponse)
    async def greet(city: City):
        return f"hello {city.name}"

    response = client_for(router).post("/greet", json=OSLO)

    assert response.text == "hello Oslo"
    assert response.headers["content-type"].startswith("text/plain")


# -- trusted containers -------------------------------------------------------------------------


def test_list_of_declared_structs_is_encoded(router: MsgspecRouter) -> None:
    @router.get("/cities")
    async def cities() -> list[City]:
        return [City(name="Oslo", population=1), City(name="Bergen", population=-2)]

    response = client_for(router).get("/cities")

    assert response.json() == [
        {"name": "Oslo", "population": 1},
        {"name": "Bergen", "population": -2},
    ]


def test_dict_of_declared_structs_is_encoded(router: MsgspecRouter) -> None:
    @router.get("/cities")
    async def cities() -> dict[str, City]:
        return {"oslo": City(name="Oslo", population=1)}

    assert client_for(router).get("/cities").json() == {"oslo": {"name": "Oslo", "population": 1}}


def test_tuple_of_declared_structs_is_encoded(router: MsgspecRouter) -> None:
    @router.get("/cities")
    async def cities() -> tuple[City, ...]:
        return (City(name="Oslo", population=1),)

    assert client_for(router).get("/cities").json() == [{"name": "Oslo", "population": 1}]


def test_optional_struct_is_encoded_as_null_or_object(router: MsgspecRouter) -> None:
    @router.get("/maybe/{present}")
    async def maybe(present: bool) -> City | None:
        return City(name="Oslo", population=1) if present else None

    client = client_for(router)

    assert client.get("/maybe/true").json() == {"name": "Oslo", "population": 1}
    assert client.get("/maybe/false").json() is None


def test_empty_list_response_is_encoded(router: MsgspecRouter) -> None:
    @router.get("/cities")
    async def cities() -> list[City]:
        return []

    assert client_for(router).get("/cities").json() == []


def test_mixed_list_with_a_valid_dict_is_validated_and_encoded(router: MsgspecRouter) -> None:
    @router.get("/cities")
    async def cities() -> list[City]:
        return [City(name="Oslo", population=1), {"name": "Bergen", "population": 2}]  # type: ignore[list-item]

    assert client_for(router).get("/cities").json() == [
        {"name": "Oslo", "population": 1},
        {"name": "Bergen", "population": 2},
    ]


def test_mixed_list_with_an_invalid_dict_is_a_response_validation_error(
    router: MsgspecRouter,
) -> None:
    @router.get("/cities")
    async def cities() -> list[City]:
        return [City(name="Oslo", population=1), {"name": "Bergen"}]  # type: ignore[list-item]

    with pytest.raises(ResponseValidationError):
        client_for(router).get("/cities")


def test_mixed_list_validates_the_struct_instances_too(router: MsgspecRouter) -> None:
    @router.get("/cities")
    async def cities() -> list[City]:
        return [City(name="Oslo", population=-1), {"name": "Bergen", "population": 2}]  # type: ignore[list-item]

    with pytest.raises(ResponseValidationError):
        client_for(router).get("/cities")


def test_dict_of_structs_with_a_non_struct_value_is_validated(router: MsgspecRouter) -> None:
    @router.get("/cities")
    async def cities() -> dict[str, City]:
        return {"oslo": City(name="Oslo", population=1), "bergen": {"name": 3}}  # type: ignore[dict-item]

    with pytest.raises(ResponseValidationError):
        client_for(router).get("/cities")


def test_list_response_of_a_wrong_container_type_is_validated(router: MsgspecRouter) -> None:
    @router.get("/cities")
    async def cities() -> list[City]:
        return {"not": "a list"}  # type: ignore[return-value]

    with pytest.raises(ResponseValidationError):
        client_for(router).get("/cities")


# -- background tasks attached to the injected objects ------------------------------------------


def test_background_task_runs_after_a_typed_response(twin: Twin) -> None:
    router = twin.router_class()
    done: list[str] = []

    @router.post("/cities")
    async def create(tasks: BackgroundTasks) -> City:
        tasks.add_task(done.append, "sent")
        return City(name="Oslo", population=1)

    response = client_for(router).post("/cities")

    assert response.json() == {"name": "Oslo", "population": 1}
    assert done == ["sent"]


# -- what a trusted instance does not check -----------------------------------------------------


class Country(msgspec.Struct):
    name: str
    capital: City


class Page(msgspec.Struct, Generic[T]):
    items: list[T]
    total: int


def test_nested_values_of_a_trusted_instance_are_not_checked(router: MsgspecRouter) -> None:
    @router.get("/country")
    async def country() -> Country:
        return Country(name="Norway", capital=City(name="Oslo", population=-1))

    response = client_for(router).get("/country")

    assert response.status_code == 200
    assert response.json() == {"name": "Norway", "capital": {"name": "Oslo", "population": -1}}


def test_type_parameters_of_a_trusted_generic_instance_are_not_checked(
    router: MsgspecRouter,
) -> None:
    @router.get("/page")
    async def page() -> Page[City]:
        return Page(items=[{"not": "a city"}], total=1)  # type: ignore[list-item]

    response = client_for(router).get("/page")

    assert response.status_code == 200
    assert response.json() == {"items": [{"not": "a city"}], "total": 1}


def test_dict_for_a_generic_struct_is_validated_with_its_type_parameters(
    router: MsgspecRouter,
) -> None:
    @router.get("/page")
    async def page() -> Page[City]:
        return {"items": [{"not": "a city"}], "total": 1}  # type: ignore[return-value]

    with pytest.raises(ResponseValidationError):
        client_for(router).get("/page")


def test_response_model_none_turns_off_validation_of_an_annotated_route(
    router: MsgspecRouter,
) -> None:
    @router.get("/city", response_model=None)
    async def city() -> City:
        return {"name": "Oslo", "extra": b"\x01"}  # type: ignore[return-value]

    response = client_for(router).get("/city")

    assert response.status_code == 200
    assert response.json() == {"name": "Oslo", "extra": "AQ=="}


# -- MsgspecJSONResponse on its own -------------------------------------------------------------


def test_msgspec_json_response_renders_with_msgspec() -> None:
    response = MsgspecJSONResponse({"city": City(name="Oslo", population=1), "raw": b"\x00"})

    assert response.body == b'{"city":{"name":"Oslo","population":1},"raw":"AA=="}'
    assert response.headers["content-type"] == "application/json"


def test_msgspec_json_response_returned_from_a_plain_fastapi_route_is_sent_as_is() -> None:
    app = FastAPI()

    @app.get("/price")
    async def price():
        return MsgspecJSONResponse({"amount": decimal.Decimal("1.5")}, status_code=202)

    response = TestClient(app).get("/price")

    assert response.status_code == 202
    assert response.json() == {"amount": "1.5"}


class CityRow:
    """An ORM-style row: the fields are attributes, and msgspec cannot encode it as is."""

    def __init__(self, name: str, population: int) -> None:
        self.name = name
        self.population = population


def test_object_with_the_fields_as_attributes_is_validated_and_encoded(
    router: MsgspecRouter,
) -> None:
    @router.get("/city")
    async def city() -> City:
        return CityRow("Oslo", 709037)  # type: ignore[return-value]

    response = client_for(router).get("/city")

    assert response.json() == {"name": "Oslo", "population": 709037}


def test_list_of_attribute_objects_is_validated_and_encoded(router: MsgspecRouter) -> None:
    @router.get("/cities", response_model=list[City])
    async def cities() -> Any:
        return [CityRow("Oslo", 1), CityRow("Bergen", 2)]

    response = client_for(router).get("/cities")

    assert response.json() == [
        {"name": "Oslo", "population": 1},
        {"name": "Bergen", "population": 2},
    ]


def test_attribute_object_with_an_invalid_field_raises_response_validation_error(
    router: MsgspecRouter,
) -> None:
    @router.get("/city")
    async def city() -> City:
        return CityRow("Oslo", -1)  # type: ignore[return-value]

    with pytest.raises(ResponseValidationError) as raised:
        client_for(router).get("/city")

    assert "population" in raised.value.errors()[0]["msg"]


def test_attribute_object_missing_a_field_raises_response_validation_error(
    router: MsgspecRouter,
) -> None:
    class Partial:
        name = "Oslo"

    @router.get("/city")
    async def city() -> City:
        return Partial()  # type: ignore[return-value]

    with pytest.raises(ResponseValidationError):
        client_for(router).get("/city")
