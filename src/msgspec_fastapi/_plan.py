"""Registration: read an endpoint once and decide everything the request path needs.

`analyze_endpoint` runs when a route is added. It finds the msgspec body parameter,
builds its decoder, decides how the response is encoded, and rejects what is not
supported with a TypeError that names the culprit. The result, an `EndpointSpec`, is
fixed for the route's lifetime. `RoutePlan` adds what depends on where the route is
included (status code, content-type policy, the direct tier's parameters) and is what
the request-path twins read.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from copy import deepcopy
from dataclasses import dataclass
from hashlib import sha256
from typing import Any, get_args, get_origin

import msgspec
from fastapi import params
from fastapi.datastructures import DefaultPlaceholder
from pydantic import BaseModel
from pydantic_core import PydanticUndefined
from starlette.requests import Request
from starlette.responses import Response

from ._params import ParamSpec, constrained_type
from ._shared import (
    BODYLESS_STATUSES,
    CONTAINER_DICT,
    CONTAINER_LIST,
    CONTAINER_NONE,
    CONTAINER_OPTIONAL,
    CONTAINER_TUPLE,
    MISSING,
    OUTPUT_TRUSTED,
    OUTPUT_UNTYPED,
    OUTPUT_VALIDATE,
)
from ._types import (
    EMPTY,
    annotated_metadata,
    endpoint_hints,
    is_body_shaped,
    is_coroutine_endpoint,
    is_msgspec_json_type,
    is_struct_class,
    mentions_pydantic,
    mentions_struct,
    optional_inner,
    strip_annotated,
)

_REJECTED_FOR_TYPED = (
    "response_model_include",
    "response_model_exclude",
    "response_model_exclude_unset",
    "response_model_exclude_defaults",
    "response_model_exclude_none",
)


@dataclass(frozen=True, slots=True)
class BodyPlan:
    name: str
    decoder: msgspec.json.Decoder[Any]
    decode_type: Any
    default: Any
    embedded: bool

    @property
    def required(self) -> bool:
        return self.default is MISSING


@dataclass(frozen=True, slots=True)
class OutputPlan:
    mode: int
    encoder: msgspec.json.Encoder
    decoder: msgspec.json.Decoder[Any] | None = None
    output_type: Any = None
    trusted_class: type | None = None
    container: int = CONTAINER_NONE


@dataclass(frozen=True, slots=True)
class EndpointSpec:
    """What registration learned about one endpoint; shared by all its inclusions."""

    endpoint: Callable[..., Any]
    is_coroutine: bool
    body: BodyPlan | None
    output: OutputPlan | None
    request_name: str
    response_name: str
    injected_request: bool
    injected_response: bool


@dataclass(frozen=True, slots=True)
class DirectPlan:
    endpoint: Callable[..., Any]
    is_coroutine: bool
    params: tuple[ParamSpec, ...]
    body_name: str | None


@dataclass(frozen=True, slots=True)
class RoutePlan:
    """Everything one route needs per request, for one place it is included."""

    body: BodyPlan | None
    output: OutputPlan | None  # None: FastAPI's response (Pydantic, a custom class)
    strict_content_type: bool
    status_code: int
    direct: DirectPlan | None
    # Enforced by the request path only where FastAPI does not (before 0.164); -1: none.
    max_body_size: int = -1


def literal_path(path_regex: re.Pattern[str], path_format: str) -> str | None:
    """The path a route without path parameters matches, when its regex is Starlette's.

    Starlette compiles such a path to "^<escaped path>$", so the request path may compare
    strings instead. Note `$`: the regex also matches the path followed by one newline.
    """
    if "{" in path_format or path_regex != re.compile("^" + re.escape(path_format) + "$"):
        return None
    return path_format


def _untyped_hook(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    raise TypeError(f"Encoding objects of type {type(value).__name__} is unsupported")


_TYPED_ENCODER = msgspec.json.Encoder()
_UNTYPED_OUTPUT = OutputPlan(OUTPUT_UNTYPED, msgspec.json.Encoder(enc_hook=_untyped_hook))


def _param_metadata(parameter: inspect.Parameter) -> list[Any]:
    return [*annotated_metadata(parameter.annotation), parameter.default]


def _find_body(endpoint_name: str, parameters: list[inspect.Parameter]) -> inspect.Parameter | None:
    body = None
    for parameter in parameters:
        metadata = _param_metadata(parameter)
        where = f"{endpoint_name}(): parameter {parameter.name!r}"
        if any(isinstance(m, params.Depends) for m in metadata):
            continue
        if any(isinstance(m, (params.Form, params.File)) for m in metadata):
            if mentions_struct(parameter.annotation):
                raise TypeError(f"{where}: msgspec Structs are not supported as Form or File")
            continue
        explicit_param = any(isinstance(m, params.Param) for m in metadata)
        if explicit_param:
            if mentions_struct(parameter.annotation):
                raise TypeError(
                    f"{where}: msgspec Structs are not supported as path, query, header "
                    "or cookie parameters"
                )
            continue
        explicit_body = any(isinstance(m, params.Body) for m in metadata)
        wants_body = explicit_body or mentions_struct(parameter.annotation)
        wants_body = wants_body or is_body_shaped(parameter.annotation)
        if not wants_body or not is_msgspec_json_type(strip_annotated(parameter.annotation)):
            continue
        if body is not None:
            raise TypeError(
                f"{where}: only one msgspec body parameter is supported per route "
                f"(already {body.name!r})"
            )
        body = parameter
    return body


def _body_plan(endpoint_name: str, parameter: inspect.Parameter) -> BodyPlan:
    where = f"{endpoint_name}(): body parameter {parameter.name!r}"
    annotation = parameter.annotation
    body_info = next((m for m in _param_metadata(parameter) if isinstance(m, params.Body)), None)
    extra = [m for m in annotated_metadata(annotation) if not isinstance(m, params.Body)]
    default: Any = MISSING
    embedded = False
    if body_info is not None:
        if body_info.media_type != "application/json":
            raise TypeError(f"{where}: only application/json bodies are supported")
        if body_info.default_factory is not None:
            raise TypeError(f"{where}: Body(default_factory=...) is not supported")
        extra.extend(body_info.metadata)
        embedded = body_info.embed is True
        if body_info.default not in (PydanticUndefined, Ellipsis):
            default = body_info.default
    if parameter.default is not EMPTY and not isinstance(parameter.default, params.Body):
        default = parameter.default
    body_type = constrained_type(strip_annotated(annotation), extra, where)
    decode_type = body_type
    if embedded:
        assert body_info is not None
        key = body_info.alias or parameter.name
        field: tuple[Any, ...] = ("value", body_type)
        if default is not MISSING:
            frozen = default
            field = ("value", body_type, msgspec.field(default_factory=lambda: deepcopy(frozen)))
        identity = msgspec.json.encode(
            {"schema": msgspec.json.schema(body_type), "key": key, "required": default is MISSING}
        )
        name = f"Body_{endpoint_name}_{sha256(identity).hexdigest()[:8]}"
        decode_type = msgspec.defstruct(name, [field], rename={"value": key})
    try:
        decoder = msgspec.json.Decoder(type=decode_type)
    except TypeError as exc:
        raise TypeError(f"{where}: {exc}") from exc
    return BodyPlan(parameter.name, decoder, decode_type, default, embedded)


def _trust(output_type: Any) -> tuple[type | None, int]:
    """Which instances can be encoded without revalidation: class and container kind."""

    def struct_class(annotation: Any) -> type | None:
        origin = get_origin(annotation)
        if origin is not None and is_struct_class(origin):
            return origin  # a generic Struct: its arguments go unchecked
        return annotation if is_struct_class(annotation) else None

    bare = strip_annotated(output_type)
    if bare is not output_type:
        # Constraints on the outer type (a list's max_length, say) need validation.
        return struct_class(bare), CONTAINER_NONE
    cls = struct_class(bare)
    if cls is not None:
        return cls, CONTAINER_NONE
    origin, args = get_origin(bare), get_args(bare)
    if origin is list and len(args) == 1 and struct_class(args[0]):
        return struct_class(args[0]), CONTAINER_LIST
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis and struct_class(args[0]):
        return struct_class(args[0]), CONTAINER_TUPLE
    if origin is dict and len(args) == 2 and args[0] is str and struct_class(args[1]):
        return struct_class(args[1]), CONTAINER_DICT
    inner = optional_inner(bare)
    if inner is not None and struct_class(inner):
        return struct_class(inner), CONTAINER_OPTIONAL
    return None, CONTAINER_NONE


def _output_plan(
    endpoint_name: str,
    return_type: Any,
    options: dict[str, Any],
    untyped_allowed: bool,
) -> OutputPlan | None:
    explicit = options.get("response_model", EMPTY)
    inferred = explicit is EMPTY or isinstance(explicit, DefaultPlaceholder)
    output_type = return_type if inferred else explicit
    if is_msgspec_json_type(output_type):
        where = f"{endpoint_name}(): response type"
        for option in _REJECTED_FOR_TYPED:
            if options.get(option):
                raise TypeError(f"{where}: {option} is not supported for msgspec responses")
        if options.get("response_model_by_alias", True) is False:
            raise TypeError(
                f"{where}: response_model_by_alias=False is not supported, msgspec "
                "responses always use the encoded field names"
            )
        if options.get("status_code") in BODYLESS_STATUSES:
            raise TypeError(f"{where}: status code {options['status_code']} has no body")
        if not untyped_allowed:
            raise TypeError(f"{where}: a custom response_class cannot encode msgspec responses")
        output_type = constrained_type(output_type, (), where)
        trusted_class, container = _trust(output_type)
        mode = OUTPUT_TRUSTED if trusted_class is not None else OUTPUT_VALIDATE
        return OutputPlan(
            mode,
            _TYPED_ENCODER,
            msgspec.json.Decoder(type=output_type),
            output_type,
            trusted_class,
            container,
        )
    if output_type in (EMPTY, None) and untyped_allowed and not mentions_pydantic(return_type):
        return _UNTYPED_OUTPUT
    return None


def _free_name(base: str, taken: set[str]) -> str:
    while base in taken:
        base += "_"
    return base


def analyze_endpoint(
    endpoint: Callable[..., Any],
    options: dict[str, Any],
    untyped_allowed: bool,
) -> tuple[EndpointSpec | None, inspect.Signature]:
    """The spec of an endpoint, or None when FastAPI should handle the route alone.

    Also returns the signature FastAPI should see: without the body parameter, with a
    Request and a Response parameter the wrapper reads, and no return annotation when
    the response is ours.
    """
    name = getattr(endpoint, "__name__", type(endpoint).__name__)
    signature = inspect.signature(endpoint)
    hints = endpoint_hints(endpoint)
    parameters = [
        p.replace(annotation=hints.get(p.name, p.annotation)) for p in signature.parameters.values()
    ]
    return_type = hints.get("return", signature.return_annotation)
    if return_type is type(None):
        return_type = None  # `-> None` declares no response model, as in FastAPI
    body_parameter = _find_body(name, parameters)
    body = _body_plan(name, body_parameter) if body_parameter is not None else None
    output = _output_plan(name, return_type, options, untyped_allowed)
    if body is None and output is None:
        return None, signature
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters):
        raise TypeError(f"{name}(): *args and **kwargs are not supported on msgspec routes")

    remaining = [p for p in parameters if p is not body_parameter]
    taken = {p.name for p in parameters}

    def injected(kind: type, fallback: str) -> tuple[str, bool]:
        for p in remaining:
            bare = strip_annotated(p.annotation)
            if isinstance(bare, type) and issubclass(bare, kind):
                return p.name, False
        added = _free_name(fallback, taken)
        taken.add(added)
        remaining.append(inspect.Parameter(added, inspect.Parameter.KEYWORD_ONLY, annotation=kind))
        return added, True

    request_name, injected_request = injected(Request, "msgspec_request")
    response_name, injected_response = injected(Response, "msgspec_response")
    exposed = signature.replace(
        parameters=sorted(remaining, key=lambda p: p.kind),
        return_annotation=EMPTY if output is not None else signature.return_annotation,
    )
    spec = EndpointSpec(
        endpoint=endpoint,
        is_coroutine=is_coroutine_endpoint(endpoint),
        body=body,
        output=output,
        request_name=request_name,
        response_name=response_name,
        injected_request=injected_request,
        injected_response=injected_response,
    )
    return spec, exposed
