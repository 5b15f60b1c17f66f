"""The training run of the profile-guided build (`build_support/train.py`) and the build
backend that gives it its dependencies (`build_support/build_backend.py`).

The training must run what a service runs, and only that: every request kind answered
with its documented status, through the application's entry, or the build stops.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from fastapi import FastAPI
from twins import Twin

BUILD_SUPPORT = Path(__file__).resolve().parent.parent / "build_support"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"build_support_{name}", BUILD_SUPPORT / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Where msgspec and FastAPI look the module's annotations up.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def train() -> ModuleType:
    return load("train")


@pytest.fixture(scope="module")
def backend() -> ModuleType:
    # The backend wraps setuptools', which an installed wheel's test venv need not have.
    pytest.importorskip("setuptools")
    return load("build_backend")


def test_the_training_answers_every_request_kind_with_its_status(
    twin: Twin, train: ModuleType
) -> None:
    app = train.build_app(twin.router_class, twin.install_dispatch)
    asyncio.run(train.train(app, 3))


def test_the_training_covers_success_and_every_documented_error_status(
    train: ModuleType,
) -> None:
    statuses = {request[-1] for request in train.REQUESTS}
    assert statuses == {200, 400, 404, 422}


def test_the_training_stops_at_an_unexpected_status(
    twin: Twin, train: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    method, path, query, headers, body, _ = train.REQUESTS[0]
    monkeypatch.setattr(train, "REQUESTS", ((method, path, query, headers, body, 201),))
    app = train.build_app(twin.router_class, twin.install_dispatch)
    with pytest.raises(SystemExit, match="answered 200, not 201"):
        asyncio.run(train.train(app, 1))


def test_the_training_stops_where_the_entry_does_not_serve_the_application(
    twin: Twin, train: ModuleType
) -> None:
    def no_install(app: FastAPI) -> None:
        pass

    app = train.build_app(twin.router_class, no_install)
    with pytest.raises(SystemExit, match="install_dispatch was not called"):
        asyncio.run(train.train(app, 1))


def test_the_backend_asks_for_nothing_more_without_a_profile_guided_build(
    backend: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MSGSPEC_FASTAPI_PGO", raising=False)
    assert backend.training_requirements() == []


def test_the_backend_asks_for_the_package_dependencies_for_a_profile_guided_build(
    backend: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MSGSPEC_FASTAPI_PGO", "1")
    monkeypatch.chdir(BUILD_SUPPORT.parent)
    requirements = backend.training_requirements()
    assert {r.split(">")[0].split("=")[0] for r in requirements} == {"fastapi", "msgspec"}
