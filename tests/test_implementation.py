"""Which request path is loaded: the compiled module or its pure-Python twin."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi import FastAPI
from raw_asgi import request
from twins import Twin

import msgspec_fastapi
from msgspec_fastapi import MsgspecRoute, MsgspecRouter, _select

# Also run with MSGSPEC_FASTAPI_PURE=1: the package's default import path in pure mode.
pytestmark = pytest.mark.pure_smoke

ROOT = Path(__file__).resolve().parent.parent


def implementation_in_subprocess(**environment: str) -> str:
    env = {**os.environ, **environment}
    env.pop("MSGSPEC_FASTAPI_EXPECT", None)
    result = subprocess.run(
        [sys.executable, "-c", "import msgspec_fastapi; print(msgspec_fastapi.IMPLEMENTATION)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


def test_implementation_names_the_module_routes_run_on() -> None:
    assert _select.twin.__name__ == _select.module_name(
        _select.TWIN, msgspec_fastapi.IMPLEMENTATION
    )
    assert _select.twin.IMPLEMENTATION == msgspec_fastapi.IMPLEMENTATION
    assert MsgspecRoute.twin is _select.twin


def test_default_router_and_install_dispatch_serve_on_the_picked_twin() -> None:
    router = MsgspecRouter()

    @router.get("/ping")
    async def ping() -> dict[str, bool]:
        return {"pong": True}

    app = FastAPI()
    app.include_router(router)
    msgspec_fastapi.install_dispatch(app)
    (route,) = router.routes
    assert (type(router).matches, type(route).matches) == (
        _select.twin.router_matches,
        _select.twin.route_matches,
    )
    assert type(app.router.middleware_stack) is _select.twin.AppDispatcher
    assert request(app, "GET", b"/ping").json() == {"pong": True}


def test_environment_variable_selects_the_twin(twin: Twin) -> None:
    pure = "1" if twin.name == "pure" else "0"
    assert implementation_in_subprocess(MSGSPEC_FASTAPI_PURE=pure) == twin.name


def test_suite_stops_when_the_expected_twin_is_not_the_one_loaded() -> None:
    other = "pure" if msgspec_fastapi.IMPLEMENTATION == "compiled" else "compiled"
    env = {**os.environ, "MSGSPEC_FASTAPI_EXPECT": other}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    message = (
        f"MSGSPEC_FASTAPI_EXPECT={other!r} but msgspec_fastapi.IMPLEMENTATION is "
        f"{msgspec_fastapi.IMPLEMENTATION!r}"
    )
    assert (result.returncode, message in result.stdout + result.stderr) == (3, True)


def test_each_twin_runs_dependency_plans_with_its_own_executor(twin: Twin) -> None:
    executor = _select.companion(_select.EXECUTOR, twin.module)

    assert executor.__name__ == _select.module_name(_select.EXECUTOR, twin.name)
    assert _select.is_compiled(executor) == (twin.name == "compiled")


def test_each_twin_routes_with_its_own_dispatch(twin: Twin) -> None:
    dispatch = _select.companion(_select.DISPATCH, twin.module)

    assert dispatch.__name__ == _select.module_name(_select.DISPATCH, twin.name)
    assert _select.is_compiled(dispatch) == (twin.name == "compiled")
    assert twin.module.AppDispatcher is dispatch.AppDispatcher
    assert twin.module.route_matches is dispatch.route_matches


def test_a_compiled_twin_comes_with_every_compiled_module(twin: Twin) -> None:
    if twin.name != "compiled":
        pytest.skip("the compiled build's modules")
    for pair in _select.PAIRS:
        module = _select.load(pair, "compiled")
        assert module is not None and _select.is_compiled(module), pair


def test_each_pure_module_is_python_source() -> None:
    for pair in _select.PAIRS:
        module = _select.load(pair, "pure")
        assert module is not None and not _select.is_compiled(module), pair
