"""Path, query, header and cookie parameters converted with msgspec.

Registration turns each parameter's annotation and FastAPI constraints into one
converter; the request path only calls it. FastAPI still extracts the values (aliases,
defaults, repeated keys) on the delegated tier; the direct tier extracts them itself with
the same rules and calls the same converter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Union, get_args, get_origin

import annotated_types
import msgspec
from pydantic.fields import FieldInfo
from pydantic_core import SchemaValidator, core_schema

from .._compat import pydantic_validation, replace_validator
from .._errors.validation import Loc, path_text, split_message, value_at
from .._shared import FAST_DIGITS_MAX, PARAM_COOKIE, PARAM_HEADER, PARAM_PATH, PARAM_QUERY
from .annotations import (
    annotated_metadata,
    annotates_inside,
    mentions_pydantic,
    optional_inner,
    strip_annotated,
)

Converter = Callable[..., tuple[Any, list[dict[str, Any]]]]
IntBounds = tuple[int, int]
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

_BOUNDS = {
    annotated_types.Gt: "gt",
    annotated_types.Ge: "ge",
    annotated_types.Lt: "lt",
    annotated_types.Le: "le",
    annotated_types.MultipleOf: "multiple_of",
    annotated_types.MinLen: "min_length",
    annotated_types.MaxLen: "max_length",
}

# FastAPI reads "+5", "05", "1_0" and "5.0" as the int 5-ish values and "yes"/"off" as
# booleans: pydantic's lax string coercion. Running the same coercion keeps acceptance
# identical to a plain APIRouter; msgspec then applies the type and constraints.
_LAX_INT = SchemaValidator(core_schema.int_schema())
_LAX_BOOL = SchemaValidator(core_schema.bool_schema())


def _meta_from(metadata: Iterable[Any], where: str) -> tuple[list[msgspec.Meta], bool]:
    """msgspec.Meta for FastAPI/annotated-types constraints, and whether Strict was set."""
    metas: list[msgspec.Meta] = []
    constraints: dict[str, Any] = {}
    strict = False
    for item in metadata:
        if isinstance(item, FieldInfo):
            nested, nested_strict = _meta_from(item.metadata, where)
            metas.extend(nested)
            strict = strict or nested_strict
        elif isinstance(item, msgspec.Meta):
            metas.append(item)
        elif type(item) in _BOUNDS:
            name = _BOUNDS[type(item)]
            constraints[name] = getattr(item, name)
        elif type(item).__name__ == "Strict" and type(item).__module__.startswith("pydantic"):
            strict = bool(item.strict)
        elif type(item).__name__ == "_PydanticGeneralMetadata":
            for name, value in vars(item).items():
                if name != "pattern":
                    raise TypeError(f"{where}: the constraint {name!r} is not supported")
                constraints[name] = value
        else:
            raise TypeError(f"{where}: unsupported metadata {type(item).__name__}")
    if constraints:
        metas.append(msgspec.Meta(**constraints))
    return metas, strict


def constrained_type(annotation: Any, metadata: Iterable[Any] = (), where: str = "type") -> Any:
    """The annotation with FastAPI constraints folded into `Annotated[..., Meta]`.

    Constraints on `T | None` apply to `T`, as FastAPI applies them to the value.
    Returns the target type; strict mode is reported separately by `parameter_target`.
    """
    return _constrain(annotation, metadata, where)[0]


def _constrain(annotation: Any, metadata: Iterable[Any], where: str) -> tuple[Any, bool]:
    metadata = (*annotated_metadata(annotation), *metadata)
    annotation = strip_annotated(annotation)
    metas, strict = _meta_from(metadata, where)
    if not metas:
        return annotation, strict
    inner = optional_inner(annotation)
    if inner is not None:
        return Annotated[(inner, *metas)] | None, strict
    return Annotated[(annotation, *metas)], strict


def _lax_scalar(annotation: Any) -> SchemaValidator | None:
    if annotation is int:
        return _LAX_INT
    if annotation is bool:
        return _LAX_BOOL
    return None


class LaxRefused(Exception):
    """A string FastAPI would refuse for an int or bool parameter.

    `value` is what to convert strictly instead: the string itself, or for a sequence
    its items with every other one read, so that msgspec's error names the refused one.
    """

    def __init__(self, value: Any) -> None:
        super().__init__(value)
        self.value = value


def _refused_items(normalizers: list[Callable[[Any], Any] | None], value: list[Any]) -> Any:
    """LaxRefused for a list with a refused item: every other item read by its normalizer
    (by position, the last one for the rest)."""
    items = []
    last = len(normalizers) - 1
    for index, item in enumerate(value):
        normalize = normalizers[min(index, last)]
        if normalize is not None:
            try:
                item = normalize(item)
            except LaxRefused as exc:
                item = exc.value
        items.append(item)
    raise LaxRefused(items)


def string_normalizer(annotation: Any) -> Callable[[Any], Any] | None:
    """A function that rewrites HTTP strings the way FastAPI coerces them, or None."""
    annotation = strip_annotated(annotation)
    inner = optional_inner(annotation)
    if inner is not None:
        return string_normalizer(inner)
    origin = get_origin(annotation)
    if origin in (list, set, frozenset, tuple):
        args = [a for a in get_args(annotation) if a is not Ellipsis]
        items = [string_normalizer(a) for a in args]
        if not any(items):
            return None
        if (
            origin is tuple
            and len(get_args(annotation)) > 1
            and Ellipsis not in get_args(annotation)
        ):
            positions = [*items, None]  # items past the tuple's length are left as they are

            def each_position(value: Any) -> Any:
                if not isinstance(value, list):
                    return value
                try:
                    return [
                        items[i](v) if i < len(items) and items[i] else v  # type: ignore[misc]
                        for i, v in enumerate(value)
                    ]
                except LaxRefused:
                    return _refused_items(positions, value)

            return each_position
        item = items[0]
        assert item is not None

        def each_item(value: Any) -> Any:
            if not isinstance(value, list):
                return value
            try:
                return [item(v) for v in value]
            except LaxRefused:
                return _refused_items([item], value)

        return each_item
    validator = _lax_scalar(annotation)
    if validator is None:
        if annotation is bytes:
            return lambda value: value.encode() if isinstance(value, str) else value
        return None
    lax = validator.validate_python
    plain_ints = annotation is int

    def normalize(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        if plain_ints and len(value) <= FAST_DIGITS_MAX and value.isascii() and value.isdigit():
            return int(value)  # the common case, read exactly as pydantic reads it
        try:
            return lax(value)
        except ValueError as exc:
            raise LaxRefused(value) from exc

    return normalize


def int_bounds(target: Any, strict: bool) -> IntBounds | None:
    """(lowest, highest) accepted for a lax int parameter with only range constraints.

    For such a parameter, an ASCII digit string is accepted exactly when its value lies in
    the range, so the request path may read it without msgspec. None for anything else.
    """
    if strict:
        return None
    info = msgspec.inspect.type_info(target)
    if isinstance(info, msgspec.inspect.UnionType):
        others = [t for t in info.types if not isinstance(t, msgspec.inspect.NoneType)]
        if len(others) != 1:
            return None
        info = others[0]
    if not isinstance(info, msgspec.inspect.IntType) or info.multiple_of is not None:
        return None
    if any(type(b) is not int for b in (info.ge, info.gt, info.le, info.lt) if b is not None):
        return None
    # msgspec refuses bounds outside int64 (and gt/lt at its very ends) at registration,
    # so the range always fits a C long long.
    low, high = _INT64_MIN, _INT64_MAX
    if info.ge is not None:
        low = max(low, info.ge)
    if info.gt is not None:
        low = max(low, info.gt + 1)
    if info.le is not None:
        high = min(high, info.le)
    if info.lt is not None:
        high = min(high, info.lt - 1)
    return low, high


_STRING_TARGETS = (str, str | None)


def make_converter(target: Any, strict: bool, bounds: IntBounds | None) -> Converter:
    """The validator FastAPI calls for one parameter: `(value, values, loc)`.

    `bounds` is `int_bounds(target, strict)`.
    """
    normalize = None if strict else string_normalizer(target)
    low, high = bounds if bounds is not None else (0, -1)
    convert = msgspec.convert
    item_type = item_type_of(target)
    # msgspec caches what it learns of a class, not of a union: `str | None` is parsed
    # again on every call, five times the cost of `str`, to return the string it was given.
    keeps_strings = target in _STRING_TARGETS

    def validate(value: Any, values: Any = None, loc: Loc = ()) -> tuple[Any, list[dict[str, Any]]]:
        if keeps_strings and type(value) is str:
            return value, []
        received = value
        strictly = strict
        try:
            if normalize is not None:
                try:
                    value = normalize(value)
                    if type(value) is int and low <= value <= high:
                        return value, []  # what msgspec would answer, without asking it
                except LaxRefused as refused:
                    # msgspec's lax mode would take "1e3"; FastAPI does not. A strict
                    # conversion refuses it too, and words the error as msgspec does.
                    value, strictly = refused.value, True
            return convert(value, type=target, strict=strictly), []
        except (msgspec.ValidationError, ValueError, TypeError, OverflowError) as exc:
            first = parameter_error(exc, received, loc)
            if item_type is None or not isinstance(value, list):
                return None, [first]
            return None, item_errors(first, item_type, value, received, strictly, loc)

    return validate


def item_type_of(target: Any) -> Any:
    """The item type of a list, set or `tuple[T, ...]` parameter (also `| None`), whose
    invalid items FastAPI reports one by one; None for any other parameter."""
    bare = strip_annotated(target)
    inner = optional_inner(bare)
    if inner is not None:
        bare = strip_annotated(inner)
    origin, args = get_origin(bare), get_args(bare)
    if origin in (list, set, frozenset) and len(args) == 1:
        return args[0]
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return args[0]
    return None


def item_errors(
    first: dict[str, Any],
    item_type: Any,
    items: list[Any],
    received: Any,
    strict: bool,
    loc: Loc,
    dec_hook: Any = None,
) -> list[dict[str, Any]]:
    """Every invalid item's error, as FastAPI reports them, when msgspec named an item
    (`first`, at `(*loc, index, ...)`); else just `first` (the sequence's own error)."""
    where = first["loc"][len(loc) :]
    if not where or type(where[0]) is not int:
        return [first]
    errors = [first]
    for index in range(where[0] + 1, len(items)):
        try:
            msgspec.convert(items[index], type=item_type, strict=strict, dec_hook=dec_hook)
        except (msgspec.ValidationError, ValueError, TypeError, OverflowError) as exc:
            text, inner = split_message(str(exc))
            at = (index, *inner)
            errors.append(
                {
                    "type": "value_error.msgspec",
                    "loc": (*loc, *at),
                    "msg": f"{text} - at `{path_text(at)}`",
                    "input": value_at(received, at),
                }
            )
    return errors


def parameter_error(exc: Exception, received: Any, loc: Loc) -> dict[str, Any]:
    """A parameter's error as FastAPI shapes it: located at the item msgspec names (an
    index of a list parameter), with what the request sent there as `input`; the
    message stays msgspec's."""
    message = str(exc)
    inner = split_message(message)[1]
    return {
        "type": "value_error.msgspec",
        "loc": (*loc, *inner),
        "msg": message,
        "input": value_at(received, inner),
    }


def parameter_target(annotation: Any, metadata: Iterable[Any], where: str) -> tuple[Any, bool]:
    """The msgspec type and strictness for one parameter; TypeError when unsupported."""
    if annotates_inside(annotation):
        raise TypeError(f"{where}: a constraint inside the type is Pydantic's")
    target, strict = _constrain(annotation, metadata, where)
    try:
        msgspec.json.Decoder(type=target)
        msgspec.json.schema(target)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{where}: msgspec does not support this type ({exc})") from exc
    return target, strict


@dataclass(frozen=True, slots=True)
class ParamSpec:
    """One path/query/header/cookie parameter as the direct tier extracts it."""

    name: str
    location: int
    key: str
    header_key: bytes
    loc: tuple[str, str]
    is_sequence: bool
    required: bool
    default: Any
    convert: Converter
    int_bounds: IntBounds | None
    # Its converter answers a `str` value with the value itself (`make_converter`).
    keeps_strings: bool


_LOCATIONS = {
    "path": PARAM_PATH,
    "query": PARAM_QUERY,
    "header": PARAM_HEADER,
    "cookie": PARAM_COOKIE,
}
_SEQUENCES = (list, set, frozenset, tuple)
# The Dependant attributes that hold path, query, header and cookie parameters.
PARAM_GROUPS = ("path_params", "query_params", "header_params", "cookie_params")


def sequence_kind(annotation: Any) -> bool | None:
    """False for a scalar, True for a flat sequence of scalars, None for anything else."""
    inner = optional_inner(annotation)
    if inner is not None:
        annotation = inner
    origin = get_origin(annotation)
    if origin in _SEQUENCES:
        args = [a for a in get_args(annotation) if a is not Ellipsis]
        return True if all(sequence_kind(strip_annotated(a)) is False for a in args) else None
    if origin is Union or (isinstance(annotation, type) and issubclass(annotation, _SEQUENCES)):
        return None
    return False


# Wraps a parameter's converter where it fails: (ours, FastAPI's) -> the route's.
OnFailure = Callable[[Converter, Converter], Converter]


def prepare_dependant(dependant: Any, on_failure: OnFailure | None = None) -> None:
    """Give every msgspec-convertible parameter of a FastAPI Dependant our converter.

    FastAPI keeps extracting the values (aliases, defaults, repeated keys); only the
    validation changes. Parameters msgspec cannot take (Pydantic models, Pydantic-only
    types such as `AnyUrl`, Pydantic validators) stay FastAPI's, which keeps their route
    on the delegated tier (`direct_param_specs`). `on_failure` (a route's with
    errors="fastapi") makes each converter answer its failures otherwise.
    """
    for group in PARAM_GROUPS:
        for field in getattr(dependant, group):
            if getattr(field, "msgspec_target", None) is not None:
                continue
            info = field.field_info
            if mentions_pydantic(info.annotation):
                continue
            where = f"parameter {field.name!r}"
            try:
                target, strict = parameter_target(info.annotation, info.metadata, where)
            except TypeError:
                continue
            bounds = int_bounds(target, strict)
            converter = make_converter(target, strict, bounds)
            if on_failure is not None:
                converter = on_failure(converter, pydantic_validation(field))
            replace_validator(field, converter)
            field.msgspec_target = target
            field.msgspec_int_bounds = bounds
    for dependency in dependant.dependencies:
        prepare_dependant(dependency, on_failure)


def defaults_need_fastapi(dependant: Any) -> bool:
    """Whether a path, query, header or cookie parameter takes its default in a way only
    FastAPI's solving reproduces: made by a `default_factory` when the value is missing
    (and never before), or validated (`validate_default`)."""
    return any(
        field.field_info.default_factory is not None or field.field_info.validate_default
        for group in ("path_params", "query_params", "header_params", "cookie_params")
        for field in getattr(dependant, group)
    )


def direct_param_specs(dependant: Any) -> tuple[ParamSpec, ...] | None:
    """The direct tier's view of a prepared Dependant's own parameters, or None.

    None means some parameter needs FastAPI's extraction (alias choices, parameter
    models, Json, nested containers), so the route stays on the delegated tier.
    """
    specs = []
    for group in PARAM_GROUPS:
        for field in getattr(dependant, group):
            info = field.field_info
            if getattr(field, "msgspec_target", None) is None:
                return None
            if info.validation_alias is not None and not isinstance(info.validation_alias, str):
                return None
            if any(type(m).__name__ == "Json" for m in info.metadata):
                return None
            is_sequence = sequence_kind(strip_annotated(info.annotation))
            if is_sequence is None:
                return None
            location = _LOCATIONS[info.in_.value]
            key = getattr(field, "validation_alias", None) or field.alias
            specs.append(
                ParamSpec(
                    name=field.name,
                    location=location,
                    key=key,
                    header_key=key.lower().encode("latin-1"),
                    loc=(info.in_.value, key),
                    is_sequence=is_sequence and location in (PARAM_QUERY, PARAM_HEADER),
                    required=info.is_required(),
                    default=None if info.is_required() else field.default,
                    convert=field.validate,
                    int_bounds=None if is_sequence else field.msgspec_int_bounds,
                    keeps_strings=field.msgspec_target in _STRING_TARGETS,
                )
            )
    return tuple(specs)
