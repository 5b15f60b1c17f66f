# cython: freethreading_compatible=True
"""The application's entry: FastAPI's default application layers as one ASGI app.

FastAPI wraps every request in ServerErrorMiddleware, ExceptionTelemetryMiddleware,
AppBodyLimitMiddleware (0.164+), the user middleware, ExceptionMiddleware and
AsyncExitStackMiddleware. `Outer` does what the three outer layers do, `Inner` what the
two inner ones do; without user middleware, `Inner` runs `Outer`'s part too, so a
request passes one coroutine of the entry. Everything those layers decide per request
from state fixed at startup (the handlers, the debug page, the limit) is decided once, by
`stack` when FastAPI builds its stack; per request the entry makes one send
wrapper (it must know whether the response started), an unentered exit stack for
FastAPI's file closing (`_compat.FileStack`: no deque of callbacks until one is pushed,
and closed only if one was), and a Request only for an exception handler. Above the
layers, `serve_app` is the application's `__call__` (see `_routing.stack.take_call`):
FastAPI's and Starlette's in one coroutine.

One source: run as it is by the pure twin, compiled by Cython as `_routing.entry` (with
`entry.pxd`) for the compiled one.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._compat import (
    BODY_LIMIT_SCOPE_KEY,
    EXCEPTION_HANDLERS_KEY,
    EXIT_CALLBACKS_ATTR,
    FILE_STACK_CLASS,
    FILE_STACK_KEY,
    NATIVE_TELEMETRY_ATTR,
    TELEMETRY_SCOPE_KEY,
    lookup_exception_handler,
    record_exception,
)

RESPONSE_START = "http.response.start"
HANDLED_AFTER_START = "Caught handled exception, but response already started."

# FastAPI's and Starlette's own `__call__`, as they were when this module was imported.
# `serve_app` does their part itself only while both classes still have them, so that an
# integration that replaces either later (as Sentry's replaces Starlette's) is called.
FASTAPI_CALL = FastAPI.__call__
STARLETTE_CALL = Starlette.__call__


async def serve_app(app: Any, scope: Scope, receive: Receive, send: Send) -> None:
    """`FastAPI.__call__` as the application's class runs it after `install_dispatch`
    (`_routing.stack.take_call`): for an HTTP or WebSocket request that FastAPI's
    telemetry does not observe, what FastAPI's and Starlette's `__call__` do (the root
    path and the application put in the scope, the stack built on first use, then
    awaited) in this one coroutine, rather than in one coroutine each; anything else,
    the lifespan included, through FastAPI's own."""
    if FastAPI.__call__ is FASTAPI_CALL and Starlette.__call__ is STARLETTE_CALL:
        root_path = app.root_path
        if root_path:
            scope["root_path"] = root_path
        kind = scope["type"]
        if (
            (kind == "http" or kind == "websocket")
            and TELEMETRY_SCOPE_KEY not in scope
            and not getattr(app, NATIVE_TELEMETRY_ATTR).enabled()
        ):
            scope["app"] = app
            stack = app.middleware_stack
            if stack is None:
                stack = app.middleware_stack = app.build_middleware_stack()
            if type(stack) is Outer:
                # The entry's own outer layer, entered without Python's call protocol.
                outer: Outer = stack
                await outer.enter(scope, receive, send)
            else:
                await stack(scope, receive, send)
            return
    # FastAPI asks its telemetry again here: a question without side effects once its
    # providers are set up, asked twice only while telemetry observes requests.
    await FastAPI.__call__(app, scope, receive, send)


class TelemetryKind:
    """One OpenTelemetry kind as `TelemetryGate` reads it: the configuration's switch and
    provider keys, the namespace of the module FastAPI calls the getter on (its
    `__dict__`, which a module's attribute lookup reads first), the getter's name and the
    getter, the getter's module globals and the name of its global provider there, and
    the environment variable's key in `environ` (the dict behind `os.environ`: bytes on
    POSIX, str on Windows)."""

    __slots__ = ("api", "current", "getter", "name", "namespace", "provider", "switch", "variable")

    def __init__(
        self,
        switch: str,
        provider: str,
        api: dict[str, Any],
        name: str,
        getter: Any,
        namespace: dict[str, Any],
        current: str,
        variable: Any,
    ) -> None:
        self.switch = switch
        self.provider = provider
        self.api = api
        self.name = name
        self.getter = getter
        self.namespace = namespace
        self.current = current
        self.variable = variable


class TelemetryGate:
    """FastAPI's per-request test of whether its native telemetry observes the request
    (`NativeTelemetry.enabled`), put in its place on the application's telemetry.

    FastAPI asks each OpenTelemetry API for its global provider, and each of those asks
    the environment through `os.environ`'s Python-level mapping methods: about a third of
    a small request's instructions. While a kind is switched off in the configuration,
    or has no configured provider, no global provider, no provider named in the
    environment and FastAPI's getter in place, FastAPI's test finds that kind
    unconfigured; the gate reads those facts directly (C dict lookups) and answers False
    when every kind is in that state. Any other state goes to FastAPI's own test.

    `kinds` are the arguments of one `TelemetryKind` per kind.
    """

    __slots__ = ("config", "environ", "kinds", "original")

    def __init__(
        self,
        original: Any,
        config: dict[str, Any],
        kinds: tuple[tuple[str, str, dict[str, Any], str, Any, dict[str, Any], str, Any], ...],
        environ: dict[Any, Any],
    ) -> None:
        self.original = original
        self.config = config
        self.kinds = tuple([TelemetryKind(*kind) for kind in kinds])
        self.environ = environ

    def __call__(self) -> bool:
        if self.unconfigured():
            return False
        return self.original()  # type: ignore[no-any-return]

    def unconfigured(self) -> bool:
        """Whether every kind is switched off or in the state FastAPI finds unconfigured;
        False at the first kind that is not."""
        config = self.config
        for kind in self.kinds:
            if not config[kind.switch]:
                continue
            if (
                config[kind.provider] is not None
                or kind.api.get(kind.name) is not kind.getter
                or kind.namespace[kind.current] is not None
                or kind.variable in self.environ
            ):
                return False
        return True


class Tracker:
    """The send of a request, noting when the response starts (for the error layers). A
    route that sends its own answer sets `started` and sends to `send` itself, one call
    less per message (the twins' `response_send`)."""

    __slots__ = ("send", "started")

    def __init__(self, send: Send) -> None:
        self.send = send
        self.started = False

    def __call__(self, message: Message) -> Awaitable[None]:
        # The awaitable of the server's send itself: no coroutine of our own per message.
        if message["type"] == RESPONSE_START:
            self.started = True
        return self.send(message)


class Inner:
    """ExceptionMiddleware and AsyncExitStackMiddleware around `app` (the router).

    `other` is FastAPI's own pair of those layers, for websocket and lifespan scopes;
    `handlers` the pair of handler maps ExceptionMiddleware puts in the scope, which the
    routes read too; `async_handlers` says, per handler id, whether it is a coroutine
    function (Starlette asks per exception). `through_stack`: the router's `__call__` is
    Starlette's, which only awaits the router's `middleware_stack`; the entry then calls
    that stack itself (read per request, as Starlette reads it), one coroutine less.
    """

    __slots__ = (
        "app",
        "async_handlers",
        "exception_handlers",
        "handlers",
        "other",
        "status_handlers",
        "through_stack",
    )

    def __init__(
        self,
        app: ASGIApp,
        other: ASGIApp,
        handlers: tuple[dict[Any, Any], dict[int, Any]],
        async_handlers: dict[int, bool],
        through_stack: bool,
    ) -> None:
        self.app = app
        self.other = other
        self.handlers = handlers
        self.exception_handlers = handlers[0]
        self.status_handlers = handlers[1]
        self.async_handlers = async_handlers
        self.through_stack = through_stack

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.other(scope, receive, send)
            return
        await self.handle(scope, receive, Tracker(send))

    async def handle(
        self, scope: Scope, receive: Receive, tracker: Tracker, outer: Outer | None = None
    ) -> None:
        """The request through the two layers, `tracker` its send; with `outer`, through
        its layers too (it has none of its own to run between), in this one coroutine."""
        scope[EXCEPTION_HANDLERS_KEY] = self.handlers
        stack = FILE_STACK_CLASS()
        scope[FILE_STACK_KEY] = stack
        handled: Exception | None = None
        app: Any = self.app
        if self.through_stack:
            app = app.middleware_stack
        try:
            try:
                try:
                    await app(scope, receive, tracker)
                except BaseException as exc:
                    # As `async with stack` would close it; a callback may swallow `exc`.
                    if getattr(stack, EXIT_CALLBACKS_ATTR) and await stack.__aexit__(
                        type(exc), exc, exc.__traceback__
                    ):
                        return
                    raise
                # Closed only if something was pushed onto it (closing an empty one does
                # nothing).
                if getattr(stack, EXIT_CALLBACKS_ATTR):
                    await stack.__aexit__(None, None, None)
            except Exception as exc:
                await self.handle_exception(scope, receive, tracker, exc)
                handled = exc
        except Exception as exc:
            if outer is None:
                raise
            await outer.fail(scope, receive, tracker, exc)
            raise
        if handled is not None:
            # Reused exception instances would gather tracebacks across requests (as
            # Starlette clears it). Outside the except block: the compiled twin must not
            # clear the traceback of the exception it is handling.
            handled.__traceback__ = None

    async def handle_exception(
        self, scope: Scope, receive: Receive, tracker: Tracker, exc: Exception
    ) -> None:
        """ExceptionMiddleware's handling of `exc`: the status-code handler of an
        HTTPException, else the handler of the nearest class in the MRO; raised on when
        there is none."""
        handler = None
        if isinstance(exc, HTTPException):
            handler = self.status_handlers.get(exc.status_code)
        if handler is None:
            handler = lookup_exception_handler(self.exception_handlers, exc)
        if handler is None:
            raise exc
        if tracker.started:
            raise RuntimeError(HANDLED_AFTER_START) from exc
        request = Request(scope, receive, tracker)
        if self.async_handlers[id(handler)]:
            response = await handler(request, exc)
        else:
            response = await run_in_threadpool(handler, request, exc)
        if response is not None:
            await response(scope, receive, tracker)


class Outer:
    """ServerErrorMiddleware, ExceptionTelemetryMiddleware and AppBodyLimitMiddleware
    around `app` (the user middleware, or `inner` when there is none).

    `inner` is set only without user middleware: then its part runs on this entry's
    send. `body_limit` is FastAPI's AppBodyLimitMiddleware around `app` (None before
    0.164), run only when it has something to do: the application has a limit
    (`limited`) or an enclosing application set one in the scope. `server_error` is a
    ServerErrorMiddleware with the application's settings, for its responses.
    """

    __slots__ = (
        "app",
        "body_limit",
        "debug",
        "handler",
        "handler_is_async",
        "inner",
        "limited",
        "server_error",
    )

    def __init__(
        self,
        app: ASGIApp,
        inner: Inner | None,
        body_limit: ASGIApp | None,
        limited: bool,
        server_error: Any,
        handler_is_async: bool,
    ) -> None:
        self.app = app
        self.inner = inner
        self.body_limit = body_limit
        self.limited = limited
        self.server_error = server_error
        self.debug = bool(server_error.debug)
        self.handler = server_error.handler
        self.handler_is_async = handler_is_async

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        return self.enter(scope, receive, send)

    def enter(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        """The request through the layers: without user middleware or a body limit to
        run, `inner` runs this entry's layers in its own coroutine, one coroutine per
        request for the whole entry."""
        inner = self.inner
        if inner is not None and scope["type"] == "http" and not self.runs_body_limit(scope):
            return inner.handle(scope, receive, Tracker(send), self)
        return self.serve(scope, receive, send)

    def runs_body_limit(self, scope: Scope) -> bool:
        """Whether the body limit has work to do: the application has a limit, or an
        enclosing application set one in the scope."""
        return self.body_limit is not None and (self.limited or BODY_LIMIT_SCOPE_KEY in scope)

    async def serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The layers around `app`, or around the body limit where it has work to do."""
        if scope["type"] != "http":
            # The error page and the body limit concern HTTP only; the telemetry record
            # concerns every scope.
            try:
                await self.app(scope, receive, send)
            except Exception as exc:
                record_exception(scope, exc)
                raise
            return
        tracker = Tracker(send)
        try:
            if self.runs_body_limit(scope):
                assert self.body_limit is not None  # what runs_body_limit asks first
                await self.body_limit(scope, receive, tracker)
            else:
                await self.app(scope, receive, tracker)
        except Exception as exc:
            await self.fail(scope, receive, tracker, exc)
            # Re-raised, as ServerErrorMiddleware does, for the server to log.
            raise

    async def fail(self, scope: Scope, receive: Receive, tracker: Tracker, exc: Exception) -> None:
        """What the layers do with an exception that reached them (it is then raised on):
        the telemetry record, then ServerErrorMiddleware's 500: the debug page, the
        application's handler for 500 or Exception, or its plain one; sent unless the
        response already started."""
        record_exception(scope, exc)
        send = tracker.send
        request = Request(scope)
        if self.debug:
            response = await run_in_threadpool(self.server_error.debug_response, request, exc)
        elif self.handler is None:
            response = self.server_error.error_response(request, exc)
        elif self.handler_is_async:
            response = await self.handler(request, exc)
        else:
            response = await run_in_threadpool(self.handler, request, exc)
        if not tracker.started:
            await response(scope, receive, send)
