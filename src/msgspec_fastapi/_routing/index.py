"""The route index: built from a route table at registration time, in Python.

An index flattens a route table (the application's, or one inclusion of a
MsgspecRouter) through its included routers into entries in registration order, and
files each entry under the shape of its path in a segment trie. Per request the
twins' dispatch section walks the trie for the candidates of a path and tries them in
order with FastAPI's own test, so the index only ever narrows: it never decides.

An entry whose path shape cannot be derived exactly (a parameter inside a segment, an
unknown or patched convertor, a regex that is not the one Starlette would compile, a
route class with its own `matches`) is an always-candidate: it is tried at its place
for every request. Included routes only FastAPI can handle (Mounts, Hosts, Starlette
routes, custom routers) hand the request to FastAPI's own loop when they come up.

Registration code: the twins do not import it, they are handed its builders
(`install` hands the application's dispatcher `build_app_index`; a MsgspecRouter class
carries `build_included_index` for its inclusions). It imports neither twin either: each
twin's classes come with the call (`INDEX_CLASSES`), and the twins' functions are found
in `_shared.TWIN_ENTRY_POINTS`.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi.routing import APIRoute, APIRouter, APIWebSocketRoute
from starlette import convertors, routing

from .. import _compat
from .._shared import (
    DIRECT_ATTR,
    ENTRY_CONTEXT,
    ENTRY_FALLBACK,
    ENTRY_MATCHER,
    ENTRY_ROUTE,
    MATCHER_ATTR,
    ROUTES_GENERATION,
    SEGMENT_ANY,
    SEGMENT_DIGITS,
    TWIN_ENTRY_POINTS,
)

# Path segment kinds while building; LITERAL and TAIL never reach the twins.
_LITERAL = -1
_TAIL = -2

# The convertors whose regex the index can reason about, by exact class, with the regex
# Starlette gives them: a patched regex makes the route an always-candidate.
_CONVERTORS: dict[type, tuple[str, int]] = {
    convertors.StringConvertor: ("[^/]+", SEGMENT_ANY),
    convertors.IntegerConvertor: ("[0-9]+", SEGMENT_DIGITS),
    convertors.FloatConvertor: (r"[0-9]+(\.[0-9]+)?", SEGMENT_ANY),
    convertors.UUIDConvertor: (
        "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
        SEGMENT_ANY,
    ),
    convertors.PathConvertor: (".*", _TAIL),
}

_PARAM_SEGMENT = re.compile(r"\{([a-zA-Z_][a-zA-Z0-9_]*)\}")
_DEFAULT_FLAGS = re.compile("").flags

# Websocket routes of these exact classes never match an HTTP request.
_WEBSOCKET_CLASSES = (routing.WebSocketRoute, APIWebSocketRoute)


def path_shape(
    path_format: Any, path_regex: Any, param_convertors: Any
) -> list[tuple[int, str]] | None:
    """The segments of a route path as (kind, literal), or None where not exactly known.

    The shape is rebuilt into the regex Starlette's `compile_path` would give it and
    compared with the route's own: only an identical regex lets the index skip the route.
    """
    if not isinstance(path_format, str) or not path_format.startswith("/"):
        return None
    pattern = getattr(path_regex, "pattern", None)
    if not isinstance(pattern, str) or path_regex.flags != _DEFAULT_FLAGS:
        return None
    segments = path_format.split("/")
    shape: list[tuple[int, str]] = []
    expected = "^"
    for i, segment in enumerate(segments):
        if i:
            expected += "/"
        param = _PARAM_SEGMENT.fullmatch(segment)
        if param is not None:
            name = param.group(1)
            convertor = param_convertors.get(name)
            known = _CONVERTORS.get(type(convertor))
            if known is None or convertor.regex != known[0]:
                return None
            kind = known[1]
            if kind == _TAIL and i != len(segments) - 1:
                return None
            expected += f"(?P<{name}>{known[0]})"
            shape.append((kind, name))
        elif "{" in segment or "}" in segment:
            return None
        else:
            expected += re.escape(segment)
            shape.append((_LITERAL, segment))
    if pattern != expected + "$" or len(param_convertors) != sum(k != _LITERAL for k, _ in shape):
        return None
    return shape


class _Builder:
    """Fills one index: entries in registration order, each filed by its path shape."""

    def __init__(self, index: Any, classes: tuple[type, type, type, type]) -> None:
        self.index = index
        _, self.entry_class, self.node_class, self.matcher_class = classes
        # Every twin imported so far has added its functions: a route or router can only
        # be bound to a twin that was imported.
        self.route_matches = TWIN_ENTRY_POINTS.route_matches
        self.route_handle = TWIN_ENTRY_POINTS.route_handle
        self.router_methods = {(APIRouter.matches, APIRouter.handle)}
        self.router_methods.update(TWIN_ENTRY_POINTS.router_methods)

    def add(self, entry: Any, shape: list[tuple[int, str]] | None) -> None:
        entry.position = len(self.index.entries)
        self.index.entries.append(entry)
        if shape is None:
            self.index.always.append(entry.position)
            return
        node = self.index.root
        for kind, text in shape:
            if kind == _LITERAL:
                child = node.literals.get(text)
                if child is None:
                    child = node.literals[text] = self.node_class()
                node = child
            elif kind == _TAIL:
                node.tails.append(entry.position)
                return
            else:
                for child in node.params:
                    if child.kind == kind:
                        break
                else:
                    child = self.node_class()
                    child.kind = kind
                    node.params.append(child)
                node = child
        node.ends.append(entry.position)

    def plain_router(self, router: Any) -> bool:
        """A router whose matching and handling of an inclusion are FastAPI's own."""
        cls = type(router)
        return (cls.matches, cls.handle) in self.router_methods

    def add_top_route(self, route: Any) -> None:
        """A route of the application's own table: tried with its `matches`, as FastAPI."""
        cls = type(route)
        if cls in _WEBSOCKET_CLASSES:
            return
        entry = self.entry_class()
        entry.kind = ENTRY_ROUTE
        entry.route = route
        entry.path_format = getattr(route, "path_format", None)
        entry.is_mount = isinstance(route, routing.Mount)
        shape = None
        if cls.matches in (routing.Route.matches, APIRoute.matches) or (
            cls.matches in self.route_matches
        ):
            shape = path_shape(route.path_format, route.path_regex, route.param_convertors)
        self.add(entry, shape)

    def add_inclusion(
        self, included: Any, chain_limits: tuple[dict[str, Any], ...], nested: bool
    ) -> None:
        """Every route of one inclusion, nested inclusions flattened in their place."""
        router = _compat.inclusion_router(included)
        _compat.watch_route_changes(router, ROUTES_GENERATION.bump)
        if nested:
            limits = _compat.inclusion_form_limits(included)
            if limits:
                chain_limits = (*chain_limits, limits)
        for candidate in _compat.included_candidates(included):
            if isinstance(candidate, _compat.IncludedRouter):
                if type(candidate) is _compat.IncludedRouter and self.plain_router(
                    _compat.inclusion_router(candidate)
                ):
                    self.add_inclusion(candidate, chain_limits, True)
                else:
                    self.add_fallback(None)
                continue
            self.add_context(candidate, included, chain_limits)

    def add_context(
        self, context: Any, included: Any, chain_limits: tuple[dict[str, Any], ...]
    ) -> None:
        """One route context of an inclusion."""
        original = _compat.context_route(context)
        if not isinstance(original, APIRoute):
            starlette_route: Any = _compat.context_starlette_route(context)
            cls = type(starlette_route)
            if cls in _WEBSOCKET_CLASSES and cls.matches in (
                routing.WebSocketRoute.matches,
                APIWebSocketRoute.matches,
            ):
                return
            if cls is routing.Route:
                self.add_fallback(
                    path_shape(
                        starlette_route.path_format,
                        starlette_route.path_regex,
                        starlette_route.param_convertors,
                    )
                )
            else:
                self.add_fallback(None)
            return
        cls = type(original)
        entry = self.entry_class()
        matcher = getattr(context, MATCHER_ATTR, None)
        if cls.matches in self.route_matches and type(matcher) is self.matcher_class:
            # Our route and this twin's matcher: the matcher is the route's whole test.
            entry.kind = ENTRY_MATCHER
            entry.matcher = matcher
        elif cls.matches is APIRoute.matches or cls.matches in self.route_matches:
            entry.kind = ENTRY_CONTEXT
        else:
            self.add_fallback(None)
            return
        if cls.handle in self.route_handle:
            # Our handle would call the direct-tier app registration left on the context.
            entry.direct = getattr(context, DIRECT_ATTR, None)
        entry.route = original
        entry.context = context
        entry.included = included
        entry.chain_limits = chain_limits
        path_format, path_regex, param_convertors = _compat.context_path(context)
        entry.path_format = path_format
        self.add(entry, path_shape(path_format, path_regex, param_convertors))

    def add_fallback(self, shape: list[tuple[int, str]] | None) -> None:
        entry = self.entry_class()
        entry.kind = ENTRY_FALLBACK
        self.add(entry, shape)


def build_app_index(router: Any, classes: tuple[type, type, type, type]) -> Any:
    """The index of an application router's table, its inclusions flattened.

    `classes` are a twin's RouteIndex, IndexEntry, IndexNode and RouteMatcher.
    """
    generation = ROUTES_GENERATION.value
    snapshot = list(router.routes)
    index = classes[0]()
    builder = _Builder(index, classes)
    _compat.watch_route_changes(router, ROUTES_GENERATION.bump)
    for route in snapshot:
        if type(route) is _compat.IncludedRouter and builder.plain_router(
            _compat.inclusion_router(route)
        ):
            builder.add_inclusion(route, (), True)
        else:
            builder.add_top_route(route)
    index.form_limits = _compat.router_form_limits(router)
    index.snapshot = snapshot
    # Read before building: a change while building leaves the index stale, not wrong.
    index.generation = generation
    return index


def build_included_index(included: Any, classes: tuple[type, type, type, type]) -> Any:
    """The index of one inclusion of a MsgspecRouter, for its own matches and handle."""
    generation = ROUTES_GENERATION.value
    index = classes[0]()
    builder = _Builder(index, classes)
    builder.add_inclusion(included, (), False)
    index.generation = generation
    return index
