"""Shared fixtures, and the check that the expected request path was loaded.

CI runs the suite once with the compiled module, and the `twin` fixture runs every
request-path test on both twins in that one process; a short run with
MSGSPEC_FASTAPI_PURE=1 checks the package's default import in pure mode. CI sets
MSGSPEC_FASTAPI_EXPECT to "compiled" or "pure", and the session stops at once when the
package picked the other one (a wheel that silently fell back to the pure twin, say).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import fastapi.routing
import pytest
from fastapi import Depends
from support import delegating_dependency
from twins import TWIN_NAMES, Twin, get_twin

import msgspec_fastapi
from msgspec_fastapi import MsgspecRouter


def pytest_report_header(config: pytest.Config) -> str:
    return f"msgspec_fastapi.IMPLEMENTATION: {msgspec_fastapi.IMPLEMENTATION}"


def pytest_sessionstart(session: pytest.Session) -> None:
    expected = os.environ.get("MSGSPEC_FASTAPI_EXPECT")
    if expected and expected != msgspec_fastapi.IMPLEMENTATION:
        pytest.exit(
            f"MSGSPEC_FASTAPI_EXPECT={expected!r} but msgspec_fastapi.IMPLEMENTATION is "
            f"{msgspec_fastapi.IMPLEMENTATION!r}",
            returncode=3,
        )


@pytest.fixture(params=TWIN_NAMES)
def twin(request: pytest.FixtureRequest) -> Twin:
    """Each twin in turn, in this one process: build routers with `twin.router_class`
    (routes with `twin.route_class`) and install dispatch with `twin.install_dispatch`.

    Where the compiled module does not import, its run fails when MSGSPEC_FASTAPI_EXPECT
    is "compiled" and is skipped with the reason otherwise (`twins.get_twin`).
    """
    return get_twin(request.param)


@pytest.fixture(params=["direct", "delegated"])
def tier(request: pytest.FixtureRequest) -> str:
    """The tier the routes of the `router` fixture run on."""
    return request.param


@pytest.fixture
def solved(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The endpoints FastAPI's request handler solved dependencies for, in order, while
    the test runs: a route whose endpoint is here went through FastAPI's solving."""
    calls: list[Any] = []
    original = fastapi.routing.solve_dependencies

    async def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs["dependant"].call)
        return await original(*args, **kwargs)

    monkeypatch.setattr(fastapi.routing, "solve_dependencies", spy)
    return calls


@pytest.fixture
def router(tier: str, twin: Twin, solved: list[Any]) -> Iterator[MsgspecRouter]:
    """A MsgspecRouter on each twin whose routes run on `tier`.

    On "delegated" every route gets a dependency that only FastAPI can solve, which keeps
    it with FastAPI's dependency solving. On "direct" the fixture checks, after the test,
    that FastAPI's dependency solving never ran: the routes really were served by the direct
    tier, so a test that passes on both tiers exercised both.
    """
    if tier == "delegated":
        router = twin.router_class(dependencies=[Depends(delegating_dependency)])
    else:
        router = twin.router_class()
    yield router
    assert [route.tier for route in router.routes] == [tier] * len(router.routes)
    if tier == "direct":
        endpoints = {route.dependant.call for route in router.routes}
        assert not endpoints.intersection(solved), "a direct route went through FastAPI's handler"
