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

import inspect
from dataclasses import dataclass
from functools import cache
from typing import Any

from fastapi import params
from fastapi.datastructures import DefaultPlaceholder
from fastapi.sse import EventSourceResponse
from pydantic import TypeAdapter

from .. import _compat
from .._params.converters import defaults_need_fastapi, direct_param_specs
from .._shared import STREAM_JSONL, STREAM_NONE, STREAM_SSE
from .plan import DirectPlan, EndpointSpec, OutputPlan, RoutePlan

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


# The pydantic-core schema types whose validation from JSON (`validate_json`) gives what
# FastAPI's `json.loads` then `validate_python` gives, wherever it succeeds: JSON's own
# types and containers of them, models, dataclasses, typed dicts, and the types read from
# a JSON string the same way in both modes. Not: decimals (validate_json keeps a number's
# digits, json.loads makes a float first), unions (JSON mode ranks a string that parses as
# a date as an exact date), bytes (the JSON mode follows `val_json_bytes`), and validators
# that see the input (before, wrap, plain), which may tell the two inputs apart.
_JSON_ALIKE = frozenset(
    {
        "any",
        "bool",
        "date",
        "datetime",
        "default",
        "definition-ref",
        "definitions",
        "dict",
        "enum",
        "float",
        "frozenset",
        "int",
        "list",
        "literal",
        "model",
        "model-field",
        "model-fields",
        "none",
        "nullable",
        "set",
        "str",
        "time",
        "timedelta",
        "tuple",
        "typed-dict",
        "typed-dict-field",
        "dataclass",
        "dataclass-args",
        "dataclass-field",
        "uuid",
    }
)


def validates_json_alike(schema: Any) -> bool:
    """Whether validating a JSON body with this pydantic-core schema straight from its
    bytes gives FastAPI's value wherever it succeeds: only `_JSON_ALIKE` types and after
    validators (which see the validated value), and nothing strict (the JSON mode takes
    strings for dates and UUIDs that the strict Python mode refuses). Serialization
    schemas are not looked at: they do not validate."""
    if isinstance(schema, list):
        return all(validates_json_alike(item) for item in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("strict") is True:
        return False
    kind = schema.get("type")
    if kind == "function-after":
        return validates_json_alike(schema["schema"])
    if kind is not None and kind not in _JSON_ALIKE:
        return False
    return all(
        validates_json_alike(value)
        for key, value in schema.items()
        if key not in ("serialization", "computed_fields", "metadata", "ref", "cls", "function")
    )


@dataclass(frozen=True, slots=True)
class PydanticPlan:
    """What the request path needs per request for one Pydantic route."""

    # What every direct route has: the endpoint, its parameters, status code, body limit;
    # and, where the response is msgspec's, its output plan (then `response_field` is None).
    route: RoutePlan
    # FastAPI's body fields, as its solving takes them (empty: the route reads no body),
    # and whether it reads them by key; the one field that takes the whole body, where
    # there is one (not embedded), and its parameter's name.
    body_fields: list[Any]
    embedded: bool
    whole_body: Any
    body_name: str | None
    # Where the whole body's type validates from JSON as FastAPI's parse and validation do
    # (`validates_json_alike`), its validator (pydantic-core's, under the field's
    # TypeAdapter): the request path validates the bytes first, and takes FastAPI's own
    # steps wherever that refuses the body.
    json_validator: Any
    absent_body: Any  # what FastAPI's solving takes for a request without a body
    # FastAPI's response field (None: the route has no response model, and the result is
    # made JSON-ready by FastAPI's jsonable_encoder), and the pydantic-core validator and
    # serializer under its TypeAdapter, called as the field and the adapter call them:
    # `validate_python(result, from_attributes=True)`, and `to_json` with every argument
    # the adapter's `dump_json` passes (`dump_arguments`).
    response_field: Any
    response_validator: Any
    response_serializer: Any
    dump_arguments: dict[str, Any]
    # The route's response_model_* options, as the response field's serializers take them.
    dump_options: dict[str, Any]
    # Where no response class was chosen and there is a response field, the field renders
    # the JSON itself (FastAPI's dump_json path); otherwise the class renders the content,
    # made with the keyword arguments FastAPI gives it (the route's status code, if set).
    dump_json: bool
    response_class: Any
    response_args: dict[str, Any]
    path: str  # the path template FastAPI names in the context of a validation error
    # A generator endpoint's items: how FastAPI streams them (STREAM_NONE: the endpoint is
    # no generator), and the validator and serializer under the stream item field's
    # TypeAdapter, called as the response field's are (None: no item type; each item is
    # written as FastAPI writes an untyped one).
    stream: int = STREAM_NONE
    item_validator: Any = None
    item_serializer: Any = None


def streams_items(route: Any) -> int:
    """How FastAPI's handler streams the items of a generator endpoint on `route` (a route
    or the context of one being built): as JSON Lines without a chosen response class, as
    server-sent events with an EventSourceResponse; STREAM_NONE where the endpoint is no
    generator, or a chosen class renders the generator itself."""
    call = route.dependant.call
    if not (_compat.is_gen_callable(call) or _compat.is_async_gen_callable(call)):
        return STREAM_NONE
    response_class = route.response_class
    if isinstance(response_class, DefaultPlaceholder):
        return STREAM_JSONL
    if isinstance(response_class, type) and issubclass(response_class, EventSourceResponse):
        return STREAM_SSE
    return STREAM_NONE


def _built(core: Any, method: str) -> Any:
    """A TypeAdapter's validator or serializer (pydantic-core's, or the wrapper Pydantic's
    plugins put around it), or None while it is a stand-in that builds the real one on
    first use: a stand-in's class has no `method`, it answers every name per instance."""
    return core if hasattr(type(core), method) else None


@cache
def _dump_json_defaults() -> dict[str, Any]:
    """What TypeAdapter.dump_json passes on to its serializer's `to_json` for each
    keyword it is not given: its own defaults."""
    signature = inspect.signature(TypeAdapter.dump_json)
    return {
        name: parameter.default
        for name, parameter in signature.parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY
    }


def reads_form(route: Any) -> bool:
    """Whether FastAPI's handler parses the route's body as a form."""
    body_field = route.body_field
    return body_field is not None and isinstance(body_field.field_info, params.Form)


def pydantic_plan(route: Any, max_body_size: int) -> PydanticPlan | None:
    """The plan of a route FastAPI built alone (`route` is the route or the inclusion
    context being built), or None where its requests need FastAPI's handler: dependencies
    or special parameters to solve, a parameter the request path cannot convert or whose
    default FastAPI makes, a form body, or a generator endpoint whose response class
    renders the generator itself (items streamed as JSON Lines or server-sent events are
    the request path's, `streams_items`). The endpoint is awaited where FastAPI awaits
    it (FastAPI's own test, which looks through wrappers)."""
    call = route.dependant.call
    return _plan(route, call, _compat.is_coroutine_callable(call), (), None, max_body_size)


def pydantic_body_plan(
    route: Any, spec: EndpointSpec, output: OutputPlan, max_body_size: int
) -> PydanticPlan | None:
    """The plan of a route whose body FastAPI validates with Pydantic and whose response
    is msgspec's (`output`, as the request path sends it on the delegated tier): its
    endpoint called straight, without the wrapper FastAPI was built on, where the endpoint
    takes neither the Request nor the Response the wrapper is given. None as for
    `pydantic_plan`, and where the route reads a msgspec body or parameter model too, or
    streams."""
    if spec.body is not None or spec.models or spec.form is not None:
        return None
    if not (spec.injected_request and spec.injected_response) or output.stream != STREAM_NONE:
        return None
    given = (spec.request_name, spec.response_name)
    return _plan(route, spec.endpoint, spec.is_coroutine, given, output, max_body_size)


def pydantic_dependency_plan(route: Any, max_body_size: int) -> PydanticPlan | None:
    """The plan of the body and the response of a route FastAPI built alone whose
    dependencies or special parameters the dependency plan solves (`_dependencies.plan`,
    with `pydantic_spec`): what `pydantic_plan` has, but the parameters, which each step
    converts, and a form body, which the executor parses. None where FastAPI's handler
    renders what the request path cannot (a response class given the generator)."""
    call = route.dependant.call
    return _runtime_plan(
        route, call, _compat.is_coroutine_callable(call), (), None, max_body_size, forms=True
    )


def pydantic_body_dependency_plan(
    route: Any, spec: EndpointSpec, output: OutputPlan, max_body_size: int
) -> PydanticPlan | None:
    """`pydantic_dependency_plan` for a route whose body FastAPI validates with Pydantic
    and whose response is msgspec's (`output`); None where the route reads a msgspec body
    or parameter model too, or streams."""
    if spec.body is not None or spec.models or spec.form is not None:
        return None
    if output.stream != STREAM_NONE:
        return None
    return _runtime_plan(
        route, spec.endpoint, spec.is_coroutine, (), output, max_body_size, forms=True
    )


def pydantic_spec(route: Any) -> EndpointSpec:
    """What the dependency plan needs to know of the endpoint of a route without msgspec
    types: FastAPI calls it itself, with every special object it asks for."""
    call = route.dependant.call
    return EndpointSpec(
        endpoint=call,
        is_coroutine=_compat.is_coroutine_callable(call),
        body=None,
        output=None,
        request_name="",
        response_name="",
        injected_request=False,
        injected_response=False,
    )


def _plan(
    route: Any,
    call: Any,
    is_coroutine: bool,
    given: tuple[str, ...],
    output: OutputPlan | None,
    max_body_size: int,
) -> PydanticPlan | None:
    """`call` (awaited where `is_coroutine`) behind what FastAPI built `route` on, whose
    special parameters named in `given` the request path need not give; the response
    `output`'s where there is one, else as FastAPI renders it."""
    dependant = route.dependant
    special = [getattr(dependant, name) for name in _SPECIAL_PARAMETERS]
    if dependant.dependencies or any(name and name not in given for name in special):
        return None
    if defaults_need_fastapi(dependant):
        return None
    converted = direct_param_specs(dependant)
    if converted is None:
        return None
    return _runtime_plan(route, call, is_coroutine, converted, output, max_body_size)


def _runtime_plan(
    route: Any,
    call: Any,
    is_coroutine: bool,
    converted: tuple[Any, ...],
    output: OutputPlan | None,
    max_body_size: int,
    forms: bool = False,
) -> PydanticPlan | None:
    """The plan of `_plan`, its parameters `converted` (empty where each step of the
    dependency plan converts its own); a form body only with `forms` (the dependency
    plan's executor parses forms)."""
    dependant = route.dependant
    stream = streams_items(route)
    generator = _compat.is_gen_callable(call) or _compat.is_async_gen_callable(call)
    if generator and (stream == STREAM_NONE or output is not None):
        return None  # the response class renders the generator, or msgspec's items
    if not forms and reads_form(route):
        return None
    strict = route.strict_content_type
    response_class = route.response_class
    chosen = None if isinstance(response_class, DefaultPlaceholder) else response_class
    shared = RoutePlan(
        body=None,
        output=output,
        strict_content_type=bool(
            strict.value if isinstance(strict, DefaultPlaceholder) else strict
        ),
        status_code=route.status_code or 200,
        direct=DirectPlan(call, is_coroutine, converted, None),
        max_body_size=max_body_size,
    )
    fields = list(dependant.body_params)
    embedded = _compat.embeds_body_fields(route)
    whole = fields[0] if len(fields) == 1 and not embedded else None
    json_validator = None
    if whole is not None:
        adapter = _compat.field_type_adapter(whole)
        if validates_json_alike(adapter.core_schema):
            json_validator = _built(adapter.validator, "validate_json")
    response_field = route.response_field if output is None else None
    response_validator = response_serializer = None
    if response_field is not None:
        response_validator, response_serializer = _field_calls(response_field)
        if response_validator is None or response_serializer is None:
            return None  # built on first use (defer_build): FastAPI's handler builds it
    item_field = route.stream_item_field if stream != STREAM_NONE else None
    item_validator = item_serializer = None
    if item_field is not None:
        item_validator, item_serializer = _field_calls(item_field)
        if item_validator is None or item_serializer is None:
            return None
    dump_options = {
        "include": route.response_model_include,
        "exclude": route.response_model_exclude,
        "by_alias": route.response_model_by_alias,
        "exclude_unset": route.response_model_exclude_unset,
        "exclude_defaults": route.response_model_exclude_defaults,
        "exclude_none": route.response_model_exclude_none,
    }
    return PydanticPlan(
        route=shared,
        body_fields=fields,
        embedded=embedded,
        whole_body=whole,
        body_name=whole.name if whole is not None else None,
        json_validator=json_validator,
        absent_body=_compat.absent_body(),
        response_field=response_field,
        response_validator=response_validator,
        response_serializer=response_serializer,
        dump_arguments={**_dump_json_defaults(), **dump_options},
        dump_options=dump_options,
        dump_json=response_field is not None and chosen is None,
        response_class=response_class.value if chosen is None else chosen,
        response_args={"status_code": route.status_code} if route.status_code else {},
        path=dependant.path or "",
        stream=stream,
        item_validator=item_validator,
        item_serializer=item_serializer,
    )


def _field_calls(field: Any) -> tuple[Any, Any]:
    """The validator and serializer under a FastAPI field's TypeAdapter (either None while
    it is built on first use)."""
    adapter = _compat.field_type_adapter(field)
    return _built(adapter.validator, "validate_python"), _built(adapter.serializer, "to_json")
