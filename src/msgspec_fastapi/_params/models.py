"""Query, header, cookie and form models: a Struct (or a TypedDict or dataclass that
msgspec handles) whose fields are parameters, as FastAPI's `Annotated[Model, Query()]`
and `Annotated[Model, Form()]`.

Registration reads the model's fields once into a `ModelPlan`. Per request the twins
gather the raw values into a dict keyed by field (`RouteRuntime.extract_models`, and
`RouteRuntime.extract_form` from a parsed form), and `ModelPlan.convert` turns it into
the model with msgspec's lax rules, or lists an error per field at FastAPI's location
(`("query", "limit")`, `("body", "username")`).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, NotRequired, Required, get_args, get_origin, get_type_hints

import msgspec
import msgspec.inspect as mi
from fastapi import params
from fastapi.dependencies.utils import ensure_multipart_is_installed
from starlette.datastructures import UploadFile as StarletteUploadFile

from .._compat import header_model_errors_by_header_name
from .._shared import PARAM_COOKIE, PARAM_FORM, PARAM_HEADER, PARAM_QUERY
from .annotations import (
    annotated_metadata,
    is_body_shaped,
    is_record_type,
    optional_inner,
    strip_annotated,
)
from .converters import (
    LaxRefused,
    item_errors,
    item_type_of,
    parameter_error,
    sequence_kind,
    string_normalizer,
)

_LOCATIONS = {
    params.Query: (PARAM_QUERY, "query"),
    params.Header: (PARAM_HEADER, "header"),
    params.Cookie: (PARAM_COOKIE, "cookie"),
}


@dataclass(frozen=True, slots=True)
class ModelField:
    """One field of a parameter model as the request carries it."""

    name: str  # the field's name in the dict msgspec converts (its encoded name)
    key: str  # the query key, header name or cookie name
    header_key: bytes  # `key` as the ASGI header list has it
    is_sequence: bool  # filled from every repeated key, not the last one
    annotation: Any
    required: bool
    # How FastAPI reads a string for this field ("+5" and "1_0" as ints, "on" and "yes"
    # as booleans, text as UTF-8 bytes), ahead of msgspec; None where msgspec's lax
    # rules already agree.
    normalize: Any = None


@dataclass(frozen=True, slots=True)
class ModelPlan:
    """One endpoint parameter that is a query, header or cookie model."""

    name: str
    location: int
    where: str
    model: Any
    fields: tuple[ModelField, ...]
    keys: frozenset[str]  # the fields' keys in the request
    names: frozenset[str]  # the fields' names in the gathered dict
    forbid_unknown: bool
    has_files: bool = False  # a form model with UploadFile fields
    dec_hook: Any = None  # a form model's: its UploadFile fields take the parsed files
    normalized: tuple[ModelField, ...] = ()  # the fields with a `normalize`
    # On a route with errors="fastapi": FastAPI's errors for what it would validate the
    # model from (`_errors.pydantic_style.ModelErrors`); msgspec's where it has none.
    report: Any = None

    def convert(self, raw: dict[str, Any], others: Any = None) -> tuple[Any, list[dict[str, Any]]]:
        """The model from the gathered values, or FastAPI-shaped errors, one per field.

        `others` is where the values were gathered from (the query's pairs, the raw
        header list, the cookies), read only for the errors' `input`; None for a form,
        whose `raw` already holds every key.
        """
        # As the request had it, for the errors' `input`: a copy only where fields change.
        received = dict(raw) if self.normalized else raw
        refused = set()
        for field in self.normalized:
            if field.name in raw:
                try:
                    raw[field.name] = field.normalize(raw[field.name])
                except LaxRefused as exc:
                    raw[field.name] = exc.value  # msgspec's lax rules would take "1e3"
                    refused.add(field.name)
        if refused:
            return None, self.errors(raw, received, others, refused, None)
        try:
            return msgspec.convert(raw, self.model, strict=False, dec_hook=self.dec_hook), []
        except msgspec.ValidationError as exc:
            return None, self.errors(raw, received, others, refused, exc)

    def errors(
        self,
        raw: dict[str, Any],
        received: dict[str, Any],
        others: Any,
        refused: set[str],
        exc: msgspec.ValidationError | None,
    ) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        extras = self.extras(received, others)
        # What FastAPI validates the model from, the input of its missing fields: the
        # fields the request has, then every other key (repeated ones as lists).
        everything = {name: value for name, value in received.items() if name in self.names}
        everything.update(extras)
        if self.report is not None:
            reported: list[dict[str, Any]] = self.report(everything)
            if reported:
                return reported
        by_name = self.location == PARAM_HEADER and not header_model_errors_by_header_name()
        for field in self.fields:
            loc = (self.where, field.name if by_name else field.key)
            if field.name not in raw:
                if field.required:
                    found.append({"type": "missing", "loc": loc, "msg": "Field required"})
                    found[-1]["input"] = everything
                continue
            try:
                msgspec.convert(
                    raw[field.name],
                    field.annotation,
                    strict=field.name in refused,
                    dec_hook=self.dec_hook,
                )
            except msgspec.ValidationError as problem:
                first = parameter_error(problem, received[field.name], loc)
                item_type = item_type_of(field.annotation)
                value = raw[field.name]
                if item_type is None or not isinstance(value, list):
                    found.append(first)
                else:
                    strict = field.name in refused
                    found += item_errors(
                        first, item_type, value, received[field.name], strict, loc, self.dec_hook
                    )
        if self.forbid_unknown:
            for key, value in extras.items():
                message = f"Object contains unknown field `{key}`"
                error: dict[str, Any] = {"type": "value_error.msgspec", "loc": (self.where, key)}
                error.update(msg=message, input=value)
                found.append(error)
        if not found:  # a check of the whole model (`__post_init__`, say)
            message = str(exc)
            whole: dict[str, Any] = {"type": "value_error.msgspec", "loc": (self.where,)}
            whole.update(msg=message, input=everything)
            found.append(whole)
        return found

    def extras(self, received: dict[str, Any], others: Any) -> dict[str, Any]:
        """The request's keys that are no field's, as FastAPI groups them: a repeated key's
        values as a list, in the order they came."""
        if others is None:  # a form: `received` holds them
            return {key: value for key, value in received.items() if key not in self.names}
        if self.location == PARAM_COOKIE:
            return {key: value for key, value in others.items() if key not in self.keys}
        grouped: dict[str, list[Any]] = {}
        for key, value in others:
            if self.location == PARAM_HEADER:
                key, value = key.decode("latin-1"), value.decode("latin-1")
                if key in self.names:
                    continue  # a field's unconverted name, which FastAPI ignores
            if key not in self.keys:
                grouped.setdefault(key, []).append(value)
        return {key: values[0] if len(values) == 1 else values for key, values in grouped.items()}


def upload_hook(cls: type, value: Any) -> Any:
    """msgspec's dec_hook for UploadFile fields: Starlette's parsed file, as the class the
    field names (FastAPI's UploadFile is a subclass sharing the same file)."""
    if isinstance(value, StarletteUploadFile) and issubclass(cls, StarletteUploadFile):
        if isinstance(value, cls):
            return value
        return cls(value.file, size=value.size, filename=value.filename, headers=value.headers)
    # FastAPI's message for the same mistake.
    raise ValueError(f"Expected UploadFile, received: {type(value)}")


def upload_kind(annotation: Any) -> bool | None:
    """False for an UploadFile (or optional one), True for a list of them, else None."""
    bare = strip_annotated(annotation)
    bare = optional_inner(bare) or bare
    if isinstance(bare, type) and issubclass(bare, StarletteUploadFile):
        return False
    args = get_args(bare)
    if get_origin(bare) is list and len(args) == 1 and upload_kind(args[0]) is False:
        return True
    return None


def _unqualified(annotation: Any) -> Any:
    """A TypedDict field's type without `Required[...]` or `NotRequired[...]`."""
    while get_origin(annotation) in (Required, NotRequired):
        annotation = get_args(annotation)[0]
    return annotation


def model_param(endpoint_name: str, parameter: inspect.Parameter) -> ModelPlan | None:
    """The plan of a `Query()`, `Header()` or `Cookie()` parameter whose type is a record
    (Struct, TypedDict, dataclass); None for any other parameter."""
    metadata = [*annotated_metadata(parameter.annotation), parameter.default]
    info = next((m for m in metadata if type(m) in _LOCATIONS), None)
    if info is None:
        return None
    return _record_plan(endpoint_name, parameter, info, *_LOCATIONS[type(info)])


def form_param(endpoint_name: str, parameter: inspect.Parameter) -> ModelPlan | None:
    """The plan of a `Form()` parameter whose type is a record; None for any other.

    Its fields are scalars, lists of scalars (from repeated keys) and UploadFiles.
    """
    metadata = [*annotated_metadata(parameter.annotation), parameter.default]
    info = next((m for m in metadata if type(m) is params.Form), None)
    if info is None:
        return None
    plan = _record_plan(endpoint_name, parameter, info, PARAM_FORM, "form")
    if plan is not None:
        ensure_multipart_is_installed()  # FastAPI's own check, and its error
    return plan


def _record_plan(
    endpoint_name: str, parameter: inspect.Parameter, info: Any, location: int, kind: str
) -> ModelPlan | None:
    annotation = strip_annotated(parameter.annotation)
    if not is_record_type(annotation):
        return None
    where = f"{endpoint_name}(): parameter {parameter.name!r}"
    try:
        type_info = mi.type_info(annotation)
        hints = get_type_hints(annotation, include_extras=True)
    except (TypeError, NameError) as exc:
        raise TypeError(f"{where}: {exc}") from exc
    fields_info = getattr(type_info, "fields", None)
    if fields_info is None or getattr(type_info, "array_like", False):
        raise TypeError(f"{where}: a {kind} model needs named fields (not array_like)")
    convert_underscores = getattr(info, "convert_underscores", True)
    fields = []
    has_files = False
    for field in fields_info:
        key = field.encode_name
        if kind == "header" and convert_underscores:
            key = key.replace("_", "-")
        if kind == "header":
            key = key.lower()
        annotation_of_field = _unqualified(hints.get(field.name, Any))
        sequence = upload_kind(annotation_of_field) if kind == "form" else None
        has_files = has_files or sequence is not None
        if sequence is None:
            sequence = sequence_kind(strip_annotated(annotation_of_field))
            if sequence is None or (not sequence and is_body_shaped(annotation_of_field)):
                allowed = "a scalar or a list of scalars"
                if kind == "form":
                    allowed = "a scalar, a list of scalars, an UploadFile or a list of them"
                raise TypeError(
                    f"{where}: field {field.name!r} of a {kind} model must be {allowed}"
                )
        fields.append(
            ModelField(
                name=field.encode_name,
                key=key,
                header_key=key.encode("latin-1"),
                is_sequence=sequence and kind != "cookie",
                annotation=annotation_of_field,
                required=field.required,
                normalize=string_normalizer(annotation_of_field),
            )
        )
    forbid = bool(getattr(type_info, "forbid_unknown_fields", False))
    return ModelPlan(
        name=parameter.name,
        location=location,
        where="body" if kind == "form" else kind,
        model=annotation,
        fields=tuple(fields),
        keys=frozenset(f.key for f in fields),
        names=frozenset(f.name for f in fields),
        forbid_unknown=forbid,
        has_files=has_files,
        dec_hook=upload_hook if kind == "form" else None,
        normalized=tuple(f for f in fields if f.normalize is not None),
    )
