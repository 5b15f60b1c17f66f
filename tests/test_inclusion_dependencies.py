"""msgspec bodies and parameter models in the dependencies an inclusion adds to routes:
`include_router(dependencies=...)` (of a MsgspecRouter or of the app), the including
router's own `dependencies=`, and `FastAPI(dependencies=...)`.

Each place a route is served gets the analysis the route would have had with those
dependencies declared first among its own, so every test compares with that route (the
dependency declared on the route instead), and with FastAPI's own routes where Pydantic
can say the same. Each test runs on both twins (`twin`) and on both tiers (`tier`: on
"delegated" a dependency only FastAPI solves keeps the routes with FastAPI's solving and
our stand-ins).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import msgspec
import pydantic
import pytest
from fastapi import APIRouter, Depends, FastAPI, Form, Header, Query
from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient
from support import delegating_dependency, tier_router
from twins import Twin

from msgspec_fastapi import MsgspecRouter, install_openapi


class City(msgspec.Struct):
    name: str
    population: int = 0


class User(msgspec.Struct):
    name: str


class Filter(msgspec.Struct):
    limit: Annotated[int, msgspec.Meta(ge=1)] = 10


class CityModel(pydantic.BaseModel):
    name: str
    population: int = 0


class UserModel(pydantic.BaseModel):
    name: str


# What the dependencies were called with, in order, for the test that runs.
CALLS: list[Any] = []


@pytest.fixture(autouse=True)
def _calls() -> None:
    CALLS.clear()


def current_user(user: User) -> str:
    CALLS.append(("current_user", user))
    return user.name


def page_filter(f: Annotated[Filter, Query()]) -> Filter:
    CALLS.append(("page_filter", f))
    return f


def pydantic_user(user: UserModel) -> str:
    return user.name


# The four places an inclusion adds dependencies to a route, each building an app that
# serves `router` with `dependencies` added there; and the routers to give install_openapi.
PLACES = ("include_router", "app.include_router", "including router", "FastAPI")


def serve(
    twin: Twin, place: str, router: APIRouter, dependencies: list[Any], **include: Any
) -> FastAPI:
    if place == "include_router":
        parent = twin.router_class()
        parent.include_router(router, dependencies=dependencies, **include)
        app = FastAPI()
        app.include_router(parent)
        top: APIRouter = parent
    elif place == "app.include_router":
        app = FastAPI()
        app.include_router(router, dependencies=dependencies, **include)
        top = router
    elif place == "including router":
        parent = twin.router_class(dependencies=dependencies)
        parent.include_router(router, **include)
        app = FastAPI()
        app.include_router(parent)
        top = parent
    else:
        app = FastAPI(dependencies=dependencies)
        app.include_router(router, **include)
        top = router
    if isinstance(top, MsgspecRouter):
        install_openapi(app, top)
    return app


def declared_on_route(
    twin: Twin, tier: str, add: Callable[[MsgspecRouter, list[Any]], None], dependencies: list[Any]
) -> FastAPI:
    """The reference: the same route with `dependencies` declared on it, first."""
    router = tier_router(twin, tier)
    add(router, dependencies)
    app = FastAPI()
    app.include_router(router)
    install_openapi(app, router)
    return app


def added_by(twin: Twin, tier: str, place: str, add: Any, dependencies: list[Any]) -> FastAPI:
    router = tier_router(twin, tier)
    add(router, [])
    return serve(twin, place, router, dependencies)


def add_city_route(router: MsgspecRouter, dependencies: list[Any]) -> None:
    @router.post("/cities", dependencies=dependencies)
    async def create(city: City) -> dict[str, Any]:
        return {"city": city.name, "calls": len(CALLS)}


def add_bodyless_route(router: MsgspecRouter, dependencies: list[Any]) -> None:
    @router.post("/me", dependencies=dependencies)
    async def me(name: Annotated[str, Depends(current_user)]) -> str:
        return name


def add_listing_route(router: MsgspecRouter, dependencies: list[Any]) -> None:
    @router.get("/cities", dependencies=dependencies)
    def listing(f: Annotated[Filter, Depends(page_filter)]) -> list[int]:
        return [f.limit]


def exchange(app: FastAPI, method: str, path: str, **request: Any) -> tuple[int, Any, Any]:
    CALLS.clear()
    response = TestClient(app).request(method, path, **request)
    return response.status_code, response.json(), list(CALLS)


@pytest.mark.parametrize("place", PLACES)
def test_dependency_added_by_an_inclusion_receives_its_struct_body(
    twin: Twin, tier: str, place: str
) -> None:
    app = added_by(twin, tier, place, add_bodyless_route, [Depends(current_user)])

    status, body, calls = exchange(app, "POST", "/me", json={"name": "ada"})

    # The endpoint's dependency and the inclusion's are one, called once (cached).
    assert (status, body, calls) == (200, "ada", [("current_user", User("ada"))])


@pytest.mark.parametrize("place", PLACES)
def test_body_of_an_inclusion_dependency_is_embedded_beside_the_endpoints_own(
    twin: Twin, tier: str, place: str, solved: list[Any]
) -> None:
    dependencies = [Depends(current_user)]
    app = added_by(twin, tier, place, add_city_route, dependencies)
    reference = declared_on_route(twin, tier, add_city_route, dependencies)
    payload = {"city": {"name": "Oslo"}, "user": {"name": "ada"}}

    ours = exchange(app, "POST", "/cities", json=payload)
    # Served on the tier the route runs on: FastAPI solved it only on "delegated".
    assert bool(solved) == (tier == "delegated")

    assert ours == (200, {"city": "Oslo", "calls": 1}, [("current_user", User("ada"))])
    assert ours == exchange(reference, "POST", "/cities", json=payload)
    # The endpoint's body alone is no longer the whole body.
    assert exchange(app, "POST", "/cities", json={"name": "Oslo"})[0] == 422


@pytest.mark.parametrize("place", PLACES)
def test_errors_of_the_inclusion_dependency_and_the_endpoint_come_as_on_the_route(
    twin: Twin, tier: str, place: str
) -> None:
    dependencies = [Depends(current_user)]
    app = added_by(twin, tier, place, add_city_route, dependencies)
    reference = declared_on_route(twin, tier, add_city_route, dependencies)

    for payload in (
        {"city": {"name": 1}, "user": {"name": 2}},
        {"city": {"name": "Oslo"}, "user": {}},
        {"city": {"name": 1}, "user": {"name": "ada"}},
        {},
    ):
        ours = exchange(app, "POST", "/cities", json=payload)
        assert ours == exchange(reference, "POST", "/cities", json=payload), payload
        assert ours[0] == 422


def checked_city(city: City) -> None:
    CALLS.append(("checked_city", city))


@pytest.mark.parametrize("place", PLACES)
def test_route_dependency_body_becomes_a_part_when_the_inclusion_adds_another(
    twin: Twin, tier: str, place: str
) -> None:
    def add_route(router: MsgspecRouter, dependencies: list[Any]) -> None:
        @router.post("/checks", dependencies=[*dependencies, Depends(checked_city)])
        async def check() -> int:
            return len(CALLS)

    app = added_by(twin, tier, place, add_route, [Depends(current_user)])
    reference = declared_on_route(twin, tier, add_route, [Depends(current_user)])
    payload = {"city": {"name": "Oslo"}, "user": {"name": "ada"}}

    ours = exchange(app, "POST", "/checks", json=payload)

    assert ours == (200, 2, [("current_user", User("ada")), ("checked_city", City("Oslo"))])
    assert ours == exchange(reference, "POST", "/checks", json=payload)
    bad = {"city": {"name": 1}, "user": {"name": 2}}
    assert exchange(app, "POST", "/checks", json=bad) == exchange(
        reference, "POST", "/checks", json=bad
    )


def pydantic_city_route_with_user() -> FastAPI:
    """FastAPI's own: the city route included with the Pydantic user dependency."""
    fastapi_router = APIRouter()

    @fastapi_router.post("/cities")
    async def create(city: CityModel) -> dict[str, Any]:
        return {"city": city.name}

    app = FastAPI()
    app.include_router(fastapi_router, dependencies=[Depends(pydantic_user)])
    return app


def test_error_order_is_fastapis_the_inclusion_dependency_first(twin: Twin, tier: str) -> None:
    ours = added_by(twin, tier, "app.include_router", add_city_route, [Depends(current_user)])
    theirs = pydantic_city_route_with_user()
    payload = {"city": {"name": 1}, "user": {"name": 2}}

    def locs(app: FastAPI) -> list[Any]:
        errors = exchange(app, "POST", "/cities", json=payload)[1]["detail"]
        return [error["loc"] for error in errors]

    assert locs(ours) == locs(theirs) == [["body", "user", "name"], ["body", "city", "name"]]


def test_embedded_body_is_documented_as_fastapis_body_model(twin: Twin) -> None:
    ours = added_by(twin, "direct", "app.include_router", add_city_route, [Depends(current_user)])
    theirs = pydantic_city_route_with_user()

    def body_model(app: FastAPI) -> tuple[str, list[str], list[str]]:
        document = app.openapi()
        body = document["paths"]["/cities"]["post"]["requestBody"]
        name = body["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
        schema = document["components"]["schemas"][name]
        return name, list(schema["properties"]), schema["required"]

    assert body_model(ours) == body_model(theirs)
    assert body_model(ours) == ("Body_create_cities_post", ["city", "user"], ["city", "user"])


class Item(msgspec.Struct):
    title: str


class ItemModel(pydantic.BaseModel):
    title: str


def pydantic_city(city: CityModel) -> None:
    """Takes a body part, as checked_city does."""


def test_parts_of_endpoint_inclusion_and_route_come_in_fastapis_orders(
    twin: Twin, tier: str
) -> None:
    router = tier_router(twin, tier)

    @router.post("/items", dependencies=[Depends(checked_city)])
    async def create(item: Item) -> str:
        return item.title

    ours = serve(twin, "app.include_router", router, [Depends(current_user)])
    fastapi_router = APIRouter()

    @fastapi_router.post("/items", dependencies=[Depends(pydantic_city)])
    async def create_model(item: ItemModel) -> str:
        return item.title

    theirs = FastAPI()
    theirs.include_router(fastapi_router, dependencies=[Depends(pydantic_user)])
    bad = {"item": {"title": 1}, "city": {"name": 1}, "user": {"name": 1}}

    def orders(app: FastAPI) -> tuple[list[str], list[Any]]:
        document = app.openapi()
        body = document["paths"]["/items"]["post"]["requestBody"]["content"]
        name = body["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
        errors = exchange(app, "POST", "/items", json=bad)[1]["detail"]
        return list(document["components"]["schemas"][name]["properties"]), [
            error["loc"] for error in errors
        ]

    # Body fields: the endpoint's, the inclusion's, the route's; errors as solved:
    # the inclusion's dependency, the route's, then the endpoint.
    assert orders(ours) == orders(theirs)
    assert orders(ours) == (
        ["item", "user", "city"],
        [["body", "user", "name"], ["body", "city", "name"], ["body", "item", "title"]],
    )


@pytest.mark.parametrize("place", PLACES)
def test_query_model_of_an_inclusion_dependency(twin: Twin, tier: str, place: str) -> None:
    dependencies = [Depends(page_filter)]
    app = added_by(twin, tier, place, add_listing_route, dependencies)
    reference = declared_on_route(twin, tier, add_listing_route, dependencies)

    for query in ("", "?limit=3", "?limit=0", "?limit=x"):
        ours = exchange(app, "GET", "/cities" + query)
        assert ours == exchange(reference, "GET", "/cities" + query), query
    assert exchange(app, "GET", "/cities?limit=3")[:2] == (200, [3])
    assert exchange(app, "GET", "/cities?limit=0")[1]["detail"][0]["loc"] == ["query", "limit"]


class Tokens(msgspec.Struct):
    x_token: str


def token(tokens: Annotated[Tokens, Header()]) -> str:
    CALLS.append(("token", tokens))
    return tokens.x_token


@pytest.mark.parametrize("place", PLACES)
def test_header_model_of_an_inclusion_dependency(twin: Twin, tier: str, place: str) -> None:
    def add_route(router: MsgspecRouter, dependencies: list[Any]) -> None:
        @router.get("/tokens", dependencies=dependencies)
        def tokens() -> str:
            return "ok"

    app = added_by(twin, tier, place, add_route, [Depends(token)])
    reference = declared_on_route(twin, tier, add_route, [Depends(token)])

    for headers in ({"x-token": "secret"}, {}):
        ours = exchange(app, "GET", "/tokens", headers=headers)
        assert ours == exchange(reference, "GET", "/tokens", headers=headers), headers
    assert exchange(app, "GET", "/tokens", headers={"x-token": "k"}) == (
        200,
        "ok",
        [("token", Tokens("k"))],
    )
    assert exchange(app, "GET", "/tokens")[0] == 422
    assert (
        app.openapi()["paths"]["/tokens"]["get"]["parameters"]
        == (reference.openapi()["paths"]["/tokens"]["get"]["parameters"])
    )


def test_query_model_from_the_application_dependencies_reaches_every_included_route(
    twin: Twin, tier: str
) -> None:
    router = tier_router(twin, tier)

    @router.get("/plain")
    def plain() -> str:
        return "plain"

    add_city_route(router, [])
    app = serve(twin, "FastAPI", router, [Depends(page_filter)])

    assert exchange(app, "GET", "/plain?limit=2") == (
        200,
        "plain",
        [("page_filter", Filter(2))],
    )
    assert exchange(app, "GET", "/plain?limit=0")[0] == 422
    status, body, calls = exchange(app, "POST", "/cities?limit=4", json={"name": "Oslo"})
    # The model takes no body: the endpoint's body stays the whole body.
    assert (status, body, calls) == (
        200,
        {"city": "Oslo", "calls": 1},
        [("page_filter", Filter(4))],
    )


def test_router_included_twice_with_and_without_dependencies(twin: Twin, tier: str) -> None:
    router = tier_router(twin, tier)
    add_city_route(router, [])
    app = FastAPI()
    app.include_router(router, prefix="/plain")
    app.include_router(router, prefix="/checked", dependencies=[Depends(current_user)])
    install_openapi(app, router)
    nested = twin.router_class(prefix="/nested", dependencies=[Depends(page_filter)])
    nested.include_router(router, prefix="/deep", dependencies=[Depends(current_user)])
    app.include_router(nested, prefix="/outer")
    client = TestClient(app)

    plain = client.post("/plain/cities", json={"name": "Oslo"})
    assert (plain.status_code, plain.json()) == (200, {"city": "Oslo", "calls": 0})
    checked = client.post("/checked/cities", json={"city": {"name": "Oslo"}, "user": {"name": "a"}})
    assert (checked.status_code, checked.json()) == (200, {"city": "Oslo", "calls": 1})
    assert client.post("/checked/cities", json={"name": "Oslo"}).status_code == 422
    CALLS.clear()
    deep = client.post(
        "/outer/nested/deep/cities?limit=2", json={"city": {"name": "Oslo"}, "user": {"name": "a"}}
    )
    assert (deep.status_code, deep.json()) == (200, {"city": "Oslo", "calls": 2})
    assert [call[0] for call in CALLS] == ["page_filter", "current_user"]
    # The route itself, served where it is added, still takes its body alone.
    assert client.post("/plain/cities", json={"name": "Bergen"}).json()["city"] == "Bergen"


@pytest.mark.parametrize("place", PLACES)
def test_routes_added_after_the_inclusion_was_built_get_its_dependencies_too(
    twin: Twin, tier: str, place: str
) -> None:
    router = tier_router(twin, tier)
    add_city_route(router, [])
    app = serve(twin, place, router, [Depends(current_user)])
    payload = {"city": {"name": "Oslo"}, "user": {"name": "ada"}}
    assert exchange(app, "POST", "/cities", json=payload)[:2] == (200, {"city": "Oslo", "calls": 1})

    add_bodyless_route(router, [])  # FastAPI builds the inclusion's routes again

    assert exchange(app, "POST", "/cities", json=payload)[:2] == (200, {"city": "Oslo", "calls": 1})
    assert exchange(app, "POST", "/me", json={"name": "ada"}) == (
        200,
        "ada",
        [("current_user", User("ada"))],
    )


def test_override_of_an_inclusion_dependency_is_honoured(twin: Twin, tier: str) -> None:
    dependencies = [Depends(current_user)]
    apps = [
        added_by(twin, tier, "app.include_router", add_city_route, dependencies),
        declared_on_route(twin, tier, add_city_route, dependencies),
    ]

    def nobody() -> str:
        CALLS.append(("nobody", None))
        return "nobody"

    results = []
    for app in apps:
        app.dependency_overrides[current_user] = nobody
        # An override that takes no body validates none of the dependency's part.
        overridden = exchange(app, "POST", "/cities", json={"city": {"name": "Oslo"}})
        app.dependency_overrides.clear()
        restored = exchange(app, "POST", "/cities", json={"city": {"name": "Oslo"}})
        results.append((overridden, restored))

    assert results[0] == results[1]
    overridden, restored = results[0]
    assert overridden == (200, {"city": "Oslo", "calls": 1}, [("nobody", None)])
    assert restored[0] == 422


@pytest.mark.parametrize("place", PLACES)
def test_openapi_of_each_path_is_the_routes_with_the_dependency_declared_on_it(
    twin: Twin, tier: str, place: str
) -> None:
    def add_routes(router: MsgspecRouter, dependencies: list[Any]) -> None:
        add_city_route(router, dependencies)
        add_listing_route(router, dependencies)

    dependencies = [Depends(current_user)]
    ours = added_by(twin, tier, place, add_routes, dependencies).openapi()
    reference = declared_on_route(twin, tier, add_routes, dependencies).openapi()

    assert ours == reference
    body = ours["paths"]["/cities"]["post"]["requestBody"]["content"]["application/json"]
    component = ours["components"]["schemas"][body["schema"]["$ref"].rsplit("/", 1)[1]]
    assert list(component["properties"]) == ["city", "user"]


def test_openapi_of_a_router_included_twice_documents_each_body(twin: Twin) -> None:
    router = twin.router_class()
    add_city_route(router, [])
    app = FastAPI(dependencies=[Depends(page_filter)])
    app.include_router(router, prefix="/plain")
    app.include_router(router, prefix="/checked", dependencies=[Depends(current_user)])
    install_openapi(app, router)
    document = app.openapi()

    def request_body(path: str) -> Any:
        return document["paths"][path]["post"]["requestBody"]["content"]["application/json"]

    def parameters(path: str) -> list[Any]:
        return [(p["in"], p["name"]) for p in document["paths"][path]["post"]["parameters"]]

    assert request_body("/plain/cities")["schema"] == {"$ref": "#/components/schemas/City"}
    checked = request_body("/checked/cities")["schema"]["$ref"].rsplit("/", 1)[1]
    assert document["components"]["schemas"][checked]["required"] == ["city", "user"]
    assert parameters("/plain/cities") == parameters("/checked/cities") == [("query", "limit")]


def test_a_route_that_cannot_take_the_inclusion_body_fails_when_built(twin: Twin) -> None:
    router = twin.router_class()

    @router.post("/signup")
    async def signup(form: Annotated[User, Form()]) -> str:
        return form.name

    app = FastAPI()
    # Accepted here, as FastAPI accepts it: FastAPI builds an inclusion's routes later.
    app.include_router(router, dependencies=[Depends(current_user)])

    with pytest.raises(TypeError, match=r"signup\(\).*form model cannot be combined"):
        install_openapi(app, router)


def test_inclusion_without_msgspec_dependencies_builds_on_the_routes_own_wrapper(
    twin: Twin,
) -> None:
    router = twin.router_class()
    add_city_route(router, [])
    app = FastAPI(dependencies=[Depends(delegating_dependency)])
    app.include_router(router, dependencies=[Depends(page_size)])
    install_openapi(app, router)
    route = router.routes[0]

    [context] = [c for c in iter_route_contexts(app.routes) if c.original_route is route]
    assert context.dependant.call is route.msgspec_wrapper
    assert TestClient(app).post("/cities?size=2", json={"name": "Oslo"}).json()["city"] == "Oslo"
    body = app.openapi()["paths"]["/cities"]["post"]["requestBody"]["content"]
    assert body["application/json"]["schema"] == {"$ref": "#/components/schemas/City"}


def page_size(size: Annotated[int, msgspec.Meta(ge=1), Query()] = 5) -> int:
    return size
