"""The application's `__call__` after `install_dispatch`: FastAPI's and Starlette's in one
coroutine (`_routing.entry.serve_app`), on a subclass of the application's class.

What the requests get through it is compared with FastAPI's layers in test_entry.py (the
root path, the application in the scope, lifespan, WebSockets, mounted applications and
telemetry); these tests are about the class, the servers' view of it, and the cases where
FastAPI's own `__call__` must run.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import weakref
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypercorn.utils import is_asgi
from raw_asgi import body_messages, scope_for, send_request
from starlette.applications import Starlette
from starlette.types import Receive, Scope, Send
from twins import Twin, get_twin
from uvicorn import Config

from msgspec_fastapi import _select
from msgspec_fastapi._routing.stack import call_kept_because


def entry_module(twin: Twin) -> Any:
    return _select.companion(_select.ENTRY, twin.module)


def served_app(twin: Twin, cls: type[FastAPI] = FastAPI) -> FastAPI:
    """An application of class `cls` with one route, `install_dispatch` on `twin`."""
    app = cls()

    @app.get("/")
    async def read() -> dict[str, int]:
        return {"a": 1}

    twin.install_dispatch(app)
    return app


def test_the_application_gets_the_entrys_call_on_a_subclass_of_its_class(twin: Twin) -> None:
    app = served_app(twin)
    assert type(app).__call__ is entry_module(twin).serve_app
    assert type(app).__mro__[1] is FastAPI
    assert isinstance(app, FastAPI)


def test_the_subclass_keeps_the_name_module_and_doc_of_the_class(twin: Twin) -> None:
    cls = type(served_app(twin))
    assert (cls.__name__, cls.__qualname__, cls.__module__, cls.__doc__) == (
        "FastAPI",
        "FastAPI",
        "fastapi.applications",
        FastAPI.__doc__,
    )


def test_applications_of_one_class_share_one_subclass(twin: Twin) -> None:
    assert type(served_app(twin)) is type(served_app(twin))


def test_installing_twice_keeps_one_level_of_subclass(twin: Twin) -> None:
    app = served_app(twin)
    made = type(app)
    twin.install_dispatch(app)
    assert type(app) is made
    assert TestClient(app).get("/").json() == {"a": 1}


def test_installing_on_the_other_twin_takes_that_twins_call() -> None:
    compiled, pure = get_twin("compiled"), get_twin("pure")
    app = served_app(compiled)
    pure.install_dispatch(app)
    assert type(app).__call__ is entry_module(pure).serve_app
    assert type(app).__mro__[1] is FastAPI


def test_a_subclass_without_a_call_of_its_own_gets_a_subclass_of_itself(twin: Twin) -> None:
    class Service(FastAPI):
        """The application's own class."""

    app = served_app(twin, Service)
    assert type(app).__mro__[1] is Service
    assert (type(app).__name__, type(app).__doc__) == ("Service", "The application's own class.")
    assert TestClient(app).get("/").json() == {"a": 1}


def test_a_class_defined_at_run_time_goes_with_its_applications(twin: Twin) -> None:
    class Temporary(FastAPI):
        pass

    app = served_app(twin, Temporary)
    classes = (weakref.ref(Temporary), weakref.ref(type(app)))
    del app, Temporary
    # Each collection frees one link of the chain: the application with its class, then
    # the made class's entry, then the class it was made from.
    for _ in range(3):
        gc.collect()
    assert [ref() for ref in classes] == [None, None]


def test_a_subclass_with_a_call_of_its_own_keeps_its_class(twin: Twin) -> None:
    calls: list[str] = []

    class Counting(FastAPI):
        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            calls.append(scope["type"])
            await super().__call__(scope, receive, send)

    app = served_app(twin, Counting)
    assert type(app) is Counting
    assert TestClient(app).get("/").json() == {"a": 1}
    assert calls == ["http"]


def test_servers_see_an_asgi3_application(twin: Twin) -> None:
    app = served_app(twin)
    assert asyncio.iscoroutinefunction(app.__call__)
    assert inspect.iscoroutinefunction(app.__call__)
    assert is_asgi(app)  # hypercorn's test
    config = Config(app, log_config=None)
    config.load()
    assert config.interface == "asgi3"


def test_calling_the_application_gives_a_coroutine(twin: Twin) -> None:
    app = served_app(twin)
    sent: list[dict[str, Any]] = []
    messages = body_messages((b"",))

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    called = app(scope_for("GET", b"/", []), receive, send)
    assert asyncio.iscoroutine(called)
    asyncio.run(called)
    assert sent[-1]["body"] == b'{"a":1}'


def recording(original: Any, types: list[str]) -> Any:
    """A `__call__` that notes each scope's type in `types`, then runs `original`."""

    async def call(self: Starlette, scope: Scope, receive: Receive, send: Send) -> None:
        types.append(scope["type"])
        await original(self, scope, receive, send)

    return call


@pytest.mark.parametrize("cls", [Starlette, FastAPI], ids=["starlette", "fastapi"])
def test_a_call_replaced_after_install_is_called(
    twin: Twin, monkeypatch: pytest.MonkeyPatch, cls: type[Starlette]
) -> None:
    """As Sentry's integration replaces Starlette's `__call__` when it is set up."""
    app = served_app(twin)
    calls: list[str] = []
    monkeypatch.setattr(cls, "__call__", recording(cls.__call__, calls))
    assert TestClient(app).get("/").json() == {"a": 1}
    assert calls == ["http"]


def test_a_call_replaced_before_install_keeps_the_class(
    twin: Twin, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = Starlette.__call__

    async def wrapped(self: Starlette, scope: Scope, receive: Receive, send: Send) -> None:
        await original(self, scope, receive, send)

    monkeypatch.setattr(Starlette, "__call__", wrapped)
    app = served_app(twin)
    assert type(app) is FastAPI
    assert TestClient(app).get("/").json() == {"a": 1}


def test_a_call_replaced_before_the_entry_was_imported_keeps_the_class() -> None:
    """The entry's module keeps the `__call__` functions it found on import; where one
    of them was already another (an integration set up first), the class stays."""

    async def wrapped(self: Starlette, scope: Scope, receive: Receive, send: Send) -> None:
        raise AssertionError("not called")

    module = SimpleNamespace(FASTAPI_CALL=FastAPI.__call__, STARLETTE_CALL=wrapped)
    assert call_kept_because(FastAPI, module) == (  # type: ignore[arg-type]
        "FastAPI's or Starlette's __call__ was replaced before msgspec_fastapi's import"
    )


def test_a_lifespan_goes_through_fastapis_call_and_a_request_does_not(
    twin: Twin, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = served_app(twin)
    types: list[str] = []
    spy = recording(FastAPI.__call__, types)
    # The spy taken for FastAPI's own by the entry's module too, as if found on import.
    monkeypatch.setattr(entry_module(twin), "FASTAPI_CALL", spy)
    monkeypatch.setattr(FastAPI, "__call__", spy)
    with TestClient(app) as client:
        assert client.get("/").json() == {"a": 1}
    assert types == ["lifespan"]


def test_the_entrys_outer_layer_is_the_stack_the_call_enters(twin: Twin) -> None:
    app = served_app(twin)
    with TestClient(app) as client:
        assert client.get("/").json() == {"a": 1}
    assert type(app.middleware_stack) is entry_module(twin).Outer


def test_a_stack_that_is_not_the_entrys_is_called_as_an_asgi_app(twin: Twin) -> None:
    app = served_app(twin)
    seen: list[str] = []

    async def own_stack(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(scope["path"])
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    app.middleware_stack = own_stack
    reply = asyncio.run(send_request(app, "GET", b"/"))
    assert seen == ["/"]
    assert [message.get("status") for message in reply.sent] == [204, None]
