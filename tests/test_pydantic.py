"""Pydantic models on a MsgspecRouter stay FastAPI's; plain routers work next to ours."""

import decimal
from typing import Annotated

import msgspec
import pydantic
from fastapi import APIRouter, FastAPI, Query
from fastapi.testclient import TestClient
from openapi_spec_validator import validate
from support import client_for
from twins import Twin

from msgspec_fastapi import MsgspecRouter, install_openapi


class Item(pydantic.BaseModel):
    name: str
    quantity: int


class Person(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(populate_by_name=True)
    full_name: str = pydantic.Field(alias="fullName")


class City(msgspec.Struct):
    name: str
    population: int


def test_pydantic_body_is_validated_by_pydantic_with_its_coercion(twin: Twin) -> None:
    router = twin.router_class()

    @router.post("/items")
    async def create(item: Item) -> dict[str, int]:
        return {"quantity": item.quantity}

    response = client_for(router).post("/items", json={"name": "pen", "quantity": "3"})

    assert response.status_code == 200
    assert response.json() == {"quantity": 3}


def test_invalid_pydantic_body_gets_fastapi_error(twin: Twin) -> None:
    router = twin.router_class()

    @router.post("/items")
    async def create(item: Item) -> None: ...

    response = client_for(router).post("/items", json={"name": "pen", "quantity": "many"})

    assert response.status_code == 422
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body", "quantity"]
    assert error["type"] == "int_parsing"


def test_pydantic_response_model_is_filtered_and_serialized_by_fastapi(twin: Twin) -> None:
    router = twin.router_class()

    @router.get("/person", response_model=Person)
    async def person():
        return {"full_name": "Ada Lovelace", "secret": "x"}

    assert client_for(router).get("/person").json() == {"fullName": "Ada Lovelace"}


def test_pydantic_return_annotation_is_validated_by_fastapi(twin: Twin) -> None:
    router = twin.router_class()

    @router.get("/item")
    async def item() -> Item:
        return {"name": "pen", "quantity": "2"}  # type: ignore[return-value]

    assert client_for(router).get("/item").json() == {"name": "pen", "quantity": 2}


def test_list_of_pydantic_models_response_is_left_to_fastapi(twin: Twin) -> None:
    router = twin.router_class()

    @router.get("/items")
    async def items() -> list[Item]:
        return [Item(name="pen", quantity=1)]

    assert client_for(router).get("/items").json() == [{"name": "pen", "quantity": 1}]


def test_parameters_of_a_pydantic_route_are_converted_with_msgspec(twin: Twin) -> None:
    router = twin.router_class()

    @router.post("/items")
    async def create(item: Item, price: decimal.Decimal) -> dict[str, bool]:
        return {"is_nan": price.is_nan()}

    client = client_for(router)

    assert client.post("/items?price=nan", json={"name": "p", "quantity": 1}).json() == {
        "is_nan": True
    }


def test_float_parameter_of_a_pydantic_route_rejects_a_leading_space(twin: Twin) -> None:
    router = twin.router_class()

    @router.get("/ratio")
    async def ratio(value: float) -> Item:
        return Item(name="ratio", quantity=int(value))

    response = client_for(router).get("/ratio", params={"value": " 1.5"})

    assert response.status_code == 422


def test_struct_body_and_pydantic_response_model_work_together(twin: Twin) -> None:
    router = twin.router_class()

    @router.post("/items", response_model=Item)
    async def create(city: City):
        return {"name": city.name, "quantity": city.population, "extra": True}

    response = client_for(router).post("/items", json={"name": "Oslo", "population": 2})

    assert response.json() == {"name": "Oslo", "quantity": 2}


def test_struct_body_is_strict_on_a_route_with_a_pydantic_response_model(twin: Twin) -> None:
    router = twin.router_class()

    @router.post("/items", response_model=Item)
    async def create(city: City):
        return {"name": city.name, "quantity": city.population}

    response = client_for(router).post("/items", json={"name": "Oslo", "population": "2"})

    assert response.status_code == 422


def test_plain_router_and_msgspec_router_side_by_side(twin: Twin) -> None:
    plain = APIRouter(prefix="/plain")

    @plain.post("/items")
    async def plain_create(item: Item) -> Item:
        return item

    ours = twin.router_class(prefix="/msgspec")

    @ours.post("/cities")
    async def create(city: City) -> City:
        return city

    app = FastAPI()
    app.include_router(plain)
    app.include_router(ours)
    install_openapi(app, ours)
    client = TestClient(app)

    lax = client.post("/plain/items", json={"name": "pen", "quantity": "1"})
    strict = client.post("/msgspec/cities", json={"name": "Oslo", "population": "1"})
    ok = client.post("/msgspec/cities", json={"name": "Oslo", "population": 1})

    assert lax.json() == {"name": "pen", "quantity": 1}
    assert strict.status_code == 422
    assert ok.json() == {"name": "Oslo", "population": 1}
    validate(app.openapi())


def test_plain_router_keeps_pydantic_parameter_coercion_next_to_a_msgspec_router(
    twin: Twin,
) -> None:
    plain = APIRouter(prefix="/plain")
    ours = twin.router_class(prefix="/msgspec")

    async def ratio(value: Annotated[float, Query()]):
        return {"value": value}

    plain.add_api_route("/ratio", ratio)
    ours.add_api_route("/ratio", ratio)
    app = FastAPI()
    app.include_router(plain)
    app.include_router(ours)
    client = TestClient(app)

    assert client.get("/plain/ratio", params={"value": " 1.5"}).json() == {"value": 1.5}
    assert client.get("/msgspec/ratio", params={"value": " 1.5"}).status_code == 422


def test_pydantic_route_on_a_msgspec_router_is_documented_by_fastapi() -> None:
    router = MsgspecRouter()

    @router.post("/items")
    async def create(item: Item) -> Item:
        return item

    app = FastAPI()
    app.include_router(router)
    install_openapi(app, router)
    document = app.openapi()
    validate(document)

    body = document["paths"]["/items"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"] == {"$ref": "#/components/schemas/Item"}
    assert "quantity" in document["components"]["schemas"]["Item"]["properties"]


def test_response_model_filtering_options_still_work_for_a_pydantic_response_model(
    twin: Twin,
) -> None:
    router = twin.router_class()

    @router.get("/item", response_model=Item, response_model_exclude={"quantity"})
    async def item():
        return Item(name="pen", quantity=1)

    assert client_for(router).get("/item").json() == {"name": "pen"}


def test_response_model_by_alias_false_still_works_for_a_pydantic_response_model(
    twin: Twin,
) -> None:
    router = twin.router_class()

    @router.get("/person", response_model=Person, response_model_by_alias=False)
    async def person():
        return Person(full_name="Ada Lovelace")

    assert client_for(router).get("/person").json() == {"full_name": "Ada Lovelace"}
