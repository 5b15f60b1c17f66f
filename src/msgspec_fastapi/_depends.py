"""msgspec types in dependencies: a body parameter or a parameter model of a dependency,
at any depth of a route's dependency tree.

FastAPI cannot read such a dependency (it asks Pydantic for a field), so registration
reads the tree first (`DependencyTree`) and hands FastAPI, for each dependency that takes
a msgspec value or depends on one that does, a `StandIn`: the same callable behind a
signature where each msgspec parameter is itself a dependency on a provider, which passes
on what the request path decoded. Body parameters join the route's body, decoded once and
shared by name as FastAPI shares them; parameter models join the route's models.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Sequence
from typing import Annotated, Any

from fastapi import params
from starlette.requests import Request

from ._models import ModelPlan, model_param
from ._plan import find_body
from ._shared import REACHED_KEY, SCOPE_KEY, RequestValidationError
from ._types import annotated_metadata, mentions_struct, resolved_parameters, strip_annotated
from ._validation import request_invalid


class StandIn:
    """A dependency as FastAPI sees it on a msgspec route.

    It hashes and compares equal to the callable it stands for, so that
    `dependency_overrides[original]` still finds it, and unwraps to it (`__wrapped__`),
    so that FastAPI still tells a coroutine, a generator or a class for what it is.
    """

    def __init__(self, original: Callable[..., Any], signature: inspect.Signature) -> None:
        self.__wrapped__ = original
        self.__signature__ = signature
        for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
            if hasattr(original, attribute):
                setattr(self, attribute, getattr(original, attribute))

    def __call__(self, **values: Any) -> Any:
        return self.__wrapped__(**values)

    def __hash__(self) -> int:
        return hash(self.__wrapped__)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StandIn):
            return other.__wrapped__ is self.__wrapped__
        return other is self.__wrapped__

    def __repr__(self) -> str:
        return f"StandIn({self.__wrapped__!r})"


def _refuse(scope: Any) -> RequestValidationError:
    """The 422 of what the request path could not decode, raised as the endpoint's would be."""
    _runtime, body, raw, _models, model_errors = scope[SCOPE_KEY]
    scope[REACHED_KEY] = True
    return request_invalid(model_errors, body, raw)


def _body_provider(key: str | None) -> Callable[..., Any]:
    """The decoded body (`key` None), or one parameter of an embedded body."""

    async def provide_body(request: Request) -> Any:
        _runtime, body, _raw, _models, model_errors = request.scope[SCOPE_KEY]
        if model_errors or type(body) is RequestValidationError:
            raise _refuse(request.scope)
        return body if key is None else body[key]

    return provide_body


def _model_provider(key: str) -> Callable[..., Any]:
    """One parameter model, as the request path gathered it."""

    async def provide_model(request: Request) -> Any:
        _runtime, body, _raw, models, model_errors = request.scope[SCOPE_KEY]
        if model_errors or type(body) is RequestValidationError:
            raise _refuse(request.scope)
        return models[key]

    return provide_model


def _depends_in(parameter: inspect.Parameter) -> params.Depends | None:
    found = [m for m in annotated_metadata(parameter.annotation) if isinstance(m, params.Depends)]
    if isinstance(parameter.default, params.Depends):
        found.append(parameter.default)
    return found[-1] if found else None


def _callable_of(depends: params.Depends, parameter: inspect.Parameter | None) -> Any:
    if depends.dependency is not None or parameter is None:
        return depends.dependency
    # `Depends()` without a callable depends on the annotated class itself.
    return strip_annotated(parameter.annotation)


def _with_dependency(parameter: inspect.Parameter, call: Any) -> inspect.Parameter:
    """`parameter` depending on `call`, keyword-only (FastAPI passes keywords).

    The `Depends` goes in the default: a stand-in equals the callable it stands for, so
    `Annotated` (which caches by equality) would hand back the old `Depends`.
    """
    depends = _depends_in(parameter)
    assert depends is not None
    annotation = parameter.annotation
    metadata = [m for m in annotated_metadata(annotation) if not isinstance(m, params.Depends)]
    bare = strip_annotated(annotation)
    return parameter.replace(
        kind=parameter.KEYWORD_ONLY,
        annotation=Annotated[(bare, *metadata)] if metadata else bare,
        default=dataclasses.replace(depends, dependency=call),
    )


@dataclasses.dataclass(slots=True)
class _Node:
    """A dependency that takes msgspec values, itself or through its own dependencies."""

    call: Any
    where: str  # "endpoint(): dependency name()"
    parameters: list[inspect.Parameter]
    body: list[str]  # its parameters that are part of the body
    models: dict[str, str]  # its model parameters: name -> key among the route's models
    children: dict[str, _Node]  # its dependency parameters that lead to msgspec values
    stand_in: StandIn | None = None


class DependencyTree:
    """The dependencies of one route, as the msgspec request path needs them.

    `read` walks them once, refusing what cannot be supported with a TypeError naming the
    endpoint, the dependency and the parameter. `body` and `models` are then what the
    route's request path must decode for them, and `stand_ins` makes what FastAPI sees.
    """

    def __init__(self, endpoint_name: str) -> None:
        self._endpoint_name = endpoint_name
        self._nodes: dict[int, _Node | None] = {}
        # The body parameters, each with the dependency it is from.
        self.body: list[tuple[str, inspect.Parameter]] = []
        self.models: list[ModelPlan] = []

    @classmethod
    def read(
        cls, endpoint: Callable[..., Any], route_dependencies: Sequence[Any]
    ) -> DependencyTree:
        """The tree of `endpoint` on a route with these `dependencies=` (the router's too)."""
        name = getattr(endpoint, "__name__", type(endpoint).__name__)
        tree = cls(name)
        # FastAPI solves the route's `dependencies=` before the endpoint's parameters.
        tree._read_list(route_dependencies)
        for parameter in resolved_parameters(endpoint):
            depends = _depends_in(parameter)
            if depends is not None:
                tree._visit(_callable_of(depends, parameter))
        return tree

    @property
    def empty(self) -> bool:
        return not any(self._nodes.values())

    def _read_list(self, dependencies: Sequence[Any]) -> None:
        for depends in dependencies:
            if isinstance(depends, params.Depends):
                self._visit(_callable_of(depends, None))

    def _visit(self, call: Any) -> _Node | None:
        if call is None:
            return None
        key = id(call)
        if key in self._nodes:
            return self._nodes[key]
        self._nodes[key] = None  # also ends a cycle, which FastAPI reports itself
        try:
            parameters = resolved_parameters(call)
        except (TypeError, ValueError, NameError):
            return None  # FastAPI reports what it cannot read
        dependency = getattr(call, "__name__", type(call).__name__)
        where = f"{self._endpoint_name}(): dependency {dependency}"
        node = _Node(call, f"{where}()", parameters, [], {}, {})
        takes_struct = any(
            _depends_in(p) is None and mentions_struct(p.annotation) for p in parameters
        )
        if takes_struct:
            # Its own before its dependencies': FastAPI's order of body fields.
            self._read_parameters(node, where)
        for parameter in parameters:
            depends = _depends_in(parameter)
            child = None if depends is None else self._visit(_callable_of(depends, parameter))
            if child is not None:
                node.children[parameter.name] = child
        if not takes_struct and not node.children:
            return None
        self._nodes[key] = node
        return node

    def _read_parameters(self, node: _Node, where: str) -> None:
        for parameter in find_body(where, node.parameters):
            node.body.append(parameter.name)
            self.body.append((node.where, parameter))
        for parameter in node.parameters:
            plan = model_param(where, parameter)
            if plan is not None:
                key = f"{node.where} {parameter.name}"
                node.models[parameter.name] = key
                self.models.append(dataclasses.replace(plan, name=key))
        for parameter in node.parameters:
            taken = parameter.name in node.body or parameter.name in node.models
            if taken or _depends_in(parameter) is not None:
                continue
            if mentions_struct(parameter.annotation):
                raise TypeError(
                    f"{node.where}, parameter {parameter.name!r}: a msgspec type in a "
                    "dependency must be its body or a query, header or cookie model"
                )
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                raise TypeError(
                    f"{node.where}: *args and **kwargs are not supported on a dependency "
                    "that takes msgspec types"
                )

    def stand_ins(
        self,
        embedded: bool,
        route_dependencies: Sequence[Any],
        endpoint_parameters: Sequence[inspect.Parameter],
    ) -> tuple[list[Any], list[inspect.Parameter]]:
        """The route's `dependencies=` and the endpoint's parameters as FastAPI should see
        them: every `Depends` that leads to msgspec values points at a stand-in."""
        providers: dict[str, Callable[..., Any]] = {}

        def body_provider(name: str) -> Callable[..., Any]:
            if name not in providers:
                providers[name] = _body_provider(name if embedded else None)
            return providers[name]

        def stand_in(node: _Node) -> StandIn:
            if node.stand_in is not None:
                return node.stand_in
            exposed = []
            for parameter in node.parameters:
                provider = None
                if parameter.name in node.body:
                    provider = body_provider(parameter.name)
                elif parameter.name in node.models:
                    provider = _model_provider(node.models[parameter.name])
                if provider is not None:
                    parameter = parameter.replace(annotation=Any, default=params.Depends(provider))
                elif parameter.name in node.children:
                    parameter = _with_dependency(parameter, stand_in(node.children[parameter.name]))
                if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
                    # FastAPI passes keywords; keyword-only lifts the order of defaults.
                    parameter = parameter.replace(kind=parameter.KEYWORD_ONLY)
                exposed.append(parameter)
            exposed.sort(key=lambda p: p.kind)
            node.stand_in = StandIn(node.call, inspect.Signature(exposed))
            return node.stand_in

        dependencies = []
        for depends in route_dependencies:
            node = self._node_of(depends, None)
            if node is not None:
                depends = dataclasses.replace(depends, dependency=stand_in(node))
            dependencies.append(depends)
        parameters = []
        for parameter in endpoint_parameters:
            node = self._node_of(_depends_in(parameter), parameter)
            if node is not None:
                parameter = _with_dependency(parameter, stand_in(node))
            parameters.append(parameter)
        return dependencies, sorted(parameters, key=lambda p: p.kind)

    def _node_of(self, depends: Any, parameter: inspect.Parameter | None) -> _Node | None:
        if not isinstance(depends, params.Depends):
            return None
        return self._nodes.get(id(_callable_of(depends, parameter)))


def refuse_inclusion_dependencies(dependencies: Sequence[Any]) -> None:
    """Refuse msgspec types in the dependencies an inclusion adds to routes (those of an
    include_router() call, or of the including router): FastAPI adds them to routes whose
    body and models were settled when they were added."""
    tree = DependencyTree("include_router()")
    tree._read_list(dependencies)
    node = next((n for n in tree._nodes.values() if n is not None and n.children == {}), None)
    if node is None:
        return
    parameter = next(iter([*node.body, *node.models]), "")
    raise TypeError(
        f"{node.where}, parameter {parameter!r}: msgspec types are not supported in the "
        "dependencies of an include_router() call or of the including router; declare "
        "the dependency on the route, or on the router the route is added to"
    )
