"""Dependency graphs for the dependency differential, the apps they build, and the runs.

A `Graph` describes one route and everything FastAPI solves for it: dependencies of every
callable kind (async and sync functions, async and sync generators, classes, callable
instances, `functools.partial`), sub-dependencies to depth 4 with shared nodes, `use_cache`,
`scope=`, `Security` scopes, `SecurityScopes`, `Request`, `Response` and `BackgroundTasks`
parameters, query, header, cookie and path parameters of types on which msgspec and Pydantic
agree, one body, and dependencies at every level (route, router, `include_router`,
application). `source(graph)` renders it as Python source: the same text builds the oracle
(FastAPI's `APIRouter`, a Pydantic body) and the app under test (a `MsgspecRouter` of one
twin, a msgspec Struct body), so a failing example prints as a script that reproduces it.

Every callable reports to a `Recorder`: each call with its arguments, whether it ran in a
worker thread and which context-variable value it saw; what each generator saw at its
`yield`; its teardown; background tasks; the exception handler; and every ASGI message
the app sent, interleaved, so teardown before or after the response is visible. What a
callable does besides (raise `HTTPException`, a handled or an unhandled exception, in
set-up or teardown, re-raise, replace or swallow an exception, return a `Response`) is
decided per request by the `Call`'s control, so one app serves many behaviours.

`run_case` sends every call of a case to the oracle and to the app under test on each
twin and raises `Divergence` at the first answer that differs.
"""

from __future__ import annotations

import contextvars
import inspect
import json
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from random import Random
from typing import Any
from urllib.parse import quote

import msgspec
import pydantic
from fastapi import APIRouter, Depends
from fastapi.security import SecurityScopes
from hypothesis import strategies as st
from raw_asgi import body_messages, run_on_one_loop, scope_for, send_messages
from starlette.background import BackgroundTask, BackgroundTasks
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from twins import Twin, outcome

# What the installed FastAPI's `Depends` takes (0.142.2 has `scope`, 0.165 also
# `max_concurrency`).
DEPENDS_OPTIONS = frozenset(inspect.signature(Depends).parameters)
HAS_SCOPE = "scope" in DEPENDS_OPTIONS
HAS_MAX_CONCURRENCY = "max_concurrency" in DEPENDS_OPTIONS

# Callable kinds. "partial", "apartial" and "pagen" are functools.partial objects over a
# sync function, an async function and an async generator.
KINDS = (
    "async",
    "sync",
    "agen",
    "gen",
    "class",
    "instance",
    "ainstance",
    "partial",
    "apartial",
    "pagen",
)
GENERATORS = frozenset({"agen", "gen", "pagen"})
ASYNC_KINDS = frozenset({"async", "ainstance", "apartial", "agen", "pagen"})
SYNC_GENERATORS = frozenset({"gen"})

# Request parameters: (location, key) pairs a graph may declare, and their types.
QUERY_KEYS = ("q0", "q1", "q2")
HEADER_KEYS = ("h0", "h1")
COOKIE_KEYS = ("c0", "c1")
PATH_KEY = "pid"
SCALAR_TYPES = ("int", "str", "bool", "int?", "str?", "bool?")
LIST_TYPES = ("list[str]", "list[int]")
ANNOTATIONS = {
    "int": "int",
    "str": "str",
    "bool": "bool",
    "int?": "int | None",
    "str?": "str | None",
    "bool?": "bool | None",
    "list[str]": "list[str]",
    "list[int]": "list[int]",
}
DEFAULTS = {
    "int": "7",
    "str": "'d'",
    "bool": "False",
    "int?": "None",
    "str?": "None",
    "bool?": "None",
    "list[str]": "[]",
    "list[int]": "[]",
}
FUNCTIONS = {"query": "Query", "header": "Header", "cookie": "Cookie", "path": "Path"}
# Raw values for parameters: ints in FastAPI's lax spellings, booleans, text, blanks.
QUERY_VALUES = ("1", "-2", "+5", "05", "1_0", "x", "true", "off", "yes", "", " 3", "1.5", "é")
INT_ITEMS = ("1", "-2", "+5", "05", "1_0", " 3")
HEADER_VALUES = ("1", "-2", "+5", "x", "true", "off", "", "0")
COOKIE_VALUES = ("1", "-2", "x", "true", "off", "0")
PATH_VALUES = ("5", "-1", "x", "+3")
SECURITY_SCOPES = ("a", "b", "c")
# Special parameters a callable takes, each with its odds (one in n).
SPECIALS = (("response", 3), ("tasks", 5), ("scopes", 5), ("request", 6), ("connection", 10))
STATUSES = (201, 202, 204)
# Bodies: valid, invalid in ways msgspec and Pydantic both refuse, empty, malformed JSON.
BODIES = (
    b'{"name": "n", "qty": 2}',
    b'{"name": "m"}',
    b'{"name": "o", "qty": 1, "extra": true}',
    b'{"qty": 1}',
    b'{"name": 1}',
    b'{"name": "n", "qty": "x"}',
    b"[]",
    b"",
)

# Control actions, per request and per callable.
SETUP_ACTIONS = ("http", "handled", "boom")
TEARDOWN_ACTIONS = ("http_teardown", "handled_teardown", "boom_teardown")
CATCH_ACTIONS = ("replace", "replace_http", "swallow")
ENDPOINT_ACTIONS = ("http", "handled", "boom", "response", "response_with_background")
BACKGROUND_ACTIONS = ("bg_boom", "bg_http")

CV: contextvars.ContextVar[str] = contextvars.ContextVar("dependency_differential", default="-")


class Handled(Exception):
    """Answered by the app's own exception handler (418)."""


class Boom(Exception):
    """Handled by nobody: a 500 from Starlette, and the exception escapes to the server."""


class PydanticItem(pydantic.BaseModel):
    name: str
    qty: int = 0


class StructItem(msgspec.Struct):
    name: str
    qty: int = 0


# --- the model ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ParamArg:
    """A path, query, header or cookie parameter named by its key."""

    where: str
    key: str
    type: str
    required: bool


@dataclass(frozen=True)
class Edge:
    """`Depends(...)` or `Security(...)` on node `target`."""

    target: str
    use_cache: bool = True
    scope: str | None = None
    security: tuple[str, ...] | None = None
    spelling: str = "annotated"  # "annotated", "default" or "shortcut" (class: Depends())
    max_concurrency: int | None = None


@dataclass(frozen=True)
class DepArg:
    edge: Edge


@dataclass(frozen=True)
class SpecialArg:
    """A special parameter: "item" or "other" (body parts), "request", "connection",
    "response", "tasks" or "scopes"."""

    what: str


Arg = ParamArg | DepArg | SpecialArg


@dataclass(frozen=True)
class Node:
    name: str
    kind: str
    args: tuple[Arg, ...] = ()
    # What the callable does with the Response it takes: "header", "cookie", "status",
    # "content-type" (a second content-type header), or nothing.
    response: str | None = None
    status: int = 201
    reads_body: bool = False  # an async callable that takes the Request awaits its body


@dataclass(frozen=True)
class Graph:
    nodes: tuple[Node, ...]  # dependencies, each defined before those that name it
    endpoint: Node  # kind "async" or "sync"
    method: str = "GET"
    path_param: str | None = None  # "int" or "str": the route is /r/{pid}
    status_code: int | None = None  # the route's status_code=
    route_deps: tuple[Edge, ...] = ()
    router_deps: tuple[Edge, ...] = ()
    include_deps: tuple[Edge, ...] = ()
    app_deps: tuple[Edge, ...] = ()
    overrides: tuple[Node, ...] = ()  # replacements for app.dependency_overrides
    overridable: tuple[str, ...] = ()  # node names (and "unrelated") that may be overridden

    def node(self, name: str) -> Node:
        for node in (*self.nodes, *self.overrides, self.endpoint):
            if node.name == name:
                return node
        raise KeyError(name)

    @property
    def has_body(self) -> bool:
        return any(
            isinstance(a, SpecialArg) and a.what in ("item", "other")
            for n in (*self.nodes, self.endpoint)
            for a in n.args
        )


@dataclass(frozen=True)
class Call:
    """One request, and what the callables do in it."""

    path_value: str = "5"
    query: tuple[tuple[str, str], ...] = ()
    headers: tuple[tuple[str, str], ...] = ()
    cookies: tuple[tuple[str, str], ...] = ()
    body: bytes | None = None
    control: tuple[tuple[str, str], ...] = ()
    # None: leave the overrides as they are; otherwise set exactly these (empty: clear).
    overrides: tuple[tuple[str, str], ...] | None = None


@dataclass(frozen=True)
class Case:
    graph: Graph
    calls: tuple[Call, ...]


def edges_of(node: Node) -> list[Edge]:
    return [a.edge for a in node.args if isinstance(a, DepArg)]


def root_edges(graph: Graph) -> list[tuple[str, Edge]]:
    """Every edge from the route's root, with the level that declares it, in FastAPI's
    order: the application's, the inclusion's, the router's, the route's, the endpoint's."""
    levels = (
        ("app", graph.app_deps),
        ("include", graph.include_deps),
        ("router", graph.router_deps),
        ("route", graph.route_deps),
        ("endpoint", tuple(edges_of(graph.endpoint))),
    )
    return [(level, edge) for level, edges in levels for edge in edges]


# --- rendering ----------------------------------------------------------------------------


def _depends_source(edge: Edge, in_annotation: bool) -> str:
    options = []
    if edge.security is not None:
        options.append(f"scopes={list(edge.security)!r}")
    if not edge.use_cache:
        options.append("use_cache=False")
    if edge.scope is not None:
        options.append(f"scope={edge.scope!r}")
    if edge.max_concurrency is not None:
        options.append(f"max_concurrency={edge.max_concurrency}")
    function = "Security" if edge.security is not None else "Depends"
    target = "" if edge.spelling == "shortcut" and in_annotation else edge.target
    return f"{function}({', '.join([target, *options] if target else options)})"


def _arg_name(arg: Arg, position: int) -> str:
    if isinstance(arg, ParamArg):
        return arg.key
    if isinstance(arg, DepArg):
        return f"s{position}"
    return arg.what


def _parameter_source(arg: Arg, position: int) -> str:
    name = _arg_name(arg, position)
    if isinstance(arg, ParamArg):
        annotation = f"Annotated[{ANNOTATIONS[arg.type]}, {FUNCTIONS[arg.where]}()]"
        return f"{name}: {annotation}" + ("" if arg.required else f" = {DEFAULTS[arg.type]}")
    if isinstance(arg, DepArg):
        edge = arg.edge
        if edge.spelling == "default":
            return f"{name}=" + _depends_source(edge, False)
        annotation = edge.target if edge.spelling == "shortcut" else "Any"
        return f"{name}: Annotated[{annotation}, {_depends_source(edge, True)}]"
    return (
        f"{name}: "
        + {
            "item": "Item",
            "other": "Item",
            "request": "Request",
            "connection": "HTTPConnection",
            "response": "Response",
            "tasks": "BackgroundTasks",
            "scopes": "SecurityScopes",
        }[arg.what]
    )


def _signature(node: Node, extra: Sequence[str] = ()) -> str:
    parameters = [*extra]
    declared = [_parameter_source(a, i) for i, a in enumerate(node.args)]
    if declared:
        parameters += ["*", *declared]
    return ", ".join(parameters)


def _effects(node: Node, value: str) -> list[str]:
    """What the callable does with the special objects it takes, after it was entered."""
    lines = []
    names = {a.what for a in node.args if isinstance(a, SpecialArg)}
    if "response" in names and node.response is not None:
        lines.append(
            {
                "header": f'response.headers["x-{node.name}"] = {value}',
                "cookie": f'response.set_cookie("k-{node.name}", {value})',
                "status": f"response.status_code = {node.status}",
                "content-type": 'response.headers.append("content-type", "text/x-dep")',
            }[node.response]
        )
    if "tasks" in names:
        lines.append(f'tasks.add_task(rt.background, "{node.name}")')
    if node.reads_body and "request" in names:
        lines.append(f'rt.note("{node.name}", "body", len(await request.body()))')
    return lines


def _values(node: Node) -> str:
    names = [_arg_name(a, i) for i, a in enumerate(node.args)]
    return "{" + ", ".join(f"{n!r}: {n}" for n in names) + "}"


def _function_source(node: Node, name: str, asynchronous: bool, extra: Sequence[str] = ()) -> str:
    prefix = "async def" if asynchronous else "def"
    lines = [f"{prefix} {name}({_signature(node, extra)}):"]
    lines.append(f'    value = rt.enter("{node.name}", {_values(node)})')
    if asynchronous:
        lines.append("    await asyncio.sleep(0)")
    lines += ["    " + line for line in _effects(node, "value")]
    if node.kind in GENERATORS:
        lines += [
            "    try:",
            "        yield value",
            "    except Exception as exc:",
            f'        if rt.saw("{node.name}", exc):',
            "            raise",
            "    finally:",
            f'        rt.leave("{node.name}")',
        ]
    else:
        lines.append("    return value")
    return "\n".join(lines)


def node_source(node: Node) -> str:
    kind, name = node.kind, node.name
    if kind in ("async", "sync", "agen", "gen"):
        return _function_source(node, name, kind in ("async", "agen"))
    if kind in ("partial", "apartial", "pagen"):
        inner = _function_source(node, f"_{name}", kind != "partial", extra=["bound"])
        return f'{inner}\n\n\n{name} = functools.partial(_{name}, "b")'
    if kind == "class":
        body = [
            f"class {name}:",
            f"    def __init__({_signature(node, ['self'])}):",
            f'        self.tag = rt.enter("{name}", {_values(node)})',
        ]
        body += ["        " + line for line in _effects(node, "self.tag")]
        return "\n".join(body)
    # A callable instance, with a sync or an async __call__.
    asynchronous = kind == "ainstance"
    method = _function_source(node, "__call__", asynchronous, extra=["self"])
    method = "\n".join("    " + line for line in method.splitlines())
    return f"class _{name}:\n{method}\n\n\n{name} = _{name}()"


def _list_source(edges: Sequence[Edge]) -> str:
    return "[" + ", ".join(_depends_source(e, False) for e in edges) + "]"


def source(graph: Graph) -> str:
    """The graph as a script: it expects `rt` (a Recorder), `Router` and `Item` given."""
    parts = [
        "import asyncio, functools",
        "from typing import Annotated, Any",
        "from fastapi import BackgroundTasks, Cookie, Depends, FastAPI, Header, Path, Query,"
        " Request, Response, Security",
        "from starlette.requests import HTTPConnection",
        "from fastapi.security import SecurityScopes",
        "from dependency_graphs import Handled",
    ]
    for node in reversed(graph.nodes):
        parts.append(node_source(node))
    for node in graph.overrides:
        parts.append(node_source(node))
    parts.append("def unrelated():\n    return 'unrelated'")
    endpoint = graph.endpoint
    path = "/r/{pid}" if graph.path_param else "/r"
    asynchronous = endpoint.kind == "async"
    header = "async def" if asynchronous else "def"
    lines = [
        f"app = FastAPI(dependencies={_list_source(graph.app_deps)})",
        "app.add_exception_handler(Handled, rt.handle)",
        f"router = Router(dependencies={_list_source(graph.router_deps)})",
        "",
        "",
        f'@router.{graph.method.lower()}("{path}", status_code={graph.status_code}, '
        f"dependencies={_list_source(graph.route_deps)})",
        f"{header} endpoint({_signature(endpoint)}):",
        f'    value = rt.enter("endpoint", {_values(endpoint)})',
    ]
    if asynchronous:
        lines.append("    await asyncio.sleep(0)")
    lines += ["    " + line for line in _effects(endpoint, "value")]
    lines += [
        f"    return rt.result({_values(endpoint)})",
        "",
        "",
        f'app.include_router(router, prefix="/p", dependencies={_list_source(graph.include_deps)})',
    ]
    parts.append("\n".join(lines))
    return "\n\n\n".join(parts) + "\n"


def _endpoint_path_source(graph: Graph) -> str:
    return "/p/r/{pid}" if graph.path_param else "/p/r"


# --- running ------------------------------------------------------------------------------


def describe(value: Any, recorder: Recorder) -> Any:
    """A comparable picture of an argument a callable received."""
    if isinstance(value, HTTPConnection):
        if recorder.request is None:
            recorder.request = value
        return [type(value).__name__, value is recorder.request]
    if isinstance(value, Response):
        return "response"
    if isinstance(value, BackgroundTasks):
        return "tasks"
    if isinstance(value, SecurityScopes):
        return ["scopes", list(value.scopes), value.scope_str]
    if isinstance(value, pydantic.BaseModel):
        return ["item", value.model_dump()]
    if isinstance(value, msgspec.Struct):
        return ["item", msgspec.structs.asdict(value)]
    tag = getattr(value, "tag", None)
    if tag is not None:
        return tag
    return value


class Recorder:
    """What the callables of one app did, request by request."""

    def __init__(self) -> None:
        self.log: list[Any] = []
        self.control: dict[str, str] = {}
        self.calls: Counter[str] = Counter()
        self.request: HTTPConnection | None = None

    def begin(self, control: dict[str, str]) -> None:
        self.log = []
        self.control = control
        self.calls = Counter()
        self.request = None

    def _raise(self, name: str, stage: str) -> None:
        """Raise what the control asks of `name` at `stage` ("" for set-up or the call,
        "_teardown" after the yield)."""
        action = self.control.get(name)
        if action == f"http{stage}":
            raise_for(name, action)
        if action == f"handled{stage}":
            raise Handled(f"{name} {action}")
        if action == f"boom{stage}":
            raise Boom(f"{name} {action}")

    def enter(self, name: str, values: dict[str, Any]) -> str:
        args = {k: describe(v, self) for k, v in values.items()}
        in_thread = threading.current_thread() is not threading.main_thread()
        self.log.append(("enter", name, args, in_thread, CV.get()))
        CV.set(name)
        self._raise(name, "")
        self.calls[name] += 1
        return f"{name}.{self.calls[name]}"

    def saw(self, name: str, exc: Exception) -> bool:
        """A generator's except clause: True to re-raise what it saw."""
        self.log.append(("saw", name, summary(exc)))
        action = self.control.get(name)
        if action == "replace":
            raise Handled(f"{name} replaced {type(exc).__name__}")
        if action == "replace_http":
            raise_for(name, "replaced")
        return action != "swallow"

    def leave(self, name: str) -> None:
        self.log.append(("leave", name))
        self._raise(name, "_teardown")

    def note(self, name: str, what: str, value: Any) -> None:
        self.log.append(("note", name, what, value))

    def background(self, name: str) -> None:
        self.log.append(("background", name))
        action = self.control.get(f"bg:{name}")
        if action == "bg_boom":
            raise Boom(f"background {name}")
        if action == "bg_http":
            raise_for(name, "background")

    def result(self, values: dict[str, Any]) -> Any:
        content = {k: describe(v, self) for k, v in values.items()}
        action = self.control.get("endpoint")
        if action == "response":
            return JSONResponse(content, status_code=200, headers={"x-own": "1"})
        if action == "response_with_background":
            own = BackgroundTask(self.background, "own")
            return JSONResponse(content, status_code=203, background=own)
        return content

    async def handle(self, request: Request, exc: Exception) -> Response:
        context = exc.__context__
        same = None if self.request is None else request is self.request
        self.log.append(("handler", str(exc), type(context).__name__ if context else None, same))
        return JSONResponse({"handled": str(exc)}, status_code=418)


def summary(exc: BaseException) -> Any:
    """An exception as compared: a validation error by its locations (the messages are
    msgspec's on our side, README "Differences"), an HTTPException by status and detail."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        return [type(exc).__name__, [list(e["loc"]) for e in errors()]]
    status = getattr(exc, "status_code", None)
    if status is not None:
        return [type(exc).__name__, status, getattr(exc, "detail", None)]
    return [type(exc).__name__, str(exc)]


def raise_for(name: str, stage: str) -> None:
    from fastapi import HTTPException

    status = 409 if stage == "replaced" else 403
    raise HTTPException(status, detail=f"{name} {stage}", headers={"x-failed": name})


@dataclass
class Built:
    app: Any
    recorder: Recorder
    callables: dict[str, Any]
    source: str


def router_class_for(twin: Twin | None) -> Callable[..., Any]:
    return APIRouter if twin is None else twin.router_class


def build(graph: Graph, twin: Twin | None, wrap: Callable[[str, Any], Any] | None = None) -> Built:
    """The oracle (`twin=None`: FastAPI's APIRouter, a Pydantic body) or the app under test
    on `twin`. `wrap(name, callable)`, where given, replaces each dependency as it is
    defined: the mutation tests build deliberately wrong apps with it."""
    recorder = Recorder()
    text = source(graph)
    namespace: dict[str, Any] = {
        "rt": recorder,
        "Router": router_class_for(twin),
        "Item": PydanticItem if twin is None else StructItem,
    }
    if wrap is None:
        exec(compile(text, f"<graph {'oracle' if twin is None else twin.name}>", "exec"), namespace)
    else:
        # Definition by definition, each dependency wrapped before anything names it.
        wrapped: set[str] = set()
        for chunk in text.split("\n\n\n"):
            exec(compile(chunk, "<mutant>", "exec"), namespace)
            for node in (*graph.nodes, *graph.overrides):
                if node.name in namespace and node.name not in wrapped:
                    namespace[node.name] = wrap(node.name, namespace[node.name])
                    wrapped.add(node.name)
    callables = {
        name: namespace[name]
        for name in [n.name for n in (*graph.nodes, *graph.overrides)] + ["unrelated"]
    }
    return Built(namespace["app"], recorder, callables, text)


@dataclass(frozen=True)
class Outcome:
    messages: tuple[Any, ...]
    escaped: Any
    log: tuple[Any, ...]
    received: int | None

    def show(self) -> str:
        lines = [f"  escaped: {self.escaped}", f"  receive calls: {self.received}"]
        lines += [f"  sent {m}" for m in self.messages]
        lines += [f"  log {entry}" for entry in self.log]
        return "\n".join(lines)


def target_of(graph: Graph, call: Call) -> bytes:
    path = _endpoint_path_source(graph).replace("{pid}", quote(call.path_value, safe=""))
    query = "&".join(f"{quote(k)}={quote(v, safe='')}" for k, v in call.query)
    return (path + ("?" + query if query else "")).encode()


def headers_of(graph: Graph, call: Call) -> list[tuple[bytes, bytes]]:
    headers = [(k.encode(), v.encode("latin-1")) for k, v in call.headers]
    if call.cookies:
        cookie = "; ".join(f"{k}={v}" for k, v in call.cookies)
        headers.append((b"cookie", cookie.encode("latin-1")))
    if call.body is not None:
        headers.append((b"content-type", b"application/json"))
    return headers


def normalise_message(message: dict[str, Any], status: int | None) -> Any:
    """A message as compared. A 422's body is compared by each error's location (and its
    type where it is FastAPI's own "missing"): parameter and body errors carry msgspec's
    messages and types on our side (README "Differences"), so its length differs too."""
    message = dict(message)
    if status == 422 and message["type"] == "http.response.body" and message.get("body"):
        detail = json.loads(message["body"])["detail"]
        message["body"] = [(e["loc"], e["type"] if e["type"] == "missing" else "-") for e in detail]
    if status == 422 and message["type"] == "http.response.start":
        message["headers"] = [h for h in message["headers"] if h[0] != b"content-length"]
    if "headers" in message:
        message["headers"] = [tuple(h) for h in message["headers"]]
    return sorted(message.items())


def apply_overrides(built: Built, overrides: tuple[tuple[str, str], ...] | None) -> None:
    if overrides is None:
        return
    table = built.app.dependency_overrides
    table.clear()
    for key, replacement in overrides:
        table[built.callables[key]] = built.callables[replacement]


async def exchange(built: Built, graph: Graph, call: Call) -> Outcome:
    """Send `call` to the app; everything observable about the answer."""
    apply_overrides(built, call.overrides)
    recorder = built.recorder
    control = dict(call.control)
    recorder.begin(control)
    CV.set("-")
    sent: list[dict[str, Any]] = []
    app = built.app

    async def tee(scope: Any, receive: Any, send: Any) -> None:
        async def recorded_send(message: dict[str, Any]) -> None:
            sent.append(message)
            recorder.log.append(("sent", message["type"], message.get("status")))
            await send(message)

        await app(scope, receive, recorded_send)

    scope = scope_for(graph.method, target_of(graph, call), headers_of(graph, call))
    body = call.body if call.body is not None else b""
    result = await outcome(send_messages(tee, scope, body_messages([body])))
    status = next((m["status"] for m in sent if m["type"] == "http.response.start"), None)
    escaped = None
    if result[0] == "raised":
        kind, message = result[1], result[2]
        # FastAPI's message names a local variable of its own handler.
        escaped = (kind,) if kind == "UnboundLocalError" else (kind, message)
    return Outcome(
        tuple(normalise_message(m, status) for m in sent),
        escaped,
        tuple(recorder.log),
        result[1].received if result[0] == "reply" else None,
    )


class Divergence(AssertionError):
    pass


def features(outcome: Outcome, call: Call, graph: Graph | None = None) -> set[str]:
    """What an answer of the oracle exercised, for the check that the run was not vacuous;
    given the graph, also what the callables were told to do and did (`control_features`)."""
    found = {f"status {m[2]}" for m in outcome.log if m[0] == "sent" and m[2] is not None}
    if outcome.escaped is not None:
        found.add(f"escaped {outcome.escaped[0]}")
    body_sent = False
    for entry in outcome.log:
        if entry[0] == "sent" and entry[1] == "http.response.body":
            body_sent = True
        elif entry[0] == "saw":
            found.add(f"generator saw {entry[2][0]}")
        elif entry[0] == "leave":
            found.add(
                "teardown after the response" if body_sent else "teardown before the response"
            )
        elif entry[0] == "enter" and entry[3]:
            found.add("ran in a thread")
        elif entry[0] in ("background", "handler", "note"):
            found.add(entry[0])
    if graph is not None:
        found |= control_features(outcome, call, graph)
    if call.overrides:
        found.add("overrides set")
    elif call.overrides == ():
        found.add("overrides cleared")
    return found


def control_features(outcome: Outcome, call: Call, graph: Graph) -> set[str]:
    """The control actions that took effect in an answer: each raise at the step that was
    told to raise (set-up, teardown, endpoint, background task), and what each generator
    did with the exception it saw (re-raised, replaced, swallowed), the endpoint's too."""
    control = dict(call.control)
    found = set()
    endpoint_raised = False
    for entry in outcome.log:
        name = entry[1] if len(entry) > 1 else None
        action = control.get(name) if isinstance(name, str) else None
        if entry[0] == "enter" and action in SETUP_ACTIONS:
            if name == "endpoint":
                endpoint_raised = True
                where = "the endpoint"
            else:
                generator = graph.node(name).kind in GENERATORS
                where = "a generator's set-up" if generator else "a dependency"
            found.add(f"{action} in {where}")
            if where == "a generator's set-up":
                found.add("a generator raised in its set-up")
        elif entry[0] == "leave" and action in TEARDOWN_ACTIONS:
            found.add(f"{action.removesuffix('_teardown')} in a generator's teardown")
            found.add("a generator raised in its teardown")
        elif entry[0] == "saw":
            done = {"replace": "replaced", "replace_http": "replaced", "swallow": "swallowed"}
            what = f"generator {done.get(action or '', 're-raised')}"
            found.add(what + (" after the endpoint raised" if endpoint_raised else ""))
            found.add(what)
            if action == "replace_http":
                found.add("http replacing an exception")
        elif entry[0] == "background" and control.get(f"bg:{name}") in BACKGROUND_ACTIONS:
            found.add(f"{control[f'bg:{name}']} in a background task")
    return found


def describe_case(graph: Graph, calls: Sequence[Call], index: int, twin: str) -> str:
    return "\n".join(
        [
            f"dependency solving differs on the {twin} twin, at call {index}:",
            source(graph),
            "calls:",
            *[f"  {i}: {c}" for i, c in enumerate(calls)],
        ]
    )


# Known differences of the code under test, each compared as FastAPI's answer would be
# transformed by it; every one is pinned by a strict xfail in the differential test, which
# fails once the difference is gone, so that the equalisation is removed with it.
Equalise = Callable[[Outcome, Outcome], Outcome]


def _body_last(locs: list[Any], loc_of: Callable[[Any], Any]) -> list[Any]:
    return [e for e in locs if loc_of(e)[0] != "body"] + [e for e in locs if loc_of(e)[0] == "body"]


def body_errors_last(want: Outcome, got: Outcome) -> Outcome:
    """README "Limitations": our 422 lists the body's errors after every parameter error,
    where FastAPI lists each dependency's errors at its turn."""

    def message(m: Any) -> Any:
        items = dict(m)
        if items["type"] == "http.response.body" and isinstance(items.get("body"), list):
            items["body"] = _body_last(items["body"], lambda e: e[0])
        return sorted(items.items())

    def entry(e: Any) -> Any:
        if e[0] == "saw" and e[2][0] == "RequestValidationError":
            return (e[0], e[1], [e[2][0], _body_last(e[2][1], lambda loc: loc)])
        return e

    return replace(
        want,
        messages=tuple(message(m) for m in want.messages),
        log=tuple(entry(e) for e in want.log),
    )


def run_case(
    case: Case,
    twins: Sequence[Twin | None],
    wrap: Callable[[str, Any], Any] | None = None,
    mutate: Callable[[Graph], Graph] | None = None,
    spoil: Callable[[Built], None] | None = None,
    equalise: Sequence[Equalise] = (),
    seen: Counter[str] | None = None,
) -> int:
    """Compare every call of `case` between the oracle and each twin (None: the oracle
    again); how many were compared. `seen` counts the `features` of the oracle's answers.

    `mutate` (a graph transformation), `wrap` (see `build`) and `spoil` (given the built
    app) make the app under test a deliberately wrong one, for the mutation tests.
    """

    async def run() -> int:
        oracle = build(case.graph, None)
        expected = [await exchange(oracle, case.graph, call) for call in case.calls]
        if seen is not None:
            for answer, call in zip(expected, case.calls, strict=True):
                seen.update(features(answer, call, case.graph))
        compared = 0
        for twin in twins:
            graph = mutate(case.graph) if mutate is not None else case.graph
            candidate = build(graph, twin, wrap)
            if spoil is not None:
                spoil(candidate)
            name = "oracle" if twin is None else twin.name
            for index, call in enumerate(case.calls):
                got = await exchange(candidate, case.graph, call)
                want = expected[index]
                for rule in equalise:
                    want = rule(want, got)
                if got != want:
                    raise Divergence(
                        describe_case(case.graph, case.calls, index, name)
                        + f"\nFastAPI:\n{want.show()}\nours:\n{got.show()}"
                    )
                compared += 1
        return compared

    return int(run_on_one_loop(run()))


# --- strategies ---------------------------------------------------------------------------
# Generation draws from one hypothesis-controlled `Random` (`st.randoms`): each choice is
# a primitive draw, several times cheaper than a strategy draw, and still shrinks.


def _chance(r: Random, one_in: int) -> bool:
    return r.randrange(one_in) == 0


def _edge(
    r: Random, target: Node, force_function: bool, in_override: bool, at_root: bool = False
) -> Edge:
    scope = None
    if HAS_SCOPE:
        if force_function:
            scope = "function"
        elif _chance(r, 3):
            scope = "request" if in_override else r.choice(("function", "request"))
    security = None
    if scope is None and _chance(r, 4):
        # `Security` takes neither scope= nor max_concurrency=.
        security = tuple(r.choice(SECURITY_SCOPES) for _ in range(r.randint(0, 2)))
    spellings = ("annotated", "default") + (("shortcut",) if target.kind == "class" else ())
    concurrency = None
    # Only on the root's own edges, which are solved once per request: a Depends() object
    # solved twice in one request (below a node reached twice, uncached or under other
    # Security scopes) waits for itself when it holds a generator (FastAPI hangs too).
    if HAS_MAX_CONCURRENCY and at_root and security is None and _chance(r, 6):
        concurrency = r.choice((1, 2))
    return Edge(
        target=target.name,
        use_cache=not _chance(r, 4),
        scope=scope,
        security=security,
        spelling=r.choice(spellings),
        max_concurrency=concurrency,
    )


def _key_types(r: Random) -> dict[str, str]:
    """The type of each parameter key, the same wherever the graph declares it."""
    types = {key: r.choice(SCALAR_TYPES + LIST_TYPES) for key in QUERY_KEYS}
    for key in HEADER_KEYS + COOKIE_KEYS:
        types[key] = r.choice(SCALAR_TYPES)
    return types


def _param(
    r: Random, taken: set[str], path_param: str | None, types: dict[str, str]
) -> ParamArg | None:
    where = r.choice(("query", "query", "header", "cookie", "path"))
    if where == "path":
        if path_param is None or PATH_KEY in taken:
            return None
        return ParamArg("path", PATH_KEY, path_param, True)
    keys = {"query": QUERY_KEYS, "header": HEADER_KEYS, "cookie": COOKIE_KEYS}[where]
    key = r.choice(keys)
    if key in taken:
        return None
    kind = types[key]
    return ParamArg(where, key, kind, kind[-1] != "?" and _chance(r, 3))


@dataclass
class _Drafting:
    """What the graph being drawn has so far."""

    path_param: str | None
    types: dict[str, str]
    # Generators that depend on a scope="function" dependency: FastAPI refuses them at
    # registration unless they are function-scoped themselves, so every edge to one is.
    function_scoped: set[str] = field(default_factory=set)


def _node(
    r: Random,
    name: str,
    kind: str,
    targets: Sequence[Node],
    drafting: _Drafting,
    in_override: bool = False,
) -> Node:
    """A node with its own parameters, sub-dependencies among `targets` and specials."""
    args: list[Arg] = []
    taken: set[str] = set()
    generator = kind in GENERATORS
    for _ in range(r.randint(0, 4)):
        what = r.choice(("param", "dep", "dep"))
        if what == "param":
            param = _param(r, taken, drafting.path_param, drafting.types)
            if param is not None:
                taken.add(param.key)
                args.append(param)
        elif what == "dep" and targets:
            target = r.choice(targets)
            force = target.name in drafting.function_scoped
            edge = _edge(r, target, force, in_override and generator)
            if generator and edge.scope == "function":
                drafting.function_scoped.add(name)
            args.append(DepArg(edge))
    for special, one_in in SPECIALS:
        if _chance(r, one_in):
            args.insert(r.randint(0, len(args)), SpecialArg(special))
    response = r.choice(("header", "cookie", "status", "status", "content-type"))
    reads_body = kind in ASYNC_KINDS and _chance(r, 2)
    return Node(name, kind, tuple(args), response, r.choice(STATUSES), reads_body)


def _height(nodes: dict[str, Node], name: str) -> int:
    return 1 + max((_height(nodes, e.target) for e in edges_of(nodes[name])), default=0)


def reach(graph: Graph, name: str) -> set[str]:
    """`name` and every node below it."""
    seen = {name}
    for edge in edges_of(graph.node(name)):
        seen |= reach(graph, edge.target)
    return seen


def paths_to(graph: Graph, levels: Sequence[str] | None = None) -> Counter[str]:
    """How many times FastAPI solves each node per request (once per path from the root),
    counting only the root edges of `levels` when given."""
    counts: Counter[str] = Counter()

    def visit(name: str) -> None:
        counts[name] += 1
        for edge in edges_of(graph.node(name)):
            visit(edge.target)

    for level, edge in root_edges(graph):
        if levels is None or level in levels:
            visit(edge.target)
    return counts


def make_graph(r: Random, max_nodes: int = 6) -> Graph:
    count = r.randint(1, max_nodes)
    drafting = _Drafting(r.choice((None, None, "int", "str")), _key_types(r))
    nodes: dict[str, Node] = {}
    for i in reversed(range(count)):
        name = f"d{i}"
        # Depth at most 4 below the endpoint: a node's height (itself included) is <= 4.
        targets = [n for n in nodes.values() if _height(nodes, n.name) <= 3]
        nodes[name] = _node(r, name, r.choice(KINDS), targets, drafting)
    ordered = tuple(nodes[f"d{i}"] for i in range(count))

    def level_edges(max_size: int, min_size: int = 0) -> tuple[Edge, ...]:
        picked = [r.choice(ordered) for _ in range(r.randint(min_size, max_size))]
        return tuple(
            _edge(r, n, n.name in drafting.function_scoped, False, at_root=True) for n in picked
        )

    endpoint = _node(r, "endpoint", r.choice(("async", "sync")), ordered, drafting)
    extra = tuple(DepArg(e) for e in level_edges(2, min_size=1))
    graph = Graph(
        nodes=ordered,
        endpoint=replace(endpoint, args=endpoint.args + extra),
        method=r.choice(("GET", "POST")),
        path_param=drafting.path_param,
        status_code=r.choice((None, None, 200, 202)),
        route_deps=level_edges(2),
        router_deps=level_edges(2),
        include_deps=level_edges(1),
        app_deps=level_edges(1),
    )
    graph = _add_body(r, graph)
    return _add_overrides(r, graph, drafting)


def _add_body(r: Random, graph: Graph) -> Graph:
    """One `item: Item` body parameter, on the endpoint or on a dependency (solved once or
    several times per request: its errors repeat) that no application or inclusion-level
    dependency reaches (docs: msgspec types there are refused)."""
    if _chance(r, 3):
        return graph
    outer = paths_to(graph, ("app", "include"))
    holders = ["endpoint"] + [n.name for n in graph.nodes if not outer[n.name]]
    node = graph.node(r.choice(holders))
    position = r.randint(0, len(node.args))
    new = replace(node, args=(*node.args[:position], SpecialArg("item"), *node.args[position:]))
    if node.name == "endpoint":
        return replace(graph, endpoint=new, method="POST")
    nodes = tuple(new if n.name == node.name else n for n in graph.nodes)
    return replace(graph, nodes=nodes, method="POST")


def _body_holders(graph: Graph) -> set[str]:
    return {
        n.name
        for n in graph.nodes
        if any(isinstance(a, SpecialArg) and a.what in ("item", "other") for a in n.args)
    }


def _add_overrides(r: Random, graph: Graph, drafting: _Drafting) -> Graph:
    """Replacement callables and the nodes they may replace (the body's taker and those
    above it too, each also by itself), and nothing an override reaches (so that no set
    of overrides makes a cycle). Overrides take no body and reach none (docs: an override
    that takes a msgspec type, itself or below, is not supported)."""
    if _chance(r, 2):
        return graph
    holders = _body_holders(graph)
    above_body = {n.name for n in graph.nodes if reach(graph, n.name) & holders}
    keys = [n.name for n in graph.nodes]
    if not keys:
        return graph
    overridable = r.sample(keys, min(len(keys), r.randint(1, 3)))
    excluded = set(overridable) | above_body | drafting.function_scoped
    safe = [n for n in graph.nodes if not (reach(graph, n.name) & excluded)]
    overrides = tuple(
        _node(r, f"o{i}", r.choice(KINDS), safe, drafting, in_override=True)
        for i in range(r.randint(1, 2))
    )
    return replace(graph, overrides=overrides, overridable=(*overridable, "unrelated"))


def _declared(graph: Graph) -> dict[tuple[str, str], set[str]]:
    declared: dict[tuple[str, str], set[str]] = {}
    for node in (*graph.nodes, *graph.overrides, graph.endpoint):
        for arg in node.args:
            if isinstance(arg, ParamArg):
                declared.setdefault((arg.where, arg.key), set()).add(arg.type)
    return declared


def _takes_tasks(node: Node) -> bool:
    return any(isinstance(a, SpecialArg) and a.what == "tasks" for a in node.args)


def _actions_for(graph: Graph) -> list[tuple[str, str]]:
    actions: list[tuple[str, str]] = [("endpoint", a) for a in ENDPOINT_ACTIONS]
    for node in (*graph.nodes, *graph.overrides):
        actions += [(node.name, a) for a in SETUP_ACTIONS]
        if node.kind in GENERATORS:
            actions += [(node.name, a) for a in TEARDOWN_ACTIONS + CATCH_ACTIONS]
    for node in (*graph.nodes, *graph.overrides, graph.endpoint):
        if _takes_tasks(node):
            actions += [(f"bg:{node.name}", a) for a in BACKGROUND_ACTIONS]
    return actions


def make_call(r: Random, graph: Graph) -> Call:
    query: list[tuple[str, str]] = []
    headers: list[tuple[str, str]] = []
    cookies: list[tuple[str, str]] = []
    for (where, key), types in sorted(_declared(graph).items()):
        if where == "path" or _chance(r, 4):
            continue
        if where == "query":
            # A list[int] gets a valid item most often, so that its other items count.
            pool = INT_ITEMS + QUERY_VALUES if types == {"list[int]"} else QUERY_VALUES
            query += [(key, r.choice(pool)) for _ in range(r.randint(1, 3))]
        elif where == "header":
            headers.append((key, r.choice(HEADER_VALUES)))
        else:
            cookies.append((key, r.choice(COOKIE_VALUES)))
    if _chance(r, 2):
        r.shuffle(query)
    body = None
    if graph.method == "POST":
        body = b""
        if graph.has_body:
            body = BODIES[0] if _chance(r, 2) else r.choice(BODIES)
    actions = _actions_for(graph)
    control: dict[str, str] = {}
    generators = [n.name for n in (*graph.nodes, *graph.overrides) if n.kind in GENERATORS]
    if generators and _chance(r, 3):
        # A generator that handles or fails in its teardown, often after an error below it.
        control[r.choice(generators)] = r.choice(CATCH_ACTIONS + TEARDOWN_ACTIONS)
        if _chance(r, 2):
            control["endpoint"] = r.choice(SETUP_ACTIONS)
    if generators and _chance(r, 6):
        # A generator that fails in its set-up: those above it see the exception.
        control.setdefault(r.choice(generators), r.choice(SETUP_ACTIONS))
    takers = [n.name for n in (*graph.nodes, *graph.overrides, graph.endpoint) if _takes_tasks(n)]
    if takers and _chance(r, 3):
        control.setdefault(f"bg:{r.choice(takers)}", r.choice(BACKGROUND_ACTIONS))
    for _ in range(r.choice((0, 0, 1, 1, 2))):
        name, action = r.choice(actions)
        control.setdefault(name, action)
    overrides = None
    if graph.overrides and _chance(r, 2) and _chance(r, 2):
        overrides = ()
    elif graph.overrides and _chance(r, 3):
        replacements = [n.name for n in graph.overrides]
        keys = r.sample(graph.overridable, r.randint(0, min(2, len(graph.overridable))))
        overrides = tuple(
            (key, r.choice(replacements + ([key] if key != "unrelated" else []))) for key in keys
        )
    return Call(
        path_value=r.choice(PATH_VALUES),
        query=tuple(query),
        headers=tuple(headers),
        cookies=tuple(cookies),
        body=body,
        control=tuple(sorted(control.items())),
        overrides=overrides,
    )


@st.composite
def cases(draw: st.DrawFn, min_calls: int = 1, max_calls: int = 8, max_nodes: int = 6) -> Case:
    r = draw(st.randoms(use_true_random=False))
    graph = make_graph(r, max_nodes)
    count = r.randint(min_calls, max_calls)
    return Case(graph, tuple(make_call(r, graph) for _ in range(count)))
