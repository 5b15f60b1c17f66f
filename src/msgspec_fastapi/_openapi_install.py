"""`install_openapi`: msgspec's schemas in an application's OpenAPI document.

Apart from `_openapi` because it needs the router's classes, and router.py needs
`_openapi` at registration: this way neither of those two imports the other.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.routing import iter_route_contexts

from ._openapi import add_msgspec_schemas, merge_components
from .router import MsgspecRoute, MsgspecRouter


def install_openapi(app: FastAPI, *routers: MsgspecRouter) -> None:
    """Add the msgspec schemas of `routers` to `app`'s OpenAPI document.

    Call once, after including the routers, with every MsgspecRouter that is not itself
    included in another MsgspecRouter. Building the document also builds every
    included route, so registration errors surface here rather than on a request.
    """
    if not routers:
        raise TypeError("install_openapi() needs the MsgspecRouter instances in the app")
    for router in routers:
        if not isinstance(router, MsgspecRouter):
            raise TypeError(f"install_openapi() takes MsgspecRouter instances, not {router!r}")
    if getattr(app, "_msgspec_openapi_installed", False):
        raise RuntimeError("install_openapi() was already called for this app")
    components: dict[str, Any] = {}
    for router in routers:
        merge_components(components, router.msgspec_components)
    list(iter_route_contexts(app.routes))
    original = app.openapi
    app.openapi_schema = None

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = original()
        routes = (
            route
            for route in iter_route_contexts(app.routes)
            if isinstance(route.original_route, MsgspecRoute)
        )
        add_msgspec_schemas(document, routes, components)
        app.openapi_schema = document
        return document

    app.openapi = openapi  # type: ignore[method-assign]
    app._msgspec_openapi_installed = True  # type: ignore[attr-defined]
