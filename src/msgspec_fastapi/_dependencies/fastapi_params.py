"""A dependency plan's step whose parameters FastAPI solves itself.

On a route without msgspec types (FastAPI validates it with Pydantic), a step whose path,
query, header or cookie parameters the request path cannot convert (a Pydantic parameter
model, a Pydantic type, `AliasChoices`, `Json`, a default made by a factory or validated)
still runs from the plan: its parameters are solved per request by FastAPI's own step
(`_compat.solve_params`), which gives FastAPI's values and errors by construction.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import HTTPConnection
from starlette.types import Scope

from .._compat import solve_params


class FastAPIParams:
    """The parameters of one Dependant, as the executor extracts a step's parameters
    (`extract_params`, as the twins' RouteRuntime has it)."""

    __slots__ = ("dependant",)

    def __init__(self, dependant: Any) -> None:
        self.dependant = dependant

    def extract_params(self, scope: Scope) -> tuple[dict[str, Any], list[Any]]:
        return solve_params(self.dependant, HTTPConnection(scope))
