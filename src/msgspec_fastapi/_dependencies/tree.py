"""msgspec types in dependencies: a body parameter or a parameter model of a dependency,
at any depth of a route's dependency tree.

FastAPI cannot read such a dependency (it asks Pydantic for a field), so registration
reads the tree first (`DependencyTree`) and hands FastAPI, for each dependency that takes
a msgspec value or depends on one that does, a stand-in: a callable that calls it, behind
a signature with a Request in place of its msgspec parameters, which the stand-in fills
in from what the request path decoded. Body parameters join the route's body, decoded
once and shared by name as FastAPI shares them; parameter models join the route's models.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Annotated, Any

from fastapi import params
from starlette.requests import Request

from .._endpoint.plan import find_body
from .._params.annotations import (
    annotated_metadata,
    mentions_struct,
    resolved_parameters,
    strip_annotated,
)
from .._params.models import ModelPlan, model_param
from .standins import StandInBase, Takes, stand_in_for


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


def _keywords(parameters: list[inspect.Parameter]) -> inspect.Signature:
    """The parameters, in their order (which is FastAPI's order of solving them), all
    keyword-only (FastAPI passes keywords), so that defaults may come in any order."""
    return inspect.Signature([p.replace(kind=p.KEYWORD_ONLY) for p in parameters])


def _with_dependency(parameter: inspect.Parameter, call: Any) -> inspect.Parameter:
    """`parameter` depending on `call`.

    The `Depends` goes in the default: a stand-in equals the callable it stands for, so
    `Annotated` (which caches by equality) would hand back the old `Depends`.
    """
    depends = _depends_in(parameter)
    assert depends is not None
    annotation = parameter.annotation
    metadata = [m for m in annotated_metadata(annotation) if not isinstance(m, params.Depends)]
    bare = strip_annotated(annotation)
    return parameter.replace(
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
    stand_in: StandInBase | None = None


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
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters):
            raise TypeError(
                f"{node.where}: *args and **kwargs are not supported on a dependency that "
                "takes msgspec types, or depends on one that does"
            )
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

    def stand_ins(
        self,
        embedded: bool,
        route_dependencies: Sequence[Any],
        endpoint_parameters: Sequence[inspect.Parameter],
    ) -> tuple[list[Any], list[inspect.Parameter]]:
        """The route's `dependencies=` and the endpoint's parameters as FastAPI should see
        them: every `Depends` that leads to msgspec values points at a stand-in."""

        def stand_in(node: _Node) -> StandInBase:
            if node.stand_in is not None:
                return node.stand_in
            exposed = []
            for parameter in node.parameters:
                if parameter.name in node.body or parameter.name in node.models:
                    continue  # filled in by the stand-in
                if parameter.name in node.children:
                    parameter = _with_dependency(parameter, stand_in(node.children[parameter.name]))
                exposed.append(parameter)
            takes = None
            if node.body or node.models:
                request_name = next(
                    (p.name for p in exposed if strip_annotated(p.annotation) is Request), None
                )
                own_request = request_name is not None
                if request_name is None:
                    request_name = "msgspec_request"
                    while any(p.name == request_name for p in node.parameters):
                        request_name += "_"
                    exposed.append(
                        inspect.Parameter(
                            request_name, inspect.Parameter.KEYWORD_ONLY, annotation=Request
                        )
                    )
                takes = Takes(
                    request_name,
                    own_request,
                    tuple((name, name if embedded else None) for name in node.body),
                    tuple(node.models.items()),
                )
            node.stand_in = stand_in_for(node.call, _keywords(exposed), takes)
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
        return dependencies, list(_keywords(parameters).parameters.values())

    def _node_of(self, depends: Any, parameter: inspect.Parameter | None) -> _Node | None:
        if not isinstance(depends, params.Depends):
            return None
        return self._nodes.get(id(_callable_of(depends, parameter)))


def take_msgspec_types(endpoint_name: str, dependencies: Sequence[Any]) -> bool:
    """Whether any of these dependencies (added to the route of `endpoint_name`) takes a
    msgspec body or model, itself or through its own dependencies."""
    tree = DependencyTree(endpoint_name)
    tree._read_list(dependencies)
    return not tree.empty


def refuse_copied_route_dependencies(dependencies: Sequence[Any]) -> None:
    """Refuse msgspec types in dependencies added to a route copied from another
    MsgspecRouter (its endpoint FastAPI's wrapper of it): its body and models were
    settled when it was first added."""
    tree = DependencyTree("add_api_route()")
    tree._read_list(dependencies)
    node = next((n for n in tree._nodes.values() if n is not None and n.children == {}), None)
    if node is None:
        return
    parameter = next(iter([*node.body, *node.models]), "")
    raise TypeError(
        f"{node.where}, parameter {parameter!r}: msgspec types are not supported in "
        "dependencies added to a route copied from another MsgspecRouter; include that "
        "router instead (include_router), or declare the dependency on the route"
    )


class _SelfOverridesKept(Mapping[Any, Any]):
    """The application's overrides as FastAPI's own solving reads them: a dependency that
    overrides itself keeps its stand-in, whose signature FastAPI can read, where the
    dependency's own (a msgspec parameter) would be refused."""

    __slots__ = ("_overrides",)

    def __init__(self, overrides: Mapping[Any, Any]) -> None:
        self._overrides = overrides

    def __getitem__(self, key: Any) -> Any:
        value = self._overrides[key]
        return key if isinstance(key, StandInBase) and key == value else value

    def __iter__(self) -> Iterator[Any]:
        return iter(self._overrides)

    def __len__(self) -> int:
        return len(self._overrides)


class StandInOverridesProvider:
    """The overrides provider given to FastAPI's handler of a route with stand-ins: it
    reads the application's `dependency_overrides` on every request, as FastAPI does."""

    __slots__ = ("_provider",)

    def __init__(self, provider: Any) -> None:
        self._provider = provider

    @property
    def dependency_overrides(self) -> Mapping[Any, Any]:
        overrides: Mapping[Any, Any] = getattr(self._provider, "dependency_overrides", {})
        return _SelfOverridesKept(overrides) if overrides else overrides


def has_stand_ins(dependant: Any) -> bool:
    """Whether FastAPI's dependant of a route calls a stand-in at any depth."""
    return any(
        isinstance(sub.call, StandInBase) or has_stand_ins(sub) for sub in dependant.dependencies
    )
