"""The two request-path twins, for tests that run both in one process.

`get_twin(name)` is the one way a test reaches a twin: the `twin` fixture (conftest.py)
calls it for each name, and `PerTwin` calls it for objects that hypothesis tests build
once per twin at module level. Where the compiled module does not import, the test is
skipped with the reason, unless MSGSPEC_FASTAPI_EXPECT says the compiled twin is the
one under test: then it fails, so that a build that lost its extension cannot pass by
skipping.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Generic, TypeVar

import pytest
from fastapi import FastAPI
from raw_asgi import Reply

from msgspec_fastapi import _select
from msgspec_fastapi._routing.install import install_dispatch_with
from msgspec_fastapi.router import MsgspecRoute, MsgspecRouter, route_class_for, router_class_for

T = TypeVar("T")

TWIN_NAMES = ("compiled", "pure")


@dataclass(frozen=True)
class Twin:
    """One twin: its name, its module, and what runs on it: a route class, a router class
    (its inclusions' index and, by default, its routes) and `install_dispatch`.

    Everything the package binds to the twin `_select` picked has its counterpart here, so
    that a test built from these runs entirely on this twin, whichever one was picked.
    """

    name: str
    module: ModuleType
    route_class: type[MsgspecRoute]
    router_class: type[MsgspecRouter]

    def install_dispatch(self, app: FastAPI) -> None:
        """`msgspec_fastapi.install_dispatch` on this twin."""
        install_dispatch_with(app, self.module)


@functools.cache
def _twin_of(module: ModuleType) -> Twin:
    return Twin(module.IMPLEMENTATION, module, route_class_for(module), router_class_for(module))


def get_twin(name: str) -> Twin:
    """The twin called `name`; fails or skips the current test where it does not import."""
    module = _select.load_twin(name)
    if module is not None:
        return _twin_of(module)
    reason = f"the {name} twin ({_select.module_name(_select.TWIN, name)}) does not import"
    if os.environ.get("MSGSPEC_FASTAPI_EXPECT") == name:
        pytest.fail(f"{reason}, but MSGSPEC_FASTAPI_EXPECT={name}")
    pytest.skip(reason)


class PerTwin(Generic[T]):
    """`build(twin)` for each twin, built on first use: `APPS = PerTwin(build_app)`.

    `APPS["compiled"]` fails or skips the test that asks for it as `get_twin` does.
    """

    def __init__(self, build: Callable[[Twin], T]) -> None:
        self._build = build
        self._built: dict[str, T] = {}

    def __getitem__(self, name: str) -> T:
        if name not in self._built:
            self._built[name] = self._build(get_twin(name))
        return self._built[name]


async def outcome(reply: Awaitable[Reply]) -> tuple[Any, ...]:
    """("reply", the `raw_asgi.Reply`) or ("raised", exception type, its errors or message).

    For comparing the twins: an exception that escapes the app is part of the answer and
    must be the same from both, so it is recorded here instead of failing the test.
    """
    try:
        return ("reply", await reply)
    except Exception as exc:
        errors = exc.errors() if hasattr(exc, "errors") else str(exc)
        return ("raised", type(exc).__name__, repr(errors))
