"""The package in use runs the request path it should, and serves a request with it.

These hold for every way the package is installed (editable, wheel, sdist without a
compiler) and in both modes, so the suite never collects nothing. MSGSPEC_FASTAPI_EXPECT,
set by `make test`, `make wheel-test` and the wheel builds, names the expected path.
"""

from __future__ import annotations

import os
from importlib.machinery import EXTENSION_SUFFIXES

import msgspec
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

import msgspec_fastapi
from msgspec_fastapi import MsgspecRouter, _impl

TWIN_MODULES = {
    "compiled": "msgspec_fastapi._fastpath",
    "pure": "msgspec_fastapi._fastpath_py",
}


def test_implementation_is_the_expected_one() -> None:
    expected = os.environ.get("MSGSPEC_FASTAPI_EXPECT")
    if expected is None:
        pytest.skip("MSGSPEC_FASTAPI_EXPECT is not set")
    in_use = msgspec_fastapi.IMPLEMENTATION
    assert in_use == expected


def test_the_selector_reports_the_twin_it_imported() -> None:
    assert _impl.RouteRuntime.__module__ == TWIN_MODULES[msgspec_fastapi.IMPLEMENTATION]


def test_the_compiled_twin_is_an_extension_module() -> None:
    if msgspec_fastapi.IMPLEMENTATION != "compiled":
        pytest.skip("the compiled twin is not in use")
    from msgspec_fastapi import _fastpath

    assert _fastpath.__file__.endswith(tuple(EXTENSION_SUFFIXES))


class City(msgspec.Struct):
    name: str
    population: int


def test_a_route_answers_through_the_request_path_in_use() -> None:
    router = MsgspecRouter()

    @router.post("/cities")
    async def create_city(city: City) -> City:
        return city

    app = FastAPI()
    app.include_router(router)
    client = TestClient(app)

    response = client.post("/cities", json={"name": "Lyon", "population": 522250})
    assert response.status_code == 200
    assert response.json() == {"name": "Lyon", "population": 522250}

    response = client.post("/cities", json={"name": "Lyon", "population": "many"})
    assert response.status_code == 422
