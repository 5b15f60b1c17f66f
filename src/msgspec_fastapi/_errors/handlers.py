"""Exceptions raised inside a direct-tier route, handled as a FastAPI route would."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from .._compat import cache_request_body, exception_handler
from .._shared import is_coroutine_endpoint


async def handle_route_exception(
    exc: Exception,
    scope: Scope,
    receive: Receive,
    send: Send,
    started: bool,
    raw: bytes | None,
    request: Request | None = None,
) -> None:
    """Give `exc` to the application's handler for it, or raise it on.

    FastAPI routes handle exceptions inside the route (so that a route-level body limit
    and the dependency exit stacks see the handled response); the direct tier does the
    same, with Starlette's lookup of the handler. The handler gets `request` when the
    route made one (its dependencies and endpoint saw that object), else a new one; `raw`
    is the body the request path read (None if it read none): the new Request returns it
    from `body()`, as FastAPI's handler gets the route's Request with the body it read,
    where reading `receive` again would wait for a body already taken.
    """
    handler = exception_handler(scope, exc)
    if handler is None:
        raise exc
    if started:
        raise RuntimeError("Caught handled exception, but response already started.") from exc
    if request is None:
        request = Request(scope, receive, send)
        if raw is not None:
            cache_request_body(request, raw)
    if is_coroutine_endpoint(handler):
        response = await handler(request, exc)
    else:
        response = await run_in_threadpool(handler, request, exc)
    if response is not None:
        await response(scope, receive, send)
    exc.__traceback__ = None
