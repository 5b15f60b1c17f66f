"""Registration: a route's analysis from what it was added with, for the route and again
for each inclusion whose dependencies take msgspec types.

An inclusion (`include_router(dependencies=...)`, the including router's and the
application's `dependencies=`) adds its dependencies in front of the route's. Where one
of them takes a msgspec body or model, the route is analysed again as if they had been
declared first among its own: its body (embedded where it now has several parts, the
inclusion's dependencies' parts after the endpoint's, as FastAPI orders body fields), its
models, the stand-ins FastAPI sees and the wrapper it builds on, and its OpenAPI entries.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .._dependencies.tree import DependencyTree
from .._openapi.schemas import route_openapi
from .delegated import make_wrapper
from .plan import EndpointSpec, analyze_endpoint


@dataclass(frozen=True, slots=True)
class Registration:
    """What a route was added with, as `analyse` needs it."""

    endpoint: Callable[..., Any]
    # The route's options (the router's responses merged in), before any analysis.
    options: dict[str, Any]
    untyped_allowed: bool
    msgpack: bool
    sse: bool
    body_media_type: str  # what untyped responses are labelled with (`analyze_endpoint`)
    response_media_type: str  # what responses are documented under
    max_body_size: int | None
    # The router's and the route's `dependencies=`, as declared.
    dependencies: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Analysis:
    """A route's analysis for one place it is served."""

    spec: EndpointSpec | None  # None: FastAPI serves the route alone
    endpoint: Callable[..., Any]  # what FastAPI builds on: the wrapper, or the user's
    # The `dependencies=` FastAPI should see (stand-ins where they lead to msgspec
    # values), the added ones first; None: as declared.
    dependencies: list[Any] | None
    # The route's options with its OpenAPI entries (`responses`, `openapi_extra`) filled in.
    options: dict[str, Any]
    components: dict[str, Any]  # the msgspec schemas those entries refer to


def analyse(registration: Registration, added: Sequence[Any] = ()) -> Analysis:
    """The route's analysis with `added` (an inclusion's dependencies) in front of its own
    dependencies. TypeError for what cannot be supported, naming the endpoint."""
    endpoint = registration.endpoint
    declared = [*added, *registration.dependencies]
    tree = DependencyTree.read(endpoint, declared)
    spec, exposed = analyze_endpoint(
        endpoint,
        registration.options,
        registration.untyped_allowed,
        registration.msgpack,
        registration.sse,
        registration.body_media_type,
        tree.body,
        tree.models,
    )
    dependencies = None
    if spec is not None and not tree.empty:
        embedded = spec.body is not None and spec.body.embedded
        dependencies, parameters = tree.stand_ins(
            embedded, declared, list(exposed.parameters.values())
        )
        exposed = exposed.replace(parameters=parameters)
    options = dict(registration.options)
    components = route_openapi(
        spec, options, registration.max_body_size, registration.response_media_type
    )
    built_on = endpoint if spec is None else make_wrapper(spec, exposed)
    return Analysis(spec, built_on, dependencies, options, components)
