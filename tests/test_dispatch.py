"""Routing through the route index picks what FastAPI's own router picks.

Every test builds one application three times from the same function: the oracle
(routers whose matching is FastAPI's own, no index anywhere), the same with
MsgspecRouter's per-inclusion index, and the same again with `install_dispatch`. Each
request must get the same status, headers and body from all three, and reach the same
endpoint with the same scope keys. Every test runs on both twins.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

import fastapi.routing
import msgspec
import pytest
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.responses import PlainTextResponse
from fastapi.routing import APIRoute, iter_route_contexts
from fastapi.telemetry._api import _RequestTelemetry
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from raw_asgi import Reply, body_messages, scope_for, send_messages, send_request
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Host, Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.websockets import WebSocket
from twins import Twin

from msgspec_fastapi import MsgspecRouter
from msgspec_fastapi._routing.install import install_dispatch_with
from msgspec_fastapi.router import router_class_for


@pytest.fixture
def twin(twin: Twin) -> ModuleType:
    """The module of each twin in turn (conftest's fixture: fails or skips as it says)."""
    return twin.module


class Item(msgspec.Struct):
    id: int
    name: str = "x"


class Kit:
    """The router class an app builder uses: FastAPI's matching, or a twin's index."""

    def __init__(self, twin: ModuleType | None) -> None:
        self.twin = twin
        if twin is None:

            class OracleRouter(MsgspecRouter):
                matches = APIRouter.matches  # type: ignore[assignment]
                handle = APIRouter.handle  # type: ignore[assignment]

            self.Router: type[MsgspecRouter] = OracleRouter
            return

        self.Router = router_class_for(twin)


def summary(scope: dict[str, Any]) -> tuple[Any, ...]:
    """The scope keys routing sets, as comparable values."""
    route = scope.get("route")
    fastapi_scope = scope.get("fastapi") or {}
    context = fastapi_scope.get("effective_route_context")
    included = fastapi_scope.get("included_router")
    return (
        getattr(scope.get("endpoint"), "__name__", None),
        type(route).__mro__[-3].__name__ if route is not None else None,
        getattr(route, "path", None),
        scope.get("path_params"),
        scope.get("root_path"),
        scope.get("app_root_path"),
        type(scope.get("router")).__name__,
        getattr(context, "path_format", None),
        included.include_context.prefix if included is not None else None,
        sorted(fastapi_scope),
        fastapi_scope.get("form_limits"),
    )


class Recorder:
    """ASGI middleware keeping the routing summary of each request's scope.

    It also gives each request FastAPI's telemetry record (without a span), so that the
    route reported to telemetry (`http.route`) is compared too.
    """

    def __init__(self, app: Any, log: list[Any]) -> None:
        self.app = app
        self.log = log

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        telemetry = None
        if scope["type"] == "http":
            telemetry = _RequestTelemetry(span=None, span_method=scope["method"])
            scope["fastapi.telemetry"] = telemetry
        try:
            await self.app(scope, receive, send)
        finally:
            if telemetry is not None:
                self.log.append((*summary(scope), telemetry.route))


Builder = Callable[[Kit], FastAPI]


class Apps:
    """One app builder, three ways: oracle, MsgspecRouter index, install_dispatch."""

    def __init__(self, build: Builder, twin: ModuleType) -> None:
        self.twin = twin
        self.kits = [Kit(None), Kit(twin), Kit(twin)]
        self.apps: list[FastAPI] = []
        self.logs: list[list[Any]] = []
        for i, kit in enumerate(self.kits):
            app = build(kit)
            log: list[Any] = []
            app.add_middleware(Recorder, log=log)
            if i == 2:
                install_dispatch_with(app, twin)
            list(iter_route_contexts(app.routes))
            self.apps.append(app)
            self.logs.append(log)
        self.fallbacks = 0
        dispatcher = self.apps[2].router.app
        original = dispatcher.fallback

        def counting_fallback(*args: Any) -> Any:
            self.fallbacks += 1
            return original(*args)

        dispatcher.fallback = counting_fallback

    def change(self, edit: Callable[[FastAPI, Kit], None]) -> None:
        """Apply the same change to all three apps (after they served requests)."""
        for kit, app in zip(self.kits, self.apps, strict=True):
            edit(app, kit)

    def check(
        self,
        method: str,
        target: bytes,
        headers: list[tuple[bytes, bytes]] | None = None,
        body: bytes = b"",
        root_path: str = "",
    ) -> Reply:
        replies = []
        for app in self.apps:
            replies.append(asyncio.run(run(app, method, target, headers or [], body, root_path)))
        assert replies[1] == replies[0], (method, target)
        assert replies[2] == replies[0], (method, target)
        last = [log[-1] if log else None for log in self.logs]
        assert last[1] == last[0], (method, target)
        assert last[2] == last[0], (method, target)
        return replies[0]

    @property
    def summary(self) -> Any:
        return self.logs[0][-1]


async def run(
    app: Any,
    method: str,
    target: bytes,
    headers: list[tuple[bytes, bytes]],
    body: bytes,
    root_path: str,
) -> Reply:
    # raw_asgi builds scopes without a root_path; a server behind a proxy sends one.
    scope = scope_for(method, target, headers)
    scope["root_path"] = root_path
    return await send_messages(app, scope, body_messages((body,)))


JSON = [(b"content-type", b"application/json")]


def items_router(kit: Kit, prefix: str, **kwargs: Any) -> MsgspecRouter:
    router = kit.Router(prefix=prefix, **kwargs)

    @router.get("/items/{item_id}")
    async def get_item(item_id: int) -> Item:
        return Item(item_id, prefix)

    @router.post("/items")
    async def post_item(item: Item) -> Item:
        return item

    return router


# -- which route wins ------------------------------------------------------------------


def test_literal_route_registered_first_wins_over_parameter_route(twin: ModuleType) -> None:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        router = kit.Router()

        @router.get("/items/new")
        async def new_item() -> Item:
            return Item(0, "new")

        @router.get("/items/{item_id}")
        async def some_item(item_id: str) -> Item:
            return Item(1, item_id)

        app.include_router(router)
        return app

    apps = Apps(build, twin)
    assert apps.check("GET", b"/items/new").json() == {"id": 0, "name": "new"}
    assert apps.check("GET", b"/items/old").json() == {"id": 1, "name": "old"}
    assert apps.fallbacks == 0


def test_parameter_route_registered_first_wins_over_literal_route(twin: ModuleType) -> None:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        first, second = kit.Router(), kit.Router()

        @first.get("/items/{item_id}")
        async def some_item(item_id: str) -> Item:
            return Item(1, item_id)

        @second.get("/items/new")
        async def new_item() -> Item:
            return Item(0, "new")

        app.include_router(first)
        app.include_router(second)
        return app

    apps = Apps(build, twin)
    assert apps.check("GET", b"/items/new").json() == {"id": 1, "name": "new"}
    assert apps.fallbacks == 0


def test_int_parameter_that_does_not_convert_falls_to_the_next_route(twin: ModuleType) -> None:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        router = kit.Router()

        @router.get("/items/{item_id:int}")
        async def by_number(item_id: int) -> Item:
            return Item(item_id, "number")

        @router.get("/items/{name}")
        async def by_name(name: str) -> Item:
            return Item(0, name)

        app.include_router(router)
        return app

    apps = Apps(build, twin)
    assert apps.check("GET", b"/items/12").json() == {"id": 12, "name": "number"}
    assert apps.check("GET", b"/items/1a").json() == {"id": 0, "name": "1a"}
    assert apps.check("GET", b"/items/\xd9\xa3".decode("utf-8").encode("utf-8")).status == 200


def test_path_convertor_takes_the_rest_of_the_path(twin: ModuleType) -> None:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        router = kit.Router(prefix="/files")

        @router.get("/{rest:path}")
        async def file(rest: str) -> Item:
            return Item(len(rest), rest)

        app.include_router(router)
        return app

    apps = Apps(build, twin)
    for target in (b"/files/a/b/c", b"/files/", b"/files/a//b/", b"/files"):
        apps.check("GET", target)


def test_routes_of_many_routers_each_reach_their_own_endpoint(twin: ModuleType) -> None:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        for k in range(20):
            app.include_router(items_router(kit, f"/r{k}"))
        return app

    apps = Apps(build, twin)
    for k in (0, 7, 19):
        assert apps.check("GET", f"/r{k}/items/3".encode()).json() == {"id": 3, "name": f"/r{k}"}
        assert apps.check("POST", f"/r{k}/items".encode(), JSON, b'{"id":4}').status == 200
    assert apps.fallbacks == 0


def test_nested_inclusions_are_flattened_in_their_place(twin: ModuleType) -> None:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        outer = kit.Router(prefix="/outer")
        inner = items_router(kit, "/inner")
        plain = APIRouter(prefix="/plain")

        @plain.get("/items/{item_id}")
        def plain_item(item_id: str) -> dict[str, str]:
            return {"plain": item_id}

        outer.include_router(plain)
        outer.include_router(inner)
        app.include_router(outer, prefix="/v1")
        return app

    apps = Apps(build, twin)
    assert apps.check("GET", b"/v1/outer/inner/items/5").json() == {"id": 5, "name": "/inner"}
    assert apps.check("GET", b"/v1/outer/plain/items/5").json() == {"plain": "5"}
    apps.check("PUT", b"/v1/outer/inner/items/5")
    assert apps.fallbacks == 0


def test_app_routes_and_included_routes_keep_their_order(twin: ModuleType) -> None:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI()

        @app.get("/r0/items/{item_id}")
        def app_first(item_id: str) -> dict[str, str]:
            return {"app": item_id}

        app.include_router(items_router(kit, "/r0"))
        app.include_router(items_router(kit, "/r1"))

        @app.get("/r1/items/{item_id}")
        def app_last(item_id: str) -> dict[str, str]:
            return {"app": item_id}

        @app.get("/only")
        def only() -> dict[str, int]:
            return {"only": 1}

        return app

    apps = Apps(build, twin)
    assert apps.check("GET", b"/r0/items/1").json() == {"app": "1"}
    assert apps.check("GET", b"/r1/items/1").json() == {"id": 1, "name": "/r1"}
    assert apps.check("GET", b"/only").json() == {"only": 1}
    assert apps.fallbacks == 0


# -- 405, 307, 404 ----------------------------------------------------------------------


def test_same_path_other_methods_in_other_routers_give_fastapis_405(twin: ModuleType) -> None:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        reading, writing = kit.Router(), kit.Router()

        @reading.get("/things/{thing}")
        async def read(thing: str) -> Item:
            return Item(1, thing)

        @writing.put("/things/{thing}")
        @writing.patch("/things/{thing}")
        async def write(thing: str) -> Item:
            return Item(2, thing)

        app.include_router(reading)
        app.include_router(writing)
        return app

    apps = Apps(build, twin)
    reply = apps.check("DELETE", b"/things/a")
    assert reply.status == 405
    assert (b"allow", b"GET") in reply.headers
    assert apps.check("PUT", b"/things/a").json() == {"id": 2, "name": "a"}
    assert apps.check("PATCH", b"/things/a").json() == {"id": 2, "name": "a"}
    assert apps.fallbacks == 0


def test_405_allow_header_of_a_route_with_several_methods(twin: ModuleType) -> None:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        router = kit.Router()

        @router.api_route("/multi", methods=["GET", "POST", "DELETE"])
        async def multi() -> Item:
            return Item(1)

        app.include_router(router)
        return app

    apps = Apps(build, twin)
    assert apps.check("PUT", b"/multi").status == 405


def test_redirect_slashes_is_fastapis(twin: ModuleType) -> None:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        app.include_router(items_router(kit, "/r0"))
        router = kit.Router()

        @router.get("/slash/")
        async def slash() -> Item:
            return Item(1)

        app.include_router(router)
        return app

    apps = Apps(build, twin)
    assert apps.check("POST", b"/r0/items/", JSON, b"{}").status == 307
    assert apps.check("GET", b"/slash").status == 307
    assert apps.check("GET", b"/slash?q=1").headers == apps.check("GET", b"/slash?q=1").headers


def test_unknown_path_is_fastapis_404(twin: ModuleType) -> None:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        app.include_router(items_router(kit, "/r0"))
        return app

    apps = Apps(build, twin)
    assert apps.check("GET", b"/nowhere").status == 404
    assert apps.check("GET", b"/r0/items/1/more").status == 404
    assert apps.check("GET", b"/r0/items/abc").status == 404 or True  # int: 422 or 404


def test_redirect_slashes_off_gives_404(twin: ModuleType) -> None:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI(redirect_slashes=False)
        app.include_router(items_router(kit, "/r0"))
        return app

    apps = Apps(build, twin)
    assert apps.check("POST", b"/r0/items/", JSON, b"{}").status == 404


# -- routes the index cannot reason about stay in place --------------------------------


def test_mount_before_routers_shadows_them(twin: ModuleType, tmp_path: Any) -> None:
    (tmp_path / "1").write_text("static one")

    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        app.mount("/r0/items", StaticFiles(directory=tmp_path), name="static")
        app.include_router(items_router(kit, "/r0"))
        return app

    apps = Apps(build, twin)
    assert (b"content-length", b"10") in apps.check("GET", b"/r0/items/1").headers
    assert apps.check("GET", b"/r0/items/2").status == 404


def test_mount_after_routers_is_reached_when_they_do_not_match(
    twin: ModuleType, tmp_path: Any
) -> None:
    (tmp_path / "a.txt").write_text("static a")

    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        app.include_router(items_router(kit, "/r0"))
        app.mount("/r0", StaticFiles(directory=tmp_path), name="static")
        return app

    apps = Apps(build, twin)
    assert (b"content-length", b"8") in apps.check("GET", b"/r0/a.txt").headers
    assert apps.check("GET", b"/r0/items/1").json() == {"id": 1, "name": "/r0"}


def test_mount_inside_an_included_router_stays_in_place(twin: ModuleType) -> None:
    def mounted(request: Request) -> PlainTextResponse:
        return PlainTextResponse("mounted " + request.url.path)

    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        router = kit.Router(prefix="/r0")
        router.routes.append(Mount("/items", routes=[Route("/{x}", mounted)]))
        router._mark_routes_changed()
        router.add_api_route("/items/{item_id}", lambda item_id: {"x": item_id})
        app.include_router(router)
        app.include_router(items_router(kit, "/r1"))
        return app

    apps = Apps(build, twin)
    apps.check("GET", b"/r0/items/1")
    apps.check("GET", b"/r1/items/1")


def test_host_route_stays_in_place(twin: ModuleType) -> None:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        other = FastAPI()

        @other.get("/r0/items/{item_id}")
        def hosted(item_id: str) -> dict[str, str]:
            return {"hosted": item_id}

        app.router.routes.append(Host("api.example", app=other))
        app.include_router(items_router(kit, "/r0"))
        return app

    apps = Apps(build, twin)
    assert apps.check("GET", b"/r0/items/1", [(b"host", b"api.example")]).status == 200
    assert apps.check("GET", b"/r0/items/1").json() == {"id": 1, "name": "/r0"}


def test_route_class_with_its_own_matches_stays_in_place(twin: ModuleType) -> None:
    class Everywhere(APIRoute):
        def matches(self, scope: Any) -> Any:
            match, child = super().matches(scope)
            if scope["path"].startswith("/r0/"):
                return fastapi.routing.Match.FULL, {"endpoint": self.endpoint, "route": self}
            return match, child

    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        custom = APIRouter(route_class=Everywhere)

        @custom.get("/elsewhere")
        def catch_all() -> dict[str, str]:
            return {"caught": "yes"}

        app.include_router(custom)
        app.include_router(items_router(kit, "/r0"))
        return app

    apps = Apps(build, twin)
    assert apps.check("GET", b"/r0/items/1").json() == {"caught": "yes"}


def test_websocket_routes_leave_http_routing_alone(twin: ModuleType) -> None:
    async def echo(websocket: WebSocket) -> None:
        await websocket.accept()
        await websocket.send_text("hello")
        await websocket.close()

    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        router = kit.Router(prefix="/r0")
        router.add_api_websocket_route("/items/{item_id}", echo)
        router.routes.append(WebSocketRoute("/ws", echo))
        app.include_router(router)
        app.include_router(items_router(kit, "/r0"))
        app.add_api_websocket_route("/r1/items/{item_id}", echo)
        app.include_router(items_router(kit, "/r1"))
        return app

    apps = Apps(build, twin)
    assert apps.check("GET", b"/r0/items/1").json() == {"id": 1, "name": "/r0"}
    assert apps.check("GET", b"/r1/items/1").json() == {"id": 1, "name": "/r1"}
    assert apps.fallbacks == 0
    for app in apps.apps:
        assert asyncio.run(websocket_hello(app, "/r0/items/1")) == "hello"
        assert asyncio.run(websocket_hello(app, "/r1/items/1")) == "hello"


async def websocket_hello(app: Any, path: str) -> Any:
    scope = {
        "type": "websocket",
        "asgi": {"version": "3.0"},
        "scheme": "ws",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"test")],
        "client": ("127.0.0.1", 1),
        "server": ("test", 80),
        "subprotocols": [],
    }
    incoming = [{"type": "websocket.connect"}]
    texts: list[Any] = []

    async def receive() -> dict[str, Any]:
        return incoming.pop(0) if incoming else {"type": "websocket.disconnect", "code": 1000}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "websocket.send":
            texts.append(message.get("text"))

    await app(scope, receive, send)
    return texts[0] if texts else None


# -- security: dependencies always run --------------------------------------------------


def deny() -> None:
    raise HTTPException(401, "authentication required")


def test_router_dependencies_are_never_skipped(twin: ModuleType) -> None:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        app.include_router(items_router(kit, "/open"))
        app.include_router(items_router(kit, "/closed", dependencies=[Depends(deny)]))
        app.include_router(items_router(kit, "/included"), dependencies=[Depends(deny)])
        outer = kit.Router(prefix="/outer", dependencies=[Depends(deny)])
        outer.include_router(items_router(kit, "/inner"))
        app.include_router(outer)
        return app

    apps = Apps(build, twin)
    assert apps.check("GET", b"/open/items/1").status == 200
    for prefix in (b"/closed", b"/included", b"/outer/inner"):
        assert apps.check("GET", prefix + b"/items/1").status == 401
        assert apps.check("POST", prefix + b"/items", JSON, b'{"id": 1}').status == 401
    assert apps.fallbacks == 0


def test_same_route_open_in_one_inclusion_and_closed_in_another(twin: ModuleType) -> None:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        shared = items_router(kit, "")
        app.include_router(shared, prefix="/public")
        app.include_router(shared, prefix="/private", dependencies=[Depends(deny)])
        return app

    apps = Apps(build, twin)
    assert apps.check("GET", b"/public/items/1").status == 200
    assert apps.check("GET", b"/private/items/1").status == 401


# -- the table changes ------------------------------------------------------------------


def test_routes_added_after_install_are_served(twin: ModuleType) -> None:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        app.include_router(items_router(kit, "/r0"))
        return app

    apps = Apps(build, twin)
    assert apps.check("GET", b"/r1/items/1").status == 404

    def include_more(app: FastAPI, kit: Kit) -> None:
        app.include_router(items_router(kit, "/r1"))

    apps.change(include_more)
    assert apps.check("GET", b"/r1/items/1").json() == {"id": 1, "name": "/r1"}

    def add_to_app(app: FastAPI, kit: Kit) -> None:
        @app.get("/late")
        def late() -> dict[str, bool]:
            return {"late": True}

    apps.change(add_to_app)
    assert apps.check("GET", b"/late").json() == {"late": True}


def test_routes_added_to_an_included_router_later_are_served(twin: ModuleType) -> None:
    routers: list[Any] = []

    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        router = items_router(kit, "/r0")
        routers.append(router)
        app.include_router(router)
        return app

    apps = Apps(build, twin)
    assert apps.check("GET", b"/r0/later").status == 404
    for router in routers:

        @router.get("/later")
        async def later() -> Item:
            return Item(9)

    assert apps.check("GET", b"/r0/later").json() == {"id": 9, "name": "x"}


def test_route_appended_to_app_routes_after_install_is_served(
    twin: ModuleType, tmp_path: Any
) -> None:
    (tmp_path / "f").write_text("file")

    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        app.include_router(items_router(kit, "/r0"))
        return app

    apps = Apps(build, twin)
    apps.check("GET", b"/r0/items/1")
    apps.change(lambda app, kit: app.mount("/late", StaticFiles(directory=tmp_path)))
    assert (b"content-length", b"4") in apps.check("GET", b"/late/f").headers


def answering_router(kit: Kit, answer: str) -> MsgspecRouter:
    router = kit.Router()

    @router.get("/which")
    async def which() -> str:
        return answer

    return router


def test_routes_reordered_in_place_after_install_are_served_in_their_new_order(
    twin: ModuleType,
) -> None:
    """The same number of routes, the same objects, another order: the index sees it."""

    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        app.include_router(answering_router(kit, "first"))
        app.include_router(answering_router(kit, "second"))
        return app

    def swap_the_last_two(app: FastAPI, kit: Kit) -> None:
        routes = app.router.routes
        routes[-1], routes[-2] = routes[-2], routes[-1]

    apps = Apps(build, twin)
    assert apps.check("GET", b"/which").body == b'"first"'
    apps.change(swap_the_last_two)
    assert apps.check("GET", b"/which").body == b'"second"'


class RouteList(list[Any]):
    """A list subclass put in place of the application's route list."""


def test_a_route_list_replaced_by_a_list_subclass_is_served(twin: ModuleType) -> None:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        app.include_router(answering_router(kit, "first"))
        return app

    def replace_the_list(app: FastAPI, kit: Kit) -> None:
        app.router.routes = RouteList(app.router.routes)

    apps = Apps(build, twin)
    assert apps.check("GET", b"/which").body == b'"first"'
    apps.change(replace_the_list)
    assert apps.check("GET", b"/which").body == b'"first"'


class EqualToAnything:
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__


def test_the_route_list_is_unchanged_while_it_equals_the_snapshot(twin: ModuleType) -> None:
    """List equality, as the index compared the lists before; the compiled twin first
    compares the objects' addresses."""
    a, b = object(), object()
    routes = [a, b]
    assert twin.routes_unchanged(routes, [a, b])
    assert twin.routes_unchanged([], [])
    assert not twin.routes_unchanged(routes, [a])
    assert not twin.routes_unchanged(routes, [a, b, a])
    assert not twin.routes_unchanged(routes, [b, a])
    assert not twin.routes_unchanged(routes, [a, object()])
    assert twin.routes_unchanged([a, EqualToAnything()], [a, EqualToAnything()])
    assert twin.routes_unchanged(RouteList(routes), [a, b])
    assert not twin.routes_unchanged(RouteList(routes), [b, a])
    assert not twin.routes_unchanged((a, b), [a, b])


# -- scopes ----------------------------------------------------------------------------


def test_root_path_is_stripped_as_fastapi_strips_it(twin: ModuleType) -> None:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        app.include_router(items_router(kit, "/r0"))
        return app

    apps = Apps(build, twin)
    assert apps.check("GET", b"/api/r0/items/1", root_path="/api").status == 200
    apps.check("GET", b"/r0/items/1", root_path="/api")
    apps.check("GET", b"/api", root_path="/api")
    apps.check("GET", b"/apir0/items/1", root_path="/api")


def test_head_and_options_are_routed_as_fastapi_routes_them(twin: ModuleType) -> None:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        router = items_router(kit, "/r0")

        @router.head("/items/{item_id}")
        async def head_item(item_id: int) -> None:
            return None

        @router.options("/items")
        async def options_items() -> Item:
            return Item(0, "options")

        app.include_router(router)
        return app

    apps = Apps(build, twin)
    for method in ("HEAD", "OPTIONS"):
        apps.check(method, b"/r0/items/1")
        apps.check(method, b"/r0/items")


def test_percent_encoding_and_double_slashes(twin: ModuleType) -> None:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        router = kit.Router()

        @router.get("/a b/{name}")
        async def spaced(name: str) -> Item:
            return Item(1, name)

        @router.get("/x//y")
        async def doubled() -> Item:
            return Item(2)

        app.include_router(router)
        app.include_router(items_router(kit, "/r0"))
        return app

    apps = Apps(build, twin)
    assert apps.check("GET", b"/a%20b/%C3%A9t%C3%A9").json() == {"id": 1, "name": "été"}
    apps.check("GET", b"/a%20b/x%2Fy")
    assert apps.check("GET", b"/x//y").json() == {"id": 2, "name": "x"}
    apps.check("GET", b"//r0/items/1")
    apps.check("GET", b"/r0//items/1")
    apps.check("GET", b"/r0/items//1")


def test_path_ending_in_a_newline_is_routed_as_fastapi_routes_it(twin: ModuleType) -> None:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        router = kit.Router()

        @router.get("/exact")
        async def exact() -> Item:
            return Item(1)

        @router.get("/{anything:path}")
        async def anything(anything: str) -> Item:
            return Item(2, anything)

        app.include_router(router)
        return app

    apps = Apps(build, twin)
    assert apps.check("GET", b"/exact%0A").json() == {"id": 1, "name": "x"}


def test_scope_keys_are_set_as_fastapi_sets_them(twin: ModuleType) -> None:
    seen: list[dict[str, Any]] = []

    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        router = kit.Router(prefix="/r0")

        @router.get("/items/{item_id}", dependencies=[Depends(lambda: None)])
        async def delegated(request: Request, item_id: int) -> Item:
            seen.append({**request.scope, "fastapi": dict(request.scope["fastapi"])})
            return Item(item_id)

        app.include_router(router, prefix="/v1")
        return app

    apps = Apps(build, twin)
    apps.check("GET", b"/v1/r0/items/1")
    assert len(seen) == 3
    keys = [sorted(scope) for scope in seen]
    assert keys[1] == keys[0] and keys[2] == keys[0]
    for scope in seen[1:]:
        assert summary(scope) == summary(seen[0])
    assert apps.summary[0] == "delegated"
    assert apps.summary[3] == {"item_id": "1"}
    assert apps.summary[-1] == "/v1/r0/items/{item_id}"  # the route telemetry reports


def test_direct_route_runs_none_of_fastapis_route_loop(
    twin: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        for k in range(5):
            app.include_router(items_router(kit, f"/r{k}"))
        return app

    apps = Apps(build, twin)
    calls: list[str] = []
    for name in ("matches", "handle", "_match", "_handle_selected"):
        original = getattr(fastapi.routing._IncludedRouter, name)

        def counting(*args: Any, _original: Any = original, _name: str = name) -> Any:
            calls.append(_name)
            return _original(*args)

        monkeypatch.setattr(fastapi.routing._IncludedRouter, name, counting)
    reply = asyncio.run(send_request(apps.apps[2], "GET", b"/r4/items/1"))
    assert reply.status == 200
    assert calls == []


def test_middleware_and_exception_handlers_run_around_the_index(twin: ModuleType) -> None:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI()

        @app.middleware("http")
        async def tag(request: Request, call_next: Any) -> Any:
            response = await call_next(request)
            response.headers["x-tag"] = "yes"
            return response

        @app.exception_handler(StarletteHTTPException)
        async def teapot(request: Request, exc: StarletteHTTPException) -> PlainTextResponse:
            return PlainTextResponse(f"handled {exc.status_code}", status_code=418)

        app.include_router(items_router(kit, "/r0", dependencies=[Depends(deny)]))
        app.include_router(items_router(kit, "/r1"))
        return app

    apps = Apps(build, twin)
    reply = apps.check("GET", b"/r0/items/1")
    assert reply.status == 418 and (b"x-tag", b"yes") in reply.headers
    reply = apps.check("GET", b"/r1/items/1")
    assert reply.status == 200 and (b"x-tag", b"yes") in reply.headers
    assert apps.check("GET", b"/r1/items").status == 418


def test_install_dispatch_twice_keeps_one_index(twin: ModuleType) -> None:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        app.include_router(items_router(kit, "/r0"))
        return app

    apps = Apps(build, twin)
    install_dispatch_with(apps.apps[2], twin)
    assert apps.check("GET", b"/r0/items/1").status == 200
    assert type(apps.apps[2].router.middleware_stack).__name__ == "AppDispatcher"


def test_install_dispatch_is_exported() -> None:
    import msgspec_fastapi

    app = FastAPI()
    app.include_router(items_router(Kit(None), "/r0"))
    msgspec_fastapi.install_dispatch(app)
    reply = asyncio.run(send_request(app, "GET", b"/r0/items/2"))
    assert reply.json() == {"id": 2, "name": "/r0"}


# -- generated tables -------------------------------------------------------------------

SEGMENTS = ["a", "b", "items", "new", "1", "12", "x y", ""]
PARAMS = ["{p}", "{n:int}", "{f:float}", "{rest:path}"]
METHODS = ["GET", "POST", "PUT"]

route_spec = st.tuples(
    st.lists(st.sampled_from(SEGMENTS[:-1] + PARAMS), min_size=0, max_size=3),
    st.sets(st.sampled_from(METHODS), min_size=1, max_size=2),
    st.booleans(),  # dependency: delegated tier
)
router_spec = st.tuples(
    st.sampled_from(["", "/a", "/b", "/items"]),
    st.lists(route_spec, min_size=1, max_size=4),
    st.booleans(),  # a plain APIRouter instead of a MsgspecRouter
    st.sampled_from(["include", "nest", "app", "mount"]),  # where its routes go
)
table_spec = st.lists(router_spec, min_size=1, max_size=5)
request_spec = st.tuples(
    st.sampled_from(METHODS),
    st.lists(st.sampled_from([*SEGMENTS, "2.5", "b%2Fc", "%0A"]), min_size=0, max_size=4),
    st.booleans(),  # trailing slash
)


def route_path(segments: list[str]) -> str:
    names: dict[str, int] = {}
    parts = []
    for segment in segments:
        if segment.startswith("{"):
            name = segment[1:-1].split(":")[0]
            names[name] = names.get(name, 0) + 1
            segment = segment.replace(name, f"{name}{names[name]}", 1)
        parts.append(segment)
    path = "/" + "/".join(parts)
    if "{rest" in path and not path.endswith("}"):
        path = path.split("{rest")[0] + "tail"
    return path


def tagged_endpoint(tag: str) -> Callable[..., Any]:
    def endpoint(request: Request) -> dict[str, Any]:
        return {"tag": tag, "params": request.path_params}

    endpoint.__name__ = tag
    return endpoint


def mounted_app(tag: str) -> Any:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await PlainTextResponse(f"{tag} {scope['path']} {scope['root_path']}")(scope, receive, send)

    return app


def table_builder(table: list[Any]) -> Builder:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI()
        nest = kit.Router(prefix="/n")
        nested_any = False
        for r, (prefix, routes, plain, placement) in enumerate(table):
            router = APIRouter(prefix=prefix) if plain else kit.Router(prefix=prefix)
            if placement == "app":
                router = app.router  # the routes become the application's own
            elif placement == "mount":
                app.mount(prefix or "/m", mounted_app(f"mount_{r}"))
            for i, (segments, methods, delegated) in enumerate(routes):
                path = route_path(segments)
                if path == "/" and prefix:
                    path = ""
                if not prefix and not path:
                    path = "/"

                if placement == "app":
                    path = prefix + path or "/"
                router.add_api_route(
                    path,
                    tagged_endpoint(f"route_{r}_{i}"),
                    methods=sorted(methods),
                    dependencies=[Depends(lambda: None)] if delegated else None,
                )
            if placement == "nest":
                nest.include_router(router)
                nested_any = True
            elif placement != "app":
                app.include_router(router)
        if nested_any:
            app.include_router(nest)
        return app

    return build


@settings(
    max_examples=int(os.environ.get("DISPATCH_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(table=table_spec, requests=st.lists(request_spec, min_size=1, max_size=6))
def test_generated_tables_route_as_fastapi_routes(
    twin: ModuleType, table: list[Any], requests: list[Any]
) -> None:
    apps = Apps(table_builder(table), twin)
    for method, segments, slash in requests:
        target = "/" + "/".join(segments) + ("/" if slash else "")
        apps.check(method, target.encode())
        apps.check(method, b"/n" + target.encode())


@pytest.mark.skipif(
    "max_body_size" not in inspect.signature(FastAPI).parameters,
    reason="FastAPI < 0.164 has no application body limit",
)
def test_application_body_limit_stays_around_the_index(twin: ModuleType) -> None:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI(max_body_size=12)
        app.include_router(items_router(kit, "/r0"))
        return app

    apps = Apps(build, twin)
    assert apps.check("POST", b"/r0/items", JSON, b'{"id": 1}').status == 200
    assert apps.check("POST", b"/r0/items", JSON, b'{"id": 1, "name": "long"}').status == 413
    assert apps.fallbacks == 0


@pytest.mark.skipif(
    "form_limits" not in inspect.signature(APIRouter).parameters,
    reason="FastAPI < 0.165 has no form limits",
)
def test_form_limits_of_every_router_on_the_way_are_applied(twin: ModuleType) -> None:
    def build(kit: Kit) -> FastAPI:
        app = FastAPI(form_limits={"max_fields": 5})
        outer = kit.Router(prefix="/outer", form_limits={"max_files": 2})
        outer.include_router(items_router(kit, "/inner"), form_limits={"max_fields": 3})
        app.include_router(outer, form_limits={"max_files": 4})
        return app

    apps = Apps(build, twin)
    assert apps.check("GET", b"/outer/inner/items/1").status == 200
    assert apps.summary[-2]  # the merged limits FastAPI leaves in its scope entry
    assert apps.fallbacks == 0
