"""Registration: the direct tier's plan for a route FastAPI validates with Pydantic alone.

A route with no msgspec type anywhere (Pydantic models or dataclasses, or anything else
FastAPI validates with Pydantic, as its body, response model or return annotation) is
built by FastAPI as on an `APIRouter`. Where nothing between the request and the
endpoint needs FastAPI's solving, its requests skip FastAPI's route handler: the request
path converts the path, query, header and cookie parameters, hands the body to the same
Pydantic fields FastAPI's handler validates it with, and renders the response with the
route's response field as FastAPI's handler does (`PydanticRuntime` in the twins). The
answers are FastAPI's: the fields are FastAPI's own, and so is the solving of the body
(`_compat.validate_body`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import params
from fastapi.datastructures import DefaultPlaceholder

from .. import _compat
from .._params.converters import direct_param_specs
from .._shared import is_coroutine_endpoint
from .plan import DirectPlan, RoutePlan

# What a dependant names when its endpoint takes a special object (FastAPI's solving gives
# it), or its route has dependencies of its own: such routes keep FastAPI's handler.
_SPECIAL_PARAMETERS = (
    "request_param_name",
    "websocket_param_name",
    "http_connection_param_name",
    "response_param_name",
    "background_tasks_param_name",
    "security_scopes_param_name",
)


@dataclass(frozen=True, slots=True)
class PydanticPlan:
    """What the request path needs per request for one Pydantic route."""

    # What every direct route has: the endpoint, its parameters, status code, body limit.
    route: RoutePlan
    # FastAPI's body fields, as its solving takes them (empty: the route reads no body),
    # and whether it reads them by key; the one field that takes the whole body, where
    # there is one (not embedded), and its parameter's name.
    body_fields: list[Any]
    embedded: bool
    whole_body: Any
    body_name: str | None
    absent_body: Any  # what FastAPI's solving takes for a request without a body
    response_field: Any  # FastAPI's response field: it validates and renders the result
    # The route's response_model_* options, as the response field's serialize_json takes them.
    dump_options: dict[str, Any]
    path: str  # the path template FastAPI names in the context of a validation error


def pydantic_plan(route: Any, max_body_size: int) -> PydanticPlan | None:
    """The plan of a route FastAPI built alone (`route` is the route or the inclusion
    context being built), or None where its requests need FastAPI's handler: dependencies
    or special parameters to solve, a parameter the request path cannot convert, a form
    body, a generator endpoint, a chosen response class, or no response field (FastAPI
    then renders with the response class)."""
    dependant = route.dependant
    if dependant.dependencies or any(getattr(dependant, n) for n in _SPECIAL_PARAMETERS):
        return None
    call = dependant.call
    if _compat.is_gen_callable(call) or _compat.is_async_gen_callable(call):
        return None
    if route.response_field is None or not isinstance(route.response_class, DefaultPlaceholder):
        return None
    if any(isinstance(field.field_info, params.Form) for field in dependant.body_params):
        return None
    converted = direct_param_specs(dependant)
    if converted is None:
        return None
    strict = route.strict_content_type
    shared = RoutePlan(
        body=None,
        output=None,
        strict_content_type=bool(
            strict.value if isinstance(strict, DefaultPlaceholder) else strict
        ),
        status_code=route.status_code or 200,
        direct=DirectPlan(call, is_coroutine_endpoint(call), converted, None),
        max_body_size=max_body_size,
    )
    fields = list(dependant.body_params)
    embedded = _compat.embeds_body_fields(route)
    whole = fields[0] if len(fields) == 1 and not embedded else None
    return PydanticPlan(
        route=shared,
        body_fields=fields,
        embedded=embedded,
        whole_body=whole,
        body_name=whole.name if whole is not None else None,
        absent_body=_compat.absent_body(),
        response_field=route.response_field,
        dump_options={
            "include": route.response_model_include,
            "exclude": route.response_model_exclude,
            "by_alias": route.response_model_by_alias,
            "exclude_unset": route.response_model_exclude_unset,
            "exclude_defaults": route.response_model_exclude_defaults,
            "exclude_none": route.response_model_exclude_none,
        },
        path=dependant.path or "",
    )
