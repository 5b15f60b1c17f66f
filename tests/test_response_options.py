"""The response_model_* options on typed msgspec responses, as FastAPI applies them.

Each test sends the same request to a Pydantic APIRouter route and to a MsgspecRouter route
with the same options on an equivalent Struct, on both twins and both tiers, and expects
the same body.
"""

import dataclasses
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
import pydantic
import pytest
from fastapi import APIRouter, FastAPI
from fastapi.sse import EventSourceResponse
from fastapi.testclient import TestClient
from support import assert_tier, client_for, tier_router
from twins import Twin

from msgspec_fastapi._endpoint.plan import analyze_endpoint
from msgspec_fastapi._shared import OUTPUT_SHAPED, OUTPUT_TRUSTED


class Part(msgspec.Struct, rename="camel"):
    part_no: int | None = None
    tags: list[str] = []
    label: str = "x"


class Order(msgspec.Struct):
    name: str
    part: Part | None = None
    parts: list[Part] = []
    counts: dict[str, int | None] = {}


class PydanticPart(pydantic.BaseModel):
    part_no: int | None = pydantic.Field(None, alias="partNo")
    tags: list[str] = []
    label: str = "x"


class PydanticOrder(pydantic.BaseModel):
    name: str
    part: PydanticPart | None = None
    parts: list[PydanticPart] = []
    counts: dict[str, int | None] = {}


ORDER = {
    "name": "n",
    "part": {"partNo": None, "tags": [], "label": "x"},
    "parts": [{"partNo": 1, "tags": ["a"], "label": "y"}, {"partNo": None}, {"partNo": 3}],
    "counts": {"k": None, "j": 1},
}


def fastapi_body(path: str, model: Any, value: Any, **options: Any) -> Any:
    """What a Pydantic APIRouter route answers for `value` with `options`."""
    router = APIRouter()
    router.add_api_route(path, lambda: value, response_model=model, **options)
    return client_for(router).get(path).json()


def our_client(
    twin: Twin, tier: str, endpoint: Callable[..., Any], model: Any, **options: Any
) -> TestClient:
    router = tier_router(twin, tier)
    router.add_api_route("/order", endpoint, response_model=model, **options)
    assert_tier(router, tier)
    return client_for(router)


OPTIONS = [
    {"response_model_exclude_none": True},
    {"response_model_exclude_defaults": True},
    {"response_model_by_alias": False},
    {"response_model_include": {"name", "parts"}},
    {"response_model_exclude": {"parts", "counts"}},
    {"response_model_include": {"parts": {0: {"part_no"}, -1: True}, "counts": {"k"}}},
    {"response_model_exclude": {"parts": {"__all__": {"label"}, 0: True}, "part": {"tags"}}},
    {"response_model_include": {"parts": {"__all__": {"label"}, 1: {"tags"}}}},
    {"response_model_include": {"name", "part"}, "response_model_exclude": {"part"}},
    {"response_model_exclude_none": True, "response_model_by_alias": False},
]


@pytest.mark.parametrize("options", OPTIONS, ids=repr)
def test_option_shapes_a_validated_response_as_fastapi_does(
    twin: Twin, tier: str, options: dict[str, Any]
) -> None:
    expected = fastapi_body("/order", PydanticOrder, ORDER, **options)

    client = our_client(twin, tier, lambda: ORDER, Order, **options)

    assert client.get("/order").json() == expected


@pytest.mark.parametrize("options", OPTIONS, ids=repr)
def test_option_shapes_a_trusted_struct_instance_as_fastapi_does(
    twin: Twin, tier: str, options: dict[str, Any]
) -> None:
    expected = fastapi_body("/order", PydanticOrder, ORDER, **options)

    client = our_client(twin, tier, lambda: msgspec.convert(ORDER, Order), Order, **options)

    assert client.get("/order").json() == expected


def test_option_applies_inside_a_list_response(twin: Twin, tier: str) -> None:
    parts = ORDER["parts"]
    expected = fastapi_body("/parts", list[PydanticPart], parts, response_model_exclude_none=True)

    router = tier_router(twin, tier)
    router.add_api_route(
        "/parts", lambda: parts, response_model=list[Part], response_model_exclude_none=True
    )

    assert client_for(router).get("/parts").json() == expected


def test_include_of_names_on_a_list_response_keeps_nothing_as_fastapi_does(
    twin: Twin, tier: str
) -> None:
    # Pydantic filters a list by index, so names match no item.
    parts = ORDER["parts"]
    expected = fastapi_body("/parts", list[PydanticPart], parts, response_model_include={"label"})

    router = tier_router(twin, tier)
    router.add_api_route(
        "/parts", lambda: parts, response_model=list[Part], response_model_include={"label"}
    )

    assert client_for(router).get("/parts").json() == expected == []


def test_exclude_defaults_compares_with_the_default_factory(twin: Twin, tier: str) -> None:
    class Box(msgspec.Struct):
        items: list[int] = msgspec.field(default_factory=list)
        size: int = 0

    class PydanticBox(pydantic.BaseModel):
        items: list[int] = pydantic.Field(default_factory=list)
        size: int = 0

    value = {"items": [], "size": 2}
    expected = fastapi_body("/box", PydanticBox, value, response_model_exclude_defaults=True)

    router = tier_router(twin, tier)
    router.add_api_route(
        "/box", lambda: value, response_model=Box, response_model_exclude_defaults=True
    )

    assert client_for(router).get("/box").json() == expected == {"size": 2}


def test_exclude_defaults_applies_to_a_nested_struct_equal_to_its_default(
    twin: Twin, tier: str
) -> None:
    class Inner(msgspec.Struct):
        level: int = 0

    class Outer(msgspec.Struct):
        inner: Inner = msgspec.field(default_factory=Inner)
        name: str = "a"

    class PydanticInner(pydantic.BaseModel):
        level: int = 0

    class PydanticOuter(pydantic.BaseModel):
        inner: PydanticInner = PydanticInner()
        name: str = "a"

    value = {"inner": {"level": 0}, "name": "b"}
    expected = fastapi_body("/o", PydanticOuter, value, response_model_exclude_defaults=True)

    router = tier_router(twin, tier)
    router.add_api_route(
        "/o", lambda: value, response_model=Outer, response_model_exclude_defaults=True
    )

    assert client_for(router).get("/o").json() == expected == {"name": "b"}


def test_exclude_none_applies_to_dataclass_fields(twin: Twin, tier: str) -> None:
    @dataclasses.dataclass
    class Point:
        x: int | None = None
        y: int = 0

    @pydantic.dataclasses.dataclass
    class PydanticPoint:
        x: int | None = None
        y: int = 0

    value = {"x": None, "y": 1}
    expected = fastapi_body("/p", PydanticPoint, value, response_model_exclude_none=True)

    router = tier_router(twin, tier)
    router.add_api_route(
        "/p", lambda: value, response_model=Point, response_model_exclude_none=True
    )

    assert client_for(router).get("/p").json() == expected == {"y": 1}


def test_exclude_unset_drops_unset_fields_as_fastapi_drops_fields_never_set(
    twin: Twin, tier: str
) -> None:
    class Patch(msgspec.Struct):
        name: str | msgspec.UnsetType = msgspec.UNSET
        size: int | msgspec.UnsetType | None = msgspec.UNSET

    class PydanticPatch(pydantic.BaseModel):
        name: str | None = None
        size: int | None = None

    expected = fastapi_body(
        "/patch", PydanticPatch, {"size": None}, response_model_exclude_unset=True
    )

    router = tier_router(twin, tier)
    router.add_api_route(
        "/patch", lambda: Patch(size=None), response_model=Patch, response_model_exclude_unset=True
    )

    assert client_for(router).get("/patch").json() == expected == {"size": None}


def test_exclude_unset_keeps_a_field_left_at_its_default(twin: Twin, tier: str) -> None:
    # Structs do not record which fields were given: only UNSET counts as unset.
    router = tier_router(twin, tier)
    router.add_api_route(
        "/part", lambda: Part(label="y"), response_model=Part, response_model_exclude_unset=True
    )

    assert client_for(router).get("/part").json() == {"partNo": None, "tags": [], "label": "y"}


def test_tagged_struct_keeps_its_tag_under_include(twin: Twin, tier: str) -> None:
    class Cat(msgspec.Struct, tag=True):
        name: str
        lives: int = 9

    router = tier_router(twin, tier)
    router.add_api_route(
        "/cat", lambda: Cat("Tom"), response_model=Cat, response_model_include={"lives"}
    )

    assert client_for(router).get("/cat").json() == {"type": "Cat", "lives": 9}


def test_omit_defaults_struct_still_omits_its_defaults_under_by_alias_false(
    twin: Twin, tier: str
) -> None:
    class Profile(msgspec.Struct, rename="camel", omit_defaults=True):
        first_name: str
        last_name: str = ""

    router = tier_router(twin, tier)
    router.add_api_route(
        "/profile", lambda: Profile("Ada"), response_model=Profile, response_model_by_alias=False
    )

    assert client_for(router).get("/profile").json() == {"first_name": "Ada"}


def test_options_shape_messagepack_responses(twin: Twin, tier: str) -> None:
    router = tier_router(twin, tier, msgpack=True)
    router.add_api_route(
        "/order", lambda: ORDER, response_model=Order, response_model_exclude_none=True
    )
    expected = fastapi_body("/order", PydanticOrder, ORDER, response_model_exclude_none=True)

    response = client_for(router).get("/order", headers={"accept": "application/msgpack"})

    assert response.headers["content-type"] == "application/msgpack"
    assert msgspec.msgpack.decode(response.content) == expected


def stream_router(router: APIRouter, model: Any, items: list[Any], sse: bool) -> None:
    async def stream() -> AsyncIterator[model]:  # type: ignore[valid-type]
        for item in items:
            yield item

    options: dict[str, Any] = {"response_model_exclude_none": True}
    if sse:
        options["response_class"] = EventSourceResponse
    router.add_api_route("/stream", stream, **options)


@pytest.mark.parametrize("sse", [False, True], ids=["jsonl", "sse"])
def test_options_shape_each_stream_item_as_fastapi_does(twin: Twin, tier: str, sse: bool) -> None:
    fastapi_router = APIRouter()
    stream_router(fastapi_router, PydanticPart, ORDER["parts"], sse)
    expected = client_for(fastapi_router).get("/stream").text

    router = tier_router(twin, tier)
    stream_router(router, Part, ORDER["parts"], sse)
    assert_tier(router, tier)

    assert client_for(router).get("/stream").text == expected


def test_openapi_is_unchanged_by_the_options(twin: Twin) -> None:
    def document(**options: Any) -> Any:
        router = twin.router_class()
        router.add_api_route("/order", lambda: ORDER, response_model=Order, **options)
        app = FastAPI()
        app.include_router(router)
        return app.openapi()

    plain = document()
    for options in OPTIONS:
        assert document(**options) == plain


@pytest.mark.parametrize(
    ("options", "mode"),
    [
        ({}, OUTPUT_TRUSTED),
        ({"response_model_exclude_unset": True}, OUTPUT_TRUSTED),
        ({"response_model_by_alias": True, "response_model_exclude": set()}, OUTPUT_TRUSTED),
        ({"response_model_exclude_none": True}, OUTPUT_SHAPED),
    ],
    ids=repr,
)
def test_only_options_that_change_the_response_leave_the_trusted_path(
    options: dict[str, Any], mode: int
) -> None:
    def order() -> Order:
        return msgspec.convert(ORDER, Order)

    spec, _ = analyze_endpoint(order, options, untyped_allowed=True)

    assert spec is not None and spec.output is not None
    assert spec.output.mode == mode


@pytest.mark.parametrize(
    "options",
    [
        {"response_model_include": ["name"]},
        {"response_model_exclude": {"parts": False}},
    ],
    ids=repr,
)
def test_an_include_or_exclude_pydantic_would_refuse_is_refused_at_registration(
    twin: Twin, options: dict[str, Any]
) -> None:
    router = twin.router_class()

    with pytest.raises(TypeError, match=r"response_model_(include|exclude)"):
        router.add_api_route("/order", lambda: ORDER, response_model=Order, **options)
