"""`install_openapi`: msgspec's schemas in an application's OpenAPI document.

Apart from `_openapi.schemas` because it needs the router's classes, and router.py needs
`_openapi.schemas` at registration: this way neither of those two imports the other.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.routing import iter_route_contexts

from .. import _compat
from ..router import INCLUSION_COMPONENTS_ATTR, MsgspecRoute, MsgspecRouter
from .schemas import add_msgspec_schemas, merge_components


def _components(routers: tuple[Any, ...]) -> dict[str, Any]:
    """The msgspec components of `routers` and of every router they include, as they are
    now: a router included before its routes were added gives them too."""
    components: dict[str, Any] = {}
    seen: set[int] = set()

    def gather(router: Any) -> None:
        if id(router) in seen:
            return
        seen.add(id(router))
        if isinstance(router, MsgspecRouter):
            merge_components(components, router.msgspec_components)
        for included in _compat.included_routers(router):
            gather(included)

    for router in routers:
        gather(router)
    return components


def install_openapi(app: FastAPI, *routers: MsgspecRouter) -> None:
    """Add the msgspec schemas of `routers` to `app`'s OpenAPI document.

    Call once, after including the routers, with every MsgspecRouter that is not itself
    included in another MsgspecRouter. Building the document also builds every
    included route, so registration errors surface here rather than on a request. As
    FastAPI's, the document is built on first use and again whenever the routes changed.
    """
    if not routers:
        raise TypeError("install_openapi() needs the MsgspecRouter instances in the app")
    for router in routers:
        if not isinstance(router, MsgspecRouter):
            raise TypeError(f"install_openapi() takes MsgspecRouter instances, not {router!r}")
    if getattr(app, "_msgspec_openapi_installed", False):
        raise RuntimeError("install_openapi() was already called for this app")
    list(iter_route_contexts(app.routes))
    original = app.openapi
    app.openapi_schema = None
    built_for: list[int] = []  # the routes version the cached document was built for

    def openapi() -> dict[str, Any]:
        # As FastAPI.openapi(): built once, and again when the routes changed.
        version = _compat.routes_version(app.router)
        if app.openapi_schema and built_for == [version]:
            return app.openapi_schema
        app.openapi_schema = None  # so that `original` builds afresh too
        document = original()
        routes = [
            route
            for route in iter_route_contexts(app.routes)
            if isinstance(route.original_route, MsgspecRoute)
        ]
        components = _components((app.router, *routers))
        for route in routes:
            # Those of a route analysed again for an inclusion's dependencies.
            merge_components(components, getattr(route, INCLUSION_COMPONENTS_ATTR, {}))
        add_msgspec_schemas(document, routes, components)
        app.openapi_schema = document
        built_for[:] = [version]
        return document

    app.openapi = openapi  # type: ignore[method-assign]
    app._msgspec_openapi_installed = True  # type: ignore[attr-defined]
