"""The delegated tier's 422 in FastAPI's order, for a route whose dependencies take
msgspec bodies or models.

FastAPI validates each dependency at its turn: its sub-dependencies' errors, its own
parameters', then its body's, in the order it solves them, a body key taken by several
dependencies once per taker. On the delegated tier FastAPI solves, but our bodies and
models are decoded apart, so their errors cannot join its list at their turn. When any of
ours failed, `ErrorOrder` lists the errors again from the route's dependency plan, built
`errors_only` (FastAPI's own validation of each step's parameters, ours of its models and
body parts): the list FastAPI would have made. Only on the error path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import HTTPConnection
from starlette.types import Scope

from .._compat import parameter_errors
from .._shared import RequestValidationError
from .executor_py import body_errors

if TYPE_CHECKING:
    from .plan import DepPlan

# Plans per route for override sets seen lately, as on the direct tier.
PLANS_PER_ROUTE = 8

Probes = tuple[tuple[Any, Any], ...]


class ErrorOrder:
    """One route's (one place it is included) errors in FastAPI's order."""

    __slots__ = ("build", "plans", "provider")

    def __init__(
        self, build: Callable[[Any], tuple[DepPlan | None, Probes]], provider: Any
    ) -> None:
        self.build = build  # the errors-only plan under an override set (None: none)
        self.provider = provider  # whose dependency_overrides apply (the app), or None
        # (built under overrides, their lookups, the plan), the latest used first; a
        # tuple replaced whole, as `DependencyRoute.plans` (requests on other threads)
        self.plans: tuple[tuple[bool, Probes, DepPlan | None], ...] = ()

    def plan(self) -> DepPlan | None:
        """The plan under the overrides set now: a recent one built under overrides that
        still resolve as they did (or under none, when none are set), else a new one."""
        overrides = getattr(self.provider, "dependency_overrides", None) or None
        plans = self.plans
        for i, (overridden, probes, plan) in enumerate(plans):
            if overridden != (overrides is not None):
                continue
            try:
                if overrides is not None and any(
                    overrides.get(call, call) is not resolved for call, resolved in probes
                ):
                    continue
            except TypeError:  # an unhashable key: FastAPI fails on it too
                return None
            if i:
                self.plans = (plans[i], *plans[:i], *plans[i + 1 :])
            return plan
        try:
            plan, probes = self.build(overrides)
        except Exception:  # whatever FastAPI makes of these overrides, it makes itself
            return None
        self.plans = ((overrides is not None, probes, plan), *plans[: PLANS_PER_ROUTE - 1])
        return plan

    def errors(self, scope: Scope, body: Any) -> list[Any] | None:
        """Every validation error of the request, in FastAPI's order; None where the
        route's dependencies cannot be planned (the errors stay as they were)."""
        plan = self.plan()
        if plan is None:
            return None
        connection = HTTPConnection(scope)
        invalid = type(body) is RequestValidationError
        errors: list[Any] = []
        for step in (*plan.steps, plan.endpoint):
            errors += parameter_errors(step.dependant, connection)
            if step.params is not None:
                found: dict[str, Any] = {}
                step.params.extract_models(scope, found, errors)
            if step.body and invalid:
                errors += body_errors(body, step.body_keys)
        return errors
