"""FastAPI's own 422s for a body that failed, on routes added with `errors="fastapi"`.

FastAPI reads a JSON body with `json.loads` and validates it with Pydantic in lax mode;
its errors carry Pydantic's `type`, `msg`, `input` and `ctx`, under `("body", ...)`. A route
with `errors="fastapi"` decodes its body with msgspec in lax mode (`strict=False`), and when
that fails, `FastAPIBodyErrors` reads the body again to the value FastAPI reads (msgspec's
untyped decoder, Python's `json` for what msgspec refuses) and validates it with
a Pydantic type made once, at registration, from the msgspec type: each Struct a model
whose fields carry the Struct's encoded names as aliases, its defaults and its
`forbid_unknown_fields` (`extra="forbid"`), each `Meta` constraint the `Field` constraint
of the same name. The errors are then Pydantic's own, in Pydantic's order.

A MessagePack body (on a route that takes them) is decoded in lax mode too; a failure is
validated as the JSON it would be, and one msgspec cannot parse is a 422
`msgpack_invalid`, the counterpart of `json_invalid`.

Where Pydantic accepts what msgspec refused (a base64 string for bytes, say: Pydantic
takes a string's UTF-8 bytes), or a type has no Pydantic equivalent here (array-like or
tagged Structs, recursive Structs), the report falls back to msgspec's
(`_errors.validation.BodyErrors`). A body that is not JSON is FastAPI's 422
`json_invalid` at the character Python's `json` stops at (found, on the compiled twin,
by `_errors.jsonscan` without building the values `json.loads` builds first); one that
is not UTF-8 is FastAPI's 400. Nothing here runs for a body that decodes.

Parameters: a converter that fails hands the value to FastAPI's own validation of the
parameter (`fastapi_parameter_errors`); a query, header, cookie or form model's failure is
validated again with its Pydantic equivalent (`ModelErrors`).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable
from copy import deepcopy
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import msgspec
from fastapi import HTTPException
from fastapi.exceptions import RequestValidationError
from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, create_model

from .._compat import (
    body_null_is_missing,
    header_model_errors_by_header_name,
    parameter_models_take_defaults,
)
from .._shared import json_invalid_error, malformed_json, nested_too_deeply
from .validation import BodyErrors, json_ready, nests_deeper_than

# The Meta constraints Pydantic's Field takes under the same names.
_CONSTRAINTS = (
    "gt",
    "ge",
    "lt",
    "le",
    "multiple_of",
    "min_length",
    "max_length",
    "pattern",
)
_CONTAINERS = (list, set, frozenset, tuple, dict)
# FastAPI's answer for a body `json.loads` fails on with anything but a JSON syntax error.
_UNPARSABLE = "There was an error parsing the body"


class NoEquivalent(TypeError):
    """A msgspec type this module does not translate into a Pydantic type."""


def pydantic_type(annotation: Any, models: dict[type, Any] | None = None) -> Any:
    """The Pydantic equivalent of a msgspec type annotation (see the module docstring)."""
    if models is None:
        models = {}
    if isinstance(annotation, type) and issubclass(annotation, msgspec.Struct):
        return _model(annotation, models)
    origin = get_origin(annotation)
    if origin is Annotated:
        inner, *extras = get_args(annotation)
        kept = [_field_of(extra) if isinstance(extra, msgspec.Meta) else extra for extra in extras]
        return Annotated[(pydantic_type(inner, models), *kept)]
    if origin is Literal:
        return annotation
    if origin in (Union, UnionType):
        members = tuple(pydantic_type(arg, models) for arg in get_args(annotation))
        return Union[members]  # noqa: UP007 - built from a tuple of members
    if origin in _CONTAINERS:
        args = get_args(annotation)
        if not args:
            return annotation
        converted = tuple(arg if arg is Ellipsis else pydantic_type(arg, models) for arg in args)
        return origin[converted]
    if origin is not None:
        raise NoEquivalent(f"no Pydantic equivalent for {annotation!r} here")
    if annotation in (msgspec.Raw, msgspec.UnsetType) or isinstance(annotation, msgspec.Meta):
        raise NoEquivalent(f"no Pydantic equivalent for {annotation!r} here")
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return annotation
    return annotation


def _field_of(meta: msgspec.Meta) -> Any:
    given = {name: getattr(meta, name) for name in _CONSTRAINTS if getattr(meta, name) is not None}
    if meta.tz is not None:
        raise NoEquivalent("a datetime's tz constraint has no Field equivalent")
    return Field(**given)


def _model(cls: type[msgspec.Struct], models: dict[type, Any]) -> Any:
    found = models.get(cls)
    if found is not None:
        return found
    config = cls.__struct_config__
    if config.array_like or config.tag_field is not None:
        raise NoEquivalent(f"{cls.__name__}: array-like and tagged Structs are not translated")
    models[cls] = None  # a Struct met again inside itself: recursive, not translated
    fields: dict[str, Any] = {}
    for field in msgspec.structs.fields(cls):
        if field.type is cls or models.get(field.type, 0) is None:
            raise NoEquivalent(f"{cls.__name__}: recursive Structs are not translated")
        if field.default is not msgspec.NODEFAULT:
            info = Field(default=field.default, alias=field.encode_name)
        elif field.default_factory is not msgspec.NODEFAULT:
            info = Field(default_factory=field.default_factory, alias=field.encode_name)
        else:
            info = Field(alias=field.encode_name)
        # A field named like a BaseModel attribute is renamed; the alias is what counts.
        fields[f"f_{field.name}"] = (pydantic_type(field.type, models), info)
    extra: Literal["forbid", "ignore"] = "forbid" if config.forbid_unknown_fields else "ignore"
    model = create_model(cls.__name__, __config__=ConfigDict(extra=extra), **fields)
    models[cls] = model
    return model


# `_errors.jsonscan.syntax_error`: where, and why, Python's `json` refuses UTF-8 bytes.
JsonScan = Callable[[bytes, int], "tuple[str, int] | None"]


def scanned_error(raw: bytes, scan: JsonScan | None) -> json.JSONDecodeError | None:
    """The `JSONDecodeError` `json.loads(raw)` raises, found by `scan` without reading
    `raw` to values; None where there is no scan, where `raw` is not UTF-8 (Python's
    `json` reads it, or raises something else), or where the scan cannot tell."""
    if scan is None:
        return None
    encoding = json.detect_encoding(raw)
    if encoding != "utf-8" and encoding != "utf-8-sig":
        return None
    try:
        # The error carries the text, as Python's `json` gives it.
        text = raw.decode(encoding, "surrogatepass")
    except UnicodeDecodeError:
        return None
    found = scan(raw, 3 if encoding == "utf-8-sig" else 0)
    if found is None:
        return None
    return json.JSONDecodeError(found[0], text, found[1])


def json_invalid(
    raw: bytes, failed: BaseException | None = None, scan: JsonScan | None = None
) -> Exception:
    """What FastAPI answers for a body msgspec found malformed: its 422 `json_invalid`
    where Python's `json` fails too, its 400 where the body is not text, and msgspec's
    400 where Python's `json` reads it (NaN, Infinity). `failed` is what Python's `json`
    raised for `raw` already, if it was run: it is not run twice. Otherwise `scan`, where
    the route has one, finds Python's `json`'s error first (`scanned_error`)."""
    try:
        if failed is None:
            failed = scanned_error(raw, scan)
        if failed is not None:
            raise failed
        json.loads(raw)
    except json.JSONDecodeError as exc:
        return RequestValidationError([json_invalid_error(exc)], body=exc.doc)
    except RecursionError:
        return nested_too_deeply()
    except ValueError:  # not UTF-8 (UnicodeDecodeError), or a number too long to read
        return HTTPException(400, _UNPARSABLE)
    return malformed_json(ValueError("not JSON msgspec can read"))


def _read_json(raw: bytes, scan: JsonScan | None = None) -> Any:
    """`raw` read to the value FastAPI reads with Python's `json`. msgspec's untyped decode,
    the cheaper of the two, reads it first: it refuses whatever Python's `json` refuses
    (and some that `json` takes: `NaN`, lone surrogates, numbers out of a float's range, a
    byte-order mark), and what it takes it reads to the same value. What it refuses is
    scanned (where the route has `scan`) for FastAPI's `json_invalid`, and read again by
    Python's `json` for the value, or the error, where the scan finds none."""
    try:
        return msgspec.json.decode(raw)
    except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError):
        # msgspec 0.22 reports invalid UTF-8 as UnicodeDecodeError, later ones as DecodeError.
        pass
    failed = scanned_error(raw, scan)
    if failed is not None:
        raise json_invalid(raw, failed) from None
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as failed:
        raise json_invalid(raw, failed) from None


def msgpack_invalid(exc: BaseException) -> RequestValidationError:
    """The 422 for a MessagePack body msgspec could not parse, on a route with
    errors="fastapi": FastAPI's `json_invalid` error in MessagePack's terms (FastAPI reads
    no MessagePack), without a position (msgspec's message gives one where it knows it)."""
    error = {
        "type": "msgpack_invalid",
        "loc": ("body",),
        "msg": "MessagePack decode error",
        "input": {},
        "ctx": {"error": str(exc)},
    }
    return RequestValidationError([error], body=None)


class FastAPIBodyErrors:
    """A JSON (or, with `msgpack`, MessagePack) body's failure as FastAPI reports it;
    built once per body at registration.

    Its `fallback` is msgspec's report for the same body, used where Pydantic finds
    nothing wrong or no Pydantic type could be made. A MessagePack body is validated as
    the JSON it would be (`json_ready`); one holding what JSON cannot (a map with
    non-string keys) keeps msgspec's report. `scan`, on routes of the compiled twin,
    finds FastAPI's `json_invalid` in a malformed body without reading it to values.
    """

    __slots__ = ("adapters", "fallback", "msgpack", "parts", "scan")

    def __init__(
        self, decode_type: Any, fallback: BodyErrors, scan: JsonScan | None = None
    ) -> None:
        self.fallback = fallback
        self.scan = scan
        self.parts = fallback.parts
        self.msgpack = fallback.msgpack
        # The whole body's adapter under key None, else one per embedded part's key.
        self.adapters: dict[str | None, Any] | None
        try:
            if self.parts:
                fields = msgspec.structs.fields(decode_type)
                self.adapters = {
                    field.encode_name: (
                        TypeAdapter(pydantic_type(field.type)),
                        field.required,
                    )
                    for field in fields
                }
            else:
                self.adapters = {None: (TypeAdapter(pydantic_type(decode_type)), True)}
        except (NoEquivalent, TypeError, ValueError, NameError):
            # No Pydantic type for it (or Pydantic refused the one made): msgspec's report.
            self.adapters = None

    def malformed(self, exc: BaseException, raw: bytes) -> Exception:
        """The error for a body msgspec could not parse."""
        if self.msgpack:
            return msgpack_invalid(exc)
        if self.adapters is None:
            return malformed_json(exc)
        return json_invalid(raw, scan=self.scan)

    def __call__(self, exc: msgspec.ValidationError, raw: bytes) -> Exception:
        """The 422 for `raw`, which failed with `exc`; raises FastAPI's answer for a body
        that is not JSON (or MessagePack)."""
        if self.adapters is None:
            return self.fallback(exc, raw)
        if not raw:
            value: Any = {}
        elif self.msgpack:
            try:
                value = msgspec.msgpack.decode(raw)
            except (msgspec.DecodeError, UnicodeDecodeError) as problem:
                raise msgpack_invalid(problem) from None
            except (msgspec.ValidationError, RecursionError):
                return self.fallback(exc, raw)  # out of range, or too deep: msgspec's
            if nests_deeper_than(raw, value, True):
                raise nested_too_deeply(True)
            if value is not None:
                value = json_ready(value)
                if value is None:  # a map with keys JSON cannot have
                    return self.fallback(exc, raw)
        else:
            value = _read_json(raw, self.scan)
            if nests_deeper_than(raw, value, False):
                # Deeper than FastAPI's handler can encode as an error's input.
                raise nested_too_deeply()
        errors = self.errors(value)
        if not errors:
            return self.fallback(exc, raw)
        return RequestValidationError(errors, body=value if raw else None)

    def errors(self, value: Any) -> list[dict[str, Any]]:
        """Pydantic's errors for `value`, at FastAPI's locations."""
        assert self.adapters is not None
        # Before FastAPI 0.165 a `null` body or part counts as missing.
        null_missing = body_null_is_missing()
        found: list[dict[str, Any]] = []
        for key, (adapter, required) in self.adapters.items():
            where: tuple[Any, ...] = ("body",) if key is None else ("body", key)
            if key is None:
                if value is None and null_missing:
                    found.append(_missing(where))
                    continue
                part = value
            elif not isinstance(value, dict):
                # FastAPI reads each part of an embedded body from an object: every part,
                # even one with a default, is missing from anything else (but `null`
                # before 0.165, which leaves the parts with defaults to them).
                if required or not (value is None and null_missing):
                    found.append(_missing(where))
                continue
            elif key in value and not (value[key] is None and null_missing):
                part = value[key]
            else:
                if required:
                    found.append(_missing(where))
                continue
            try:
                adapter.validate_python(part, from_attributes=True)
            except ValidationError as exc:
                for error in exc.errors(include_url=False):
                    found.append({**error, "loc": (*where, *error["loc"])})
            except RecursionError:
                return []
        return found


class ModelErrors:
    """A query, header, cookie or form model's failure as FastAPI reports it: Pydantic's
    errors for the values FastAPI validates the model from, located under `where`; built
    at registration (`NoEquivalent` or Pydantic's TypeError where there is no such type).

    `header_keys` maps a header model's field (its encoded name) to the header it is read
    from where the two differ (`x_token` from `x-token`): FastAPI 0.165 locates those
    fields' errors by the header (`header_model_errors_by_header_name`)."""

    __slots__ = ("adapter", "defaults", "header_keys", "where")

    def __init__(self, model: Any, where: str, header_keys: dict[str, str] | None = None) -> None:
        self.adapter = TypeAdapter(pydantic_type(model))
        self.where = where
        self.header_keys = header_keys or None
        # (key, default, factory) of each field in order; a field without a default has
        # neither (NODEFAULT). Only a Struct's are known here.
        fields = msgspec.structs.fields(model) if issubclass(model, msgspec.Struct) else ()
        self.defaults = tuple(
            (field.encode_name, field.default, field.default_factory) for field in fields
        )

    def with_defaults(self, values: dict[str, Any]) -> dict[str, Any]:
        """`values` as FastAPI before 0.165 gathers them: each field in order, the
        request's value or a copy of its default, then the keys of no field."""
        gathered: dict[str, Any] = {}
        for key, default, factory in self.defaults:
            if key in values:
                gathered[key] = values[key]
            elif default is not msgspec.NODEFAULT:
                gathered[key] = deepcopy(default)
            elif factory is not msgspec.NODEFAULT:
                gathered[key] = factory()
        gathered.update((key, value) for key, value in values.items() if key not in gathered)
        return gathered

    def __call__(self, values: dict[str, Any]) -> list[dict[str, Any]]:
        if self.defaults and parameter_models_take_defaults():
            values = self.with_defaults(values)
        try:
            self.adapter.validate_python(values, from_attributes=True)
        except ValidationError as exc:
            renamed = self.header_keys if header_model_errors_by_header_name() else None
            found = []
            for error in exc.errors(include_url=False):
                loc = error["loc"]
                if renamed and loc and loc[0] in renamed:
                    loc = (renamed[loc[0]], *loc[1:])
                found.append({**error, "loc": (self.where, *loc)})
            return found
        return []


class ResponseErrors:
    """A returned value's failure as FastAPI reports it: Pydantic's errors for the value,
    validated as FastAPI validates a response (lax, attributes read as fields), under
    `("response", ...)`; built at registration (`NoEquivalent` or Pydantic's TypeError
    where there is no such type)."""

    __slots__ = ("adapter",)

    def __init__(self, output_type: Any) -> None:
        self.adapter = TypeAdapter(pydantic_type(output_type))

    def __call__(self, value: Any) -> list[dict[str, Any]]:
        try:
            self.adapter.validate_python(value, from_attributes=True)
        except ValidationError as exc:
            return [
                {**error, "loc": ("response", *error["loc"])}
                for error in exc.errors(include_url=False)
            ]
        except RecursionError:
            pass
        return []


def _missing(where: tuple[Any, ...]) -> dict[str, Any]:
    return {"type": "missing", "loc": where, "msg": "Field required", "input": None}


Converter = Callable[..., tuple[Any, list[dict[str, Any]]]]


def fastapi_parameter_errors(convert: Converter, validate: Converter) -> Converter:
    """A parameter converter whose failures carry FastAPI's errors: where msgspec's
    conversion fails, the value goes to `validate`, FastAPI's own Pydantic validation
    of the parameter. msgspec's errors stay where Pydantic accepts the value (a msgspec
    `Meta` constraint Pydantic does not read): a value msgspec refused is never let
    through."""

    def converted(
        value: Any, values: Any = None, loc: tuple[Any, ...] = ()
    ) -> tuple[Any, list[dict[str, Any]]]:
        result, errors = convert(value, values, loc)
        if not errors:
            return result, errors
        _, pydantic_errors = validate(value, values if values is not None else {}, loc=loc)
        return (None, pydantic_errors) if pydantic_errors else (None, errors)

    return converted
