"""install_openapi: msgspec schemas in the OpenAPI document, and a document that validates."""

import datetime
import decimal
import enum
import json
import os
import pathlib
import subprocess
import sys
import uuid
from typing import Annotated, Any, Generic, Literal, TypeVar

import msgspec
import openapi_models
import pydantic
import pytest
from fastapi import APIRouter, Body, FastAPI, Header, Path, Query
from fastapi.exceptions import ResponseValidationError
from fastapi.testclient import TestClient
from openapi_spec_validator import validate
from twins import Twin

from msgspec_fastapi import MsgspecJSONResponse, MsgspecRouter, install_openapi

T = TypeVar("T")


class City(msgspec.Struct):
    name: str
    population: int


class Status(enum.Enum):
    ACTIVE = "active"
    RETIRED = "retired"


class Cat(msgspec.Struct, tag="cat"):
    lives: Annotated[int, msgspec.Meta(ge=0, le=9)]


class Dog(msgspec.Struct, tag="dog"):
    good: bool = True


class Airport(msgspec.Struct, rename="camel", omit_defaults=True):
    iata_code: Annotated[str, msgspec.Meta(pattern="^[A-Z]{3}$")]
    opened_at: datetime.datetime
    status: Status = Status.ACTIVE
    elevation_m: float | None = None
    tags: list[str] = []
    fee: decimal.Decimal | None = None
    ident: uuid.UUID | None = None


class Page(msgspec.Struct, Generic[T]):
    items: list[T]
    total: Annotated[int, msgspec.Meta(ge=0)]
    next_cursor: str | None = None


class Note(pydantic.BaseModel):
    text: str = pydantic.Field(max_length=10)


def document_for(app: FastAPI) -> dict[str, Any]:
    document = app.openapi()
    validate(document)
    return document


def operation(document: dict[str, Any], path: str, method: str) -> dict[str, Any]:
    return document["paths"][path][method]


def resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema["$ref"]
    assert ref.startswith("#/components/schemas/")
    return document["components"]["schemas"][ref.removeprefix("#/components/schemas/")]


def city_app() -> FastAPI:
    router = MsgspecRouter()

    @router.post("/cities/{country}", status_code=201)
    async def create(
        country: Annotated[str, Path(max_length=2)],
        city: City,
        limit: Annotated[int, Query(ge=1)] = 5,
    ) -> list[City]:
        return [city]

    app = FastAPI()
    app.include_router(router)
    install_openapi(app, router)
    return app


# -- what install_openapi adds --------------------------------------------------------------------


def test_struct_schema_is_added_under_components() -> None:
    document = document_for(city_app())

    city = document["components"]["schemas"]["City"]
    assert city["type"] == "object"
    assert set(city["properties"]) == {"name", "population"}
    assert city["required"] == ["name", "population"]


def test_request_body_refers_to_the_struct_schema() -> None:
    document = document_for(city_app())

    body = operation(document, "/cities/{country}", "post")["requestBody"]
    assert body["required"] is True
    schema = body["content"]["application/json"]["schema"]
    assert resolve(document, schema) == document["components"]["schemas"]["City"]


def test_response_schema_is_documented_under_the_route_status_code() -> None:
    document = document_for(city_app())

    responses = operation(document, "/cities/{country}", "post")["responses"]
    schema = responses["201"]["content"]["application/json"]["schema"]
    assert schema["type"] == "array"
    assert resolve(document, schema["items"])["title"] == "City"


def test_400_and_422_responses_are_documented_for_a_body_route() -> None:
    document = document_for(city_app())

    responses = operation(document, "/cities/{country}", "post")["responses"]
    assert "400" in responses
    error = resolve(document, responses["422"]["content"]["application/json"]["schema"])
    assert "detail" in error["properties"]


def test_parameter_schemas_carry_the_constraints() -> None:
    document = document_for(city_app())

    parameters = {
        p["name"]: p for p in operation(document, "/cities/{country}", "post")["parameters"]
    }
    assert parameters["limit"]["in"] == "query"
    assert parameters["limit"]["schema"]["type"] == "integer"
    assert parameters["limit"]["schema"]["minimum"] == 1
    assert parameters["limit"]["schema"]["default"] == 5
    assert parameters["country"]["required"] is True
    assert parameters["country"]["schema"]["maxLength"] == 2


def test_msgspec_meta_constraint_on_a_parameter_is_documented() -> None:
    router = MsgspecRouter()

    @router.get("/cities")
    async def cities(
        limit: Annotated[int, msgspec.Meta(ge=5, le=50)] = 10,
        code: Annotated[str | None, msgspec.Meta(pattern="^[A-Z]{2}$")] = None,
    ) -> list[City]:
        return []

    app = FastAPI()
    app.include_router(router)
    install_openapi(app, router)
    document = document_for(app)

    parameters = {p["name"]: p for p in operation(document, "/cities", "get")["parameters"]}
    assert parameters["limit"]["schema"]["minimum"] == 5
    assert parameters["limit"]["schema"]["maximum"] == 50
    assert parameters["limit"]["schema"]["default"] == 10
    assert "^[A-Z]{2}$" in msgspec.json.encode(parameters["code"]["schema"]).decode()


def test_aliased_header_parameter_is_documented_by_its_alias() -> None:
    router = MsgspecRouter()

    @router.get("/trace")
    async def trace(trace: Annotated[int, Header(alias="X-Trace", ge=0)] = 0) -> City:
        return City(name="a", population=trace)

    app = FastAPI()
    app.include_router(router)
    install_openapi(app, router)
    document = document_for(app)

    (parameter,) = operation(document, "/trace", "get")["parameters"]
    assert (parameter["name"], parameter["in"]) == ("X-Trace", "header")
    assert parameter["schema"]["minimum"] == 0


def test_optional_body_is_documented_as_not_required() -> None:
    router = MsgspecRouter()

    @router.post("/cities")
    async def create(city: City | None = Body(default=None)) -> None:
        return None

    app = FastAPI()
    app.include_router(router)
    install_openapi(app, router)
    document = document_for(app)

    assert operation(document, "/cities", "post")["requestBody"]["required"] is False


def test_embedded_body_is_documented_as_an_object_with_the_alias_key() -> None:
    router = MsgspecRouter()

    @router.post("/cities")
    async def create(city: Annotated[City, Body(embed=True, alias="town")]) -> None:
        return None

    app = FastAPI()
    app.include_router(router)
    install_openapi(app, router)
    document = document_for(app)

    schema = operation(document, "/cities", "post")["requestBody"]["content"]["application/json"]
    wrapper = resolve(document, schema["schema"])
    assert list(wrapper["properties"]) == ["town"]
    assert wrapper["required"] == ["town"]


def test_served_openapi_json_is_the_installed_document() -> None:
    app = city_app()

    served = TestClient(app).get("/openapi.json").json()

    assert served == app.openapi()
    assert "City" in served["components"]["schemas"]


def test_same_struct_in_several_routes_is_not_a_conflict() -> None:
    router = MsgspecRouter()

    @router.post("/a")
    async def a(city: City) -> City:
        return city

    @router.put("/b")
    async def b(city: City) -> list[City]:
        return [city]

    app = FastAPI()
    app.include_router(router)
    install_openapi(app, router)

    assert "City" in document_for(app)["components"]["schemas"]


# -- conflicting component names ------------------------------------------------------------------


def qualified(cls: type) -> str:
    """Pydantic's name for a clashing class: its import path with dots as `__`."""
    return f"{cls.__module__}.{cls.__qualname__}".replace(".", "__")


def all_refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"]} if isinstance(node.get("$ref"), str) else set()
        return found.union(*(all_refs(value) for value in node.values()))
    if isinstance(node, list):
        return set().union(*(all_refs(value) for value in node))
    return set()


def app_with(*routers: APIRouter) -> FastAPI:
    app = FastAPI()
    for each in routers:
        app.include_router(each)
    install_openapi(app, *(each for each in routers if isinstance(each, MsgspecRouter)))
    return app


def body_schema(document: dict[str, Any], path: str) -> dict[str, Any]:
    content = operation(document, path, "post")["requestBody"]["content"]
    return resolve(document, content["application/json"]["schema"])


def clashing_router(router: MsgspecRouter) -> MsgspecRouter:
    @router.post("/a")
    async def a(city: City) -> None: ...

    @router.post("/b")
    async def b(city: openapi_models.City) -> None: ...

    return router


def test_two_structs_with_one_name_get_module_qualified_names(router: MsgspecRouter) -> None:
    document = document_for(app_with(clashing_router(router)))

    schemas = document["components"]["schemas"]
    assert "City" not in schemas
    assert set(schemas[qualified(City)]["properties"]) == {"name", "population"}
    assert set(schemas[qualified(openapi_models.City)]["properties"]) == {"title"}


def test_two_structs_with_one_name_are_each_referenced_by_their_own_name(
    router: MsgspecRouter,
) -> None:
    document = document_for(app_with(clashing_router(router)))

    assert set(body_schema(document, "/a")["properties"]) == {"name", "population"}
    assert set(body_schema(document, "/b")["properties"]) == {"title"}


def test_two_structs_with_one_name_in_two_routers_get_qualified_names(
    router: MsgspecRouter,
) -> None:
    other = MsgspecRouter()

    @router.post("/a")
    async def a(city: City) -> None: ...

    @other.post("/b")
    async def b(city: openapi_models.City) -> None: ...

    document = document_for(app_with(router, other))

    assert set(body_schema(document, "/a")["properties"]) == {"name", "population"}
    assert set(body_schema(document, "/b")["properties"]) == {"title"}


def test_struct_holding_two_structs_with_one_name_refers_to_each(router: MsgspecRouter) -> None:
    class Trip(msgspec.Struct):
        start: City
        end: openapi_models.City

    @router.post("/trips")
    async def trip(trip: Trip) -> None: ...

    document = document_for(app_with(router))

    trip_schema = body_schema(document, "/trips")
    assert resolve(document, trip_schema["properties"]["start"])["required"] == [
        "name",
        "population",
    ]
    assert resolve(document, trip_schema["properties"]["end"])["required"] == ["title"]


def test_struct_named_like_a_pydantic_model_is_qualified_beside_it(
    router: MsgspecRouter,
) -> None:
    plain = APIRouter()

    @plain.post("/pydantic")
    async def with_pydantic(city: openapi_models.Pydantic.City) -> None: ...

    @router.post("/msgspec")
    async def with_msgspec(city: City) -> None: ...

    document = document_for(app_with(plain, router))

    assert set(body_schema(document, "/pydantic")["properties"]) == {"label"}
    assert set(body_schema(document, "/msgspec")["properties"]) == {"name", "population"}
    assert body_schema(document, "/msgspec") == document["components"]["schemas"][qualified(City)]


def test_openapi_json_is_served_beside_a_pydantic_model_of_the_same_name(
    router: MsgspecRouter,
) -> None:
    plain = APIRouter()

    @plain.post("/pydantic")
    async def with_pydantic(city: openapi_models.Pydantic.City) -> None: ...

    @router.post("/msgspec")
    async def with_msgspec(city: City) -> City:
        return city

    response = TestClient(app_with(plain, router)).get("/openapi.json")

    assert response.status_code == 200
    validate(response.json())


def test_every_ref_of_a_document_with_clashing_names_has_a_component(
    router: MsgspecRouter,
) -> None:
    plain = APIRouter()

    @plain.post("/pydantic")
    async def with_pydantic(city: openapi_models.Pydantic.City) -> None: ...

    @router.get("/page")
    async def page() -> Page[openapi_models.City]:
        return Page(items=[], total=0)

    document = document_for(app_with(plain, clashing_router(router)))

    names = {ref.removeprefix("#/components/schemas/") for ref in all_refs(document)}
    assert names <= set(document["components"]["schemas"])


def test_clashing_component_names_are_the_same_in_every_build(router: MsgspecRouter) -> None:
    first = document_for(app_with(clashing_router(router)))
    second = document_for(app_with(clashing_router(MsgspecRouter())))

    assert sorted(first["components"]["schemas"]) == sorted(second["components"]["schemas"])


def test_struct_without_a_clash_keeps_its_short_name(router: MsgspecRouter) -> None:
    @router.post("/a")
    async def a(city: openapi_models.City) -> None: ...

    document = document_for(app_with(router))

    assert "City" in document["components"]["schemas"]
    assert qualified(openapi_models.City) not in document["components"]["schemas"]


def test_enum_used_as_a_parameter_and_in_a_struct_is_documented_once() -> None:
    class Filter(msgspec.Struct):
        status: Status

    router = MsgspecRouter()

    @router.get("/airports")
    async def airports(status: Status | None = None) -> Filter:
        return Filter(status=status or Status.ACTIVE)

    app = FastAPI()
    app.include_router(router)
    install_openapi(app, router)
    document = document_for(app)

    assert document["components"]["schemas"]["Status"]["enum"] == ["active", "retired"]


def test_enum_query_parameter_is_documented() -> None:
    router = MsgspecRouter()

    @router.get("/airports")
    async def airports(status: Status = Status.ACTIVE) -> City:
        return City(name=status.value, population=0)

    app = FastAPI()
    app.include_router(router)
    install_openapi(app, router)
    document = document_for(app)

    (parameter,) = operation(document, "/airports", "get")["parameters"]
    schema = parameter["schema"]
    assert (resolve(document, schema) if "$ref" in schema else schema)["enum"] == [
        "active",
        "retired",
    ]


# -- nested routers -------------------------------------------------------------------------------


def nested_app(router_class: type[MsgspecRouter] = MsgspecRouter) -> FastAPI:
    inner = router_class(prefix="/inner")

    @inner.post("/cities/{city_id}")
    async def create(city_id: int, city: City, limit: Annotated[int, Query(le=50)] = 5) -> City:
        return city

    outer = router_class(prefix="/outer")

    @outer.get("/page")
    async def page() -> Page[City]:
        return Page(items=[], total=0)

    outer.include_router(inner)
    api = APIRouter(prefix="/v1")
    api.include_router(outer)
    app = FastAPI()
    app.include_router(api, prefix="/api")
    install_openapi(app, outer)
    return app


def test_nested_router_paths_carry_every_prefix() -> None:
    document = document_for(nested_app())

    assert set(document["paths"]) == {
        "/api/v1/outer/page",
        "/api/v1/outer/inner/cities/{city_id}",
    }


def test_nested_router_components_are_installed_through_the_outer_router() -> None:
    document = document_for(nested_app())

    schemas = document["components"]["schemas"]
    body = operation(document, "/api/v1/outer/inner/cities/{city_id}", "post")["requestBody"]
    assert resolve(document, body["content"]["application/json"]["schema"]) == schemas["City"]
    response = operation(document, "/api/v1/outer/page", "get")["responses"]["200"]
    page = resolve(document, response["content"]["application/json"]["schema"])
    assert set(page["properties"]) == {"items", "total", "next_cursor"}


def test_nested_router_parameter_schemas_are_replaced() -> None:
    document = document_for(nested_app())

    parameters = operation(document, "/api/v1/outer/inner/cities/{city_id}", "post")["parameters"]
    limit = next(p for p in parameters if p["name"] == "limit")
    assert limit["schema"]["maximum"] == 50


def test_nested_routes_serve_requests(twin: Twin) -> None:
    client = TestClient(nested_app(twin.router_class))

    response = client.post("/api/v1/outer/inner/cities/1", json={"name": "a", "population": 1})

    assert response.json() == {"name": "a", "population": 1}
    assert client.get("/api/v1/outer/page").json() == {
        "items": [],
        "total": 0,
        "next_cursor": None,
    }


def test_router_included_twice_is_documented_under_both_prefixes() -> None:
    router = MsgspecRouter()

    @router.post("/cities")
    async def create(city: City) -> City:
        return city

    app = FastAPI()
    app.include_router(router, prefix="/v1")
    app.include_router(router, prefix="/v2")
    install_openapi(app, router)
    document = document_for(app)

    for path in ("/v1/cities", "/v2/cities"):
        body = operation(document, path, "post")["requestBody"]["content"]["application/json"]
        assert resolve(document, body["schema"])["title"] == "City"


# -- a rich application validates ---------------------------------------------------------------


def rich_app(router_class: type[MsgspecRouter] = MsgspecRouter) -> FastAPI:
    airports = router_class(prefix="/airports", tags=["airports"])

    @airports.get("")
    async def list_airports(
        since: datetime.datetime | None = None,
        limit: Annotated[int, Query(ge=1, le=100)] = 10,
        code: Annotated[str | None, Query(pattern="^[A-Z]{3}$")] = None,
        x_client: Annotated[str | None, Header()] = None,
    ) -> Page[Airport]:
        return Page(items=[], total=0)

    @airports.post("", status_code=201)
    async def create_airport(airport: Airport) -> Airport:
        return airport

    @airports.put("/{code}")
    async def replace_airport(
        code: Annotated[str, Path(min_length=3, max_length=3)],
        airport: Annotated[Airport, Body(embed=True)],
    ) -> Airport | None:
        return airport

    pets = router_class(prefix="/pets")

    @pets.post("")
    def adopt(pet: Cat | Dog) -> dict[str, Cat | Dog]:
        return {"pet": pet}

    @pets.post("/batch")
    def adopt_many(
        pets: Annotated[list[Cat | Dog], msgspec.Meta(max_length=10)],
    ) -> list[Literal["cat", "dog"]]:
        return []

    @pets.get("/pages")
    async def pages() -> Page[Cat]:
        return Page(items=[], total=0)

    notes = router_class(prefix="/notes")

    @notes.post("")
    async def create_note(note: Note) -> Note:
        return note

    @notes.get("/untyped")
    async def untyped(q: int = 0):
        return {"q": q}

    plain = APIRouter(prefix="/plain")

    @plain.get("/hello")
    async def hello(name: str = "world") -> dict[str, str]:
        return {"hello": name}

    api = router_class(prefix="/api")
    api.include_router(airports)
    api.include_router(pets)
    app = FastAPI(title="Rich", version="1.0")
    app.include_router(api)
    app.include_router(notes)
    app.include_router(plain)
    install_openapi(app, api, notes)
    return app


def test_rich_application_document_passes_the_openapi_validator() -> None:
    document = document_for(rich_app())

    assert {"/api/airports", "/api/pets", "/notes", "/plain/hello"} <= set(document["paths"])


def test_rich_application_document_has_every_referenced_component() -> None:
    document = document_for(rich_app())
    refs: set[str] = set()

    def collect(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("$ref"), str):
                refs.add(node["$ref"])
            for value in node.values():
                collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    collect(document)
    names = {ref.removeprefix("#/components/schemas/") for ref in refs}
    assert names <= set(document["components"]["schemas"])
    assert {"Airport", "Cat", "Dog", "Status"} <= names


def test_tagged_union_schema_has_a_discriminator() -> None:
    document = document_for(rich_app())

    body = operation(document, "/api/pets", "post")["requestBody"]["content"]["application/json"]
    schema = body["schema"]
    assert {resolve(document, option)["title"] for option in schema["anyOf"]} == {"Cat", "Dog"}
    assert schema["discriminator"]["propertyName"] == "type"


def test_camel_renamed_struct_is_documented_with_its_encoded_names() -> None:
    document = document_for(rich_app())

    airport = document["components"]["schemas"]["Airport"]
    assert {"iataCode", "openedAt", "elevationM"} <= set(airport["properties"])
    assert airport["required"] == ["iataCode", "openedAt"]


def test_rich_application_serves_requests(twin: Twin) -> None:
    client = TestClient(rich_app(twin.router_class))

    created = client.post(
        "/api/airports", json={"iataCode": "OSL", "openedAt": "1998-10-08T00:00:00Z"}
    )
    bad = client.post("/api/airports", json={"iataCode": "oslo", "openedAt": "1998-10-08"})
    pet = client.post("/api/pets", json={"type": "cat", "lives": 3})

    assert created.status_code == 201
    assert created.json() == {"iataCode": "OSL", "openedAt": "1998-10-08T00:00:00Z"}
    assert bad.status_code == 422
    assert pet.json() == {"pet": {"type": "cat", "lives": 3}}
    assert client.get("/api/airports?limit=0").status_code == 422


# -- route options --------------------------------------------------------------------------------


def test_route_responses_option_is_kept_next_to_the_msgspec_schemas() -> None:
    router = MsgspecRouter()

    @router.post(
        "/cities",
        responses={404: {"description": "Country not found"}},
        response_description="The stored city",
    )
    async def create(city: City) -> City:
        return city

    app = FastAPI()
    app.include_router(router)
    install_openapi(app, router)
    document = document_for(app)

    responses = operation(document, "/cities", "post")["responses"]
    assert responses["404"] == {"description": "Country not found"}
    assert responses["200"]["description"] == "The stored city"
    assert resolve(document, responses["200"]["content"]["application/json"]["schema"])


def test_route_excluded_from_the_schema_is_not_documented() -> None:
    router = MsgspecRouter()

    @router.post("/hidden", include_in_schema=False)
    async def hidden(city: City) -> City:
        return city

    app = FastAPI()
    app.include_router(router)
    install_openapi(app, router)

    assert "/hidden" not in document_for(app)["paths"]


# -- error models ---------------------------------------------------------------------------------


class Problem(msgspec.Struct):
    detail: str
    code: int = 0


def test_struct_error_model_is_accepted_at_registration(router: MsgspecRouter) -> None:
    @router.get("/cities/{name}", responses={404: {"model": Problem}})
    async def city(name: str) -> City:
        return City(name=name, population=0)

    assert [route.path for route in router.routes] == ["/cities/{name}"]


def test_struct_error_model_is_documented_with_the_msgspec_schema(router: MsgspecRouter) -> None:
    @router.get("/cities/{name}", responses={404: {"model": Problem}})
    async def city(name: str) -> City:
        return City(name=name, population=0)

    document = document_for(app_with(router))

    response = operation(document, "/cities/{name}", "get")["responses"]["404"]
    assert response["description"] == "Not Found"
    schema = resolve(document, response["content"]["application/json"]["schema"])
    assert schema == document["components"]["schemas"]["Problem"]
    assert schema["required"] == ["detail"]


def test_struct_error_model_keeps_the_given_description_and_examples(
    router: MsgspecRouter,
) -> None:
    given = {
        "model": Problem,
        "description": "No such city",
        "content": {"application/json": {"example": {"detail": "gone"}}},
    }

    @router.get("/cities/{name}", responses={404: given})
    async def city(name: str) -> City:
        return City(name=name, population=0)

    document = document_for(app_with(router))

    response = operation(document, "/cities/{name}", "get")["responses"]["404"]
    assert response["description"] == "No such city"
    assert response["content"]["application/json"]["example"] == {"detail": "gone"}
    assert "$ref" in response["content"]["application/json"]["schema"]


def test_struct_error_model_is_documented_like_a_pydantic_one(router: MsgspecRouter) -> None:
    class PydanticProblem(pydantic.BaseModel):
        detail: str

    class Missing(msgspec.Struct):
        detail: str

    plain = APIRouter()

    @plain.get("/pydantic", responses={404: {"model": PydanticProblem}})
    async def with_pydantic() -> None: ...

    @router.get("/msgspec", responses={404: {"model": Missing}})
    async def with_msgspec() -> None: ...

    document = document_for(app_with(plain, router))

    theirs = operation(document, "/pydantic", "get")["responses"]["404"]
    ours = operation(document, "/msgspec", "get")["responses"]["404"]
    assert theirs["description"] == ours["description"]
    assert list(theirs["content"]) == list(ours["content"])
    assert resolve(document, ours["content"]["application/json"]["schema"])["title"] == "Missing"


def test_struct_error_model_on_a_route_fastapi_serves_is_documented() -> None:
    router = MsgspecRouter()

    @router.get("/notes", responses={404: {"model": Problem}})
    async def notes() -> Note:
        return Note(text="a")

    document = document_for(app_with(router))

    response = operation(document, "/notes", "get")["responses"]["404"]
    assert resolve(document, response["content"]["application/json"]["schema"])["title"] == (
        "Problem"
    )


def test_route_with_a_struct_error_model_serves_requests(router: MsgspecRouter) -> None:
    @router.get("/cities/{name}", responses={404: {"model": Problem}})
    async def city(name: str) -> City:
        return City(name=name, population=0)

    response = TestClient(app_with(router)).get("/cities/Lyon")

    assert response.json() == {"name": "Lyon", "population": 0}


def test_generated_bodies_of_endpoints_named_alike_are_named_for_their_routes(
    router: MsgspecRouter,
) -> None:
    other = MsgspecRouter(prefix="/other")
    for each in (router, other):

        @each.post("/a")
        async def create(city: Annotated[City, Body(embed=True)]) -> None: ...

    document = document_for(app_with(router, other))

    names = [name for name in document["components"]["schemas"] if "Body_create" in name]
    assert sorted(names) == ["Body_create_a_post", "Body_create_other_a_post"]


# -- Body(...) documentation ----------------------------------------------------------------------


class PydanticCity(pydantic.BaseModel):
    name: str
    population: int


DOCUMENTED = Body(
    title="New city",
    description="The city to add",
    examples=[{"name": "Lyon", "population": 522250}],
    openapi_examples={"lyon": {"summary": "Lyon", "value": {"name": "Lyon", "population": 1}}},
)


def pydantic_and_msgspec_bodies(router: MsgspecRouter) -> dict[str, Any]:
    """The request bodies FastAPI documents for a Pydantic body and we for a Struct one,
    both declared with DOCUMENTED."""
    plain = APIRouter()

    @plain.post("/pydantic")
    async def with_pydantic(city: Annotated[PydanticCity, DOCUMENTED]) -> None: ...

    @router.post("/msgspec")
    async def with_msgspec(city: Annotated[City, DOCUMENTED]) -> None: ...

    document = document_for(app_with(plain, router))
    return {
        "pydantic": operation(document, "/pydantic", "post")["requestBody"],
        "msgspec": operation(document, "/msgspec", "post")["requestBody"],
    }


def test_body_title_description_and_examples_are_beside_the_schema_as_for_pydantic(
    router: MsgspecRouter,
) -> None:
    bodies = pydantic_and_msgspec_bodies(router)

    theirs = bodies["pydantic"]["content"]["application/json"]["schema"]
    ours = bodies["msgspec"]["content"]["application/json"]["schema"]
    assert {k: v for k, v in ours.items() if k != "$ref"} == {
        k: v for k, v in theirs.items() if k != "$ref"
    }
    assert ours["description"] == "The city to add"


def test_body_openapi_examples_are_in_the_media_type_as_for_pydantic(
    router: MsgspecRouter,
) -> None:
    bodies = pydantic_and_msgspec_bodies(router)

    theirs = bodies["pydantic"]["content"]["application/json"]["examples"]
    ours = bodies["msgspec"]["content"]["application/json"]["examples"]
    assert ours == theirs
    assert ours["lyon"]["summary"] == "Lyon"


def test_embedded_body_part_documentation_is_on_its_property_as_for_pydantic(
    router: MsgspecRouter,
) -> None:
    plain = APIRouter()
    part = Body(embed=True, title="Town", description="Where", examples=[{"name": "x"}])

    @plain.post("/pydantic")
    async def with_pydantic(city: Annotated[PydanticCity, part]) -> None: ...

    @router.post("/msgspec")
    async def with_msgspec(city: Annotated[City, part]) -> None: ...

    document = document_for(app_with(plain, router))

    theirs = body_schema(document, "/pydantic")["properties"]["city"]
    ours = body_schema(document, "/msgspec")["properties"]["city"]
    assert {k: v for k, v in ours.items() if k != "$ref"} == {
        k: v for k, v in theirs.items() if k != "$ref"
    }
    assert ours["description"] == "Where"
    assert resolve(document, ours)["title"] == "City"


def test_documented_body_is_still_decoded(router: MsgspecRouter) -> None:
    @router.post("/cities")
    async def create(city: Annotated[City, DOCUMENTED]) -> City:
        return city

    response = TestClient(app_with(router)).post("/cities", json={"name": "a", "population": 1})

    assert response.json() == {"name": "a", "population": 1}


# -- media types ----------------------------------------------------------------------------------

VND = "application/vnd.api+json"


def test_vendor_json_body_media_type_is_accepted_at_registration(router: MsgspecRouter) -> None:
    @router.post("/cities")
    async def create(city: Annotated[City, Body(media_type=VND)]) -> City:
        return city

    assert [route.path for route in router.routes] == ["/cities"]


def test_vendor_json_body_is_documented_under_its_media_type(router: MsgspecRouter) -> None:
    @router.post("/cities")
    async def create(city: Annotated[City, Body(media_type=VND)]) -> City:
        return city

    document = document_for(app_with(router))

    content = operation(document, "/cities", "post")["requestBody"]["content"]
    assert list(content) == [VND]
    assert resolve(document, content[VND]["schema"])["title"] == "City"


def test_vendor_json_body_is_decoded_when_sent_with_its_media_type(router: MsgspecRouter) -> None:
    @router.post("/cities")
    async def create(city: Annotated[City, Body(media_type=VND)]) -> City:
        return city

    response = TestClient(app_with(router)).post(
        "/cities", content=b'{"name":"a","population":1}', headers={"content-type": VND}
    )

    assert response.json() == {"name": "a", "population": 1}


def test_non_json_body_media_type_is_refused_at_registration(router: MsgspecRouter) -> None:
    with pytest.raises(TypeError, match="text/plain"):

        @router.post("/cities")
        async def create(city: Annotated[City, Body(media_type="text/plain")]) -> None: ...


def test_embedded_parts_of_one_media_type_are_documented_under_it(router: MsgspecRouter) -> None:
    @router.post("/cities")
    async def create(
        city: Annotated[City, Body(media_type=VND)], note: Annotated[str, Body(media_type=VND)]
    ) -> None: ...

    document = document_for(app_with(router))

    assert list(operation(document, "/cities", "post")["requestBody"]["content"]) == [VND]


def test_embedded_parts_of_several_media_types_are_documented_as_json_as_for_pydantic(
    router: MsgspecRouter,
) -> None:
    plain = APIRouter()

    @plain.post("/pydantic")
    async def with_pydantic(
        city: Annotated[PydanticCity, Body(media_type=VND)], note: Annotated[str, Body()]
    ) -> None: ...

    @router.post("/msgspec")
    async def with_msgspec(
        city: Annotated[City, Body(media_type=VND)], note: Annotated[str, Body()]
    ) -> None: ...

    document = document_for(app_with(plain, router))

    theirs = operation(document, "/pydantic", "post")["requestBody"]["content"]
    ours = operation(document, "/msgspec", "post")["requestBody"]["content"]
    assert list(ours) == list(theirs) == ["application/json"]


class VendorResponse(MsgspecJSONResponse):
    media_type = VND


def test_typed_route_with_a_vendor_response_class_is_sent_with_its_media_type(
    router: MsgspecRouter,
) -> None:
    @router.get("/cities", response_class=VendorResponse)
    async def cities() -> list[City]:
        return [City(name="a", population=1)]

    response = TestClient(app_with(router)).get("/cities")

    assert response.headers["content-type"] == VND
    assert response.json() == [{"name": "a", "population": 1}]


def test_typed_route_with_a_vendor_response_class_is_documented_under_its_media_type(
    router: MsgspecRouter,
) -> None:
    @router.get("/cities", response_class=VendorResponse)
    async def cities() -> list[City]:
        return []

    document = document_for(app_with(router))

    content = operation(document, "/cities", "get")["responses"]["200"]["content"]
    assert list(content) == [VND]
    assert content[VND]["schema"]["type"] == "array"


def test_typed_route_with_a_vendor_response_class_validates_as_any_typed_route(
    router: MsgspecRouter,
) -> None:
    @router.get("/cities", response_class=VendorResponse)
    async def cities() -> list[City]:
        return [{"name": "a"}]  # type: ignore[list-item]

    with pytest.raises(ResponseValidationError):
        TestClient(app_with(router)).get("/cities")


class TextResponse(MsgspecJSONResponse):
    media_type = "text/plain"


def test_typed_route_with_a_text_response_class_gets_starlettes_charset(
    router: MsgspecRouter,
) -> None:
    @router.get("/cities", response_class=TextResponse)
    async def cities() -> list[City]:
        return []

    response = TestClient(app_with(router)).get("/cities")

    assert response.headers["content-type"] == "text/plain; charset=utf-8"


def test_untyped_route_with_a_vendor_response_class_is_served_and_documented_with_it(
    twin: Twin,
) -> None:
    router = twin.router_class()

    @router.post("/cities", response_class=VendorResponse, responses={404: {"model": Problem}})
    async def create(city: City):
        return {"stored": city.name}

    app = app_with(router)
    response = TestClient(app).post("/cities", json={"name": "a", "population": 1})
    document = document_for(app)

    assert response.headers["content-type"] == VND
    assert response.json() == {"stored": "a"}
    responses = operation(document, "/cities", "post")["responses"]
    assert list(responses["200"]["content"]) == [VND]
    assert list(responses["404"]["content"]) == [VND]


def test_struct_error_model_on_the_router_is_documented_for_its_routes(
    router: MsgspecRouter,
) -> None:
    router.responses = {404: {"model": Problem}}  # as MsgspecRouter(responses=...) sets it

    @router.get("/cities/{name}")
    async def city(name: str) -> City:
        return City(name=name, population=0)

    document = document_for(app_with(router))

    response = operation(document, "/cities/{name}", "get")["responses"]["404"]
    assert resolve(document, response["content"]["application/json"]["schema"])["title"] == (
        "Problem"
    )


def test_router_with_a_struct_error_model_is_accepted() -> None:
    router = MsgspecRouter(responses={404: {"model": Problem}})

    @router.get("/cities")
    async def cities() -> list[City]:
        return []

    assert TestClient(app_with(router)).get("/cities").json() == []


def test_body_examples_may_hold_structs_and_pydantic_models(router: MsgspecRouter) -> None:
    examples = [City(name="a", population=1), PydanticCity(name="b", population=2)]

    @router.post("/cities")
    async def create(city: Annotated[City, Body(examples=examples)]) -> None: ...

    document = document_for(app_with(router))

    schema = operation(document, "/cities", "post")["requestBody"]["content"]["application/json"]
    assert schema["schema"]["examples"] == [
        {"name": "a", "population": 1},
        {"name": "b", "population": 2},
    ]


class Node(msgspec.Struct):
    label: str
    children: "list[Node]" = []


def test_recursive_struct_refers_to_itself_by_its_document_name(router: MsgspecRouter) -> None:
    @router.post("/nodes")
    async def create(node: Node) -> None: ...

    document = document_for(app_with(router))

    node = body_schema(document, "/nodes")
    assert node["properties"]["children"]["items"] == {"$ref": "#/components/schemas/Node"}


# Three components named City: a Struct here (in __main__), one in openapi_models, and a
# Pydantic model. Kept free of test_openapi's imports so that the two processes start fast.
CLASHING_APP = """
import json
import msgspec
import openapi_models
from fastapi import APIRouter, FastAPI
from msgspec_fastapi import MsgspecRouter, install_openapi

class City(msgspec.Struct):
    name: str

router, plain = MsgspecRouter(), APIRouter()

@router.post("/a")
async def a(city: City) -> openapi_models.City: ...

@plain.post("/pydantic")
async def with_pydantic(city: openapi_models.Pydantic.City) -> None: ...

app = FastAPI()
app.include_router(router)
app.include_router(plain)
install_openapi(app, router)
print(json.dumps(sorted(app.openapi()["components"]["schemas"])))
"""


def test_clashing_component_names_are_the_same_in_two_processes() -> None:
    tests = pathlib.Path(__file__).parent
    runs = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", CLASHING_APP],
                cwd=tests,
                env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(tests)},
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        for seed in ("1", "2")
    ]

    assert runs[0] == runs[1]
    assert {"City", "__main____City", "openapi_models__City"} <= set(runs[0])


def test_msgspec_error_model_without_components_on_a_route_fastapi_serves_is_documented() -> None:
    router = MsgspecRouter()

    @router.get("/notes", responses={400: {"model": Annotated[int, msgspec.Meta(ge=1)]}})
    async def notes() -> Note:
        return Note(text="a")

    document = document_for(app_with(router))

    response = operation(document, "/notes", "get")["responses"]["400"]
    assert response["content"]["application/json"]["schema"] == {"type": "integer", "minimum": 1}
