"""Route tables and requests for the routing differential test, and the apps they build.

A `Table` describes one application: routes on the app itself, routers (MsgspecRouter and
APIRouter) included with prefixes and nested, mounts, StaticFiles, hosts, websockets, a
custom BaseRoute, an app `root_path`, and operations that run after `install_dispatch`.
`build` turns a table into a FastAPI app: the oracle (FastAPI's routing), or the app
routed by the index (`dispatch=True`: the package's classes and install_dispatch).
Every endpoint answers with its id and the path parameters it got, and records its id
(and every auth dependency its tag) in the app's log, so the endpoint that ran is
visible twice over.

`exchange` sends one `Call` to an app and returns everything observable: the ASGI messages
sent (all keys, headers in order), the exception that escaped if any, the log, and a
projection of the scope after the call (endpoint, route, path parameters, root_path).

The strategies (`cases`) draw a table and requests aimed at it: matches, near misses,
trailing and double slashes, percent-encoding, wrong methods, HEAD and OPTIONS,
websockets, other hosts, root_path variants, with and without the auth header.
"""

from __future__ import annotations

import inspect
import itertools
import json
import re
import uuid
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, FastAPI, Header, HTTPException, Request
from fastapi.routing import APIRoute, APIWebSocketRoute
from fastapi.staticfiles import StaticFiles
from hypothesis import strategies as st
from raw_asgi import scope_for
from starlette.convertors import CONVERTOR_TYPES, Convertor, register_url_convertor
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import BaseRoute, Host, Match, Mount, Route, Router, WebSocketRoute
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket

from msgspec_fastapi import MsgspecRoute, MsgspecRouter, _compat, _select, install_dispatch
from msgspec_fastapi._routing.install import install_dispatch_with
from msgspec_fastapi.router import route_class_for, router_class_for


class HexConvertor(Convertor[int]):
    """A convertor Starlette does not ship, so an index cannot know its regex in advance."""

    regex = "[0-9a-f]+"

    def convert(self, value: str) -> int:
        return int(value, 16)

    def to_string(self, value: int) -> str:
        return format(value, "x")


if "hex" not in CONVERTOR_TYPES:
    register_url_convertor("hex", HexConvertor())

CONVERTORS = ("str", "int", "float", "uuid", "path", "hex")
PY_TYPES: dict[str, Any] = {
    "str": str,
    "int": int,
    "float": float,
    "uuid": uuid.UUID,
    "path": str,
    "hex": int,
}
LITERALS = ("items", "new", "users", "me", "a", "static", "ws")
# Literals with characters a regex or a percent-decoder could get wrong: drawn less often.
ODD_LITERALS = ("v1.0", "café", "a+b", "x%y", "items.json")
BODY_LIMIT = 8
BODIES = (b"{}", b'{"a": "0123456789"}')  # within the limit, over it
AROUND = (("v", ""), ("", ".json"), ("", "-x"), ("a", "b"))
HTTP_METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD")
AUTH_HEADER = (b"x-auth", b"ok")
HOSTS = ("api.test", "{sub}.test")
STATIC_FILES = {
    "a.txt": b"static a\n",
    "d/b.txt": b"static b\n",
    "front/index.html": b"<html>front</html>\n",
    "front/app.js": b"// front\n",
}
FRONT_FILES = ("index.html", "app.js", "missing.js", "deep/page")


# --- tables -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """A path parameter, alone in its segment or with literal text around it."""

    conv: str
    name: str
    before: str = ""
    after: str = ""

    def __str__(self) -> str:
        inner = self.name if self.conv == "str" else f"{self.name}:{self.conv}"
        return f"{self.before}{{{inner}}}{self.after}"


Segment = str | Param


@dataclass(frozen=True)
class PathT:
    """A path template: segments, and whether it ends with a slash. No segments: "/" or ""."""

    segments: tuple[Segment, ...] = ()
    slash: bool = False

    def __str__(self) -> str:
        if not self.segments:
            return "/" if self.slash else ""
        return "/" + "/".join(map(str, self.segments)) + ("/" if self.slash else "")

    @property
    def params(self) -> list[Param]:
        return [s for s in self.segments if isinstance(s, Param)]

    def join(self, other: PathT) -> PathT:
        return PathT(self.segments + other.segments, other.slash)


@dataclass(frozen=True)
class Api:
    """`router.add_api_route`: typed path parameters, or a Request parameter."""

    rid: str
    path: PathT
    methods: tuple[str, ...]
    takes_request: bool = False
    auth: bool = False


@dataclass(frozen=True)
class Plain:
    """`router.add_route`: a Starlette Route (GET also answers HEAD)."""

    rid: str
    path: PathT
    methods: tuple[str, ...]


@dataclass(frozen=True)
class Ws:
    """A websocket route: FastAPI's (`add_api_websocket_route`) or Starlette's."""

    rid: str
    path: PathT
    api: bool = True


@dataclass(frozen=True)
class Sub:
    """A mounted sub-app (a FastAPI app or a Starlette Router) with a few echo routes."""

    rid: str
    path: PathT
    routes: tuple[PathT, ...]
    fastapi: bool = False


@dataclass(frozen=True)
class Static:
    """StaticFiles mounted at `path`."""

    rid: str
    path: PathT


@dataclass(frozen=True)
class HostT:
    """`router.host(host, Router([...]))`."""

    rid: str
    host: str
    routes: tuple[PathT, ...]


@dataclass(frozen=True)
class Custom:
    """A BaseRoute subclass: any path whose last segment is `word`; GET only, else partial."""

    rid: str
    word: str


@dataclass(frozen=True)
class Frontend:
    """`router.frontend(path, directory=...)`: FastAPI's low-priority routes."""

    rid: str
    path: PathT


@dataclass(frozen=True)
class RouterT:
    rid: str
    msgspec: bool
    prefix: PathT
    auth: bool
    items: tuple[Item, ...]
    max_body_size: int | None = None


@dataclass(frozen=True)
class Include:
    """`parent.include_router(router, prefix=..., dependencies=...)`."""

    router: RouterT
    prefix: PathT = PathT()
    auth: bool = False


@dataclass(frozen=True)
class Reinclude:
    """The app includes a router that is already included elsewhere, at another prefix."""

    rid: str
    prefix: PathT
    auth: bool = False


Item = Api | Plain | Ws | Sub | Static | HostT | Custom | Frontend | Include | Reinclude


@dataclass(frozen=True)
class Late:
    """An item added after `install_dispatch`, to the app ("app") or to a router."""

    target: str
    item: Item


@dataclass(frozen=True)
class Table:
    items: tuple[Item, ...]
    root_path: str = ""
    redirect_slashes: bool = True
    late: tuple[Late, ...] = ()

    def render(self) -> str:
        """The table as the calls that build it, one per line."""
        lines = [
            f"app = FastAPI(root_path={self.root_path!r}, redirect_slashes={self.redirect_slashes})"
        ]
        lines += _render_items("app", self.items, "")
        lines.append("install_dispatch(app)  # dispatch app only")
        for late in self.late:
            lines += _render_items(late.target, (late.item,), "")
        return "\n".join(lines)


def _render_items(parent: str, items: Sequence[Item], indent: str) -> list[str]:
    lines: list[str] = []
    for item in items:
        if isinstance(item, Include):
            r = item.router
            kind = "MsgspecRouter" if r.msgspec else "APIRouter"
            auth = ", dependencies=[Depends(auth)]" if r.auth else ""
            if r.max_body_size is not None:
                auth += f", max_body_size={r.max_body_size}"
            lines.append(f"{indent}{r.rid} = {kind}(prefix={str(r.prefix)!r}{auth})")
            lines += _render_items(r.rid, r.items, indent + "    ")
            auth = ", dependencies=[Depends(auth)]" if item.auth else ""
            lines.append(
                f"{indent}{parent}.include_router({r.rid}, prefix={str(item.prefix)!r}{auth})"
            )
        elif isinstance(item, Reinclude):
            auth = ", dependencies=[Depends(auth)]" if item.auth else ""
            lines.append(
                f"{indent}{parent}.include_router({item.rid}, prefix={str(item.prefix)!r}{auth})"
            )
        elif isinstance(item, Api):
            extra = ", dependencies=[Depends(auth)]" if item.auth else ""
            extra += ", (request)" if item.takes_request else ""
            lines.append(
                f"{indent}{parent}.add_api_route({str(item.path)!r}, {item.rid}, "
                f"methods={list(item.methods)}{extra})"
            )
        elif isinstance(item, Plain):
            lines.append(
                f"{indent}{parent}.add_route({str(item.path)!r}, {item.rid}, "
                f"methods={list(item.methods)})"
            )
        elif isinstance(item, Ws):
            how = "add_api_websocket_route" if item.api else "add_websocket_route"
            lines.append(f"{indent}{parent}.{how}({str(item.path)!r}, {item.rid})")
        elif isinstance(item, Sub):
            kind = "FastAPI" if item.fastapi else "Router"
            paths = [str(p) for p in item.routes]
            lines.append(f"{indent}{parent}.mount({str(item.path)!r}, {kind}({item.rid}: {paths}))")
        elif isinstance(item, Static):
            lines.append(f"{indent}{parent}.mount({str(item.path)!r}, StaticFiles({item.rid}))")
        elif isinstance(item, HostT):
            paths = [str(p) for p in item.routes]
            lines.append(f"{indent}{parent}.host({item.host!r}, Router({item.rid}: {paths}))")
        elif isinstance(item, Frontend):
            lines.append(f"{indent}{parent}.frontend({str(item.path) or '/'!r})  # {item.rid}")
        else:
            lines.append(f"{indent}{parent}.routes.append(Custom({item.rid}, {item.word!r}))")
    return lines


# --- building ------------------------------------------------------------------------------


def _plain(value: Any) -> list[str]:
    return [type(value).__name__, str(value)]


def _typed_endpoint(rid: str, params: Sequence[Param], log: list[str]) -> Callable[..., Any]:
    async def endpoint(**values: Any) -> dict[str, Any]:
        log.append(rid)
        return {"id": rid, "params": {k: _plain(v) for k, v in values.items()}}

    endpoint.__name__ = endpoint.__qualname__ = rid
    parameters = [
        inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, annotation=PY_TYPES[p.conv])
        for p in params
    ]
    endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        parameters, return_annotation=dict[str, Any]
    )
    endpoint.__annotations__ = {p.name: PY_TYPES[p.conv] for p in params}
    endpoint.__annotations__["return"] = dict[str, Any]
    return endpoint


def _request_endpoint(rid: str, log: list[str]) -> Callable[..., Any]:
    async def endpoint(request: Request):  # untyped: MsgspecJSONResponse or JSONResponse
        log.append(rid)
        return {
            "id": rid,
            "params": {k: _plain(v) for k, v in request.path_params.items()},
            "root_path": request.scope.get("root_path"),
            "url": str(request.url),
        }

    endpoint.__name__ = endpoint.__qualname__ = rid
    return endpoint


def _plain_endpoint(rid: str, log: list[str]) -> Callable[..., Any]:
    async def endpoint(request: Request) -> JSONResponse:
        log.append(rid)
        params = {k: _plain(v) for k, v in request.path_params.items()}
        size = len(await request.body())  # reading is where a body limit bites
        return JSONResponse({"id": rid, "params": params, "path": request.url.path, "body": size})

    endpoint.__name__ = endpoint.__qualname__ = rid
    return endpoint


def _ws_endpoint(rid: str, log: list[str]) -> Callable[..., Any]:
    async def endpoint(websocket: WebSocket) -> None:
        log.append(rid)
        await websocket.accept()
        params = {k: _plain(v) for k, v in websocket.path_params.items()}
        await websocket.send_text(json.dumps({"id": rid, "params": params}))
        await websocket.close()

    endpoint.__name__ = endpoint.__qualname__ = rid
    return endpoint


def _make_auth(tag: str, log: list[str]) -> Callable[..., Any]:
    async def auth(x_auth: Annotated[str | None, Header()] = None) -> None:
        log.append("auth:" + tag)
        if x_auth != AUTH_HEADER[1].decode():
            raise HTTPException(401, f"auth {tag}")

    return auth


class CustomRoute(BaseRoute):
    """A route type no index knows: it decides in `matches` alone."""

    def __init__(self, rid: str, word: str, log: list[str]) -> None:
        self.rid, self.word, self.log = rid, word, log
        self.path = f"<custom {word}>"

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] != "http":
            return Match.NONE, {}
        if _compat.get_route_path(scope).rsplit("/", 1)[-1] != self.word:
            return Match.NONE, {}
        child = {"endpoint": self.handle}
        return (Match.FULL if scope["method"] == "GET" else Match.PARTIAL), child

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.log.append(self.rid)
        if scope["method"] != "GET":
            response: Any = PlainTextResponse(f"{self.rid} 405", 405, headers={"allow": "GET"})
        else:
            response = JSONResponse({"id": self.rid, "path": scope["path"]})
        await response(scope, receive, send)


@dataclass
class Built:
    """A built app, the log its endpoints write, and the builder for its late items."""

    app: FastAPI
    log: list[str]
    builder: _Builder


@cache
def router_classes(twin: ModuleType, dispatch: bool) -> tuple[type[MsgspecRouter], type[APIRoute]]:
    """The MsgspecRouter and route classes of one build, on `twin`.

    The oracle's routers and routes match as FastAPI's APIRouter and APIRoute do (the
    index inside MsgspecRouter is on whether or not install_dispatch runs); their routes
    still run on the twin. The dispatch build uses the package's classes as they are
    for the twin `_select` picked, and subclasses bound to the other twin.
    """
    if not dispatch:

        class OracleRoute(route_class_for(twin)):  # type: ignore[misc]
            matches = APIRoute.matches

        class OracleRouter(MsgspecRouter):
            matches = APIRouter.matches  # type: ignore[assignment]
            handle = APIRouter.handle  # type: ignore[assignment]

        return OracleRouter, OracleRoute
    if twin is _select.twin:
        return MsgspecRouter, MsgspecRoute
    return router_class_for(twin), route_class_for(twin)


def install(app: FastAPI, twin: ModuleType) -> None:
    """install_dispatch itself for the twin `_select` picked; for the other twin, with it."""
    if twin is _select.twin:
        install_dispatch(app)
    else:
        install_dispatch_with(app, twin)


class _Builder:
    def __init__(self, twin: ModuleType, dispatch: bool, static_dir: Path, log: list[str]) -> None:
        self.router_class, self.route_class = router_classes(twin, dispatch)
        self.static_dir = static_dir
        self.log = log
        self.routers: dict[str, APIRouter] = {}

    def auth(self, tag: str) -> list[Any]:
        return [Depends(_make_auth(tag, self.log))]

    def echo_router(self, rid: str, paths: Sequence[PathT]) -> Router:
        routes = [
            Route(str(p) or "/", _plain_endpoint(f"{rid}.{i}", self.log))
            for i, p in enumerate(paths)
        ]
        return Router(routes=routes)

    def router(self, spec: RouterT) -> APIRouter:
        options: dict[str, Any] = {"prefix": str(spec.prefix)}
        if spec.auth:
            options["dependencies"] = self.auth(spec.rid)
        if spec.max_body_size is not None:
            options["max_body_size"] = spec.max_body_size
        router: APIRouter
        if spec.msgspec:
            router = self.router_class(route_class=self.route_class, **options)
        else:
            router = APIRouter(**options)
        self.routers[spec.rid] = router
        for item in spec.items:
            self.add(router, item)
        return router

    def add(self, target: Any, item: Item) -> None:
        """Add `item` to `target`: the FastAPI app or an APIRouter."""
        log = self.log
        if isinstance(item, Include):
            router = self.router(item.router)
            deps = self.auth(item.router.rid + "@include") if item.auth else None
            target.include_router(router, prefix=str(item.prefix), dependencies=deps)
        elif isinstance(item, Reinclude):
            deps = self.auth(item.rid + "@reinclude") if item.auth else None
            target.include_router(
                self.routers[item.rid], prefix=str(item.prefix), dependencies=deps
            )
        elif isinstance(item, Api):
            endpoint = (
                _request_endpoint(item.rid, log)
                if item.takes_request
                else _typed_endpoint(item.rid, item.path.params, log)
            )
            deps = self.auth(item.rid) if item.auth else None
            target.add_api_route(
                str(item.path), endpoint, methods=list(item.methods), dependencies=deps
            )
        elif isinstance(item, Plain):
            target.add_route(str(item.path), _plain_endpoint(item.rid, log), list(item.methods))
        elif isinstance(item, Ws):
            endpoint = _ws_endpoint(item.rid, log)
            if item.api:
                target.add_api_websocket_route(str(item.path), endpoint)
            else:  # Starlette 1.x keeps this one on the router only
                getattr(target, "router", target).add_websocket_route(str(item.path), endpoint)
        elif isinstance(item, Sub):
            sub: Any
            if item.fastapi:
                sub = FastAPI()
                for i, path in enumerate(item.routes):
                    rid = f"{item.rid}.{i}"
                    sub.add_api_route(str(path) or "/", _request_endpoint(rid, log))
            else:
                sub = self.echo_router(item.rid, item.routes)
            sub.diff_id = item.rid
            target.mount(str(item.path), sub)
        elif isinstance(item, Static):
            static = StaticFiles(directory=self.static_dir)
            static.diff_id = item.rid  # type: ignore[attr-defined]
            target.mount(str(item.path), static)
        elif isinstance(item, HostT):
            host_app = self.echo_router(item.rid, item.routes)
            host_app.diff_id = item.rid  # type: ignore[attr-defined]
            target.host(item.host, host_app)
        elif isinstance(item, Frontend):
            router = getattr(target, "router", target)
            router.frontend(str(item.path) or "/", directory=self.static_dir / "front")
        else:
            target.routes.append(CustomRoute(item.rid, item.word, log))


def build(table: Table, twin: ModuleType, static_dir: Path, dispatch: bool = False) -> Built:
    """The app `table` describes, on `twin`, without its late items.

    With `dispatch` the app's MsgspecRouters route through the index and
    install_dispatch runs before `build` returns; without, routing is FastAPI's own.
    """
    log: list[str] = []
    with warnings.catch_warnings():
        # Deprecated in favour of the server's root path (0.16x), still honoured.
        warnings.simplefilter("ignore")
        app = FastAPI(root_path=table.root_path, redirect_slashes=table.redirect_slashes)
    builder = _Builder(twin, dispatch, static_dir, log)
    for item in table.items:
        builder.add(app, item)
    if dispatch:
        install(app, twin)
    built = Built(app, log, builder)
    return built


def add_late(built: Built, table: Table) -> None:
    """Add the table's late items, as after install_dispatch."""
    for late in table.late:
        target = built.app if late.target == "app" else built.builder.routers[late.target]
        built.builder.add(target, late.item)


def make_static_dir(root: Path) -> Path:
    for name, content in STATIC_FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)
    return root


# --- requests ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One request: method ("WS" for a websocket), raw target, host, auth, scope root_path."""

    method: str
    target: bytes
    host: bytes = b"test"
    auth: bool = False
    root_path: str = ""
    html: bool = False  # accept: text/html, a navigation request for frontend routes
    body: bytes = b""

    def scope(self) -> dict[str, Any]:
        headers = [AUTH_HEADER] if self.auth else []
        if self.html:
            headers.append((b"accept", b"text/html"))
        if self.body:
            headers.append((b"content-length", str(len(self.body)).encode()))
        scope = scope_for("GET" if self.method == "WS" else self.method, self.target, headers)
        scope["headers"] = [(b"host", self.host), *headers]
        scope["root_path"] = self.root_path
        if self.method == "WS":
            del scope["method"]
            scope.update(type="websocket", scheme="ws", subprotocols=[])
        return scope


@dataclass(frozen=True)
class Outcome:
    messages: tuple[Any, ...]
    error: tuple[str, str] | None
    log: tuple[str, ...]
    scope: dict[str, Any]

    def show(self) -> str:
        lines = [f"  error: {self.error}", f"  log: {list(self.log)}", f"  scope: {self.scope}"]
        lines += [f"  sent: {m}" for m in self.messages]
        return "\n".join(lines)


ROUTE_KINDS = (MsgspecRoute, APIRoute, APIWebSocketRoute, Route, WebSocketRoute, Mount, Host)
ROUTE_KINDS += (BaseRoute,)


def _norm(value: Any) -> Any:
    """A comparable stand-in for a scope value: objects by their id or type, not identity."""
    if isinstance(value, dict):
        return {str(k): _norm(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_norm(v) for v in value]
    if value is None or isinstance(value, (str, bytes, bool, int, float)):
        return [type(value).__name__, value]
    if isinstance(value, uuid.UUID):
        return ["UUID", str(value)]
    diff_id = getattr(value, "diff_id", None)
    if diff_id is not None:
        return ["app", diff_id]
    if isinstance(value, BaseRoute):
        # By kind, not class: the two builds use different subclasses of MsgspecRoute.
        kind = next(k for k in ROUTE_KINDS if isinstance(value, k)).__name__
        endpoint = getattr(value, "endpoint", None)
        return [kind, getattr(value, "path", None), _norm(endpoint)]
    name = getattr(value, "__name__", None)
    if name is not None and callable(value):
        return ["callable", getattr(value, "__qualname__", name)]
    return ["object", type(value).__name__]


SCOPE_KEYS = (
    "type",
    "path",
    "raw_path",
    "root_path",
    "app_root_path",
    "path_params",
    "endpoint",
    "route",
)


def project(scope: Scope) -> dict[str, Any]:
    """What routing left in the scope: the chosen endpoint, route and inclusion."""
    seen = {key: _norm(scope[key]) for key in SCOPE_KEYS if key in scope}
    context = scope.get(_compat.FASTAPI_SCOPE_KEY, {}).get(_compat.ROUTE_CONTEXT_KEY)
    if context is not None:
        seen["route_context"] = [
            getattr(context, "path_format", None),
            _norm(getattr(context, "original_route", None)),
        ]
    return seen


async def exchange(built: Built, call: Call) -> Outcome:
    """Send `call` to the app and collect everything it did."""
    scope = call.scope()
    if call.method == "WS":
        pending: list[dict[str, Any]] = [{"type": "websocket.connect"}]
        closing: dict[str, Any] = {"type": "websocket.disconnect", "code": 1000}
    else:
        pending = [{"type": "http.request", "body": call.body, "more_body": False}]
        closing = {"type": "http.disconnect"}
    sent: list[Any] = []

    async def receive() -> dict[str, Any]:
        return pending.pop(0) if pending else closing

    async def send(message: dict[str, Any]) -> None:
        sent.append(sorted((k, _norm(v)) for k, v in message.items()))

    del built.log[:]
    error = None
    try:
        await built.app(scope, receive, send)
    except Exception as exc:  # compared: both apps must fail alike
        error = (type(exc).__name__, str(exc))
    return Outcome(tuple(sent), error, tuple(built.log), project(scope))


# --- strategies ----------------------------------------------------------------------------


class _Ids:
    def __init__(self) -> None:
        self.counter = itertools.count()

    def __call__(self, letter: str) -> str:
        return f"{letter}{next(self.counter)}"


def _chance(draw: st.DrawFn, one_in: int) -> bool:
    return draw(st.integers(0, one_in - 1)) == 0


@st.composite
def _segment(draw: st.DrawFn, ids: _Ids, last: bool) -> Segment:
    if _chance(draw, 3):
        convs = CONVERTORS if last else tuple(c for c in CONVERTORS if c != "path")
        conv = draw(st.sampled_from(convs))
        if conv != "path" and _chance(draw, 5):
            before, after = draw(st.sampled_from(AROUND))
            return Param(conv, ids("p"), before, after)
        return Param(conv, ids("p"))
    if _chance(draw, 12):
        return draw(st.sampled_from(ODD_LITERALS))
    return draw(st.sampled_from(LITERALS))


@st.composite
def path_templates(draw: st.DrawFn, ids: _Ids, max_size: int = 3, params: bool = True) -> PathT:
    size = draw(st.integers(0, max_size))
    if params:
        segments = tuple(draw(_segment(ids, i == size - 1)) for i in range(size))
    else:
        segments = tuple(draw(st.sampled_from(LITERALS)) for _ in range(size))
    slash = draw(st.booleans()) if segments else True
    if segments and isinstance(segments[-1], Param) and segments[-1].conv == "path":
        slash = False
    return PathT(segments, slash)


@st.composite
def _prefix(draw: st.DrawFn, ids: _Ids) -> PathT:
    """A router, include or mount prefix: "" or segments without a trailing slash."""
    if draw(st.booleans()):
        return PathT()
    size = 1 if draw(st.integers(0, 3)) else 2
    return PathT(tuple(draw(_segment(ids, False)) for _ in range(size)), False)


METHOD_SETS = st.lists(st.sampled_from(HTTP_METHODS), min_size=1, max_size=2, unique=True)


@st.composite
def _route_item(draw: st.DrawFn, ids: _Ids, prefixed: bool, known_paths: list[PathT]) -> Item:
    kinds = ["api"] * 7 + ["same_path"] * 2 + ["plain", "ws", "ws", "sub", "static", "host"]
    kind = draw(st.sampled_from([*kinds, "custom", "frontend"]))

    def route_path(may_be_empty: bool = False) -> PathT:
        # "" only where the router's own prefix comes first: FastAPI refuses a route
        # whose prefix and path are both empty, Starlette a path without a leading "/".
        path = draw(path_templates(ids))
        if not (prefixed and may_be_empty) and not path.segments:
            path = PathT((), True)
        known_paths.append(path)
        return path

    if kind == "same_path" and known_paths:
        # A path already in the table, on another router, with other methods.
        path = draw(st.sampled_from(known_paths))
        if not prefixed and not path.segments:
            path = PathT((), True)
        return Api(ids("e"), path, tuple(draw(METHOD_SETS)), draw(st.booleans()), _chance(draw, 4))
    if kind in ("api", "same_path"):
        takes_request = draw(st.booleans())
        return Api(
            ids("e"), route_path(True), tuple(draw(METHOD_SETS)), takes_request, _chance(draw, 6)
        )
    if kind == "plain":
        return Plain(ids("s"), route_path(), tuple(draw(METHOD_SETS)))
    if kind == "ws":
        api = draw(st.booleans())
        return Ws(ids("w"), route_path(api), api)
    if kind == "sub":
        sub_paths = tuple(draw(st.lists(path_templates(ids, 2), min_size=1, max_size=3)))
        mount = draw(_prefix(ids))
        if not mount.segments:
            mount = PathT((draw(st.sampled_from(LITERALS)),))
        return Sub(ids("m"), mount, sub_paths, draw(st.booleans()))
    if kind == "static":
        return Static(ids("f"), PathT((draw(st.sampled_from(LITERALS)),)))
    if kind == "host":
        host = draw(st.sampled_from(HOSTS)).replace("{sub}", f"{{{ids('h')}}}")
        sub_paths = tuple(draw(st.lists(path_templates(ids, 2), min_size=1, max_size=2)))
        return HostT(ids("h"), host, sub_paths)
    if kind == "frontend":
        return Frontend(ids("n"), draw(path_templates(ids, 1, params=False)))
    return Custom(ids("c"), draw(st.sampled_from(LITERALS)))


@st.composite
def _router(draw: st.DrawFn, ids: _Ids, depth: int, known_paths: list[PathT]) -> RouterT:
    rid = ids("r")
    prefix = draw(_prefix(ids))
    msgspec = draw(st.booleans())
    auth = _chance(draw, 3)
    items: list[Item] = []
    for _ in range(draw(st.integers(1, 4))):
        if depth < 2 and _chance(draw, 5):
            items.append(draw(_include(ids, depth + 1, known_paths)))
        else:
            items.append(draw(_route_item(ids, bool(prefix.segments), known_paths)))
    # A router's own body limit: FastAPI's (0.164+), or MsgspecRouter's before that.
    limit = None
    if (msgspec or _compat.HAS_NATIVE_BODY_LIMIT) and _chance(draw, 3):
        limit = BODY_LIMIT
    return RouterT(rid, msgspec, prefix, auth, tuple(items), limit)


@st.composite
def _include(draw: st.DrawFn, ids: _Ids, depth: int, known_paths: list[PathT]) -> Include:
    router = draw(_router(ids, depth, known_paths))
    return Include(router, draw(_prefix(ids)), _chance(draw, 4))


def _router_ids(items: Sequence[Item]) -> Iterator[str]:
    for item in items:
        if isinstance(item, Include):
            yield item.router.rid
            yield from _router_ids(item.router.items)


@st.composite
def tables(draw: st.DrawFn) -> Table:
    ids = _Ids()
    known: list[PathT] = []
    items: list[Item] = []
    for _ in range(draw(st.integers(1, 5))):
        choice = draw(st.integers(0, 4))
        routers = list(_router_ids(items))
        if choice <= 1:
            items.append(draw(_include(ids, 0, known)))
        elif choice == 2 and routers:
            rid = draw(st.sampled_from(routers))
            items.append(Reinclude(rid, draw(_prefix(ids)), _chance(draw, 3)))
        else:
            items.append(draw(_route_item(ids, False, known)))
    late: list[Late] = []
    for _ in range(draw(st.integers(0, 2))):
        target = draw(st.sampled_from(["app", *_router_ids(items)]))
        if target == "app" and _chance(draw, 3):
            late.append(Late(target, draw(_include(ids, 1, known))))
        else:
            late.append(Late(target, draw(_route_item(ids, target != "app", known))))
    root_path = draw(st.sampled_from(["", "", "/api", "/api/v1"]))
    return Table(tuple(items), root_path, not _chance(draw, 5), tuple(late))


# Path parameter values the convertor takes, and ones it refuses.
GOOD_VALUES: dict[str, tuple[str, ...]] = {
    "str": ("x", "new", "items", "a b", "é", "-", "a.txt", "50%", "v1.0"),
    "int": ("0", "7", "007", "99999999999999999999"),
    "float": ("1.5", "2", "0.25"),
    "uuid": (
        "12345678-1234-5678-1234-567812345678",
        "12345678123456781234567812345678",
        "ABCDEFAB-1234-5678-1234-567812345678",
    ),
    "path": ("", "x", "a/b", "new/", "items/new", "d/b.txt", "a.txt"),
    "hex": ("ff", "0", "abc"),
}
BAD_VALUES: dict[str, tuple[str, ...]] = {
    "str": ("",),
    "int": ("-1", "1.5", "abc", "", "٣"),
    "float": ("1.", "-1.0", "nan", "1e3", ".5"),
    "uuid": ("12345678-1234-5678-1234-56781234567", "1234567g-1234-5678-1234-567812345678"),
    "path": (),
    "hex": ("FF", "g1", "0x1"),
}


@dataclass(frozen=True)
class Target:
    """Where requests aim: an absolute path template, its methods, websocket or not."""

    path: PathT
    methods: tuple[str, ...] = ("GET",)
    websocket: bool = False
    host: str | None = None


def _targets(items: Sequence[Item], prefix: PathT, out: list[Target]) -> None:
    """Where a table's items answer (best effort: this aims requests, it is no oracle)."""
    for item in items:
        if isinstance(item, Include):
            r = item.router
            _targets(r.items, prefix.join(item.prefix).join(r.prefix), out)
        elif isinstance(item, Reinclude):
            out.append(Target(prefix.join(item.prefix).join(PathT(("items",)))))
        elif isinstance(item, (Api, Plain)):
            out.append(Target(prefix.join(item.path), item.methods))
            # Starlette routes and mounts do not take the router's own prefix.
        elif isinstance(item, Ws):
            out.append(Target(prefix.join(item.path), websocket=True))
        elif isinstance(item, Sub):
            base = prefix.join(item.path)
            out += [Target(base.join(p)) for p in item.routes]
            out.append(Target(base.join(PathT((), True))))
        elif isinstance(item, Static):
            base = prefix.join(item.path)
            names = [*STATIC_FILES, "missing.txt", "d"]
            out += [Target(base.join(PathT(tuple(n.split("/")))), ("GET", "HEAD")) for n in names]
        elif isinstance(item, HostT):
            host = re.sub(r"\{[^}]*\}", "x", item.host)
            out += [Target(prefix.join(p), host=host) for p in item.routes]
        elif isinstance(item, Frontend):
            base = prefix.join(PathT(item.path.segments))
            out += [
                Target(base.join(PathT(tuple(n.split("/")))), ("GET", "HEAD")) for n in FRONT_FILES
            ]
            out.append(Target(base))
        else:
            out.append(Target(prefix.join(PathT(("x", item.word)))))


def _unprefixed(items: Sequence[Item], prefix: PathT, out: list[Target]) -> None:
    """Also aim at Starlette routes and mounts without their router's own prefix."""
    for item in items:
        if isinstance(item, Include):
            _unprefixed(item.router.items, prefix.join(item.prefix), out)
            _targets(
                [i for i in item.router.items if not isinstance(i, Api)],
                prefix.join(item.prefix),
                out,
            )


def table_targets(table: Table) -> list[Target]:
    out: list[Target] = []
    items = (*table.items, *(late.item for late in table.late))
    _targets(items, PathT(), out)
    _unprefixed(items, PathT(), out)
    return out


def _encode(text: str, draw: st.DrawFn) -> str:
    """Quote a segment as a client would; sometimes percent-encode more than needed."""
    how = draw(st.integers(0, 7))
    if how == 0 and text:
        return "".join(f"%{b:02X}" for b in text.encode())  # every byte
    if how == 1 and text and text[0].isascii():
        return f"%{ord(text[0]):02x}" + quote(text[1:], safe="/")  # the first, lower case
    return quote(text, safe="/")


NEAR_MISSES = (
    "value",
    "case",
    "literal",
    "drop",
    "add",
    "double",
    "slash",
    "encoded_slash",
    "newline",  # a regex's "$" also matches before a final "\n"
)


@st.composite
def _path_for(draw: st.DrawFn, target: Target, miss: str | None) -> str:
    parts: list[str] = []
    params = [i for i, s in enumerate(target.path.segments) if isinstance(s, Param)]
    literals = [i for i, s in enumerate(target.path.segments) if not isinstance(s, Param)]
    wrong = draw(st.sampled_from(params)) if miss == "value" and params else None
    changed = draw(st.sampled_from(literals)) if miss in ("case", "literal") and literals else None
    for i, segment in enumerate(target.path.segments):
        if isinstance(segment, Param):
            before, after = segment.before, segment.after
            if i == wrong:
                other = draw(st.sampled_from(CONVERTORS))
                values = BAD_VALUES[segment.conv] + GOOD_VALUES[other]
                if (before or after) and draw(st.booleans()):
                    before, after = after, before
            else:
                values = GOOD_VALUES[segment.conv]
            text = before + draw(st.sampled_from(values)) + after
        else:
            text = segment
            if i == changed:
                text = text.upper() if miss == "case" else draw(st.sampled_from(LITERALS))
        parts.append(_encode(text, draw))
    if miss == "drop" and parts:
        del parts[draw(st.integers(0, len(parts) - 1))]
    elif miss == "add":
        parts.insert(draw(st.integers(0, len(parts))), draw(st.sampled_from(LITERALS)))
    elif miss == "double":
        parts.insert(draw(st.integers(0, len(parts))), "")
    elif miss == "encoded_slash" and parts:
        i = draw(st.integers(0, len(parts) - 1))
        parts[i] = parts[i] + "%2F" + draw(st.sampled_from(LITERALS))
    path = "/" + "/".join(parts)
    slash = target.path.slash != (miss == "slash")
    if slash and not path.endswith("/"):
        path += "/"
    elif not slash and path.endswith("/") and path != "/":
        path = path[:-1]
    return path + "%0A" if miss == "newline" else path


@st.composite
def calls(draw: st.DrawFn, table: Table, targets: Sequence[Target]) -> Call:
    choice = draw(st.integers(0, 9))
    target = None
    if choice == 0 or not targets:
        words = st.sampled_from((*LITERALS, "", "7", "x", "a.txt"))
        path = "/" + "/".join(draw(st.lists(words, max_size=4)))
    else:
        target = draw(st.sampled_from(targets))
        miss = draw(st.sampled_from(NEAR_MISSES)) if choice <= 4 else None
        path = draw(_path_for(target, miss))
    root_path = draw(st.sampled_from(["", "", "", table.root_path, "/api", "/x"]))
    if root_path and not _chance(draw, 4):
        path = root_path + (path if path != "/" or draw(st.booleans()) else "")
    path += draw(st.sampled_from(["", "", "", "?q=1", "?a=%FF&b"]))
    host = "test"
    if target is not None and target.host is not None and not _chance(draw, 4):
        host = target.host
    elif _chance(draw, 8):
        host = "other.test"
    if _chance(draw, 8):
        host = host.upper() + ":8000"
    if target is not None and not _chance(draw, 4):
        method = "WS" if target.websocket else draw(st.sampled_from(target.methods))
    else:
        # Servers pass the method on as the client sent it: "get" is not "GET".
        method = draw(st.sampled_from(("GET", *HTTP_METHODS, "WS", "TRACE", "get", "PROPFIND")))
    auth = not _chance(draw, 3)
    body = b"" if _chance(draw, 2) else draw(st.sampled_from(BODIES))
    return Call(method, path.encode(), host.encode(), auth, root_path, _chance(draw, 3), body)


@dataclass(frozen=True)
class Case:
    """A table, requests before the late items are added, and requests after."""

    table: Table
    before: tuple[Call, ...]
    after: tuple[Call, ...]


@st.composite
def cases(draw: st.DrawFn, min_calls: int = 4, max_calls: int = 24) -> Case:
    table = draw(tables())
    targets = table_targets(table)
    requests = st.lists(calls(table, targets), min_size=min_calls, max_size=max_calls)
    before = tuple(draw(requests))
    after: tuple[Call, ...] = ()
    if table.late:
        after = tuple(draw(requests))
        if _chance(draw, 4):
            before = ()  # late items added before any request
    return Case(table, before, after)
