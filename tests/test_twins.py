"""How tests reach the two twins: the `twin` fixture and `twins.get_twin`.

Both run a test on the compiled and on the pure twin in one process. Where the compiled
module does not import, a test that asks for it is skipped, unless MSGSPEC_FASTAPI_EXPECT
is "compiled": then it fails, so that a build without its extension cannot pass.
"""

from __future__ import annotations

from types import ModuleType

import pytest
from fastapi import FastAPI
from raw_asgi import request
from twins import Twin, get_twin

from msgspec_fastapi import MsgspecRouter, _impl


@pytest.fixture
def compiled_twin_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    """`_impl.load_twin` as on an install whose compiled module does not import."""
    original = _impl.load_twin

    def load_twin(name: str) -> ModuleType | None:
        return None if name == "compiled" else original(name)

    monkeypatch.setattr(_impl, "load_twin", load_twin)


def test_twin_fixture_gives_the_module_of_its_name(twin: Twin) -> None:
    assert twin.module.__name__ == _impl.TWIN_MODULES[twin.name]
    assert twin.name == twin.module.IMPLEMENTATION


def test_routes_of_a_twins_route_class_run_on_that_twin(twin: Twin) -> None:
    router = MsgspecRouter(route_class=twin.route_class)

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
