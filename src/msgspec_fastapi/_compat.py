"""Every private FastAPI name this package touches, in one place.

Checked against FastAPI 0.142.2 and 0.165.0 (the declared range). When FastAPI moves one
of these, this module is the only one to change.
"""

from __future__ import annotations

from typing import Any

from fastapi import routing as _routing
from fastapi.openapi import utils as _openapi_utils
from starlette.types import ASGIApp

# The route context FastAPI is building a handler for. Included routers are built lazily
# per inclusion (0.137+), and `get_route_handler` learns which inclusion it serves only
# through this ContextVar.
_effective_route_context_var = _routing._effective_route_context_var

# The scope entry where the router records the inclusion context that matched, read by
# `APIRoute.handle` to pick that context's app, and by the request path to find what
# registration left on that context.
FASTAPI_SCOPE_KEY: str = _routing._FASTAPI_SCOPE_KEY
ROUTE_CONTEXT_KEY: str = _routing._FASTAPI_EFFECTIVE_ROUTE_CONTEXT_KEY

# OpenAPI components of FastAPI's 422 response, reused for the 422 we document.
VALIDATION_ERROR_DEFINITION: dict[str, Any] = _openapi_utils.validation_error_definition
VALIDATION_ERROR_RESPONSE_DEFINITION: dict[str, Any] = (
    _openapi_utils.validation_error_response_definition
)

try:
    # 0.164+: per-route request body limits, applied around each route's app.
    from fastapi._body_limit import wrap_app_with_body_limit as _wrap_body_limit
except ImportError:  # pragma: no cover - exercised on FastAPI < 0.164
    _wrap_body_limit = None

HAS_NATIVE_BODY_LIMIT = _wrap_body_limit is not None

# How Starlette strips root_path from the path before matching (starlette._utils).
get_route_path = _routing.get_route_path


def building_context() -> Any | None:
    """The inclusion context whose handler is being built, or None for the route itself."""
    return _effective_route_context_var.get()


def wrap_body_limit(app: ASGIApp, max_body_size: int | None) -> ASGIApp:
    """Apply FastAPI's own body limit around `app`, where FastAPI has one."""
    if _wrap_body_limit is None or max_body_size is None:
        return app
    return _wrap_body_limit(app, max_body_size)


def included_match_data(context: Any) -> tuple[Any, dict[str, Any], Any, frozenset[str]]:
    """What matching an included route needs: path regex, convertors, endpoint, methods.

    The request path repeats the steps of `_EffectiveRouteContext.matches` and
    `APIRoute.matches` with these (path regex, convertors, inherited path params,
    method). Checked against 0.142.2 and 0.165.0.
    """
    return (
        context.path_regex,
        dict(context.param_convertors),
        context.endpoint,
        frozenset(context.methods),
    )


# -- dispatch: what the route index (`_routing`, and the twins' dispatch section) reads --
# Every name below checked against FastAPI 0.142.2 and 0.165.0.

# FastAPI's node for one `include_router` (0.137+): its `effective_candidates()` are the
# inclusion's routes as contexts (and nested inclusions), built once per routes version.
IncludedRouter: type = _routing._IncludedRouter

# The entry of the FastAPI scope dict naming the inclusion being matched or handled; the
# router's own `matches`/`handle` read it to know which inclusion they serve.
INCLUDED_ROUTER_KEY: str = _routing._FASTAPI_INCLUDED_ROUTER_KEY

# The scope entry where FastAPI's telemetry (0.142+) keeps its per-request record; when
# it is set, a selected route is reported with `route_selected`.
TELEMETRY_SCOPE_KEY = "fastapi.telemetry"

# Reports the selected route's path template to the request's telemetry span (both
# versions: `_route_selected(scope=, path=, mount=)`, a no-op without telemetry).
route_selected = _routing._route_selected

# 0.165 merges the FastAPI entry of a child scope instead of replacing it; 0.142.2 has
# no `_update_scope` and uses `scope.update`.
_update_scope = getattr(_routing, "_update_scope", None)

# 0.165 applies per-router multipart limits on entering each router (top level and each
# inclusion); 0.142.2 has no form limits.
_apply_router_form_limits = getattr(_routing, "_apply_router_form_limits", None)


def update_scope(scope: dict[str, Any], child_scope: dict[str, Any]) -> None:
    """Merge a matched route's child scope into the scope, as FastAPI's router does."""
    if _update_scope is None:
        scope.update(child_scope)
    else:
        _update_scope(scope, child_scope)


def router_form_limits(router: Any) -> dict[str, Any]:
    """The form limits a router applies when a request enters it ({} before 0.165)."""
    if _apply_router_form_limits is None:
        return {}
    return dict(getattr(router, "form_limits", None) or {})


def inclusion_form_limits(included: Any) -> dict[str, Any]:
    """The form limits an inclusion applies in its `handle` ({} before 0.165)."""
    if _apply_router_form_limits is None:
        return {}
    return dict(getattr(included.include_context, "form_limits", None) or {})


def apply_form_limits(scope: dict[str, Any], limits: dict[str, Any]) -> None:
    """What FastAPI does with a router's form limits on entering it (0.165)."""
    if _apply_router_form_limits is not None:
        _apply_router_form_limits(scope, limits)


def included_candidates(included: Any) -> list[Any]:
    """An inclusion's candidates in order: route contexts and nested inclusions.

    Builds them (and the route handlers) on first use, as FastAPI's first request would.
    """
    return included.effective_candidates()  # type: ignore[no-any-return]


def watch_route_changes(router: Any, on_change: Any) -> None:
    """Call `on_change()` whenever FastAPI bumps `router`'s routes version.

    Every change FastAPI counts (add_api_route, add_route, include_router, websocket
    routes, frontend) goes through `APIRouter._mark_routes_changed` in both versions;
    the hook is an instance attribute that calls the original first. Idempotent.
    """
    if getattr(router, "_msgspec_watched", False):
        return
    original = router._mark_routes_changed

    def mark_routes_changed() -> None:
        original()
        on_change()

    router._mark_routes_changed = mark_routes_changed
    router._msgspec_watched = True


def replace_router_app(router: Any, app: Any) -> None:
    """Put `app` where `router.app` (Starlette's route loop) sits in the router's stack.

    `Router.__init__` wraps the bound `app` in the router's own middleware (and, with
    `max_body_size`, Starlette's body limit) as `middleware_stack`; the loop is the
    innermost `.app` of that chain. The instance attribute covers `Router.handle`.
    """
    loop = type(router).app

    def is_loop(candidate: Any) -> bool:
        return (
            getattr(candidate, "__self__", None) is router
            and getattr(candidate, "__func__", None) is loop
        ) or getattr(candidate, "installed_on", None) is router

    if is_loop(router.middleware_stack):
        router.middleware_stack = app
    else:
        node = router.middleware_stack
        for _ in range(64):
            inner = getattr(node, "app", None)
            if inner is None:
                raise RuntimeError("the router's route loop is not in its middleware stack")
            if is_loop(inner):
                node.app = app
                break
            node = inner
        else:
            raise RuntimeError("the router's route loop is not in its middleware stack")
    router.app = app
