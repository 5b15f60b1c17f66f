"""`install_dispatch`: the application's route loop replaced by a twin's route index.

Registration code: it picks the twin (`_select`) and hands its dispatcher the index
builder (`index`), so that neither the twins nor the builder import this module back.
"""

from __future__ import annotations

from functools import partial
from types import ModuleType

from fastapi import FastAPI
from fastapi.routing import APIRouter

from .. import _compat, _select
from .index import build_app_index
from .stack import install_entry


def install_dispatch_with(app: FastAPI, twin: ModuleType) -> None:
    """`install_dispatch` with the given request-path twin (tests run both)."""
    router = app.router
    if not isinstance(router, APIRouter) or type(router).app is not APIRouter.app:
        raise TypeError("install_dispatch needs FastAPI's own APIRouter as app.router")
    fallback = APIRouter.app.__get__(router)
    rebuild = partial(build_app_index, router, twin.INDEX_CLASSES)
    dispatcher = twin.AppDispatcher(router, fallback, rebuild, twin.routes_unchanged)
    _compat.replace_router_app(router, dispatcher)
    install_entry(app, _select.companion(_select.ENTRY, twin))


def install_dispatch(app: FastAPI) -> None:
    """Route the application's requests through the route index.

    Call once, after including the routers. Routes added later (to the application or
    any router included in it) are picked up: the index is rebuilt when FastAPI's route
    table changes. Middleware, exception handlers and the route handlers stay as they
    are; FastAPI's own loop still answers what the index does not decide (redirects,
    low-priority routes, 404, and routes only FastAPI can handle).

    FastAPI's default application layers (the 500 response, telemetry's exception record,
    the body limit, the exception handlers, the file exit stack) become one entry doing
    what they do, built when FastAPI builds its middleware stack, with the user
    middleware between its halves. Where the stack is not FastAPI's default, FastAPI's
    stays: `app.msgspec_fastapi_entry` (`installed`, `reason`) and a log record say why.

    The application becomes an instance of a subclass of its class, of the same name,
    whose `__call__` does what FastAPI's and Starlette's do in one coroutine, where its
    class has no `__call__` of its own.
    """
    install_dispatch_with(app, _select.twin)
