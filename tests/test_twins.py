"""How tests reach the two twins: the `twin` fixture and `twins.get_twin`.

Both run a test on the compiled and on the pure twin in one process. Where the compiled
module does not import, a test that asks for it is skipped, unless MSGSPEC_FASTAPI_EXPECT
is "compiled": then it fails, so that a build without its extension cannot pass.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from fastapi import FastAPI
from raw_asgi import request
from twins import Twin, get_twin

from msgspec_fastapi import MsgspecRoute, MsgspecRouter, _select

pytestmark = pytest.mark.pure_smoke


@pytest.fixture
def compiled_twin_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    """`_select.load_twin` as on an install whose compiled module does not import."""
    original = _select.load_twin

    def load_twin(name: str) -> ModuleType | None:
        return None if name == "compiled" else original(name)

    monkeypatch.setattr(_select, "load_twin", load_twin)


def test_twin_fixture_gives_the_module_of_its_name(twin: Twin) -> None:
    assert twin.module.__name__ == _select.module_name(_select.TWIN, twin.name)
    assert twin.name == twin.module.IMPLEMENTATION


def bound_to(value: Any, module: ModuleType) -> bool:
    """Whether a class attribute is the twin `module` itself or one of its functions, its
    routing's (which it re-exports) included."""
    routing = _select.companion(_select.DISPATCH, module)
    return value is module or getattr(value, "__module__", None) in (
        module.__name__,
        routing.__name__,
    )


@pytest.mark.parametrize("default_class", [MsgspecRoute, MsgspecRouter])
def test_everything_bound_to_the_default_twin_is_rebound_by_the_twin_classes(
    twin: Twin, default_class: type[Any]
) -> None:
    twin_class = twin.route_class if default_class is MsgspecRoute else twin.router_class
    bound = [n for n, v in vars(default_class).items() if bound_to(v, _select.twin)]
    assert bound  # the scan finds the bindings it checks
    rebound = [n for n in bound if bound_to(getattr(twin_class, n), twin.module)]
    assert rebound == bound


def test_a_twins_router_class_runs_its_inclusions_and_routes_on_that_twin(twin: Twin) -> None:
    router = twin.router_class()
    methods = (type(router).matches, type(router).handle)
    assert methods == (twin.module.router_matches, twin.module.router_handle)
    assert router.route_class is twin.route_class


def test_a_twins_install_dispatch_routes_the_app_through_that_twins_index(twin: Twin) -> None:
    router = twin.router_class()

    @router.get("/ping")
    async def ping() -> dict[str, bool]:
        return {"pong": True}

    app = FastAPI()
    app.include_router(router)
    twin.install_dispatch(app)
    assert request(app, "GET", b"/ping").json() == {"pong": True}
    assert type(app.router.middleware_stack) is twin.module.AppDispatcher


def test_routes_of_a_twins_route_class_run_on_that_twin(twin: Twin) -> None:
    router = twin.router_class()

    @router.get("/ping")
    async def ping() -> dict[str, bool]:
        return {"pong": True}

    app = FastAPI()
    app.include_router(router)
    (route,) = router.routes
    entry_points = (route.twin, type(route).matches, type(route).handle)
    assert entry_points == (twin.module, twin.module.route_matches, twin.module.route_handle)
    assert request(app, "GET", b"/ping").json() == {"pong": True}


@pytest.mark.usefixtures("compiled_twin_missing")
def test_missing_compiled_twin_fails_the_test_when_the_compiled_twin_is_expected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MSGSPEC_FASTAPI_EXPECT", "compiled")
    with pytest.raises(pytest.fail.Exception, match="MSGSPEC_FASTAPI_EXPECT=compiled"):
        get_twin("compiled")


@pytest.mark.usefixtures("compiled_twin_missing")
@pytest.mark.parametrize("expected", [None, "pure"])
def test_missing_compiled_twin_skips_the_test_otherwise(
    monkeypatch: pytest.MonkeyPatch, expected: str | None
) -> None:
    if expected is None:
        monkeypatch.delenv("MSGSPEC_FASTAPI_EXPECT", raising=False)
    else:
        monkeypatch.setenv("MSGSPEC_FASTAPI_EXPECT", expected)
    with pytest.raises(pytest.skip.Exception, match=r"the compiled twin .* does not import"):
        get_twin("compiled")
