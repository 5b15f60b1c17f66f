"""install_openapi documents what FastAPI documents, where msgspec's schemas make no
difference: components, rebuilding, parameter and body metadata, body names.

Most tests build the same endpoint on an APIRouter and on a MsgspecRouter and compare
the two documents, FastAPI's being the reference.
"""

import enum
from collections.abc import Callable
from typing import Annotated, Any

import msgspec
import openapi_models
import pydantic
from fastapi import APIRouter, Body, Depends, FastAPI, Query
from fastapi.routing import APIRoute
from fastapi.security import APIKeyHeader
from fastapi.testclient import TestClient
from openapi_spec_validator import validate
from twins import Twin

from msgspec_fastapi import MsgspecRouter, install_openapi


class City(msgspec.Struct):
    name: str
    population: int


class Model(enum.Enum):
    ALEXNET = "alexnet"
    RESNET = "resnet"
    LENET = "lenet"


def documents(declare: Callable[[APIRouter], None]) -> tuple[dict[str, Any], dict[str, Any]]:
    """FastAPI's document and ours of the routes `declare` adds to a router."""
    found = []
    for router in (APIRouter(), MsgspecRouter()):
        declare(router)
        app = FastAPI()
        app.include_router(router)
        if isinstance(router, MsgspecRouter):
            install_openapi(app, router)
        document = app.openapi()
        validate(document)
        found.append(document)
    return found[0], found[1]


def query_schemas(document: dict[str, Any]) -> dict[str, Any]:
    return {p["name"]: p["schema"] for p in document["paths"]["/"]["get"]["parameters"]}


def body_component(document: dict[str, Any], path: str = "/") -> tuple[str, dict[str, Any]]:
    schema = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]
    name = schema["schema"]["$ref"].removeprefix("#/components/schemas/")
    return name, document["components"]["schemas"][name]


# -- components -----------------------------------------------------------------------------------


def test_document_without_schemas_has_no_components() -> None:
    def declare(router: APIRouter) -> None:
        @router.get("/")
        async def root() -> None: ...

    theirs, ours = documents(declare)

    assert "components" not in theirs
    assert "components" not in ours


def test_security_schemes_are_the_only_components_where_there_are_no_schemas() -> None:
    def declare(router: APIRouter) -> None:
        @router.get("/", dependencies=[Depends(APIKeyHeader(name="key"))])
        async def root() -> None: ...

    theirs, ours = documents(declare)

    assert (
        ours["components"]
        == theirs["components"]
        == {"securitySchemes": {"APIKeyHeader": {"type": "apiKey", "in": "header", "name": "key"}}}
    )


# -- building again -------------------------------------------------------------------------------


def late_app(router_class: type[MsgspecRouter]) -> tuple[FastAPI, MsgspecRouter]:
    router = router_class()
    app = FastAPI()
    app.include_router(router, prefix="/api")
    install_openapi(app, router)
    return app, router


def test_document_is_built_once_while_the_routes_stay_the_same() -> None:
    app, _ = late_app(MsgspecRouter)

    assert app.openapi() is app.openapi()


def test_route_added_after_the_first_build_is_served_in_the_document(twin: Twin) -> None:
    app, router = late_app(twin.router_class)
    client = TestClient(app)
    assert "/api/later" not in client.get("/openapi.json").json()["paths"]

    @router.get("/later")
    async def later() -> dict[str, bool]:
        return {"later": True}

    assert "/api/later" in client.get("/openapi.json").json()["paths"]


def test_schemas_of_a_route_added_after_the_first_build_are_documented() -> None:
    app, router = late_app(MsgspecRouter)
    app.openapi()

    @router.post("/cities")
    async def create(city: City) -> None: ...

    document = app.openapi()
    validate(document)
    assert "City" in document["components"]["schemas"]


def test_document_changed_by_the_user_is_kept_while_the_routes_stay_the_same() -> None:
    app, _ = late_app(MsgspecRouter)
    app.openapi()["info"]["x-logo"] = "logo.png"

    assert app.openapi()["info"]["x-logo"] == "logo.png"


# -- parameters -----------------------------------------------------------------------------------


def test_deprecated_query_parameter_is_deprecated_in_its_schema_too() -> None:
    def declare(router: APIRouter) -> None:
        @router.get("/")
        async def root(q: Annotated[int | None, Query(deprecated=True)] = None) -> None: ...

    theirs, ours = documents(declare)

    assert query_schemas(ours)["q"]["deprecated"] is True
    assert query_schemas(ours) == query_schemas(theirs)


def test_parameter_examples_and_schema_extra_are_in_its_schema() -> None:
    def declare(router: APIRouter) -> None:
        @router.get("/")
        async def root(
            q: Annotated[int, Query(examples=[1, 2], json_schema_extra={"x-unit": "m"})],
        ) -> None: ...

    theirs, ours = documents(declare)

    assert query_schemas(ours)["q"]["examples"] == [1, 2]
    assert query_schemas(ours)["q"]["x-unit"] == "m"
    assert query_schemas(ours) == query_schemas(theirs)


def test_bare_list_query_parameter_has_items_of_anything() -> None:
    def declare(router: APIRouter) -> None:
        @router.get("/")
        async def root(q: Annotated[list, Query()] = []) -> None: ...  # type: ignore[type-arg]  # noqa: B006

    theirs, ours = documents(declare)

    assert query_schemas(ours)["q"]["items"] == {}
    assert query_schemas(ours) == query_schemas(theirs)


def test_parameter_two_dependencies_read_is_documented_as_the_required_one() -> None:
    def key(client_id: str = Query()) -> str:
        return client_id

    def tag(client_id: str | None = Query(None)) -> str | None:
        return client_id

    def declare(router: APIRouter) -> None:
        @router.get("/")
        async def root(k: str = Depends(key), t: str | None = Depends(tag)) -> None: ...

    theirs, ours = documents(declare)

    assert query_schemas(ours)["client_id"]["type"] == "string"
    assert ours["paths"]["/"]["get"]["parameters"] == theirs["paths"]["/"]["get"]["parameters"]


def test_enum_parameter_shares_fastapis_component_with_values_in_declared_order() -> None:
    def declare(router: APIRouter) -> None:
        @router.get("/{model}")
        async def root(model: Model) -> None: ...

    theirs, ours = documents(declare)

    parameter = ours["paths"]["/{model}"]["get"]["parameters"][0]
    assert parameter["schema"] == {"$ref": "#/components/schemas/Model"}
    assert ours["components"]["schemas"]["Model"]["enum"] == ["alexnet", "resnet", "lenet"]
    assert ours["components"] == theirs["components"]


# -- body metadata --------------------------------------------------------------------------------

Counted = Annotated[
    int,
    pydantic.Field(
        title="Count",
        description="How many",
        examples=[1],
        deprecated=True,
        json_schema_extra={"x-a": 1},
    ),
]


def parts_as_fastapi_documents_them(
    theirs: dict[str, Any], ours: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The embedded body's properties in both documents, FastAPI's without the titles
    Pydantic makes from a name where none was given (a difference of msgspec's schemas)."""
    their_parts = body_component(theirs)[1]["properties"]
    our_parts = body_component(ours)[1]["properties"]
    for key, part in their_parts.items():
        if "title" not in our_parts.get(key, {}):
            part.pop("title", None)
    return their_parts, our_parts


def test_embedded_body_part_documents_its_field_metadata_as_fastapi_does() -> None:
    def declare(router: APIRouter) -> None:
        @router.post("/")
        async def root(
            count: Annotated[Counted, Body()], other: Annotated[int, Body()]
        ) -> None: ...

    theirs, ours = documents(declare)

    their_parts, our_parts = parts_as_fastapi_documents_them(theirs, ours)
    assert our_parts == their_parts


def test_body_arguments_and_field_metadata_are_merged_as_fastapi_merges_them() -> None:
    def declare(router: APIRouter) -> None:
        @router.post("/")
        async def root(
            count: Annotated[Counted, Body(description="From Body", deprecated=False)],
            cleared: Annotated[Counted, Body(title=None, description=None, examples=None)],
        ) -> None: ...

    theirs, ours = documents(declare)

    their_parts, our_parts = parts_as_fastapi_documents_them(theirs, ours)
    assert our_parts["count"]["description"] == "From Body"
    assert our_parts == their_parts


def test_embedded_body_part_documents_its_default() -> None:
    def declare(router: APIRouter) -> None:
        @router.post("/")
        async def root(
            value: Annotated[list[int] | None, Body(embed=True)] = [10],  # noqa: B006
        ) -> None: ...

    theirs, ours = documents(declare)

    assert body_component(ours)[1]["properties"]["value"]["default"] == [10]
    assert body_component(theirs)[1]["properties"]["value"]["default"] == [10]


def test_embedded_body_part_defaulting_to_none_documents_no_default() -> None:
    def declare(router: APIRouter) -> None:
        @router.post("/")
        async def root(value: Annotated[int | None, Body(embed=True)] = None) -> None: ...

    theirs, ours = documents(declare)

    assert "default" not in body_component(ours)[1]["properties"]["value"]
    assert "default" not in body_component(theirs)[1]["properties"]["value"]


# -- body names -----------------------------------------------------------------------------------


def test_embedded_body_is_named_as_fastapi_names_it() -> None:
    def declare(router: APIRouter) -> None:
        @router.post("/items/{item_id}")
        async def update(
            item_id: int, a: Annotated[int, Body()], b: Annotated[str, Body()]
        ) -> None: ...

    theirs, ours = documents(declare)

    name, schema = body_component(ours, "/items/{item_id}")
    assert (
        name == body_component(theirs, "/items/{item_id}")[0] == "Body_update_items__item_id__post"
    )
    assert schema["title"] == name


def test_embedded_body_name_follows_the_unique_id_function() -> None:
    def unique_id(route: APIRoute) -> str:
        return f"custom-{route.name}"

    def declare(router: APIRouter) -> None:
        @router.post("/", generate_unique_id_function=unique_id)
        async def create(a: Annotated[int, Body()], b: Annotated[int, Body()]) -> None: ...

    theirs, ours = documents(declare)

    assert body_component(ours)[0] == body_component(theirs)[0] == "Body_custom-create"


def test_router_included_twice_documents_a_body_per_inclusion() -> None:
    router = MsgspecRouter()

    @router.post("/")
    async def create(a: Annotated[int, Body()], b: Annotated[int, Body()]) -> None: ...

    app = FastAPI()
    app.include_router(router, prefix="/one")
    app.include_router(router, prefix="/two")
    install_openapi(app, router)
    document = app.openapi()

    assert body_component(document, "/one/")[0] == "Body_create_one__post"
    assert body_component(document, "/two/")[0] == "Body_create_two__post"
    assert not [name for name in document["components"]["schemas"] if "Body_create_" in name][2:]


def test_msgpack_body_refers_to_the_same_named_component() -> None:
    router = MsgspecRouter(msgpack=True)

    @router.post("/")
    async def create(a: Annotated[int, Body()], b: Annotated[int, Body()]) -> None: ...

    app = FastAPI()
    app.include_router(router)
    install_openapi(app, router)
    content = app.openapi()["paths"]["/"]["post"]["requestBody"]["content"]

    assert content["application/msgpack"] == content["application/json"]
    assert content["application/json"]["schema"]["$ref"].endswith("/Body_create__post")


def test_embedded_body_keeps_its_generated_name_when_fastapis_is_taken() -> None:
    taken_model = pydantic.create_model("Body_create__post", other=(str, ...))
    plain = APIRouter()

    @plain.post("/pydantic")
    async def pydantic_route(taken: taken_model) -> None: ...  # type: ignore[valid-type]

    router = MsgspecRouter()

    @router.post("/")
    async def create(a: Annotated[int, Body()], b: Annotated[int, Body()]) -> None: ...

    app = FastAPI()
    app.include_router(plain)
    app.include_router(router)
    install_openapi(app, router)
    document = app.openapi()
    validate(document)

    name, schema = body_component(document)
    assert name.startswith("Body_create_")
    assert name != "Body_create__post"
    assert set(schema["properties"]) == {"a", "b"}
    assert set(document["components"]["schemas"]["Body_create__post"]["properties"]) == {"other"}


def every_ref_resolves(document: dict[str, Any]) -> bool:
    schemas = document.get("components", {}).get("schemas", {})
    refs: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("$ref"), str):
                refs.add(node["$ref"].removeprefix("#/components/schemas/"))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(document)
    return refs <= set(schemas)


def test_embedded_body_keeps_fastapis_name_when_the_document_is_built_again() -> None:
    app, router = late_app(MsgspecRouter)

    @router.post("/")
    async def create(a: Annotated[int, Body()], b: Annotated[int, Body()]) -> None: ...

    app.openapi()

    @router.get("/later")
    async def later() -> None: ...

    document = app.openapi()
    assert body_component(document, "/api/")[0] == "Body_create_api__post"
    assert every_ref_resolves(document)


def test_struct_named_like_a_later_struct_is_qualified_when_the_document_is_built_again() -> None:
    app, router = late_app(MsgspecRouter)

    @router.post("/a")
    async def a(city: City) -> None: ...

    app.openapi()

    @router.post("/b")
    async def b(city: openapi_models.City) -> None: ...

    document = app.openapi()
    assert "City" not in document["components"]["schemas"]
    assert every_ref_resolves(document)
