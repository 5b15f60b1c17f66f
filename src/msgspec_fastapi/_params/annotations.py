"""Questions asked of type annotations at registration time."""

from __future__ import annotations

import dataclasses
import inspect
from collections import abc
from collections.abc import Callable
from functools import partial
from types import NoneType, UnionType
from typing import Annotated, Any, TypeGuard, Union, get_args, get_origin, get_type_hints

import msgspec
import msgspec.inspect as mi
from pydantic import BaseModel
from pydantic.dataclasses import is_pydantic_dataclass
from starlette.responses import Response
from typing_extensions import is_typeddict

EMPTY = inspect.Parameter.empty


def strip_annotated(annotation: Any) -> Any:
    """The type inside `Annotated[...]`, or the annotation itself."""
    return get_args(annotation)[0] if get_origin(annotation) is Annotated else annotation


def annotated_metadata(annotation: Any) -> tuple[Any, ...]:
    """The metadata of `Annotated[T, ...]`, or nothing."""
    return get_args(annotation)[1:] if get_origin(annotation) is Annotated else ()


def is_struct_class(value: Any) -> TypeGuard[type[msgspec.Struct]]:
    return isinstance(value, type) and issubclass(value, msgspec.Struct)


def is_record_type(annotation: Any) -> bool:
    """A type that decodes from a JSON object with named fields."""
    bare = strip_annotated(annotation)
    value = get_origin(bare) or bare
    if not isinstance(value, type):
        return False
    return (
        issubclass(value, msgspec.Struct)
        or is_typeddict(value)
        or dataclasses.is_dataclass(value)
        or (issubclass(value, tuple) and hasattr(value, "_fields"))
    )


def mentions(annotation: Any, test: Callable[[Any], bool]) -> bool:
    """Whether `test` holds for the annotation or any type nested in it."""
    bare = strip_annotated(annotation)
    if test(bare) or test(get_origin(bare)):
        return True
    return any(mentions(arg, test) for arg in get_args(bare) if arg is not Ellipsis)


def mentions_struct(annotation: Any) -> bool:
    return mentions(annotation, is_struct_class)


def _is_pydantic_type(value: Any) -> bool:
    """A Pydantic model or a Pydantic dataclass: msgspec would take the dataclass for a plain
    one, without its validators, computed fields or serializers."""
    return isinstance(value, type) and (
        issubclass(value, BaseModel) or is_pydantic_dataclass(value)
    )


def mentions_pydantic(annotation: Any) -> bool:
    return mentions(annotation, _is_pydantic_type)


def annotates_inside(annotation: Any, seen: frozenset[int] = frozenset()) -> bool:
    """Whether an `Annotated` below the annotation's top level carries metadata other than
    msgspec.Meta (`list[Annotated[int, Field(gt=0)]]`, `Annotated[set[str],
    Field(max_length=3)] | None`), also on a field of a TypedDict, dataclass or NamedTuple
    inside it: msgspec would silently ignore it."""
    bare = strip_annotated(annotation)
    inner = [arg for arg in get_args(bare) if arg is not Ellipsis]
    record = get_origin(bare) or bare  # a generic record's class
    if not is_struct_class(record) and is_record_type(record) and id(record) not in seen:
        seen = seen | {id(record)}
        try:
            inner.extend(get_type_hints(record, include_extras=True).values())
        except (NameError, TypeError):
            return True  # fields it cannot read: let Pydantic have the type
    for arg in inner:
        if any(not isinstance(m, msgspec.Meta) for m in annotated_metadata(arg)):
            return True
        if annotates_inside(arg, seen):
            return True
    return False


def is_body_shaped(annotation: Any) -> bool:
    """Types FastAPI would not read from the query string: records and containers."""
    bare = strip_annotated(annotation)
    if is_record_type(bare):
        return True
    if get_origin(bare) in (list, dict, tuple, set, frozenset):
        return True
    return any(is_body_shaped(arg) for arg in get_args(bare) if arg is not Ellipsis)


def is_response_class(annotation: Any) -> bool:
    bare = strip_annotated(annotation)
    return isinstance(bare, type) and issubclass(bare, Response)


def is_msgspec_json_type(annotation: Any) -> bool:
    """A type msgspec can both decode from JSON and describe with a JSON schema, with no
    metadata inside it that msgspec would ignore."""
    if annotation is EMPTY or annotation is None or annotation is NoneType:
        return False
    if mentions_pydantic(annotation) or is_response_class(annotation):
        return False
    if annotates_inside(annotation):
        return False
    try:
        msgspec.json.Decoder(type=annotation)
        msgspec.json.schema(annotation)
    except (TypeError, ValueError):
        return False
    return True


def admits_any(annotation: Any) -> bool:
    """Whether some part of a msgspec type is `Any` (or `object`): a part msgspec converts
    nothing in, so a value that passed conversion may still be one it cannot encode."""
    return any_part(
        annotation,
        lambda info: (
            isinstance(info, mi.AnyType) or (isinstance(info, mi.CustomType) and info.cls is object)
        ),
    )


def has_dataclass_defaults(annotation: Any) -> bool:
    """Whether some part of a msgspec type is a dataclass with a field's default given as
    a value (`x: int = 0`). msgspec decodes such a field left out of the input by leaving
    it to the class attribute, and encodes a dataclass from its instance `__dict__`, so
    the decoded value would be sent without that field."""

    def defaulted(info: Any) -> bool:
        return (
            isinstance(info, mi.DataclassType)
            and dataclasses.is_dataclass(info.cls)
            and any(f.default is not dataclasses.MISSING for f in dataclasses.fields(info.cls))
        )

    return any_part(annotation, defaulted)


def any_part(annotation: Any, test: Callable[[Any], bool]) -> bool:
    """Whether `test` holds for the msgspec type info of `annotation` or of any type
    inside it (fields, items, keys, values, union members), recursive types walked once."""
    seen: set[int] = set()

    def walk(info: Any) -> bool:
        if test(info):
            return True
        if id(info) in seen:
            return False  # a recursive type, already being walked
        seen.add(id(info))
        parts: list[Any] = [field.type for field in getattr(info, "fields", ())]
        for name in ("item_type", "key_type", "value_type"):
            if hasattr(info, name):
                parts.append(getattr(info, name))
        parts.extend(getattr(info, "item_types", ()))
        parts.extend(getattr(info, "types", ()))
        return any(walk(part) for part in parts)

    return walk(mi.type_info(annotation))


def optional_inner(annotation: Any) -> Any | None:
    """`T` for `T | None` (either spelling), else None."""
    if get_origin(annotation) in (Union, UnionType):
        args = get_args(annotation)
        if len(args) == 2 and NoneType in args:
            return args[0] if args[1] is NoneType else args[1]
    return None


def endpoint_hints(endpoint: Callable[..., Any]) -> dict[str, Any]:
    """Resolved annotations of an endpoint, through partials and callable objects."""
    target: Any = endpoint
    while isinstance(target, partial):
        target = target.func
    if not (inspect.isfunction(target) or inspect.ismethod(target)):
        target = target.__call__
    return get_type_hints(target, include_extras=True)


def resolved_parameters(call: Callable[..., Any]) -> list[inspect.Parameter]:
    """The parameters of an endpoint or a dependency (a class: its `__init__`'s), with
    their annotations resolved."""
    signature = inspect.signature(call)
    if isinstance(call, type):
        hints = get_type_hints(call.__init__, include_extras=True)  # type: ignore[misc]
    else:
        hints = endpoint_hints(call)
    return [
        p.replace(annotation=hints.get(p.name, p.annotation)) for p in signature.parameters.values()
    ]


def is_generator_endpoint(endpoint: Callable[..., Any]) -> bool:
    """Whether calling `endpoint` returns a generator or an async generator, through
    partials and callable objects (what FastAPI streams)."""
    target: Any = endpoint
    while isinstance(target, partial):
        target = target.func
    if inspect.isasyncgenfunction(target) or inspect.isgeneratorfunction(target):
        return True
    if not callable(target):
        return False
    call = type(target).__call__
    return inspect.isasyncgenfunction(call) or inspect.isgeneratorfunction(call)


_ITERATOR_ORIGINS = frozenset(
    {
        abc.AsyncIterator,
        abc.AsyncIterable,
        abc.AsyncGenerator,
        abc.Iterator,
        abc.Iterable,
        abc.Generator,
    }
)


def stream_item_type(annotation: Any) -> Any:
    """The item type of `AsyncIterator[T]`, `Iterator[T]`, `AsyncGenerator[T, None]`, ...;
    `Any` for a bare iterator type or no annotation, as FastAPI reads it."""
    bare = strip_annotated(annotation)
    if get_origin(bare) in _ITERATOR_ORIGINS:
        args = get_args(bare)
        return args[0] if args else Any
    return Any
