"""`install_dispatch` changes nothing a user or a server can see, whatever the application
does around its routes.

Each test builds one application (tests/entry_apps.py) twice from the same builder: once
as FastAPI serves it (its middleware stack, its routing) and once with the twin's
`install_dispatch(app)`, which replaces the route loop and, where it can, FastAPI's
default application layers (ServerErrorMiddleware, the exception telemetry, the
application body limit, ExceptionMiddleware, AsyncExitStackMiddleware) with one entry.
The same calls go to both, through a raw ASGI server, and everything is compared: every
message sent (status, headers, body, websocket frames), what escaped
`await app(scope, receive, send)` (type and message), what the endpoints, dependencies,
handlers and middleware did, the log records of the server's and the frameworks'
loggers, the lifespan messages, and, with telemetry on, FastAPI's spans, metrics and log
records. A debug traceback is compared by the user's frames and the exception lines
(the frames in between are library code, which is what changes).

The scenarios cover each kind of exception at each place it can be raised, under debug,
telemetry and server-error handlers; bodies over the application's limit; clients that
leave mid-body and mid-stream; streaming responses; websockets; mounted applications
with root_path, url_for, request.app and app.state; and each kind of user middleware.
Routes are on the twin's MsgspecRouter, a few on the application itself; every test runs
on both twins.

`entry_state(app)` reads what `install_dispatch` reports about the entry once the stack
is built.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from entry_apps import (
    KINDS,
    MIDDLEWARE,
    Built,
    Call,
    Config,
    Http,
    Observed,
    Side,
    WebSocketSession,
    both_sides,
    build_app,
    serve,
)
from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from twins import Twin

from msgspec_fastapi.router import MsgspecRoute

JSON = ((b"content-type", b"application/json"),)


@dataclass(frozen=True)
class Scenario:
    """Calls to make on an application built with `config` (inside its lifespan when
    `lifespan`), and how the first call ends on FastAPI's side: its status (or first
    websocket message type), then " raised <type>" when an exception escaped. The latter
    keeps each scenario honest: it tests what its name says."""

    calls: tuple[Call, ...]
    first: str
    config: Config = field(default_factory=Config)
    lifespan: bool = False
    # On applications that served nothing yet (else on the ones every test with this
    # config and twin shares, as a server's application serves many requests).
    fresh: bool = False


def outcome(call: tuple[Any, ...]) -> str:
    """The first call's summary, as `Scenario.first` states it."""
    kind, *_, messages, raised = call
    if kind == "http":
        starts = [m["status"] for m in messages if m["type"] == "http.response.start"]
        summary = str(starts[0]) if starts else "no response"
    else:
        summary = messages[0]["type"] if messages else "nothing sent"
    return summary + (f" raised {raised[0]}" if raised else "")


def built_twice(twin: Twin, config: Config) -> dict[Side, Built]:
    """The application as FastAPI serves it, and with the twin's `install_dispatch`."""
    return both_sides(lambda: build_app(twin.router_class, config), twin.install_dispatch)


# Building the two applications costs far more than a request: tests share them.
shared_applications = functools.cache(built_twice)


# What `run_both` compares, by `Observed` field.
COMPARED = ("calls", "lifespan", "events", "logs", "telemetry")


def run_both(
    twin: Twin,
    scenario: Scenario,
    caplog: pytest.LogCaptureFixture,
    sides: dict[Side, Built] | None = None,
) -> Observed:
    """Serve the scenario on both applications (`sides`, by default the scenario's) and
    assert they did the same; returns what FastAPI's side did."""
    scenario.config.skip_unsupported()
    if sides is None:
        sides = (
            built_twice(twin, scenario.config)
            if scenario.fresh
            else shared_applications(twin, scenario.config)
        )
    observed = {
        side: serve(built, scenario.calls, caplog, scenario.lifespan)
        for side, built in sides.items()
    }
    fastapi, installed = observed["fastapi"], observed["install_dispatch"]
    for name in COMPARED:
        assert getattr(installed, name) == getattr(fastapi, name), f"{name} differ"
    assert outcome(fastapi.calls[0]) == scenario.first
    return fastapi


# --- exceptions ----------------------------------------------------------------------------

# Where an exception is raised: the request's path for it, and the middleware the
# application needs for it. {kind} is one of entry_apps.KINDS.
SITES: dict[str, tuple[str, str | None]] = {
    "async endpoint": ("/raise/{kind}", None),
    "sync endpoint": ("/raise-sync/{kind}", None),
    "endpoint on the delegated tier": ("/raise-delegated/{kind}", None),
    "plain FastAPI route": ("/plain/raise/{kind}", None),
    "dependency before yield": ("/dependency-before-yield/{kind}", None),
    "dependency after yield": ("/dependency-after-yield/{kind}", None),
    "background task": ("/background/{kind}", None),
    "streaming response, mid-stream": ("/stream/{kind}", None),
    "mounted FastAPI app": ("/sub/raise/{kind}", None),
    "pure ASGI middleware": ("/middleware-raise/{kind}", "asgi"),
    "BaseHTTPMiddleware": ("/middleware-raise/{kind}", "base-http"),
    "http middleware, after the response": ("/middleware-raise/{kind}", "http-decorator"),
}

# How FastAPI answers each kind raised before the response starts, where the root
# application's handlers see it (entry_apps' handlers: 409 and 400 for the handled ones).
STATUS = {
    "http-exception": "418",
    "not-found": "404",
    "validation-error": "422",
    "handled-by-class": "409",
    "handled-by-parent": "400",
    "unhandled": "500 raised Unhandled",
}
AFTER_THE_RESPONSE = ("dependency after yield", "background task", "streaming response, mid-stream")
IN_MIDDLEWARE = (
    "pure ASGI middleware",
    "BaseHTTPMiddleware",
    "http middleware, after the response",
)
EXCEPTION_TYPES = {
    "http-exception": "HTTPException",
    "not-found": "HTTPException",
    "validation-error": "RequestValidationError",
    "handled-by-class": "Teapot",
    "handled-by-parent": "Sprout",
    "unhandled": "Unhandled",
}


def expected_first(site: str, kind: str, config: Config) -> str:
    """FastAPI's answer to `kind` raised at `site`.

    After the response started, a handled exception can only fail the request (Starlette
    raises RuntimeError) and any other escapes with the 200 already sent. In user
    middleware no exception handler is reached: ServerErrorMiddleware answers (its
    Exception handler 503) and the exception escapes. A mounted FastAPI app has its own
    (default) handlers: its ServerErrorMiddleware starts a 500 for an exception it has no
    handler for, and the root app's handler then finds the response started.
    """
    raised = EXCEPTION_TYPES[kind]
    if site in AFTER_THE_RESPONSE:
        return "200 raised " + (raised if kind == "unhandled" else "RuntimeError")
    if site in IN_MIDDLEWARE:
        status = "503" if config.server_error_handler == "Exception" else "500"
        return f"{status} raised {raised}"
    if site == "mounted FastAPI app" and kind.startswith("handled"):
        return "500 raised RuntimeError"
    if kind == "unhandled" and config.server_error_handler == "Exception":
        return "500 raised Unhandled" if site == "mounted FastAPI app" else "503 raised Unhandled"
    return STATUS[kind]


def exception_scenario(site: str, kind: str, config: Config) -> Scenario:
    path, middleware = SITES[site]
    if middleware:
        config = replace(config, middleware=middleware)
    return Scenario(
        (Http("GET", path.format(kind=kind)),), expected_first(site, kind, config), config
    )


def exception_cases() -> list[Any]:
    """Every kind at every site with the defaults; the unhandled exception at every site
    under debug, telemetry, each server-error handler and an own middleware stack; every
    kind at the async endpoint under debug and telemetry."""
    cases = []
    for site in SITES:
        for kind in KINDS:
            cases.append((site, kind, Config()))
        for config in (
            Config(debug=True),
            Config(telemetry=True),
            Config(server_error_handler="500"),
            Config(server_error_handler="Exception"),
            Config(own_stack=True),
        ):
            cases.append((site, "unhandled", config))
    for kind in KINDS:
        if kind != "unhandled":
            cases.append(("async endpoint", kind, Config(debug=True)))
            cases.append(("async endpoint", kind, Config(telemetry=True)))
    return [
        pytest.param(site, kind, config, id=f"{kind} in {site} ({config.label()})")
        for site, kind, config in cases
    ]


def test_the_endpoints_run_on_the_tiers_their_sites_name(twin: Twin) -> None:
    tiers = {
        route.path: route.tier
        for route in build_app(twin.router_class, Config()).router.routes
        if isinstance(route, MsgspecRoute)
    }
    assert tiers["/raise/{kind}"] == "direct"
    assert tiers["/raise-sync/{kind}"] == "direct"
    assert tiers["/raise-delegated/{kind}"] == "delegated"


@pytest.mark.parametrize(("site", "kind", "config"), exception_cases())
def test_an_exception_reaches_user_and_server_alike(
    twin: Twin, caplog: pytest.LogCaptureFixture, site: str, kind: str, config: Config
) -> None:
    run_both(twin, exception_scenario(site, kind, config), caplog)


# --- requests, bodies, streams, websockets, mounts, lifespan -----------------------------

ITEM = b'{"name": "lamp", "price": 2}'  # under entry_apps.BODY_LIMIT
OVER = b'{"name": "a lamp far too long for the limit", "price": 2}'
LIMITED = Config(body_limit=True)


def declared(body: bytes) -> tuple[tuple[bytes, bytes], ...]:
    return (*JSON, (b"content-length", str(len(body)).encode()))


SCENARIOS: dict[str, Scenario] = {
    "GET on a MsgspecRouter route": Scenario((Http("GET", "/items/3?q=x"),), "200"),
    "POST a body to a MsgspecRouter route": Scenario(
        (Http("POST", "/items", declared(ITEM), (ITEM,)),), "200"
    ),
    "an invalid body is a 422": Scenario((Http("POST", "/items", JSON, (b'{"name": 1}',)),), "422"),
    "GET on a plain FastAPI route": Scenario((Http("GET", "/plain/items/5"),), "200"),
    "an unknown path is a 404": Scenario((Http("GET", "/nowhere"),), "404"),
    "a wrong method is a 405": Scenario((Http("DELETE", "/items/3"),), "405"),
    "a trailing slash is redirected": Scenario((Http("GET", "/items/3/"),), "307"),
    # FastAPI routes, unlike Starlette's, do not answer HEAD for GET.
    "HEAD on a GET route": Scenario((Http("HEAD", "/items/3"),), "405"),
    "OPTIONS without CORS middleware": Scenario((Http("OPTIONS", "/items/3"),), "405"),
    "a trailing slash is redirected, with its query string": Scenario(
        (Http("GET", "/items/3/?q=x"),), "307"
    ),
    "a trailing slash is redirected, under a root_path": Scenario(
        (Http("GET", "/items/3/", root_path="/api"),), "307"
    ),
    "a percent-encoded path": Scenario((Http("GET", "/items/%33"),), "200"),
    "an HTTP request to a websocket route": Scenario((Http("GET", "/ws/echo"),), "404"),
    "a websocket to an HTTP route": Scenario((WebSocketSession("/items/3"),), "websocket.close"),
    "a mount's path without its slash": Scenario((Http("GET", "/sub"),), "307"),
    "a body in many messages": Scenario(
        (Http("POST", "/items", JSON, (ITEM[:5], ITEM[5:12], b"", ITEM[12:])),), "200"
    ),
    # The application's body limit.
    "a body under the limit": Scenario(
        (Http("POST", "/items", declared(ITEM), (ITEM,)),), "200", LIMITED
    ),
    "a declared Content-Length over the limit": Scenario(
        (Http("POST", "/items", declared(OVER), (OVER,)),), "413", LIMITED
    ),
    "a chunked body over the limit": Scenario(
        (Http("POST", "/items", JSON, (OVER[:20], OVER[20:40], OVER[40:])),), "413", LIMITED
    ),
    "a declared Content-Length over the limit, to a route that ignores the body": Scenario(
        (Http("POST", "/ignores-body", declared(OVER), (OVER,)),), "413", LIMITED
    ),
    "a chunked body over the limit, to a route that ignores the body": Scenario(
        # Nothing reads the body, so nothing counts it.
        (Http("POST", "/ignores-body", JSON, (OVER[:20], OVER[20:])),),
        "200",
        LIMITED,
    ),
    # Only the application's own limit guards what no route limits.
    "a body over the limit, to a mounted Starlette app": Scenario(
        (Http("POST", "/starlette/echo", JSON, (OVER[:20], OVER[20:])),), "413", LIMITED
    ),
    "a declared Content-Length over the limit, to an unknown path": Scenario(
        (Http("POST", "/nowhere", declared(OVER), (OVER,)),), "413", LIMITED
    ),
    # A mounted FastAPI app shares the root's byte counter and answers the 413 itself.
    "a declared Content-Length over the limit, to a mounted FastAPI app": Scenario(
        (Http("POST", "/sub/items", declared(OVER), (OVER,)),), "413", LIMITED
    ),
    "a chunked body over the limit, to a mounted FastAPI app": Scenario(
        (Http("POST", "/sub/items", JSON, (OVER[:20], OVER[20:])),), "413", LIMITED
    ),
    "a body under the limit, to a mounted FastAPI app": Scenario(
        (Http("POST", "/sub/items", declared(ITEM), (ITEM,)),), "200", LIMITED
    ),
    "a body over the limit with telemetry on": Scenario(
        (Http("POST", "/items", JSON, (OVER[:20], OVER[20:])),),
        "413",
        Config(body_limit=True, telemetry=True),
    ),
    # Clients that leave.
    "the client leaves mid-body": Scenario(
        (Http("POST", "/items", declared(ITEM), (ITEM[:10],), complete=False),), "no response"
    ),
    "the client leaves mid-body, to a route that ignores the body": Scenario(
        (Http("POST", "/ignores-body", declared(ITEM), (ITEM[:10],), complete=False),), "200"
    ),
    "the client leaves mid-body with telemetry on": Scenario(
        (Http("POST", "/items", declared(ITEM), (ITEM[:10],), complete=False),),
        "no response",
        Config(telemetry=True),
    ),
    "a streaming response to its end": Scenario((Http("GET", "/stream/none"),), "200"),
    "the client leaves mid-stream": Scenario((Http("GET", "/stream/none", leave_after=1),), "200"),
    "the client leaves mid-stream with telemetry on": Scenario(
        (Http("GET", "/stream/none", leave_after=1),), "200", Config(telemetry=True)
    ),
    "the connection breaks mid-stream (ASGI 2.4: send raises OSError)": Scenario(
        (Http("GET", "/stream/none", send_fails_after=1),), "200 raised ClientDisconnect"
    ),
    "a streaming response with telemetry on": Scenario(
        (Http("GET", "/stream/none"),), "200", Config(telemetry=True)
    ),
    # Websockets.
    "a websocket echo": Scenario((WebSocketSession("/ws/echo", ("hello",)),), "websocket.accept"),
    "a websocket echo with telemetry on": Scenario(
        (WebSocketSession("/ws/echo", ("hello",)),), "websocket.accept", Config(telemetry=True)
    ),
    "a websocket to an unknown path": Scenario(
        (WebSocketSession("/ws/nowhere"),), "websocket.close"
    ),
    **{
        f"{kind} in a websocket route, after accept": Scenario(
            (WebSocketSession(f"/ws/raise/{kind}"),),
            "websocket.accept" + (" raised Unhandled" if kind == "unhandled" else ""),
        )
        for kind in KINDS
    },
    **{
        f"{kind} in a websocket route, before accept": Scenario(
            (WebSocketSession(f"/ws/raise-before-accept/{kind}"),),
            # A handler's response is sent as the websocket's denial response.
            "nothing sent raised Unhandled"
            if kind == "unhandled"
            else "websocket.http.response.start",
        )
        for kind in KINDS
    },
    "an unhandled exception in a websocket route with telemetry on": Scenario(
        (WebSocketSession("/ws/raise/unhandled"),),
        "websocket.accept raised Unhandled",
        Config(telemetry=True),
    ),
    # The first call builds the stack (and, with install_dispatch, the route index).
    "an unhandled exception on the first request": Scenario(
        (Http("GET", "/raise/unhandled"),), "500 raised Unhandled", fresh=True
    ),
    "a websocket as the first call": Scenario(
        (WebSocketSession("/ws/echo", ("hi",)),), "websocket.accept", fresh=True
    ),
    "a body over the limit as the first request": Scenario(
        (Http("POST", "/items", declared(OVER), (OVER,)),), "413", LIMITED, fresh=True
    ),
    "a request to a mounted FastAPI app as the first request": Scenario(
        (Http("GET", "/sub/where"),), "200", fresh=True
    ),
    # Mounted applications, root_path, url_for, request.app, app.state.
    "request.app, app.state and url_for": Scenario((Http("GET", "/where"),), "200"),
    "a mounted Starlette app": Scenario((Http("GET", "/starlette/where"),), "200"),
    "a mounted FastAPI app": Scenario((Http("GET", "/sub/where"),), "200"),
    "a root_path from the server": Scenario((Http("GET", "/where", root_path="/api"),), "200"),
    "a root_path from the server, mounted Starlette app": Scenario(
        (Http("GET", "/starlette/where", root_path="/api"),), "200"
    ),
    "a root_path from the server, mounted FastAPI app": Scenario(
        (Http("GET", "/sub/where", root_path="/api"),), "200"
    ),
    "a mounted FastAPI app with telemetry on": Scenario(
        (Http("GET", "/sub/where"),), "200", Config(telemetry=True)
    ),
    # The lifespan, before the first request builds the stack.
    "the lifespan's state reaches a request": Scenario(
        (Http("GET", "/where"),), "200", lifespan=True, fresh=True
    ),
    "the lifespan, then an unhandled exception": Scenario(
        (Http("GET", "/raise/unhandled"),), "500 raised Unhandled", lifespan=True, fresh=True
    ),
    "the lifespan, then a websocket": Scenario(
        (WebSocketSession("/ws/echo", ("hi",)),), "websocket.accept", lifespan=True, fresh=True
    ),
    "the lifespan with telemetry on": Scenario(
        (Http("GET", "/where"),), "200", Config(telemetry=True), lifespan=True, fresh=True
    ),
    "the lifespan with debug on": Scenario(
        (Http("GET", "/raise/unhandled"),),
        "500 raised Unhandled",
        Config(debug=True),
        lifespan=True,
        fresh=True,
    ),
}

# --- user middleware -----------------------------------------------------------------------

ORIGIN = (b"origin", b"https://ok.example")
THROUGH_EVERY_MIDDLEWARE: dict[str, tuple[Call, str]] = {
    "a successful request": (Http("GET", "/items/1", (ORIGIN,)), "200"),
    "a body": (Http("POST", "/items", declared(ITEM), (ITEM,)), "200"),
    "an HTTPException": (Http("GET", "/raise/http-exception", (ORIGIN,)), "418"),
    "an exception handled by class": (Http("GET", "/raise/handled-by-class"), "409"),
    "an unhandled exception": (Http("GET", "/raise/unhandled"), "500 raised Unhandled"),
    "a streaming response": (Http("GET", "/stream/none"), "200"),
    "a large response": (Http("GET", "/big", ((b"accept-encoding", b"gzip"),)), "200"),
    "a websocket": (WebSocketSession("/ws/echo", ("hi",)), "websocket.accept"),
    "a 404": (Http("GET", "/nowhere"), "404"),
}
for _middleware in MIDDLEWARE:
    for _what, (_call, _first) in THROUGH_EVERY_MIDDLEWARE.items():
        SCENARIOS[f"{_middleware} middleware: {_what}"] = Scenario(
            (_call,), _first, Config(middleware=_middleware)
        )

CORS = Config(middleware="cors")
SCENARIOS.update(
    {
        "cors middleware: a preflight request": Scenario(
            (
                Http(
                    "OPTIONS",
                    "/items",
                    (ORIGIN, (b"access-control-request-method", b"POST")),
                ),
            ),
            "200",
            CORS,
        ),
        "cors middleware: a preflight request from a disallowed origin": Scenario(
            (
                Http(
                    "OPTIONS",
                    "/items",
                    (
                        (b"origin", b"https://evil.example"),
                        (b"access-control-request-method", b"POST"),
                    ),
                ),
            ),
            "400",
            CORS,
        ),
        "trusted-host middleware: a host it does not trust": Scenario(
            (Http("GET", "/items/1", host=b"evil.test"),), "400", Config(middleware="trusted-host")
        ),
        "trusted-host middleware: a websocket": Scenario(
            (WebSocketSession("/ws/echo", ("hi",)),),
            "websocket.accept",
            Config(middleware="trusted-host"),
        ),
        "base-http middleware: the client leaves mid-stream": Scenario(
            (Http("GET", "/stream/none", leave_after=1),), "200", Config(middleware="base-http")
        ),
        "base-http middleware: the client leaves mid-body": Scenario(
            (Http("POST", "/items", declared(ITEM), (ITEM[:10],), complete=False),),
            "500 raised RuntimeError",  # BaseHTTPMiddleware: "No response returned."
            Config(middleware="base-http"),
        ),
        "gzip middleware: the client leaves mid-stream": Scenario(
            (Http("GET", "/stream/none", ((b"accept-encoding", b"gzip"),), leave_after=1),),
            "200",
            Config(middleware="gzip"),
        ),
        "http-decorator middleware with telemetry on": Scenario(
            (Http("GET", "/raise/unhandled"),),
            "500 raised Unhandled",
            Config(middleware="http-decorator", telemetry=True),
        ),
    }
)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_a_request_is_served_alike(twin: Twin, caplog: pytest.LogCaptureFixture, name: str) -> None:
    run_both(twin, SCENARIOS[name], caplog)


# --- the comparison itself -----------------------------------------------------------------


def add_header(app: ASGIApp) -> ASGIApp:
    async def with_header(scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message["headers"], (b"x-extra", b"1")]}
            await send(message)

        await app(scope, receive, send_with_header)

    return with_header


def reword_exceptions(app: ASGIApp) -> ASGIApp:
    async def reworded(scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await app(scope, receive, send)
        except Exception as exc:
            raise type(exc)("reworded") from exc

    return reworded


def log_a_record(app: ASGIApp) -> ASGIApp:
    async def logging_app(scope: Scope, receive: Receive, send: Send) -> None:
        logging.getLogger("starlette").debug("one more record")
        await app(scope, receive, send)

    return logging_app


# A change, a scenario that shows it, and the field of `Observed` it shows in.
DIFFERENCES: dict[str, tuple[Callable[[ASGIApp], ASGIApp], Scenario, str]] = {
    "a header": (add_header, Scenario((Http("GET", "/items/1"),), "200"), "calls"),
    "the escaping exception's message": (
        reword_exceptions,
        Scenario((Http("GET", "/raise/unhandled"),), "500 raised Unhandled"),
        "calls",
    ),
    "a log record": (log_a_record, Scenario((Http("GET", "/items/1"),), "200"), "logs"),
}


@pytest.mark.parametrize("difference", list(DIFFERENCES))
def test_the_comparison_sees_a_difference_in(
    twin: Twin, caplog: pytest.LogCaptureFixture, difference: str
) -> None:
    """A middleware added on the install_dispatch side only makes the test fail: what it
    changes is compared."""
    wrap, scenario, shown_in = DIFFERENCES[difference]

    def install_and_change(app: FastAPI) -> None:
        twin.install_dispatch(app)
        app.add_middleware(Wrapping, wrap=wrap)

    sides = both_sides(lambda: build_app(twin.router_class, scenario.config), install_and_change)
    with pytest.raises(AssertionError, match=rf"^{shown_in} differ"):
        run_both(twin, scenario, caplog, sides)


class Wrapping:
    """A middleware made of a function that wraps the application."""

    def __init__(self, app: ASGIApp, wrap: Callable[[ASGIApp], ASGIApp]) -> None:
        self.wrapped = wrap(app)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.wrapped(scope, receive, send)


def test_the_comparison_sees_a_difference_in_telemetry(
    twin: Twin, caplog: pytest.LogCaptureFixture
) -> None:
    """A span only the install_dispatch side exports makes the test fail."""
    scenario = Scenario((Http("GET", "/items/1"),), "200", Config(telemetry=True))
    scenario.config.skip_unsupported()
    sides = built_twice(twin, scenario.config)
    telemetry = sides["install_dispatch"].telemetry
    assert telemetry is not None

    def one_more_span(app: ASGIApp) -> ASGIApp:
        async def spanning(scope: Scope, receive: Receive, send: Send) -> None:
            telemetry.tracer_provider.get_tracer("test").start_span("one more span").end()
            await app(scope, receive, send)

        return spanning

    sides["install_dispatch"].app.add_middleware(Wrapping, wrap=one_more_span)
    with pytest.raises(AssertionError, match=r"^telemetry differ"):
        run_both(twin, scenario, caplog, sides)


# --- the application entry -----------------------------------------------------------------


def entry_state(app: FastAPI) -> tuple[bool, str] | None:
    """What `install_dispatch` reports about its application entry once the application's
    stack is built: (installed, reason), or None where it has no entry."""
    entry = getattr(app, "msgspec_fastapi_entry", None)
    return None if entry is None else (entry.installed, entry.reason)


def installed_application(twin: Twin, config: Config) -> Built:
    built = build_app(twin.router_class, config)
    twin.install_dispatch(built.app)
    return built


@pytest.mark.parametrize(
    "config",
    [
        Config(),
        Config(debug=True),
        Config(telemetry=True),
        Config(body_limit=True),
        Config(server_error_handler="500"),
        Config(server_error_handler="Exception"),
    ],
    ids=Config.label,
)
def test_the_entry_replaces_a_default_stack(
    twin: Twin, caplog: pytest.LogCaptureFixture, config: Config
) -> None:
    config.skip_unsupported()
    built = installed_application(twin, config)
    serve(built, (Http("GET", "/items/1"),), caplog)
    state = entry_state(built.app)
    assert state is not None
    assert state[0] is True


def test_the_entry_is_built_by_the_lifespan(twin: Twin, caplog: pytest.LogCaptureFixture) -> None:
    built = installed_application(twin, Config())
    serve(built, (), caplog, lifespan=True)
    state = entry_state(built.app)
    assert state is not None
    assert state[0] is True


def test_the_entry_stands_aside_for_an_own_build_middleware_stack(
    twin: Twin, caplog: pytest.LogCaptureFixture
) -> None:
    built = installed_application(twin, Config(own_stack=True))
    serve(built, (Http("GET", "/items/1"),), caplog)
    state = entry_state(built.app)
    assert state is not None
    installed, reason = state
    assert installed is False
    assert isinstance(reason, str)
    assert reason
