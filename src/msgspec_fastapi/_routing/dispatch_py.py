# cython: annotation_typing=False
# cython: freethreading_compatible=True
"""Routing per request: which route a request goes to, for both implementations.

Written once: the pure twin (`_fastpath_py`) runs this file as Python, and the compiled
twin (`_fastpath`) runs it compiled by Cython as `_routing.dispatch`, typed by
`dispatch.pxd` beside it. Each twin re-exports the names below that the package uses.

- `RouteMatcher(route, path_regex, literal_path, segments, convertors, endpoint,
  methods).match(scope)`
  is the router's test of whether a request is for an included route, run for every route
  the router tries (twice per request), with FastAPI's result.
- `route_matches(route, scope)` and `route_handle(route, scope, receive, send)` are
  `MsgspecRoute.matches` and `MsgspecRoute.handle`: they find the matcher and the
  direct-tier app registration left on the inclusion context FastAPI is trying, and fall
  back to `APIRoute`'s own methods everywhere else.
- `AppDispatcher` is the application's route loop through the route index
  (`install_dispatch`); `router_matches` and `router_handle` are `MsgspecRouter.matches`
  and `MsgspecRouter.handle`, an inclusion's candidates through its own index.

The route index (built by `_routing.index` once per version of the route table) narrows the
routes a request could reach; the entries it yields are then tried in registration
order with FastAPI's own test, so the first full match wins and the first partial
match gives the 405, exactly as in FastAPI's loop. Whatever the index cannot decide
(no candidate, a candidate only FastAPI can handle, a path ending in a newline) goes
to FastAPI's own route loop, which then also does redirect_slashes, low-priority
routes and the 404.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable
from typing import Any

from fastapi.routing import APIRoute, APIRouter
from starlette.convertors import StringConvertor
from starlette.routing import Match
from starlette.types import Receive, Scope, Send

from .. import _shared
from .._shared import apply_form_limits, get_route_path, route_selected, update_scope

# Shared constants under their `_shared` names; the compiled build gives them C types.
MATCH_FULL = _shared.MATCH_FULL
MATCH_PARTIAL = _shared.MATCH_PARTIAL
MATCH_NONE = _shared.MATCH_NONE
FASTAPI_SCOPE_KEY = _shared.FASTAPI_SCOPE_KEY
ROUTE_CONTEXT_KEY = _shared.ROUTE_CONTEXT_KEY
MATCHER_ATTR = _shared.MATCHER_ATTR
DIRECT_ATTR = _shared.DIRECT_ATTR
ABSENT = _shared.ABSENT
ENTRY_ROUTE = _shared.ENTRY_ROUTE
ENTRY_MATCHER = _shared.ENTRY_MATCHER
ENTRY_FALLBACK = _shared.ENTRY_FALLBACK
SEGMENT_ANY = _shared.SEGMENT_ANY
INCLUDED_ROUTER_KEY = _shared.INCLUDED_ROUTER_KEY
TELEMETRY_SCOPE_KEY = _shared.TELEMETRY_SCOPE_KEY
INDEX_ATTR = _shared.INDEX_ATTR
INCLUSION_ROUTER_ATTR = _shared.INCLUSION_ROUTER_ATTR
ROUTES_GENERATION = _shared.ROUTES_GENERATION
API_ROUTE_MATCHES = APIRoute.matches
API_ROUTE_HANDLE = APIRoute.handle
API_ROUTER_MATCHES = APIRouter.matches
API_ROUTER_HANDLE = APIRouter.handle


class RouteMatcher:
    """Matches requests to one included route, as FastAPI would; built at registration."""

    __slots__ = (
        "convertors",
        "endpoint",
        "literal_path",
        "literal_path_nl",
        "literal_segments",
        "methods",
        "param_segments",
        "path_regex",
        "route",
        "segment_count",
    )

    def __init__(
        self,
        route: Any,
        path_regex: Any,
        literal_path: str | None,
        segments: tuple[int, tuple[Any, ...], tuple[Any, ...]] | None,
        convertors: dict[str, Any],
        endpoint: Any,
        methods: Iterable[str],
    ) -> None:
        self.route = route
        self.path_regex = path_regex
        self.literal_path = literal_path
        # What the regex of a literal path also matches (see `_endpoint.plan.literal_path`).
        self.literal_path_nl = None if literal_path is None else literal_path + "\n"
        # The path split on "/" in place of the regex (`_endpoint.plan.segment_template`);
        # a count of 0 leaves every request to the regex.
        self.segment_count = 0 if segments is None else segments[0]
        self.literal_segments = () if segments is None else segments[1]
        self.param_segments = () if segments is None else segments[2]
        # A StringConvertor returns its input, so only the others need calling.
        self.convertors = {k: c for k, c in convertors.items() if type(c) is not StringConvertor}
        self.endpoint = endpoint
        self.methods = frozenset(methods)

    def match(self, scope: Scope) -> tuple[Match, dict[str, Any]]:
        path = scope["path"]
        if scope.get("root_path"):
            path = get_route_path(scope)
        match, params = self.match_params(scope, path, None)
        return match, self.child_scope(params)

    def match_params(
        self, scope: Scope, path: str, segments: list[str] | None
    ) -> tuple[Match, dict[str, Any] | None]:
        """How the request's route path matches, and the path params of the child scope
        (None where it does not match); the path split on "/" where the caller has split
        it (the index, for a path not ending in a newline)."""
        params: dict[str, Any] | None
        if self.literal_path is not None:
            if path != self.literal_path and path != self.literal_path_nl:
                return MATCH_NONE, None
            params = {}
        else:
            params = self.path_params(path, segments)
            if params is None:
                return MATCH_NONE, None
            for key, convertor in self.convertors.items():
                params[key] = convertor.convert(params[key])
        inherited = scope.get("path_params")
        if inherited:
            params = {**inherited, **params}
        if scope["method"] not in self.methods:
            return MATCH_PARTIAL, params
        return MATCH_FULL, params

    def child_scope(self, params: dict[str, Any] | None) -> dict[str, Any]:
        """The child scope FastAPI's test returns with these path params (None: none)."""
        if params is None:
            return {}
        return {"endpoint": self.endpoint, "path_params": params, "route": self.route}

    def path_params(self, path: str, segments: list[str] | None) -> dict[str, Any] | None:
        """The regex's named groups for `path`, or None where it does not match."""
        if self.segment_count and type(path) is str:
            return self.split_params(path, segments)
        return self.regex_params(path)

    def regex_params(self, path: str) -> dict[str, Any] | None:
        found = self.path_regex.match(path)
        return None if found is None else found.groupdict()

    def split_params(self, path: str, segments: list[str] | None) -> dict[str, Any] | None:
        """`path_params` of a route with a segment template: a path not ending in a
        newline is split on "/" (or taken as `segments`) and compared with it, the same
        segments, literals equal, parameters non-empty."""
        if path.endswith("\n"):
            return self.regex_params(path)
        if segments is None:
            segments = path.split("/")
        if len(segments) != self.segment_count:
            return None
        for position, literal in self.literal_segments:
            if segments[position] != literal:
                return None
        params = {}
        for position, name, digits in self.param_segments:
            value = segments[position]
            if not value or (digits and not ascii_digits(value)):
                return None
            params[name] = value
        return params


def matched_context(scope: Scope) -> Any:
    """The inclusion context FastAPI's router is trying or has picked, if any."""
    fastapi_scope = scope.get(FASTAPI_SCOPE_KEY)
    return None if fastapi_scope is None else fastapi_scope.get(ROUTE_CONTEXT_KEY)


def route_matches(route: APIRoute, scope: Scope) -> tuple[Match, Scope]:
    """`MsgspecRoute.matches`: the inclusion's prepared matcher, else APIRoute's own test."""
    context = matched_context(scope)
    if context is None or context.original_route is not route or scope["type"] != "http":
        return API_ROUTE_MATCHES(route, scope)
    matcher: RouteMatcher = getattr(context, MATCHER_ATTR)
    return matcher.match(scope)


def route_handle(route: APIRoute, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
    """`MsgspecRoute.handle`: the inclusion's direct-tier app, else APIRoute's handling.

    Returns the awaitable rather than awaiting it: one coroutine less per request.
    """
    context = matched_context(scope)
    if context is not None and context.original_route is route:
        direct = getattr(context, DIRECT_ATTR, None)
        if direct is not None and scope["method"] in context.methods:
            return direct(scope, receive, send)  # type: ignore[no-any-return]
    return API_ROUTE_HANDLE(route, scope, receive, send)


class IndexNode:
    """One segment position of the route trie: literal children by text, then params."""

    __slots__ = ("ends", "kind", "literals", "params", "tails")

    def __init__(self) -> None:
        self.literals: dict[str, IndexNode] = {}
        self.params: list[IndexNode] = []
        self.ends: list[int] = []
        self.tails: list[int] = []
        self.kind = SEGMENT_ANY  # how the parameter edge into this node narrows


class IndexEntry:
    """One route of a flattened route table, with what testing and handling it needs."""

    __slots__ = (
        "chain_limits",
        "context",
        "direct",
        "included",
        "is_mount",
        "kind",
        "matcher",
        "path_format",
        "position",
        "route",
    )

    def __init__(self) -> None:
        self.position = 0
        self.kind = ENTRY_FALLBACK
        self.route: Any = None
        self.context: Any = None
        self.matcher: Any = None
        self.direct: Any = None
        self.included: Any = None
        self.chain_limits: tuple[dict[str, Any], ...] = ()
        self.path_format: str | None = None
        self.is_mount = False


class RouteIndex:
    """The index of one route table: a trie of path shapes plus the always-candidates."""

    __slots__ = ("always", "entries", "form_limits", "generation", "root", "snapshot")

    def __init__(self) -> None:
        self.root = IndexNode()
        self.always: list[int] = []
        self.entries: list[IndexEntry] = []
        self.generation = -1
        self.snapshot: list[Any] | None = None
        self.form_limits: dict[str, Any] = {}


def ascii_digits(segment: str) -> bool:
    """Whether a path segment is all ASCII digits (the test `str.isascii() and
    str.isdigit()` makes), written as a loop the compiled build turns into C."""
    for ch in segment:  # noqa: SIM110 (a generator would not compile to a C loop)
        if ch < "0" or ch > "9":
            return False
    return True


def collect(node: IndexNode, segments: list[str], i: int, found: list[int]) -> None:
    """Add the positions of every route whose path shape accepts `segments[i:]`."""
    count = len(segments)
    while i < count:
        segment = segments[i]
        if node.tails:
            found.extend(node.tails)  # a path parameter takes the rest, even ""
        if segment:
            for child in node.params:
                if child.kind == SEGMENT_ANY or ascii_digits(segment):
                    collect(child, segments, i + 1, found)
        following = node.literals.get(segment)
        if following is None:
            return
        node = following
        i += 1
    found.extend(node.ends)


def candidates(index: RouteIndex, segments: list[str]) -> list[int]:
    """Positions of the routes that could match a path split on "/" into `segments`, in
    registration order."""
    found = list(index.always)
    collect(index.root, segments, 0, found)
    if len(found) > 1:
        found.sort()
    return found


def match_entry(
    entry: IndexEntry, scope: Scope, path: str, segments: list[str]
) -> tuple[Any, dict[str, Any] | None]:
    """FastAPI's test of one route, as its route loop would run it (`path` the request's
    route path, `segments` it split on "/"): the match, and the child scope, or for an
    entry the index matches itself (ENTRY_MATCHER) the child scope's path params, the
    rest of it left to be made where it is needed."""
    kind = entry.kind
    if kind == ENTRY_MATCHER:
        matcher: RouteMatcher = entry.matcher
        return matcher.match_params(scope, path, segments)
    if kind == ENTRY_ROUTE:
        return entry.route.matches(scope)  # type: ignore[no-any-return]
    # An included APIRoute matches with its inclusion context in the scope, set and
    # restored around the test as FastAPI's inclusion does.
    fastapi_scope = scope.setdefault(FASTAPI_SCOPE_KEY, {})
    previous = fastapi_scope.get(ROUTE_CONTEXT_KEY, ABSENT)
    fastapi_scope[ROUTE_CONTEXT_KEY] = entry.context
    try:
        return entry.route.matches(scope)  # type: ignore[no-any-return]
    finally:
        fastapi_scope = scope.get(FASTAPI_SCOPE_KEY)
        if type(fastapi_scope) is dict:
            if previous is ABSENT:
                fastapi_scope.pop(ROUTE_CONTEXT_KEY, None)
            else:
                fastapi_scope[ROUTE_CONTEXT_KEY] = previous


def select(index: RouteIndex, scope: Scope) -> tuple[Any, Any, Any] | None:
    """(match, entry, what `match_entry` found) of the route FastAPI's loop would pick, or
    None.

    A match of MATCH_NONE (entry None) when no route matches; None hands the request to
    FastAPI, where a route only FastAPI can handle comes up, or the index cannot narrow.
    """
    route_path = scope["path"]
    if scope.get("root_path"):
        route_path = get_route_path(scope)
    if type(route_path) is not str:
        return None  # a str subclass: FastAPI's loop, where the matchers use the regex
    path = route_path
    if path.endswith("\n"):
        # A regex's `$` also matches before a final newline, which a segment walk would
        # not reproduce: the index cannot narrow.
        return None
    segments = path.split("/")
    found = candidates(index, segments)
    entries = index.entries
    partial = None
    for position in found:
        entry = entries[position]
        if entry.kind == ENTRY_FALLBACK:
            return None
        match, found_scope = match_entry(entry, scope, path, segments)
        if match is MATCH_FULL:
            return match, entry, found_scope
        if match is MATCH_PARTIAL and partial is None:
            partial = (match, entry, found_scope)
    if partial is None:
        return MATCH_NONE, None, {}
    return partial


def selected_child_scope(selected: tuple[Any, Any, Any]) -> dict[str, Any]:
    """The child scope FastAPI's test gives for a `select` result."""
    _, entry, found = selected
    if entry is not None and entry.kind == ENTRY_MATCHER:
        matcher: RouteMatcher = entry.matcher
        return matcher.child_scope(found)
    return found  # type: ignore[no-any-return]


def dispatch(
    selected: tuple[Any, IndexEntry, Any], scope: Scope, receive: Receive, send: Send
) -> Awaitable[None]:
    """Hand the request to the selected route, the scope set as FastAPI's router sets it."""
    match, entry, found = selected
    if entry.kind == ENTRY_ROUTE:
        # The application's loop: merge the child scope, report, handle.
        update_scope(scope, found)
        if scope.get(TELEMETRY_SCOPE_KEY) is not None:
            route_selected(scope=scope, path=entry.path_format, mount=entry.is_mount)
        return entry.route.handle(scope, receive, send)  # type: ignore[no-any-return]
    # An included route: what each inclusion's handle and the innermost selection do.
    fastapi_scope = scope.setdefault(FASTAPI_SCOPE_KEY, {})
    for limits in entry.chain_limits:
        apply_form_limits(scope, limits)
    if entry.included is not None:
        fastapi_scope[INCLUDED_ROUTER_KEY] = entry.included
    if entry.kind == ENTRY_MATCHER:
        # The child scope's entries, in its order, as `scope.update` would set them.
        matcher: RouteMatcher = entry.matcher
        scope["endpoint"] = matcher.endpoint
        scope["path_params"] = found
        scope["route"] = matcher.route
    else:
        scope.update(found)
    if scope.get(TELEMETRY_SCOPE_KEY) is not None:
        route_selected(scope=scope, path=entry.path_format, mount=False)
    fastapi_scope[ROUTE_CONTEXT_KEY] = entry.context
    scope["route"] = entry.route
    if entry.direct is not None and match is MATCH_FULL:
        return entry.direct(scope, receive, send)  # type: ignore[no-any-return]
    return entry.route.handle(scope, receive, send)  # type: ignore[no-any-return]


class AppDispatcher:
    """The application router's route loop, through the index (see `install_dispatch`).

    `fallback` is FastAPI's own loop, `rebuild()` builds the index of the current table,
    `unchanged(routes, snapshot)` (the twin's `routes_unchanged`) tells whether the
    router's route list still holds what the index was built from.
    """

    __slots__ = ("current", "fallback", "installed_on", "rebuild", "unchanged")

    def __init__(self, router: Any, fallback: Any, rebuild: Any, unchanged: Any) -> None:
        self.installed_on = router
        self.fallback = fallback
        self.rebuild = rebuild
        self.unchanged = unchanged
        # The index in a cell that is never replaced: on a free-threaded build a list item
        # is read with a reference taken safely while another thread stores a new index.
        self.current: list[RouteIndex | None] = [None]

    def current_index(self) -> RouteIndex:
        index = self.current[0]
        if (
            index is None
            or index.generation != ROUTES_GENERATION.value
            or not self.unchanged(self.installed_on.routes, index.snapshot)
        ):
            index = self.rebuild()
            self.current[0] = index
        return index

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        if scope["type"] != "http":
            return self.fallback(scope, receive, send)  # type: ignore[no-any-return]
        index = self.current_index()
        selected = select(index, scope)
        if selected is None or selected[1] is None:
            # Redirects, low-priority routes and the 404 are FastAPI's.
            return self.fallback(scope, receive, send)  # type: ignore[no-any-return]
        if index.form_limits:
            apply_form_limits(scope, index.form_limits)
        if "router" not in scope:
            scope["router"] = self.installed_on
        return dispatch(selected, scope, receive, send)


# What `_routing.index` builds indexes from.
INDEX_CLASSES: tuple[type, type, type, type] = (RouteIndex, IndexEntry, IndexNode, RouteMatcher)


def included_index(router: Any, included: Any) -> RouteIndex:
    """The index of one inclusion of a MsgspecRouter, rebuilt when routes change by the
    builder the router's class was given at registration (`index_builder`)."""
    index = getattr(included, INDEX_ATTR, None)
    if index is None or index.generation != ROUTES_GENERATION.value:
        index = router.index_builder(included)
        setattr(included, INDEX_ATTR, index)
    return index  # type: ignore[no-any-return]


def serving_inclusion(router: Any, scope: Scope) -> Any:
    """The inclusion of `router` FastAPI is matching or handling, for HTTP; else None."""
    if scope["type"] != "http":
        return None
    fastapi_scope = scope.get(FASTAPI_SCOPE_KEY)
    if fastapi_scope is None:
        return None
    included = fastapi_scope.get(INCLUDED_ROUTER_KEY)
    if included is None or getattr(included, INCLUSION_ROUTER_ATTR, None) is not router:
        return None
    return included


def router_matches(router: Any, scope: Scope) -> tuple[Any, Scope]:
    """`MsgspecRouter.matches`: this inclusion's candidates through its index."""
    included = serving_inclusion(router, scope)
    if included is not None:
        selected = select(included_index(router, included), scope)
        if selected is not None:
            return selected[0], selected_child_scope(selected)
    return API_ROUTER_MATCHES(router, scope)


def router_handle(router: Any, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
    """`MsgspecRouter.handle`: the selected route of this inclusion, through its index."""
    included = serving_inclusion(router, scope)
    if included is not None:
        selected = select(included_index(router, included), scope)
        if selected is not None and selected[1] is not None:
            return dispatch(selected, scope, receive, send)
    return API_ROUTER_HANDLE(router, scope, receive, send)


# The index builder tells the package's routes and routers from custom ones by these.
_shared.TWIN_ENTRY_POINTS.add(route_matches, route_handle, router_matches, router_handle)
