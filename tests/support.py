"""Helpers for building small apps in tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import pydantic
from fastapi import APIRouter, Depends, FastAPI, Query
from fastapi.testclient import TestClient
from twins import Twin

from msgspec_fastapi import MsgspecRouter


class NoFields(pydantic.BaseModel):
    """A Pydantic query model without fields: it takes nothing from any request."""


def delegating_dependency(_: Annotated[NoFields, Query()]) -> None:
    """A dependency FastAPI must solve (a Pydantic parameter model is not ours to
    validate): its presence keeps a route on the delegated tier, and it does nothing."""


def app_including(router: APIRouter, **include_options: Any) -> FastAPI:
    """A new app that includes `router` with `include_options` (prefix, dependencies,
    default_response_class, ...)."""
    app = FastAPI()
    app.include_router(router, **include_options)
    return app


def client_for(
    *routers: APIRouter, raise_server_exceptions: bool = True, **app_options: Any
) -> TestClient:
    """A TestClient for a new app that includes `routers` (without prefixes)."""
    app = FastAPI(**app_options)
    for router in routers:
        app.include_router(router)
    return TestClient(app, raise_server_exceptions=raise_server_exceptions)


def assert_validation_error_shape(payload: Any, first_loc: str) -> None:
    """FastAPI's 422 shape: {"detail": [{"loc": [...], "msg": str, "type": str}, ...]}."""
    assert isinstance(payload, dict)
    assert list(payload) == ["detail"]
    errors = payload["detail"]
    assert isinstance(errors, list)
    assert errors
    for error in errors:
        assert isinstance(error["loc"], list)
        assert error["loc"][0] == first_loc
        assert isinstance(error["msg"], str)
        assert isinstance(error["type"], str)


def tier_router(twin: Twin, tier: str = "direct", **options: Any) -> MsgspecRouter:
    """A MsgspecRouter whose routes run on `twin`, on `tier`: "direct", or "delegated"
    (every route gets a dependency only FastAPI solves, so FastAPI solves them)."""
    if tier == "delegated":
        options["dependencies"] = [
            Depends(delegating_dependency),
            *options.get("dependencies", ()),
        ]
    return twin.router_class(**options)


def assert_tier(router: MsgspecRouter, tier: str) -> None:
    """Every route of `router` runs on `tier`."""
    assert [route.tier for route in router.routes] == [tier] * len(router.routes)


BENCH = Path(__file__).resolve().parent.parent / "bench"


def load_bench_script(filename: str) -> ModuleType:
    """A script of bench/ imported as the module `bench_<stem>`, registered in sys.modules
    as an import would be (its dataclasses look themselves up there)."""
    spec = importlib.util.spec_from_file_location(f"bench_{Path(filename).stem}", BENCH / filename)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
