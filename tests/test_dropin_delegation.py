"""Declarations the request path cannot serve exactly run as FastAPI runs them.

A Pydantic-only declaration on a body parameter, Pydantic metadata nested inside a type,
a Pydantic dataclass: FastAPI's own fields read and validate them (on the direct tier
where nothing else needs FastAPI's solving), and every answer is the one an APIRouter
gives for the same declaration. Each test
runs on both twins, and on both tiers where the route could run on either.
"""

# No `from __future__ import annotations`: endpoints are declared inside the tests.
import math
from collections.abc import Callable
from typing import Annotated, Any

import msgspec
import pydantic
import pytest
from fastapi import APIRouter, Body, Depends, FastAPI, Query
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from pydantic import AliasChoices, BeforeValidator, Field
from pydantic.dataclasses import dataclass as pydantic_dataclass
from support import delegating_dependency
from twins import Twin

from msgspec_fastapi import MsgspecRouter

TIERS = ["direct", "delegated"]
Build = Callable[[APIRouter], None]


def router_for(twin: Twin, tier: str = "direct", **options: Any) -> MsgspecRouter:
    """A MsgspecRouter on `twin`, with a dependency only FastAPI solves on "delegated"."""
    if tier == "delegated":
        options["dependencies"] = [Depends(delegating_dependency)]
    return twin.router_class(**options)


def app_with(router: APIRouter, build: Build) -> FastAPI:
    build(router)
    app = FastAPI()
    app.include_router(router)
    return app


def both_answers(
    twin: Twin, build: Build, send: Callable[[TestClient], Any], tier: str = "direct"
) -> tuple[Any, Any, MsgspecRouter]:
    """(ours, FastAPI's) answers to the same request, as (status, JSON), and our router."""
    router = router_for(twin, tier)
    ours_app = app_with(router, build)
    twin.install_dispatch(ours_app)
    ours = send(TestClient(ours_app))
    theirs = send(TestClient(app_with(APIRouter(), build)))
    return (ours.status_code, ours.json()), (theirs.status_code, theirs.json()), router


# -- Pydantic-only declarations on body parameters ------------------------------------------------


def doubled(value: Any) -> Any:
    return value * 2 if isinstance(value, int) else value


def with_before_validator(router: APIRouter) -> None:
    @router.post("/count")
    async def count(value: Annotated[int, BeforeValidator(doubled), Body(embed=True)]) -> Any:
        return {"value": value}


def with_default_factory(router: APIRouter) -> None:
    @router.post("/tags")
    async def tags(tags: Annotated[list[str], Body(embed=True, default_factory=list)]) -> Any:
        return {"tags": tags}


def with_alias_choices(router: APIRouter) -> None:
    @router.post("/pick")
    async def pick(
        value: Annotated[int, Body(embed=True, validation_alias=AliasChoices("first", "second"))],
    ) -> Any:
        return {"value": value}


def with_allow_inf_nan(router: APIRouter) -> None:
    @router.post("/ratio")
    async def ratio(value: Annotated[float, Body(embed=True, allow_inf_nan=False)]) -> Any:
        return {"finite": math.isfinite(value)}


def with_validate_default(router: APIRouter) -> None:
    @router.post("/limit")
    async def limit(
        value: Annotated[int, Field(gt=0), Body(embed=True, validate_default=True)] = 0,
    ) -> Any:
        return {"value": value}


def with_raw_media_type(router: APIRouter) -> None:
    @router.post("/blob")
    async def blob(data: Annotated[bytes, Body(media_type="application/octet-stream")]) -> Any:
        return {"size": len(data)}


@pytest.mark.parametrize(
    ("build", "send"),
    [
        (with_before_validator, lambda c: c.post("/count", json={"value": 4})),
        (with_before_validator, lambda c: c.post("/count", json={"value": "x"})),
        (with_default_factory, lambda c: c.post("/tags", json={})),
        (with_alias_choices, lambda c: c.post("/pick", json={"second": 2})),
        (with_alias_choices, lambda c: c.post("/pick", json={"first": "x", "second": 2})),
        (with_allow_inf_nan, lambda c: c.post("/ratio", json={"value": "inf"})),
        (with_allow_inf_nan, lambda c: c.post("/ratio", json={"value": 1.5})),
        (with_validate_default, lambda c: c.post("/limit", json={})),
        (with_raw_media_type, lambda c: c.post("/blob", content=b"\x00\x01\x02")),
    ],
    ids=[
        "BeforeValidator",
        "BeforeValidator-invalid",
        "default_factory",
        "AliasChoices",
        "AliasChoices-invalid",
        "allow_inf_nan-refused",
        "allow_inf_nan-finite",
        "validate_default",
        "media_type-octet-stream",
    ],
)
def test_pydantic_only_body_declaration_is_served_as_fastapi_serves_it(
    twin: Twin, build: Build, send: Callable[[TestClient], Any]
) -> None:
    ours, theirs, router = both_answers(twin, build, send)

    assert ours == theirs
    # FastAPI's own body validation, on the direct tier (`PydanticRuntime`).
    assert router.routes[0].tier == "direct"  # type: ignore[attr-defined]


def test_body_part_beside_a_pydantic_only_one_is_validated_by_pydantic_too(twin: Twin) -> None:
    def build(router: APIRouter) -> None:
        @router.post("/pair")
        async def pair(
            first: Annotated[int, Body()],
            second: Annotated[int, BeforeValidator(doubled), Body()],
        ) -> Any:
            return [first, second]

    ours, theirs, _ = both_answers(
        twin, build, lambda c: c.post("/pair", json={"first": "x", "second": 1})
    )

    assert ours == theirs
    assert ours[1]["detail"][0]["type"] == "int_parsing"  # Pydantic's, not msgspec's


class Place(msgspec.Struct):
    name: str


def test_struct_body_part_beside_a_pydantic_only_one_stays_msgspecs(twin: Twin) -> None:
    router = router_for(twin)

    @router.post("/visits")
    async def visit(
        place: Place,
        count: Annotated[int, BeforeValidator(doubled), Body()],
    ) -> Any:
        return {"place": place.name, "count": count}

    app = app_with(router, lambda _: None)
    twin.install_dispatch(app)
    test_client = TestClient(app)

    good = test_client.post("/visits", json={"place": {"name": "Oslo"}, "count": 2})
    bad = test_client.post("/visits", json={"place": {"name": 1}, "count": 2})
    assert (good.status_code, good.json()) == (200, {"place": "Oslo", "count": 4})
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["type"] == "value_error.msgspec"


# -- Pydantic metadata nested inside a type -------------------------------------------------------


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("items", [["a", "b"], ["a", "b", "c", "d"]], ids=["fits", "too-many"])
def test_nested_pydantic_constraint_of_a_query_parameter_is_applied_as_fastapi_does(
    twin: Twin, tier: str, items: list[str]
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/tags")
        async def tags(
            tag: Annotated[Annotated[list[str], Field(max_length=3)] | None, Query()] = None,
        ) -> Any:
            return {"tag": tag}

    ours, theirs, _ = both_answers(
        twin, build, lambda c: c.get("/tags", params={"tag": items}), tier
    )

    assert ours == theirs


def test_nested_pydantic_constraint_of_a_body_type_is_applied_as_fastapi_does(twin: Twin) -> None:
    def build(router: APIRouter) -> None:
        @router.post("/scores")
        async def scores(values: list[Annotated[int, Field(gt=0)]]) -> Any:
            return {"total": sum(values)}

    ours, theirs, router = both_answers(twin, build, lambda c: c.post("/scores", json=[1, 0]))

    assert ours == theirs
    assert ours[0] == 422
    # FastAPI's own body validation, on the direct tier (`PydanticRuntime`).
    assert router.routes[0].tier == "direct"  # type: ignore[attr-defined]


# -- Pydantic types in responses ------------------------------------------------------------------


@pydantic_dataclass
class Labelled:
    name: str

    @pydantic.computed_field  # type: ignore[prop-decorator]
    @property
    def label(self) -> str:
        return f"label {self.name}"


@pytest.mark.parametrize("tier", TIERS)
def test_pydantic_dataclass_response_keeps_its_computed_field(twin: Twin, tier: str) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/labelled")
        async def labelled() -> Labelled:
            return Labelled(name="x")

    ours, theirs, _ = both_answers(twin, build, lambda c: c.get("/labelled"), tier)

    assert ours == theirs == (200, {"name": "x", "label": "label x"})


class Note(pydantic.BaseModel):
    text: str = Field(alias="body")


@pytest.mark.parametrize("tier", TIERS)
def test_pydantic_model_in_an_any_part_of_a_typed_response_is_encoded_by_its_dump(
    twin: Twin, tier: str
) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/notes")
        async def notes() -> dict[str, Any]:
            return {"note": Note(body="hi"), "count": 1}

    ours, theirs, _ = both_answers(twin, build, lambda c: c.get("/notes"), tier)

    assert ours == theirs == (200, {"note": {"body": "hi"}, "count": 1})


# -- route classes and integrations ---------------------------------------------------------------


def test_apiroute_itself_as_route_class_gives_msgspec_routes(twin: Twin) -> None:
    router = router_for(twin, route_class=APIRoute)

    @router.post("/places")
    async def create(place: Place) -> Place:
        return place

    app = app_with(router, lambda _: None)
    twin.install_dispatch(app)

    assert TestClient(app).post("/places", json={"name": "Oslo"}).json() == {"name": "Oslo"}
    assert isinstance(router.routes[0], twin.route_class)


@pytest.mark.parametrize("tier", TIERS)
def test_sync_function_wrapping_the_call_of_a_sync_endpoint_gets_its_result(
    twin: Twin, tier: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fastapi.routing

    original = fastapi.routing.get_request_handler
    calls: list[str] = []

    def wrapping_get_request_handler(*args: Any, **kwargs: Any) -> Any:
        # As older Sentry SDKs do: the call FastAPI makes, wrapped by a sync function.
        call = kwargs["dependant"].call

        def traced(**values: Any) -> Any:
            calls.append("traced")
            return call(**values)

        kwargs["dependant"].call = traced
        return original(*args, **kwargs)

    monkeypatch.setattr(fastapi.routing, "get_request_handler", wrapping_get_request_handler)
    router = router_for(twin, tier)

    @router.get("/places/{name}")
    def read(name: str) -> Place:
        return Place(name=name)

    app = app_with(router, lambda _: None)
    twin.install_dispatch(app)
    response = TestClient(app).get("/places/Oslo")

    assert (response.status_code, response.json()) == (200, {"name": "Oslo"})
    assert calls == ["traced"]
