"""Path, query, header and cookie parameters: FastAPI's extraction, msgspec's conversion.

Where FastAPI's behaviour is the contract, the same endpoint is registered on a plain
APIRouter and on the MsgspecRouter under test, and the two answers are compared.
Tests taking the `router` fixture run on both the direct and the delegated tier.
"""

import decimal
import enum
import uuid
from collections.abc import Callable
from typing import Annotated, Any

import msgspec
import pytest
from fastapi import APIRouter, Cookie, Depends, FastAPI, File, Form, Header, Path, Query
from fastapi.testclient import TestClient
from support import assert_validation_error_shape, client_for
from twins import Twin

from msgspec_fastapi import MsgspecRouter


class City(msgspec.Struct):
    name: str
    population: int


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def side_by_side(router: MsgspecRouter, path: str, endpoint: Callable[..., Any]) -> TestClient:
    """An app serving `endpoint` at /plain{path} (APIRouter) and /msgspec{path}."""
    plain = APIRouter()
    plain.add_api_route(path, endpoint)
    router.add_api_route(path, endpoint)
    app = FastAPI()
    app.include_router(plain, prefix="/plain")
    app.include_router(router, prefix="/msgspec")
    return TestClient(app)


def assert_same_decision(client: TestClient, url: str) -> None:
    """FastAPI and we accept the same values, read alike; a refusal is a 422 in FastAPI's shape."""
    plain = client.get("/plain" + url)
    ours = client.get("/msgspec" + url)
    assert plain.status_code in (200, 422)
    assert (ours.status_code, ours.json() if ours.status_code == 200 else None) == (
        plain.status_code,
        plain.json() if plain.status_code == 200 else None,
    ), f"{url}: FastAPI says {plain.status_code} {plain.text}"
    if ours.status_code == 422:
        assert_validation_error_shape(ours.json(), "query" if "?" in url else "path")


INT_INPUTS = [
    "5", "+5", "-5", "05", "007", "1_0", "1__0", "_10", "5.0", "5.00", "5.5", "5.", ".5",
    " 7 ", "7 ", " 7", "", "five", "1e3", "0x10", "0b1", "٣", "-0", "+-5",
    "99999999999999999999", "nan", "inf", "5%20", "%2B5",
]  # fmt: skip

BOOL_INPUTS = [
    "true", "True", "TRUE", "false", "1", "0", "yes", "no", "YES", "on", "off", "Off",
    "t", "f", "T", "F", "y", "n", "Y", "N", "2", "-1", "", "truee", " true", "true ",
    "1.0", "none", "null",
]  # fmt: skip


# -- FastAPI's int and bool acceptance, side by side ------------------------------------------


@pytest.mark.parametrize("raw", INT_INPUTS)
def test_int_query_parameter_accepts_what_fastapi_accepts(router: MsgspecRouter, raw: str) -> None:
    async def read(n: int):
        return {"n": n}

    assert_same_decision(side_by_side(router, "/int", read), f"/int?n={raw}")


# Inputs around the range of a bounded int, and around the 18 digits the request path reads
# without msgspec: every decision must still be FastAPI's.
BOUNDED_INT_INPUTS = [
    "0", "1", "2", "99", "100", "101", "007", "0100", "-1", "+1", "1_0", "٣",
    "000000000000000050", "000000000000000500", "0000000000000000050",
    "999999999999999999", "9999999999999999999", "99999999999999999999",
]  # fmt: skip
BOUNDS = {
    "ge-le": Query(ge=1, le=100),
    "gt-lt": Query(gt=0, lt=101),
    "ge-only": Query(ge=1),
    "multiple_of": Query(ge=1, multiple_of=2),
}


@pytest.mark.parametrize("raw", BOUNDED_INT_INPUTS)
@pytest.mark.parametrize("bounds", list(BOUNDS))
def test_bounded_int_query_parameter_accepts_what_fastapi_accepts(
    router: MsgspecRouter, bounds: str, raw: str
) -> None:
    async def read(n: Annotated[int, BOUNDS[bounds]]):
        return {"n": n}

    assert_same_decision(side_by_side(router, "/int", read), f"/int?n={raw}")


@pytest.mark.parametrize("raw", ["0", "5", "6", "99999999999999999999"])
def test_bounded_int_path_parameter_with_an_int_convertor_accepts_what_fastapi_accepts(
    router: MsgspecRouter, raw: str
) -> None:
    async def read(n: Annotated[int, Path(ge=0, le=5)]):
        return {"n": n}

    assert_same_decision(side_by_side(router, "/int/{n:int}", read), f"/int/{raw}")


@pytest.mark.parametrize("raw", BOOL_INPUTS)
def test_bool_query_parameter_accepts_what_fastapi_accepts(router: MsgspecRouter, raw: str) -> None:
    async def read(flag: bool):
        return {"flag": flag}

    assert_same_decision(side_by_side(router, "/bool", read), f"/bool?flag={raw}")


@pytest.mark.parametrize("raw", ["+5", "05", "1_0", "5.0", "5.5", " 7 ", "x", ""])
def test_optional_int_query_parameter_accepts_what_fastapi_accepts(
    router: MsgspecRouter, raw: str
) -> None:
    async def read(n: int | None = None):
        return {"n": n}

    assert_same_decision(side_by_side(router, "/int", read), f"/int?n={raw}")


@pytest.mark.parametrize("raws", [["+5", "05"], ["1_0", "5.0"], ["1", "x"], ["5.5"]])
def test_int_list_query_parameter_accepts_what_fastapi_accepts(
    router: MsgspecRouter, raws: list[str]
) -> None:
    async def read(n: Annotated[list[int], Query()]):
        return {"n": n}

    query = "&".join(f"n={raw}" for raw in raws)
    assert_same_decision(side_by_side(router, "/ints", read), f"/ints?{query}")


@pytest.mark.parametrize("raw", ["+5", "05", "1_0", "5.0", "5.5", "x"])
def test_int_path_parameter_accepts_what_fastapi_accepts(router: MsgspecRouter, raw: str) -> None:
    async def read(n: int):
        return {"n": n}

    assert_same_decision(side_by_side(router, "/int/{n}", read), f"/int/{raw}")


@pytest.mark.parametrize("raw", ["yes", "off", "T", "0", "maybe"])
def test_bool_path_parameter_accepts_what_fastapi_accepts(router: MsgspecRouter, raw: str) -> None:
    async def read(flag: bool):
        return {"flag": flag}

    assert_same_decision(side_by_side(router, "/bool/{flag}", read), f"/bool/{raw}")


@pytest.mark.parametrize("raw", ["+5", "05", "5.0", " 7 ", "x"])
def test_int_header_parameter_accepts_what_fastapi_accepts(router: MsgspecRouter, raw: str) -> None:
    async def read(x_count: Annotated[int, Header()]):
        return {"n": x_count}

    client = side_by_side(router, "/header", read)
    plain = client.get("/plain/header", headers={"x-count": raw})
    ours = client.get("/msgspec/header", headers={"x-count": raw})

    assert ours.status_code == plain.status_code
    assert ours.json() == plain.json() or plain.status_code == 422


# -- msgspec's conversion where it differs from Pydantic ----------------------------------------


def test_nan_is_accepted_for_a_decimal_query_parameter(router: MsgspecRouter) -> None:
    @router.get("/amount")
    async def amount(value: decimal.Decimal):
        return {"is_nan": value.is_nan()}

    assert client_for(router).get("/amount?value=nan").json() == {"is_nan": True}


def test_leading_space_is_rejected_for_a_float_query_parameter(router: MsgspecRouter) -> None:
    @router.get("/ratio")
    async def ratio(value: float):
        return {"value": value}

    client = client_for(router)

    assert client.get("/ratio?value=1.5").json() == {"value": 1.5}
    assert client.get("/ratio", params={"value": " 1.5"}).status_code == 422


def test_enum_query_parameter_is_converted_by_value(router: MsgspecRouter) -> None:
    @router.get("/color")
    async def color(color: Color):
        return {"is_enum": isinstance(color, Color), "name": color.name}

    client = client_for(router)

    assert client.get("/color?color=blue").json() == {"is_enum": True, "name": "BLUE"}
    assert client.get("/color?color=green").status_code == 422


def test_uuid_path_parameter_is_converted(router: MsgspecRouter) -> None:
    @router.get("/items/{item_id}")
    async def item(item_id: uuid.UUID):
        return {"version": item_id.version}

    client = client_for(router)

    assert client.get(f"/items/{uuid.uuid4()}").json() == {"version": 4}
    assert client.get("/items/not-a-uuid").status_code == 422


# -- extraction: aliases, defaults, lists, headers, cookies ---------------------------------


def test_path_parameter_is_converted(router: MsgspecRouter) -> None:
    @router.get("/items/{item_id}")
    async def item(item_id: int):
        return {"item_id": item_id}

    assert client_for(router).get("/items/42").json() == {"item_id": 42}


def test_invalid_path_parameter_is_a_422_located_in_the_path(router: MsgspecRouter) -> None:
    @router.get("/items/{item_id}")
    async def item(item_id: int):
        return {"item_id": item_id}

    response = client_for(router).get("/items/forty-two")

    assert response.status_code == 422
    assert_validation_error_shape(response.json(), "path")
    assert response.json()["detail"][0]["loc"] == ["path", "item_id"]


def test_missing_required_query_parameter_is_a_422_like_fastapi(router: MsgspecRouter) -> None:
    async def search(q: str):
        return {"q": q}

    client = side_by_side(router, "/search", search)
    plain = client.get("/plain/search")
    ours = client.get("/msgspec/search")

    assert ours.status_code == 422
    assert ours.json() == plain.json()


def test_query_parameter_default_is_used_when_absent(router: MsgspecRouter) -> None:
    @router.get("/page")
    async def page(limit: int = 10, cursor: str | None = None):
        return {"limit": limit, "cursor": cursor}

    client = client_for(router)

    assert client.get("/page").json() == {"limit": 10, "cursor": None}
    assert client.get("/page?limit=5&cursor=abc").json() == {"limit": 5, "cursor": "abc"}


def test_query_parameter_is_read_from_its_alias(router: MsgspecRouter) -> None:
    @router.get("/page")
    async def page(page_size: Annotated[int, Query(alias="page-size")] = 10):
        return {"page_size": page_size}

    client = client_for(router)

    assert client.get("/page?page-size=3").json() == {"page_size": 3}
    assert client.get("/page?page_size=3").json() == {"page_size": 10}


def test_invalid_aliased_query_parameter_error_is_located_at_the_alias(
    router: MsgspecRouter,
) -> None:
    @router.get("/page")
    async def page(page_size: Annotated[int, Query(alias="page-size")] = 10):
        return {"page_size": page_size}

    response = client_for(router).get("/page?page-size=big")

    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "page-size"]


def test_repeated_query_keys_fill_a_list_parameter(router: MsgspecRouter) -> None:
    @router.get("/tags")
    async def tags(tag: Annotated[list[int], Query()] = []):  # noqa: B006
        return {"tag": tag}

    client = client_for(router)

    assert client.get("/tags?tag=1&tag=2&tag=3").json() == {"tag": [1, 2, 3]}
    assert client.get("/tags").json() == {"tag": []}


def test_list_query_parameter_default_is_not_shared_between_requests(
    router: MsgspecRouter,
) -> None:
    @router.get("/tags")
    async def tags(tag: Annotated[list[str], Query()] = ["a"]):  # noqa: B006
        tag.append("b")
        return {"tag": tag}

    client = client_for(router)

    assert client.get("/tags").json() == {"tag": ["a", "b"]}
    assert client.get("/tags").json() == {"tag": ["a", "b"]}


def test_repeated_query_key_for_a_scalar_parameter_takes_the_last_value_like_fastapi(
    router: MsgspecRouter,
) -> None:
    async def read(n: int):
        return {"n": n}

    assert_same_decision(side_by_side(router, "/int", read), "/int?n=1&n=2")


def test_invalid_list_item_error_is_located_at_its_index(router: MsgspecRouter) -> None:
    @router.get("/tags")
    async def tags(tag: Annotated[list[int], Query()]):
        return {"tag": tag}

    response = client_for(router).get("/tags?tag=1&tag=x")

    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][:2] == ["query", "tag"]


def test_header_name_converts_underscores_to_hyphens(router: MsgspecRouter) -> None:
    @router.get("/token")
    async def token(x_token: Annotated[str, Header()]):
        return {"token": x_token}

    client = client_for(router)

    assert client.get("/token", headers={"X-Token": "abc"}).json() == {"token": "abc"}
    assert client.get("/token", headers={"x_token": "abc"}).status_code == 422


def test_header_name_keeps_underscores_when_conversion_is_off(router: MsgspecRouter) -> None:
    @router.get("/token")
    async def token(x_token: Annotated[str | None, Header(convert_underscores=False)] = None):
        return {"token": x_token}

    client = client_for(router)

    assert client.get("/token", headers={"x_token": "abc"}).json() == {"token": "abc"}
    assert client.get("/token", headers={"x-token": "abc"}).json() == {"token": None}


def test_header_is_read_from_its_alias(router: MsgspecRouter) -> None:
    @router.get("/trace")
    async def trace(trace: Annotated[str, Header(alias="X-Trace-ID")]):
        return {"trace": trace}

    assert client_for(router).get("/trace", headers={"x-trace-id": "t1"}).json() == {"trace": "t1"}


def test_repeated_headers_fill_a_list_parameter(router: MsgspecRouter) -> None:
    @router.get("/values")
    async def values(x_value: Annotated[list[int], Header()] = []):  # noqa: B006
        return {"values": x_value}

    client = client_for(router)
    response = client.get("/values", headers=[("x-value", "1"), ("x-value", "2")])

    assert response.json() == {"values": [1, 2]}
    assert client.get("/values").json() == {"values": []}


def test_cookie_parameter_is_converted(router: MsgspecRouter) -> None:
    @router.get("/visits")
    async def visits(visits: Annotated[int, Cookie()] = 0):
        return {"visits": visits}

    client = client_for(router)

    assert client.get("/visits", headers={"cookie": "visits=3"}).json() == {"visits": 3}
    assert client.get("/visits").json() == {"visits": 0}
    assert client.get("/visits", headers={"cookie": "visits=many"}).status_code == 422


def test_cookie_parameter_is_read_from_its_alias(router: MsgspecRouter) -> None:
    @router.get("/session")
    async def session(session_id: Annotated[str, Cookie(alias="sid")]):
        return {"session_id": session_id}

    client = client_for(router)

    assert client.get("/session", headers={"cookie": "sid=s1"}).json() == {"session_id": "s1"}
    assert client.get("/session", headers={"cookie": "session_id=s1"}).status_code == 422


def test_all_parameter_locations_together_with_a_body(router: MsgspecRouter) -> None:
    @router.post("/cities/{country}")
    async def create(
        country: str,
        city: City,
        dry_run: bool = False,
        x_request_id: Annotated[str, Header()] = "-",
        session: Annotated[str | None, Cookie()] = None,
    ):
        return [country, city.name, dry_run, x_request_id, session]

    response = client_for(router).post(
        "/cities/no?dry_run=yes",
        json={"name": "Oslo", "population": 1},
        headers={"x-request-id": "r1", "cookie": "session=s"},
    )

    assert response.json() == ["no", "Oslo", True, "r1", "s"]


# -- FastAPI constraints -------------------------------------------------------------------------


def test_query_ge_constraint_is_enforced(router: MsgspecRouter) -> None:
    @router.get("/page")
    async def page(page: Annotated[int, Query(ge=1)] = 1):
        return {"page": page}

    client = client_for(router)

    assert client.get("/page?page=1").json() == {"page": 1}
    response = client.get("/page?page=0")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "page"]


@pytest.mark.parametrize(
    ("constraint", "good", "bad"),
    [
        (Query(gt=0), "1", "0"),
        (Query(lt=10), "9", "10"),
        (Query(le=10), "10", "11"),
        (Query(multiple_of=5), "15", "16"),
    ],
    ids=["gt", "lt", "le", "multiple_of"],
)
def test_numeric_query_constraints_are_enforced(
    router: MsgspecRouter, constraint: Any, good: str, bad: str
) -> None:
    @router.get("/n")
    async def read(n: Annotated[int, constraint]):
        return {"n": n}

    client = client_for(router)

    assert client.get(f"/n?n={good}").status_code == 200
    assert client.get(f"/n?n={bad}").status_code == 422


def test_query_length_constraints_are_enforced(router: MsgspecRouter) -> None:
    @router.get("/search")
    async def search(q: Annotated[str, Query(min_length=2, max_length=4)]):
        return {"q": q}

    client = client_for(router)

    assert client.get("/search?q=abcd").status_code == 200
    assert client.get("/search?q=a").status_code == 422
    assert client.get("/search?q=abcde").status_code == 422


def test_query_pattern_constraint_is_enforced(router: MsgspecRouter) -> None:
    @router.get("/code")
    async def code(code: Annotated[str, Query(pattern=r"^[A-Z]{2}$")]):
        return {"code": code}

    client = client_for(router)

    assert client.get("/code?code=NO").status_code == 200
    assert client.get("/code?code=NOR").status_code == 422


def test_path_constraint_is_enforced(router: MsgspecRouter) -> None:
    @router.get("/items/{item_id}")
    async def item(item_id: Annotated[int, Path(ge=1)]):
        return {"item_id": item_id}

    client = client_for(router)

    assert client.get("/items/1").status_code == 200
    assert client.get("/items/0").status_code == 422


def test_constraint_on_an_optional_parameter_applies_to_its_value(router: MsgspecRouter) -> None:
    @router.get("/page")
    async def page(limit: Annotated[int | None, Query(le=100)] = None):
        return {"limit": limit}

    client = client_for(router)

    assert client.get("/page").json() == {"limit": None}
    assert client.get("/page?limit=100").json() == {"limit": 100}
    assert client.get("/page?limit=101").status_code == 422


def test_header_max_length_constraint_is_enforced(router: MsgspecRouter) -> None:
    @router.get("/token")
    async def token(x_token: Annotated[str, Header(max_length=3)]):
        return {"token": x_token}

    client = client_for(router)

    assert client.get("/token", headers={"x-token": "abc"}).status_code == 200
    assert client.get("/token", headers={"x-token": "abcd"}).status_code == 422


def test_msgspec_meta_constraint_on_a_query_parameter_is_enforced(router: MsgspecRouter) -> None:
    @router.get("/n")
    async def read(n: Annotated[int, msgspec.Meta(ge=5)]):
        return {"n": n}

    client = client_for(router)

    assert client.get("/n?n=5").status_code == 200
    assert client.get("/n?n=4").status_code == 422


# -- parameter errors and body errors ----------------------------------------------------------


def test_parameter_errors_come_before_body_errors_when_both_are_invalid(
    router: MsgspecRouter,
) -> None:
    @router.post("/cities")
    async def create(city: City, limit: int):
        return {}

    response = client_for(router).post("/cities?limit=x", json={"name": "Oslo"})

    assert response.status_code == 422
    locs = [error["loc"] for error in response.json()["detail"]]
    assert locs == [["query", "limit"], ["body", "population"]]


def test_several_parameter_errors_are_reported_together(router: MsgspecRouter) -> None:
    @router.get("/items/{item_id}")
    async def item(item_id: int, limit: int, x_flag: Annotated[bool, Header()]):
        return {}

    response = client_for(router).get("/items/x?limit=y", headers={"x-flag": "maybe"})

    assert response.status_code == 422
    locs = [error["loc"] for error in response.json()["detail"]]
    assert sorted(locs) == [["header", "x-flag"], ["path", "item_id"], ["query", "limit"]]


# -- parameters of dependencies -----------------------------------------------------------------


def test_dependency_parameters_are_converted_with_msgspec(twin: Twin) -> None:
    def amount(value: decimal.Decimal) -> decimal.Decimal:
        return value

    router = twin.router_class()

    @router.get("/amount")
    async def read(value: Annotated[decimal.Decimal, Depends(amount)]):
        return {"is_nan": value.is_nan()}

    assert client_for(router).get("/amount?value=nan").json() == {"is_nan": True}


# -- rejected at registration ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "marker",
    [Query, Header, Cookie],
    ids=["Query", "Header", "Cookie"],
)
def test_struct_inside_a_parameter_type_is_rejected_naming_the_parameter(marker: Any) -> None:
    """A Struct as the whole parameter is a parameter model; inside a list it is not."""
    router = MsgspecRouter()

    with pytest.raises(TypeError, match="where"):

        @router.get("/cities")
        async def cities(where: Annotated[list[City], marker()]):
            return {}


def test_struct_as_path_parameter_is_rejected_naming_the_parameter() -> None:
    router = MsgspecRouter()

    with pytest.raises(TypeError, match="where"):

        @router.get("/cities/{where}")
        async def cities(where: Annotated[City, Path()]):
            return {}


@pytest.mark.parametrize(
    "annotation",
    [list[City], City | None, dict[str, City]],
    ids=["list", "optional", "dict"],
)
def test_struct_inside_a_container_parameter_is_rejected_naming_the_parameter(
    annotation: Any,
) -> None:
    router = MsgspecRouter()

    with pytest.raises(TypeError, match="where"):

        @router.get("/cities")
        async def cities(where: Annotated[annotation, Query()]):
            return {}


@pytest.mark.parametrize("marker", [Form, File], ids=["Form", "File"])
def test_struct_in_a_container_as_form_or_file_is_rejected_naming_it(marker: Any) -> None:
    router = MsgspecRouter()

    with pytest.raises(TypeError, match="uploads"):

        @router.post("/form")
        async def form(uploads: Annotated[list[City], marker()]):
            return {}


def test_path_parameter_with_a_starlette_convertor_is_converted(router: MsgspecRouter) -> None:
    @router.get("/items/{item_id:int}")
    async def item(item_id: int):
        return {"item_id": item_id}

    assert client_for(router).get("/items/42").json() == {"item_id": 42}
