"""msgspec types in dependencies: a dependency, at any depth, that takes a msgspec body
parameter or a query, header or cookie model gets it from the request path, decoded once
and shared by name with the endpoint and the other dependencies, as in FastAPI.

Each test runs on both twins (`twin`). Such routes run on the direct tier, from the
route's dependency plan.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

import msgspec
import pydantic
import pytest
from fastapi import (
    APIRouter,
    Body,
    Depends,
    FastAPI,
    Header,
    HTTPException,
    Path,
    Query,
    Security,
)
from fastapi.security import SecurityScopes
from fastapi.testclient import TestClient
from support import assert_tier, client_for, delegating_dependency, tier_router
from twins import Twin

from msgspec_fastapi import MsgspecRouter, install_openapi


class City(msgspec.Struct):
    name: str
    population: int = 0


class Item(msgspec.Struct):
    title: str


class Filter(msgspec.Struct):
    limit: Annotated[int, msgspec.Meta(ge=1)] = 10
    tags: list[str] = []


class Tokens(msgspec.Struct):
    x_token: str


def router_for(twin: Twin, **options: Any) -> MsgspecRouter:
    return twin.router_class(**options)


def get_city(city: City) -> City:
    return city


async def async_get_city(city: City) -> City:
    return city


def city_name(city: Annotated[City, Depends(get_city)]) -> str:
    return city.name


def get_filter(f: Annotated[Filter, Query()]) -> Filter:
    return f


def test_dependency_receives_its_struct_body(twin: Twin) -> None:
    router = router_for(twin)

    @router.post("/cities")
    async def create(city: Annotated[City, Depends(get_city)]) -> dict[str, Any]:
        return {"name": city.name, "type": type(city).__name__}

    response = client_for(router).post("/cities", json={"name": "Oslo"})
    assert response.status_code == 200
    assert response.json() == {"name": "Oslo", "type": "City"}


def test_async_dependency_receives_its_struct_body(twin: Twin) -> None:
    router = router_for(twin)

    @router.post("/cities")
    async def create(city: Annotated[City, Depends(async_get_city)]) -> str:
        return city.name

    assert client_for(router).post("/cities", json={"name": "Oslo"}).json() == "Oslo"


def test_endpoint_and_dependency_share_one_decoded_body(twin: Twin) -> None:
    router = router_for(twin)

    @router.post("/cities")
    def create(city: City, from_dependency: Annotated[City, Depends(get_city)]) -> bool:
        return city is from_dependency

    assert client_for(router).post("/cities", json={"name": "Oslo"}).json() is True


def test_dependency_two_levels_down_receives_the_body(twin: Twin) -> None:
    router = router_for(twin)

    @router.post("/cities")
    async def create(name: Annotated[str, Depends(city_name)]) -> str:
        return name

    assert client_for(router).post("/cities", json={"name": "Oslo"}).json() == "Oslo"


def item_title(item: Item) -> str:
    return item.title


def test_bodies_of_several_names_are_embedded_by_name_as_in_fastapi(twin: Twin) -> None:
    router = router_for(twin)

    @router.post("/cities")
    async def create(city: City, title: Annotated[str, Depends(item_title)]) -> list[str]:
        return [city.name, title]

    client = client_for(router)
    payload = {"city": {"name": "Oslo"}, "item": {"title": "map"}}
    assert client.post("/cities", json=payload).json() == ["Oslo", "map"]
    assert client.post("/cities", json={"name": "Oslo"}).status_code == 422


class PydanticCity(pydantic.BaseModel):
    name: str
    population: int = 0


def pydantic_get_city(city: PydanticCity) -> PydanticCity:
    return city


def fastapi_reference() -> TestClient:
    app = FastAPI()

    @app.post("/cities")
    async def create(city: Annotated[PydanticCity, Depends(pydantic_get_city)]) -> str:
        return city.name

    return TestClient(app)


@pytest.mark.parametrize(
    "payload",
    [{"population": 3}, {"name": 3}, [], "x", None],
    ids=["missing field", "wrong type", "array", "string", "null"],
)
def test_invalid_body_of_a_dependency_gives_422s_where_fastapi_does(
    twin: Twin, payload: Any
) -> None:
    router = router_for(twin)

    @router.post("/cities")
    async def create(city: Annotated[City, Depends(get_city)]) -> str:
        return city.name

    ours = client_for(router).post("/cities", json=payload)
    theirs = fastapi_reference().post("/cities", json=payload)
    assert ours.status_code == theirs.status_code == 422
    assert [e["loc"] for e in ours.json()["detail"]] == [e["loc"] for e in theirs.json()["detail"]]


def test_missing_body_of_a_dependency_gives_fastapis_422(twin: Twin) -> None:
    router = router_for(twin)

    @router.post("/cities")
    async def create(city: Annotated[City, Depends(get_city)]) -> str:
        return city.name

    ours = client_for(router).post("/cities")
    theirs = fastapi_reference().post("/cities")
    assert ours.status_code == theirs.status_code == 422

    def shape(response: Any) -> list[tuple[Any, ...]]:
        return [(e["type"], e["loc"], e["msg"]) for e in response.json()["detail"]]

    assert shape(ours) == shape(theirs)


EVENTS: list[str] = []


def recording(city: City) -> City:
    EVENTS.append(city.name)
    return city


def test_malformed_json_for_a_dependency_is_a_400_before_it_runs(twin: Twin) -> None:
    EVENTS.clear()
    router = router_for(twin)

    @router.post("/cities")
    async def create(city: Annotated[City, Depends(recording)]) -> str:
        return city.name

    response = client_for(router).post(
        "/cities", content=b'{"name": ', headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert "detail" in response.json()
    assert EVENTS == []


def test_override_replaces_a_dependency_that_takes_a_struct(twin: Twin) -> None:
    router = router_for(twin)

    @router.post("/cities")
    async def create(city: Annotated[City, Depends(get_city)]) -> str:
        return city.name

    app = FastAPI()
    app.include_router(router)
    app.dependency_overrides[get_city] = lambda: City("Bergen")
    client = TestClient(app)
    assert client.post("/cities", json={"name": "Oslo"}).json() == "Bergen"
    # As in FastAPI: the override takes no body, so none is validated for it.
    assert client.post("/cities", json={"wrong": 1}).json() == "Bergen"


def test_override_replaces_a_dependency_whose_own_dependency_takes_a_struct(twin: Twin) -> None:
    router = router_for(twin)

    @router.post("/cities")
    async def create(name: Annotated[str, Depends(city_name)]) -> str:
        return name

    app = FastAPI()
    app.include_router(router)
    app.dependency_overrides[city_name] = lambda: "Tromsø"
    assert TestClient(app).post("/cities", json={"name": "Oslo"}).json() == "Tromsø"


def opened(city: City) -> Iterator[str]:
    EVENTS.append(f"open {city.name}")
    yield city.name
    EVENTS.append("close")


async def async_opened(city: City) -> AsyncIterator[str]:
    EVENTS.append("open")
    yield city.name
    EVENTS.append("close")


def test_yield_dependency_with_a_struct_body_tears_down_after_the_response(twin: Twin) -> None:
    EVENTS.clear()
    router = router_for(twin)

    @router.post("/cities")
    def create(name: Annotated[str, Depends(opened)]) -> str:
        EVENTS.append("endpoint")
        return name

    assert client_for(router).post("/cities", json={"name": "Oslo"}).json() == "Oslo"
    assert EVENTS == ["open Oslo", "endpoint", "close"]


def test_async_yield_dependency_with_a_struct_body_tears_down(twin: Twin) -> None:
    EVENTS.clear()
    router = router_for(twin)

    @router.post("/cities")
    async def create(name: Annotated[str, Depends(async_opened)]) -> str:
        return name

    assert client_for(router).post("/cities", json={"name": "Oslo"}).json() == "Oslo"
    assert EVENTS == ["open", "close"]


class CityService:
    def __init__(self, city: City, limit: int = 5) -> None:
        self.city = city
        self.limit = limit


def test_class_dependency_receives_its_struct_body(twin: Twin) -> None:
    router = router_for(twin)

    @router.post("/cities")
    async def create(service: Annotated[CityService, Depends()]) -> list[Any]:
        return [service.city.name, service.limit]

    response = client_for(router).post("/cities?limit=2", json={"name": "Oslo"})
    assert response.json() == ["Oslo", 2]


def counted(city: City) -> str:
    EVENTS.append(city.name)
    return city.name


def first(name: Annotated[str, Depends(counted)]) -> str:
    return name


def second(name: Annotated[str, Depends(counted)]) -> str:
    return name


def test_shared_dependency_runs_once_per_request(twin: Twin) -> None:
    EVENTS.clear()
    router = router_for(twin)

    @router.post("/cities")
    async def create(
        a: Annotated[str, Depends(first)], b: Annotated[str, Depends(second)]
    ) -> list[str]:
        return [a, b]

    assert client_for(router).post("/cities", json={"name": "Oslo"}).json() == ["Oslo", "Oslo"]
    assert EVENTS == ["Oslo"]


def test_dependency_in_the_routes_dependencies_list_receives_the_body(twin: Twin) -> None:
    seen: list[str] = []
    router = router_for(twin)

    def audit(city: City) -> None:
        seen.append(city.name)

    @router.post("/cities", dependencies=[Depends(audit)])
    async def create(city: City) -> str:
        return city.name

    assert client_for(router).post("/cities", json={"name": "Oslo"}).json() == "Oslo"
    assert seen == ["Oslo"]


def test_dependency_of_the_router_receives_the_body(twin: Twin) -> None:
    seen: list[str] = []

    def audit(city: City) -> None:
        seen.append(city.name)

    router = router_for(twin, dependencies=[Depends(audit)])

    @router.post("/cities")
    async def create(city: City) -> str:
        return city.name

    @router.get("/plain")
    async def plain() -> str:
        return "plain"

    client = client_for(router)
    assert client.post("/cities", json={"name": "Oslo"}).json() == "Oslo"
    assert seen == ["Oslo"]
    assert router.dependencies[0].dependency is audit


def scoped(scopes: SecurityScopes, city: City) -> list[str]:
    return [city.name, *scopes.scopes]


def test_security_dependency_keeps_its_scopes(twin: Twin) -> None:
    router = router_for(twin)

    @router.post("/cities")
    async def create(
        value: Annotated[list[str], Security(scoped, scopes=["cities:write"])],
    ) -> list[str]:
        return value

    response = client_for(router).post("/cities", json={"name": "Oslo"})
    assert response.json() == ["Oslo", "cities:write"]


def test_dependency_receives_its_query_model(twin: Twin) -> None:
    router = router_for(twin)

    @router.get("/items")
    async def items(f: Annotated[Filter, Depends(get_filter)]) -> dict[str, Any]:
        return {"limit": f.limit, "tags": f.tags}

    response = client_for(router).get("/items?limit=3&tags=a&tags=b")
    assert response.json() == {"limit": 3, "tags": ["a", "b"]}


def test_query_model_of_a_dependency_gives_a_422_per_field(twin: Twin) -> None:
    router = router_for(twin)

    @router.get("/items")
    async def items(f: Annotated[Filter, Depends(get_filter)]) -> int:
        return f.limit

    response = client_for(router).get("/items?limit=0")
    assert response.status_code == 422
    assert [e["loc"] for e in response.json()["detail"]] == [["query", "limit"]]


def get_tokens(tokens: Annotated[Tokens, Header()]) -> str:
    return tokens.x_token


def test_header_model_of_a_dependency_and_the_endpoints_query_model_both_arrive(
    twin: Twin,
) -> None:
    router = router_for(twin)

    @router.get("/items")
    async def items(
        f: Annotated[Filter, Query()], token: Annotated[str, Depends(get_tokens)]
    ) -> list[Any]:
        return [f.limit, token]

    response = client_for(router).get("/items?limit=4", headers={"x-token": "t"})
    assert response.json() == [4, "t"]
    assert client_for(router).get("/items?limit=4").status_code == 422


def test_query_model_error_and_body_error_are_reported_together(twin: Twin) -> None:
    router = router_for(twin)

    @router.post("/cities")
    async def create(
        f: Annotated[Filter, Depends(get_filter)], city: Annotated[City, Depends(get_city)]
    ) -> str:
        return city.name

    response = client_for(router).post("/cities?limit=0", json={})
    assert response.status_code == 422
    locs = [e["loc"] for e in response.json()["detail"]]
    assert locs == [["query", "limit"], ["body", "name"]]


def test_dependency_body_on_a_messagepack_route_decodes_messagepack(twin: Twin) -> None:
    router = router_for(twin, msgpack=True)

    @router.post("/cities")
    async def create(city: Annotated[City, Depends(get_city)]) -> str:
        return city.name

    response = client_for(router).post(
        "/cities",
        content=msgspec.msgpack.encode({"name": "Oslo"}),
        headers={"content-type": "application/msgpack"},
    )
    assert response.json() == "Oslo"


def other_city(city: Annotated[City, Body(embed=True)]) -> City:
    return city


def test_one_body_key_declared_two_ways_is_refused_naming_both(twin: Twin) -> None:
    router = router_for(twin)
    with pytest.raises(TypeError, match=r"dependency other_city\(\).*'city'.*create\(\)"):

        @router.post("/cities")
        async def create(city: City, other: Annotated[City, Depends(other_city)]) -> None: ...


def city_from_path(city: Annotated[City, Path()]) -> City:
    return city


def test_struct_a_dependency_cannot_take_is_refused_naming_endpoint_dependency_and_parameter(
    twin: Twin,
) -> None:
    router = router_for(twin)
    with pytest.raises(TypeError, match=r"items\(\): dependency city_from_path\(\).*'city'"):

        @router.get("/items/{city}")
        async def items(city: Annotated[City, Depends(city_from_path)]) -> None: ...


def test_openapi_documents_the_body_and_model_of_dependencies(twin: Twin) -> None:
    router = router_for(twin)

    @router.post("/cities")
    async def create(
        city: Annotated[City, Depends(get_city)], f: Annotated[Filter, Depends(get_filter)]
    ) -> str:
        return city.name

    app = FastAPI()
    app.include_router(router)
    install_openapi(app, router)
    operation = app.openapi()["paths"]["/cities"]["post"]
    schema = operation["requestBody"]["content"]["application/json"]["schema"]
    assert schema["$ref"].endswith("City")
    assert operation["requestBody"]["required"] is True
    assert [(p["in"], p["name"]) for p in operation["parameters"]] == [
        ("query", "limit"),
        ("query", "tags"),
    ]


def also_filter(f: Annotated[Filter, Query()]) -> int:
    return f.limit


def test_a_model_two_dependencies_read_is_documented_once(twin: Twin) -> None:
    router = router_for(twin)

    @router.get("/items")
    async def items(
        a: Annotated[Filter, Depends(get_filter)], b: Annotated[int, Depends(also_filter)]
    ) -> int:
        return b

    app = FastAPI()
    app.include_router(router)
    names = [p["name"] for p in app.openapi()["paths"]["/items"]["get"]["parameters"]]
    assert names == ["limit", "tags"]
    assert TestClient(app).get("/items?limit=7").json() == 7


def test_plain_fastapi_router_route_with_a_struct_dependency_still_works(twin: Twin) -> None:
    router = router_for(twin)

    @router.post("/cities")
    async def create(city: Annotated[City, Depends(get_city)]) -> str:
        return city.name

    plain = APIRouter(prefix="/v1")
    plain.include_router(router)
    assert client_for(plain).post("/v1/cities", json={"name": "Oslo"}).json() == "Oslo"


HOSTILE_BODIES = [
    (b'{"name": ', "application/json"),
    (b"[" * 2000 + b"]" * 2000, "application/json"),
    (b'{"name": "\xff"}', "application/json"),
    (b'{"name": "x", "population": 1e999}', "application/json"),
    (b'{"name": "x", "population": 123456789012345678901234567890}', "application/json"),
    (b'{"name": "x", "name": "y"}', "application/json"),
    (b'{"name": "x"}', "text/plain"),
    (b'{"name": "x"}', "application/json; charset=latin-1"),
    (b"", "application/json"),
    (b"\x81\xa4name\xa1x", "application/msgpack"),
]


@pytest.mark.parametrize(("body", "content_type"), HOSTILE_BODIES)
def test_bad_body_for_a_dependency_is_answered_as_for_the_endpoints_own_body(
    twin: Twin, body: bytes, content_type: str
) -> None:
    router = router_for(twin)

    @router.post("/dependency")
    async def through_dependency(city: Annotated[City, Depends(get_city)]) -> str:
        return city.name

    @router.post("/endpoint")
    async def own(city: City) -> str:
        return city.name

    client = client_for(router, raise_server_exceptions=False)
    headers = {"content-type": content_type}
    ours = client.post("/dependency", content=body, headers=headers)
    reference = client.post("/endpoint", content=body, headers=headers)
    assert ours.status_code < 500
    assert (ours.status_code, ours.json()) == (reference.status_code, reference.json())


def require_token(x_token: Annotated[str, Header()] = "") -> None:
    if x_token != "secret":
        raise HTTPException(401, "no token")


def city_then_token(city: City, _: Annotated[None, Depends(require_token)]) -> str:
    return city.name


def pydantic_city_then_token(city: PydanticCity, _: Annotated[None, Depends(require_token)]) -> str:
    return city.name


@pytest.mark.parametrize(
    "declaration",
    ["body dependency first", "auth dependency first", "auth inside the body dependency"],
)
def test_failing_auth_dependency_wins_over_a_dependencys_invalid_body_as_in_fastapi(
    twin: Twin, declaration: str
) -> None:
    router = router_for(twin)
    app = FastAPI()
    if declaration == "body dependency first":

        @router.post("/cities", dependencies=[Depends(get_city), Depends(require_token)])
        async def create() -> None: ...

        @app.post("/reference", dependencies=[Depends(pydantic_get_city), Depends(require_token)])
        async def reference() -> None: ...

    elif declaration == "auth dependency first":

        @router.post("/cities", dependencies=[Depends(require_token), Depends(get_city)])
        async def create() -> None: ...

        @app.post("/reference", dependencies=[Depends(require_token), Depends(pydantic_get_city)])
        async def reference() -> None: ...

    else:

        @router.post("/cities")
        async def create(name: Annotated[str, Depends(city_then_token)]) -> None: ...

        @app.post("/reference")
        async def reference(name: Annotated[str, Depends(pydantic_city_then_token)]) -> None: ...

    app.include_router(router)
    client = TestClient(app)
    ours = client.post("/cities", json={"nam": "x"})
    theirs = client.post("/reference", json={"nam": "x"})
    assert (
        (ours.status_code, ours.json())
        == (theirs.status_code, theirs.json())
        == (
            401,
            {"detail": "no token"},
        )
    )


def needs_page(page: int) -> int:
    return page


def test_fastapis_parameter_errors_and_a_dependencys_body_errors_are_reported_together(
    twin: Twin,
) -> None:
    router = router_for(twin)

    @router.post("/cities")
    async def create(
        page: Annotated[int, Depends(needs_page)], city: Annotated[City, Depends(get_city)]
    ) -> None: ...

    response = client_for(router).post("/cities?page=x", json={"nam": 1})
    assert response.status_code == 422
    assert [e["loc"] for e in response.json()["detail"]] == [["query", "page"], ["body", "name"]]


def test_dependency_skipped_for_an_invalid_body_is_not_called_but_the_others_are(
    twin: Twin,
) -> None:
    EVENTS.clear()
    router = router_for(twin)

    @router.post("/cities")
    async def create(
        city: Annotated[City, Depends(recording)], page: Annotated[int, Depends(needs_page)]
    ) -> None: ...

    response = client_for(router).post("/cities?page=x", json={})
    # FastAPI's order: each dependency's errors at its turn.
    assert [e["loc"] for e in response.json()["detail"]] == [["body", "name"], ["query", "page"]]
    assert EVENTS == []


def plain_opened() -> Iterator[None]:
    EVENTS.append("plain open")
    yield
    EVENTS.append("plain close")


def test_dependencies_are_solved_and_torn_down_in_declaration_order(twin: Twin) -> None:
    EVENTS.clear()
    router = router_for(twin)

    @router.post("/cities")
    def create(
        name: Annotated[str, Depends(opened)], _: Annotated[None, Depends(plain_opened)]
    ) -> str:
        EVENTS.append("endpoint")
        return name

    assert client_for(router).post("/cities", json={"name": "Oslo"}).json() == "Oslo"
    assert EVENTS == ["open Oslo", "plain open", "endpoint", "plain close", "close"]


async def city_with_suffix(city: City, suffix: str) -> str:
    return city.name + suffix


EXCLAIMED = functools.partial(city_with_suffix, suffix="!")


def test_partial_of_an_async_dependency_is_awaited(twin: Twin) -> None:
    router = router_for(twin)

    @router.post("/cities")
    async def create(name: Annotated[str, Depends(EXCLAIMED)]) -> str:
        return name

    assert client_for(router).post("/cities", json={"name": "Oslo"}).json() == "Oslo!"


class Cities:
    def name_of(self, city: City) -> str:
        return city.name


CITIES = Cities()


def test_override_keyed_by_a_bound_method_replaces_it(twin: Twin) -> None:
    router = router_for(twin)

    @router.post("/cities")
    async def create(name: Annotated[str, Depends(CITIES.name_of)]) -> str:
        return name

    app = FastAPI()
    app.include_router(router)
    app.dependency_overrides[CITIES.name_of] = lambda: "overridden"
    assert TestClient(app).post("/cities", json={"name": "Oslo"}).json() == "overridden"


def embedded_city(city: Annotated[City, Body(embed=True)]) -> str:
    return city.name


def also_embedded_city(city: Annotated[City, Body(embed=True)]) -> str:
    return city.name


def test_one_body_key_declared_alike_by_two_dependencies_is_shared(twin: Twin) -> None:
    router = router_for(twin)

    @router.post("/cities")
    async def create(
        a: Annotated[str, Depends(embedded_city)], b: Annotated[str, Depends(also_embedded_city)]
    ) -> list[str]:
        return [a, b]

    response = client_for(router).post("/cities", json={"city": {"name": "Oslo"}})
    assert response.json() == ["Oslo", "Oslo"]


def test_bare_and_body_spellings_of_one_body_parameter_are_alike(twin: Twin) -> None:
    router = router_for(twin)

    @router.post("/cities")
    async def create(city: Annotated[City, Body()], name: Annotated[str, Depends(get_city)]) -> str:
        return city.name

    assert client_for(router).post("/cities", json={"name": "Oslo"}).json() == "Oslo"


# --- the 422 in FastAPI's order on both tiers -----------------------------------------------


def add_ordered_routes(router: APIRouter, city_type: Any) -> None:
    """Two dependencies take the body, one takes a query parameter before it, another
    only a query parameter; the endpoint a query parameter of its own."""

    def takes_city(city: Any) -> None: ...

    def takes_q_and_city(q: Annotated[int, Query()], city: Any) -> None: ...

    # The body's type is the router's (the module's annotations are strings).
    takes_city.__annotations__["city"] = city_type
    takes_q_and_city.__annotations__["city"] = city_type

    def takes_r(r: Annotated[int, Query()]) -> None: ...

    @router.post("/ordered")
    def ordered(
        a: None = Depends(takes_city),
        b: None = Depends(takes_r),
        c: None = Depends(takes_q_and_city),
        z: Annotated[int, Query()] = 0,
    ) -> None: ...


def error_locs(router: APIRouter, body: bytes) -> list[Any]:
    response = client_for(router).post(
        "/ordered?q=x&r=y&z=w", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    return [error["loc"] for error in response.json()["detail"]]


def fastapi_router(tier: str) -> APIRouter:
    dependencies = [Depends(delegating_dependency)] if tier == "delegated" else []
    return APIRouter(dependencies=dependencies)


def test_each_dependencys_body_errors_come_at_its_turn_on_both_tiers(twin: Twin, tier: str) -> None:
    ours, theirs = tier_router(twin, tier), fastapi_router(tier)
    add_ordered_routes(ours, City)
    add_ordered_routes(theirs, PydanticCity)
    assert_tier(ours, tier)

    assert error_locs(ours, b'{"population": "x"}') == error_locs(theirs, b'{"population": "x"}')
    assert error_locs(ours, b'{"population": "x"}')[:3] == [
        ["body", "name"],
        ["body", "population"],
        ["query", "r"],
    ]


def test_a_body_key_two_dependencies_take_is_reported_for_each_on_both_tiers(
    twin: Twin, tier: str
) -> None:
    ours, theirs = tier_router(twin, tier), fastapi_router(tier)
    add_ordered_routes(ours, City)
    add_ordered_routes(theirs, PydanticCity)

    locs = error_locs(ours, b"{}")
    assert locs == error_locs(theirs, b"{}")
    assert locs.count(["body", "name"]) == 2


def test_a_dependency_whose_part_is_valid_is_called_when_another_part_is_not(
    twin: Twin, tier: str
) -> None:
    EVENTS.clear()
    router = tier_router(twin, tier)

    @router.post("/parts")
    def parts(item: Item, city: Annotated[City, Depends(recording)]) -> None: ...

    assert_tier(router, tier)
    body = {"item": {"title": 1}, "city": {"name": "Oslo"}}
    response = client_for(router).post("/parts", json=body)

    assert [e["loc"] for e in response.json()["detail"]] == [["body", "item", "title"]]
    assert EVENTS == ["Oslo"]  # as FastAPI: its own part is valid


def test_an_override_leaves_the_part_it_does_not_take_unvalidated(twin: Twin, tier: str) -> None:
    router = tier_router(twin, tier)

    @router.post("/parts")
    def parts(item: Item, name: Annotated[str, Depends(city_name)]) -> list[str]:
        return [item.title, name]

    app = FastAPI()
    app.include_router(router)
    app.dependency_overrides[get_city] = lambda: City("Bergen")
    client = TestClient(app)

    response = client.post("/parts", json={"item": {"title": "t"}, "city": {"name": 1}})
    assert response.json() == ["t", "Bergen"]
    assert client.post("/parts", json={"item": {"title": "t"}}).json() == ["t", "Bergen"]


def test_a_dependency_that_takes_a_struct_may_override_itself_on_both_tiers(
    twin: Twin, tier: str
) -> None:
    """docs/dependencies.md: "a dependency may override itself" (FastAPI answers 200)."""
    # Found by the dependency differential with every route forced to the delegated tier:
    # FastAPI rebuilt the overridden dependency from the function itself, whose Struct
    # parameter it cannot read (FastAPIError, a 500).
    router = tier_router(twin, tier)

    @router.post("/cities")
    def cities(name: Annotated[str, Depends(city_name)]) -> str:
        return name

    assert_tier(router, tier)
    app = FastAPI()
    app.include_router(router)
    app.dependency_overrides[get_city] = get_city
    client = TestClient(app, raise_server_exceptions=False)

    response = client.post("/cities", json={"name": "Oslo"})
    assert (response.status_code, response.json()) == (200, "Oslo")


def page_size(size: Annotated[int, msgspec.Meta(ge=1), Query()] = 5) -> int:
    return size


def test_msgspec_typed_parameters_in_app_and_include_router_dependencies_are_ours(
    twin: Twin, tier: str
) -> None:
    router = tier_router(twin, tier)

    @router.get("/pages")
    def pages() -> str:
        return "ok"

    app = FastAPI(dependencies=[Depends(page_size)])
    app.include_router(router, dependencies=[Depends(page_size, use_cache=False)])
    client = TestClient(app)

    assert client.get("/pages?size=3").json() == "ok"
    errors = client.get("/pages?size=0").json()["detail"]
    # msgspec's constraint, checked where each of the two dependencies is solved.
    assert [(e["loc"], e["msg"]) for e in errors] == [
        (["query", "size"], "Expected `int` >= 1")
    ] * 2
