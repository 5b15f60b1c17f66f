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
from collections.abc import Callable, Sequence
from copy import deepcopy
from dataclasses import dataclass, replace
from hashlib import sha256
from typing import Any, get_args, get_origin

import msgspec
from fastapi import params
from fastapi.datastructures import DefaultPlaceholder
from fastapi.sse import ServerSentEvent
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined
from starlette.convertors import IntegerConvertor, StringConvertor
from starlette.requests import Request
from starlette.responses import Response

from .. import _compat
from .._errors.validation import BodyErrors
from .._openapi.body_docs import field_docs, generated_body
from .._params.annotations import (
    EMPTY,
    admits_any,
    annotated_metadata,
    endpoint_hints,
    has_dataclass_defaults,
    is_body_shaped,
    is_generator_endpoint,
    is_msgspec_json_type,
    is_struct_class,
    mentions_pydantic,
    mentions_struct,
    optional_inner,
    resolved_parameters,
    stream_item_type,
    strip_annotated,
)
from .._params.converters import ParamSpec, constrained_type
from .._params.models import ModelPlan, form_param, model_param
from .._shared import (
    BODYLESS_STATUSES,
    CONTAINER_DICT,
    CONTAINER_LIST,
    CONTAINER_NONE,
    CONTAINER_OPTIONAL,
    CONTAINER_TUPLE,
    JSON_CONTENT_TYPE,
    MISSING,
    OUTPUT_SHAPED,
    OUTPUT_TRUSTED,
    OUTPUT_UNTYPED,
    OUTPUT_VALIDATE,
    STREAM_JSONL,
    STREAM_NONE,
    STREAM_SSE,
    is_coroutine_endpoint,
    untyped_hook,
)
from .shaping import ResponseShape, response_shape


@dataclass(frozen=True, slots=True)
class BodyPlan:
    """A route's body: one parameter as the whole body, or several embedded by key.

    An embedded body decodes to a Struct whose fields are named for the parameters; the
    request path hands the endpoint its fields as a dict (`msgspec.structs.asdict`).
    On a route that accepts MessagePack, `msgpack_decoder` decodes the same type from it.
    """

    names: tuple[str, ...]
    decoder: msgspec.json.Decoder[Any]
    decode_type: Any
    default: Any
    embedded: bool
    required: bool
    # On a route with errors="fastapi", an `_errors.pydantic_style.FastAPIBodyErrors`.
    report_invalid: Any
    msgpack_decoder: msgspec.msgpack.Decoder[Any] | None
    report_invalid_msgpack: Any  # the same for MessagePack (None where not taken)
    # Documentation only: what FastAPI puts in the request body of a Pydantic body.
    media_type: str
    docs: dict[str, Any]  # title, description, examples of a body that is not embedded
    part_docs: dict[str, dict[str, Any]]  # the same per key of an embedded body
    openapi_examples: dict[str, Any] | None

    @property
    def name(self) -> str | None:
        """The parameter a body that is not embedded goes to."""
        return None if self.embedded else self.names[0]


@dataclass(frozen=True, slots=True)
class OutputPlan:
    mode: int
    encoder: msgspec.json.Encoder
    decoder: msgspec.json.Decoder[Any] | None = None
    output_type: Any = None
    trusted_class: type | None = None
    container: int = CONTAINER_NONE
    # Set on routes that negotiate MessagePack responses with the client's Accept.
    msgpack_encoder: msgspec.msgpack.Encoder | None = None
    # A generator endpoint's: how its items are sent; the rest of the plan is per item.
    stream: int = STREAM_NONE
    # The content-type header of JSON responses: the response class's media type.
    content_type: tuple[bytes, bytes] = JSON_CONTENT_TYPE
    # Some part of the type is Any, which converts nothing: a value validated against it
    # may still be one msgspec cannot encode (`{None: 1}`), which is then checked.
    admits_any: bool = False
    # The response_model_* options (mode OUTPUT_SHAPED): applied to each checked value.
    shape: ResponseShape | None = None
    # Some part of the type is a dataclass with a default value, which a validated value
    # must be given where msgspec left it out (`_shared.fill_dataclass_defaults`).
    fills_defaults: bool = False
    # On a route with errors="fastapi": FastAPI's errors for a value that failed
    # validation (`_errors.pydantic_style.ResponseErrors`); None for msgspec's.
    report_invalid: Any = None


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
    msgpack: bool = False
    # Query, header and cookie models: the endpoint's, then its dependencies'.
    models: tuple[ModelPlan, ...] = ()
    # What the endpoint itself takes of the body and the models (the rest is for its
    # dependencies): body parameter names, and model names (ModelPlan.name).
    endpoint_body: tuple[str, ...] = ()
    endpoint_models: tuple[str, ...] = ()
    form: ModelPlan | None = None  # a form model (the endpoint's own)
    # The parameters the body is made of (the endpoint's and its dependencies').
    body_parameters: tuple[inspect.Parameter, ...] = ()


def embedded_body_plan(spec: EndpointSpec) -> BodyPlan:
    """The spec's body embedded by key even where it is one parameter: how FastAPI reads
    it beside body fields of its own."""
    name = getattr(spec.endpoint, "__name__", type(spec.endpoint).__name__)
    return _body_plan(name, list(spec.body_parameters), spec.msgpack, embed=True)


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
    models: tuple[ModelPlan, ...] = ()
    form: ModelPlan | None = None


def literal_path(path_regex: re.Pattern[str], path_format: str) -> str | None:
    """The path a route without path parameters matches, when its regex is Starlette's.

    Starlette compiles such a path to "^<escaped path>$", so the request path may compare
    strings instead. Note `$`: the regex also matches the path followed by one newline.
    """
    if "{" in path_format or path_regex != re.compile("^" + re.escape(path_format) + "$"):
        return None
    return path_format


# Segment-wide parameters the segment walk can test: `{name}` and `{name:int}`.
_SEGMENT_PARAM = re.compile(r"\{([a-zA-Z_][a-zA-Z0-9_]*)\}")
_SEGMENT_REGEXES = {StringConvertor: "[^/]+", IntegerConvertor: "[0-9]+"}

# How a path with parameters splits on "/": the number of segments, each literal segment
# (position, text), and each parameter (position, name, whether only ASCII digits match).
SegmentTemplate = tuple[int, tuple[tuple[int, str], ...], tuple[tuple[int, str, bool], ...]]


def segment_template(
    path_regex: re.Pattern[str], path_format: str, convertors: dict[str, Any]
) -> SegmentTemplate | None:
    """The route's path as segments, when every parameter is a whole segment of Starlette's
    string or integer kind and its regex is Starlette's for that shape.

    Such a regex matches a path exactly when the path splits on "/" into as many segments,
    each literal equal and each parameter's segment non-empty (all ASCII digits for an
    integer), except for a path ending in a newline, which `$` also lets through and which
    the matcher leaves to the regex. None for any other path (`{name:path}`, a parameter
    inside a segment, a regex of another shape).
    """
    literals: list[tuple[int, str]] = []
    params: list[tuple[int, str, bool]] = []
    pattern: list[str] = []
    for position, segment in enumerate(path_format.split("/")):
        found = _SEGMENT_PARAM.fullmatch(segment)
        if found is None:
            if "{" in segment:
                return None
            literals.append((position, segment))
            pattern.append(re.escape(segment))
            continue
        name = found.group(1)
        convertor = convertors.get(name)
        if convertor is None or _SEGMENT_REGEXES.get(type(convertor)) != convertor.regex:
            return None
        params.append((position, name, type(convertor) is IntegerConvertor))
        pattern.append(f"(?P<{name}>{convertor.regex})")
    if not params or path_regex != re.compile("^" + "/".join(pattern) + "$"):
        return None
    return len(literals) + len(params), tuple(literals), tuple(params)


_TYPED_ENCODER = msgspec.json.Encoder()
_TYPED_MSGPACK_ENCODER = msgspec.msgpack.Encoder()


def _model_hook(value: Any) -> Any:
    """For a type with `Any` inside: a Pydantic model there is encoded by its JSON dump with
    aliases, as Pydantic serializes an `Any` value by its type; anything else msgspec
    cannot encode stays an error (a ResponseValidationError)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    raise TypeError(f"Encoding objects of type {type(value).__name__} is unsupported")


_ANY_TYPED_ENCODER = msgspec.json.Encoder(enc_hook=_model_hook)
_ANY_TYPED_MSGPACK_ENCODER = msgspec.msgpack.Encoder(enc_hook=_model_hook)
_UNTYPED_OUTPUT = OutputPlan(OUTPUT_UNTYPED, msgspec.json.Encoder(enc_hook=untyped_hook))
_UNTYPED_MSGPACK_OUTPUT = replace(
    _UNTYPED_OUTPUT, msgpack_encoder=msgspec.msgpack.Encoder(enc_hook=untyped_hook)
)


def _param_metadata(parameter: inspect.Parameter) -> list[Any]:
    return [*annotated_metadata(parameter.annotation), parameter.default]


def find_body(endpoint_name: str, parameters: list[inspect.Parameter]) -> list[inspect.Parameter]:
    """The parameters that make up a msgspec body, in signature order."""
    found = []
    for parameter in parameters:
        metadata = _param_metadata(parameter)
        where = f"{endpoint_name}(): parameter {parameter.name!r}"
        if any(isinstance(m, params.Depends) for m in metadata):
            continue
        if any(isinstance(m, (params.Form, params.File)) for m in metadata):
            if form_param(endpoint_name, parameter) is not None:
                continue  # a form model
            if mentions_struct(parameter.annotation):
                raise TypeError(
                    f"{where}: msgspec Structs are supported as form models (the whole "
                    "parameter a Struct with Form()), not as File or inside other form "
                    "parameters"
                )
            continue
        explicit_param = any(isinstance(m, params.Param) for m in metadata)
        if explicit_param:
            if model_param(endpoint_name, parameter) is not None:
                continue  # a query, header or cookie model
            if mentions_struct(parameter.annotation):
                raise TypeError(
                    f"{where}: msgspec Structs are supported as query, header and cookie "
                    "models (the whole parameter a Struct), not as path parameters or "
                    "inside other parameter types"
                )
            continue
        explicit_body = any(isinstance(m, params.Body) for m in metadata)
        wants_body = explicit_body or mentions_struct(parameter.annotation)
        wants_body = wants_body or is_body_shaped(parameter.annotation)
        if wants_body and is_msgspec_json_type(strip_annotated(parameter.annotation)):
            if is_raw_bytes(parameter.annotation):
                continue  # FastAPI hands over the raw body, or a JSON string's UTF-8
            if body_key(parameter) is None and not mentions_struct(parameter.annotation):
                continue  # FastAPI reads it, the msgspec body parts beside it ours
            found.append(parameter)
    pydantic_only = []
    for parameter in found:
        reason = _pydantic_only(endpoint_name, parameter)
        if reason is None:
            continue
        if mentions_struct(parameter.annotation):
            _body_part(endpoint_name, parameter)  # its own TypeError, where it has one
            raise TypeError(
                f"{endpoint_name}(): body parameter {parameter.name!r}: {reason} is for "
                "Pydantic, which cannot validate a msgspec Struct"
            )
        pydantic_only.append(parameter)
    if pydantic_only:
        # FastAPI reads the body, and validates with Pydantic every part it can: only a
        # part that mentions a Struct is still ours.
        found = [p for p in found if p not in pydantic_only and mentions_struct(p.annotation)]
    return found


def _pydantic_only(endpoint_name: str, parameter: inspect.Parameter) -> str | None:
    """What a body parameter declares that only Pydantic does, or None: a validator or a
    constraint msgspec has no equivalent of, `default_factory`, `validate_default`, a
    `discriminator`, a media type other than JSON. (Alias choices and paths: `body_key`.)"""
    for info in _param_metadata(parameter):
        if not isinstance(info, FieldInfo):
            continue
        for option in ("default_factory", "validate_default", "discriminator"):
            if getattr(info, option):
                return option
        if isinstance(info, params.Body) and not is_json_media_type(info.media_type):
            return f"the media type {info.media_type!r}"
    try:
        _body_part(endpoint_name, parameter)
    except TypeError as exc:  # Pydantic metadata (`_params.converters._meta_from`)
        return str(exc).removeprefix(f"{endpoint_name}(): body parameter {parameter.name!r}: ")
    return None


def is_raw_bytes(annotation: Any) -> bool:
    """A `bytes` (or `bytes | None`) body parameter: FastAPI's alone, since it takes a
    body sent without a JSON content type as it is, and a JSON string as its UTF-8
    (msgspec would read base64)."""
    bare = strip_annotated(annotation)
    return (optional_inner(bare) or bare) in (bytes, bytearray)


@dataclass(frozen=True, slots=True)
class _BodyPart:
    """One body parameter: its type with constraints, default and key when embedded."""

    name: str
    body_type: Any
    default: Any
    key: str
    embed: bool
    media_type: str
    docs: dict[str, Any]
    openapi_examples: dict[str, Any] | None


def is_json_media_type(media_type: str) -> bool:
    """`application/json` or `application/*+json`: what the request path accepts."""
    media = media_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json") and "/" not in media[12:]
    )


def _body_part(endpoint_name: str, parameter: inspect.Parameter) -> _BodyPart:
    where = f"{endpoint_name}(): body parameter {parameter.name!r}"
    annotation = parameter.annotation
    body_info = next((m for m in _param_metadata(parameter) if isinstance(m, params.Body)), None)
    extra = [m for m in annotated_metadata(annotation) if not isinstance(m, params.Body)]
    default: Any = MISSING
    embed = False
    media_type = "application/json"
    openapi_examples = None
    if body_info is not None:
        media_type = body_info.media_type
        openapi_examples = getattr(body_info, "openapi_examples", None)
        extra.extend(body_info.metadata)
        embed = body_info.embed is True
        if body_info.default not in (PydanticUndefined, Ellipsis):
            default = body_info.default
    if parameter.default is not EMPTY and not isinstance(parameter.default, params.Body):
        default = parameter.default
    body_type = constrained_type(strip_annotated(annotation), extra, where)
    docs = field_docs(_compat.body_field_info(annotation, parameter.default), default)
    key = body_key(parameter)
    if key is None:  # only FastAPI reads such a part, and it cannot read a Struct
        raise TypeError(
            f"{where}: a msgspec type is read from one key, not from AliasChoices or AliasPath"
        )
    return _BodyPart(
        parameter.name, body_type, default, key, embed, media_type, docs, openapi_examples
    )


def body_key(parameter: inspect.Parameter) -> str | None:
    """The key FastAPI reads a body parameter by when embedded: its validation alias,
    else its alias, else its name; None for a validation alias that is not one key
    (AliasChoices, AliasPath), which only FastAPI reads."""
    info = _compat.body_field_info(parameter.annotation, parameter.default)
    validation_alias = info.validation_alias
    if validation_alias is not None and not isinstance(validation_alias, str):
        return None
    return validation_alias or info.alias or parameter.name


def _copies(value: Any) -> Callable[[], Any]:
    """A default factory: each request gets its own copy of a mutable default."""
    return lambda: deepcopy(value)


def _embedded_type(endpoint_name: str, parts: list[_BodyPart]) -> Any:
    """A Struct with one field per part, named for the parameter and keyed by its alias.

    Its name is stable from run to run: the endpoint and a digest of what it holds.
    """
    fields: list[tuple[Any, ...]] = []
    for part in parts:
        if part.default is MISSING:
            fields.append((part.name, part.body_type))
        else:
            factory = msgspec.field(default_factory=_copies(part.default))
            fields.append((part.name, part.body_type, factory))
    # Required fields first, as Struct definitions need; the order of keys in JSON is free.
    fields.sort(key=len)
    identity = msgspec.json.encode(
        [
            {
                "schema": msgspec.json.schema(part.body_type),
                "key": part.key,
                "required": part.default is MISSING,
            }
            for part in parts
        ]
    )
    name = f"Body_{endpoint_name}_{sha256(identity).hexdigest()[:8]}"
    cls = msgspec.defstruct(name, fields, rename={part.name: part.key for part in parts})
    return generated_body(cls)


def _body_plan(
    endpoint_name: str, parameters: list[inspect.Parameter], msgpack: bool, embed: bool = False
) -> BodyPlan:
    """The plan of a body: one parameter as the whole body, or parameters embedded by key
    (always with `embed`)."""
    parts = [_body_part(endpoint_name, parameter) for parameter in parameters]
    where = f"{endpoint_name}(): body parameter {parts[0].name!r}"
    embedded = embed or len(parts) > 1 or parts[0].embed
    if embedded:
        decode_type = _embedded_type(endpoint_name, parts)
        default: Any = MISSING
        required = any(part.default is MISSING for part in parts)
    else:
        decode_type = parts[0].body_type
        default = parts[0].default
        required = default is MISSING
    try:
        decoder = msgspec.json.Decoder(type=decode_type)
        msgpack_decoder = msgspec.msgpack.Decoder(type=decode_type) if msgpack else None
    except TypeError as exc:
        raise TypeError(f"{where}: {exc}") from exc
    # As FastAPI: the parts' media type when they agree, else application/json; examples
    # of the whole body only for a body that is not embedded.
    media_types = {part.media_type for part in parts}
    keys = tuple(part.key for part in parts) if embedded else ()
    return BodyPlan(
        tuple(part.name for part in parts),
        decoder,
        decode_type,
        default,
        embedded,
        required,
        BodyErrors(decode_type, parts=keys),
        msgpack_decoder,
        BodyErrors(decode_type, msgpack=True, parts=keys) if msgpack else None,
        media_type=media_types.pop() if len(media_types) == 1 else "application/json",
        docs={} if embedded else parts[0].docs,
        part_docs={part.key: part.docs for part in parts if embedded and part.docs},
        openapi_examples=None if embedded else parts[0].openapi_examples,
    )


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


def _output_decoder(output_type: Any) -> msgspec.json.Decoder[Any]:
    """The decoder that validates a response's JSON round trip: in lax mode (strings to
    numbers and booleans, numbers to datetimes), as FastAPI validates responses."""
    return msgspec.json.Decoder(type=output_type, strict=False)


def _output_mode(trusted_class: type | None, shape: ResponseShape | None) -> int:
    if shape is not None:
        return OUTPUT_SHAPED
    return OUTPUT_TRUSTED if trusted_class is not None else OUTPUT_VALIDATE


def _stream_plan(
    endpoint_name: str, return_type: Any, options: dict[str, Any], sse: bool
) -> OutputPlan | None:
    """How a generator endpoint's items are sent: each checked and encoded as a response
    of the item type, or as it is without one; None for Pydantic items (FastAPI's)."""
    item_type = stream_item_type(return_type)
    kind = STREAM_SSE if sse else STREAM_JSONL
    if item_type is Any or item_type is ServerSentEvent:
        return OutputPlan(OUTPUT_UNTYPED, _UNTYPED_OUTPUT.encoder, stream=kind)
    if mentions_pydantic(item_type):
        return None
    where = f"{endpoint_name}(): stream item type"
    if not is_msgspec_json_type(item_type):
        raise TypeError(f"{where}: msgspec cannot encode {item_type!r}")
    shape = response_shape(where, options)  # FastAPI applies the options to each item
    item_type = constrained_type(item_type, (), where)
    trusted_class, container = _trust(item_type)
    return OutputPlan(
        _output_mode(trusted_class, shape),
        _TYPED_ENCODER,
        _output_decoder(item_type),
        item_type,
        trusted_class,
        container,
        stream=kind,
        admits_any=admits_any(item_type),
        fills_defaults=has_dataclass_defaults(item_type),
        shape=shape,
    )


def _output_plan(
    endpoint_name: str,
    return_type: Any,
    options: dict[str, Any],
    untyped_allowed: bool,
    msgpack: bool,
) -> OutputPlan | None:
    explicit = options.get("response_model", EMPTY)
    inferred = explicit is EMPTY or isinstance(explicit, DefaultPlaceholder)
    output_type = return_type if inferred else explicit
    if is_msgspec_json_type(output_type):
        where = f"{endpoint_name}(): response type"
        shape = response_shape(where, options)
        if options.get("status_code") in BODYLESS_STATUSES:
            raise TypeError(f"{where}: status code {options['status_code']} has no body")
        output_type = constrained_type(output_type, (), where)
        trusted_class, container = _trust(output_type)
        any_inside = admits_any(output_type)
        msgpack_encoder = _ANY_TYPED_MSGPACK_ENCODER if any_inside else _TYPED_MSGPACK_ENCODER
        return OutputPlan(
            _output_mode(trusted_class, shape),
            _ANY_TYPED_ENCODER if any_inside else _TYPED_ENCODER,
            _output_decoder(output_type),
            output_type,
            trusted_class,
            container,
            msgpack_encoder if msgpack else None,
            admits_any=any_inside,
            fills_defaults=has_dataclass_defaults(output_type),
            shape=shape,
        )
    if output_type in (EMPTY, None) and untyped_allowed and not mentions_pydantic(return_type):
        return _UNTYPED_MSGPACK_OUTPUT if msgpack else _UNTYPED_OUTPUT
    return None


def _free_name(base: str, taken: set[str]) -> str:
    while base in taken:
        base += "_"
    return base


def analyze_endpoint(
    endpoint: Callable[..., Any],
    options: dict[str, Any],
    untyped_allowed: bool,
    msgpack: bool = False,
    sse: bool = False,
    media_type: str = "application/json",
    dependency_body: Sequence[tuple[str, inspect.Parameter]] = (),
    dependency_models: Sequence[ModelPlan] = (),
) -> tuple[EndpointSpec | None, inspect.Signature]:
    """The spec of an endpoint, or None when FastAPI should handle the route alone.

    With `msgpack`, the body is also accepted as MessagePack and the response negotiated.
    A generator endpoint streams JSON Lines, or server-sent events with `sse` (the route's
    response class is an EventSourceResponse); its responses stay JSON. JSON responses
    are labelled `media_type` (that of the route's MsgspecJSONResponse subclass).

    `dependency_body` and `dependency_models` are what the endpoint's dependencies take
    (`_dependencies.tree.DependencyTree`): the body parameters, each with the dependency it is from,
    join the endpoint's by name, and the models follow the endpoint's.

    Also returns the signature FastAPI should see: without the body parameter, with a
    Request and a Response parameter the wrapper reads, and no return annotation when
    the response is ours.
    """
    name = getattr(endpoint, "__name__", type(endpoint).__name__)
    signature = inspect.signature(endpoint)
    parameters = resolved_parameters(endpoint)
    return_type = endpoint_hints(endpoint).get("return", signature.return_annotation)
    if return_type is type(None):
        return_type = None  # `-> None` declares no response model, as in FastAPI
    own_body = find_body(name, parameters)
    body_parameters = _shared_body(name, own_body, dependency_body)
    body = _body_plan(name, body_parameters, msgpack) if body_parameters else None
    models = []
    forms = []
    for parameter in parameters:
        found = model_param(name, parameter)
        if found is not None:
            models.append((parameter, found))
        found = form_param(name, parameter)
        if found is not None:
            forms.append((parameter, found))
    form = _form_of(name, forms, body_parameters)
    if is_generator_endpoint(endpoint):
        output = _stream_plan(name, return_type, options, sse) if untyped_allowed or sse else None
        if output is None and (body is not None or models or dependency_models or form):
            raise TypeError(
                f"{name}(): a generator endpoint with a msgspec body or parameter model "
                "streams msgspec items only, as JSON Lines (the default response class) or "
                "with response_class=EventSourceResponse"
            )
    else:
        output = _output_plan(name, return_type, options, untyped_allowed, msgpack)
        if output is not None and media_type != "application/json":
            output = replace(output, content_type=(b"content-type", media_type.encode("latin-1")))
    if body is None and output is None and not models and not dependency_models and not form:
        return None, signature
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters):
        raise TypeError(f"{name}(): *args and **kwargs are not supported on msgspec routes")

    taken_out = [*own_body, *(parameter for parameter, _ in [*models, *forms])]
    remaining = [p for p in parameters if p not in taken_out]
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
        msgpack=msgpack,
        models=(*(plan for _, plan in models), *dependency_models),
        endpoint_body=tuple(p.name for p in own_body),
        endpoint_models=tuple(plan.name for _, plan in [*models, *forms]),
        form=form,
        body_parameters=tuple(body_parameters),
    )
    return spec, exposed


def _form_of(
    endpoint_name: str,
    forms: list[tuple[inspect.Parameter, ModelPlan]],
    body_parameters: list[inspect.Parameter],
) -> ModelPlan | None:
    """The endpoint's form model: one at most, and never beside a msgspec JSON body."""
    if not forms:
        return None
    where = f"{endpoint_name}(): parameter {forms[0][0].name!r}"
    if len(forms) > 1:
        raise TypeError(f"{where}: an endpoint takes one form model at most")
    if body_parameters:
        raise TypeError(
            f"{where}: a form model cannot be combined with the msgspec JSON body "
            f"parameter {body_parameters[0].name!r}"
        )
    return forms[0][1]


def _shared_body(
    endpoint_name: str,
    own: list[inspect.Parameter],
    dependencies: Sequence[tuple[str, inspect.Parameter]],
) -> list[inspect.Parameter]:
    """The body parameters of the endpoint and its dependencies, one per name, as FastAPI
    shares a body field between all that name it."""

    def declared(where: str, parameter: inspect.Parameter) -> tuple[Any, ...]:
        part = _body_part(where.removesuffix("()"), parameter)
        return (part.body_type, part.default, part.key, part.embed, part.media_type)

    first = {p.name: (f"{endpoint_name}()", p) for p in own}
    found = list(own)
    for where, parameter in dependencies:
        if parameter.name not in first:
            first[parameter.name] = (where, parameter)
            found.append(parameter)
            continue
        first_where, first_parameter = first[parameter.name]
        if declared(first_where, first_parameter) != declared(where, parameter):
            raise TypeError(
                f"{where}, body parameter {parameter.name!r}: declared otherwise by "
                f"{first_where}; parameters that share a body key must be declared alike"
            )
    return found
