"""The `response_model_*` options of a typed msgspec response, with FastAPI's semantics.

FastAPI hands `response_model_include`, `response_model_exclude`,
`response_model_by_alias`, `response_model_exclude_unset`,
`response_model_exclude_defaults` and `response_model_exclude_none` to Pydantic's
serializer. For a msgspec response type, registration turns them into one
`ResponseShape` (`response_shape`), or None when they change nothing, so that routes
without them keep the trusted path untouched. Per request, the checked value (trusted
or validated) is walked once into builtins, which the route's encoder then encodes as
JSON or MessagePack; values msgspec encodes as they are (strings, numbers, dates,
UUIDs, enums, ...) are left for it.

Pydantic's rules, applied to Structs as to models and to dataclasses:

- `include` and `exclude` are sets of names, or dicts of name -> True, `...`, or a
  nested set or dict, at any depth. Names are the attribute names (not the `rename`d
  ones); dict keys and list or tuple indexes (negative ones counted from the end) are
  filtered alike, and `"__all__"` applies to every key or index, merged with a key's
  own entry. What `exclude` names is dropped even where `include` names it. Sets are
  never filtered.
- `exclude_none` drops fields whose value is None (not dict values or list items).
- `exclude_defaults` drops fields equal (`==`) to their default, or to what their
  default factory makes.
- `exclude_unset`: a field is unset only where msgspec can tell, when its value is
  `msgspec.UNSET`, and msgspec never encodes those anyway. A field left at its default,
  or missing from a dict the response was validated from, is set: Structs do not
  record which fields were given. The option therefore changes nothing.
- `by_alias=False` names fields by their attribute names instead of their `rename`d
  names.

As msgspec encodes them: UNSET fields are left out, a Struct with `omit_defaults=True`
leaves out fields that are their default, and a tagged Struct's tag comes first (it is
no field, so no option drops it). An `array_like` Struct is sent as it is.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import uuid
from typing import Any

import msgspec

ALL = "__all__"
_ABSENT = object()
Filter = dict[Any, Any]

# Types whose values are leaves: nothing in them to filter.
_LEAVES = frozenset(
    {
        str,
        int,
        float,
        bool,
        type(None),
        bytes,
        bytearray,
        memoryview,
        datetime.datetime,
        datetime.date,
        datetime.time,
        datetime.timedelta,
        uuid.UUID,
        decimal.Decimal,
        msgspec.Raw,
        type(msgspec.UNSET),
    }
)
# The default factories whose empty result msgspec's `omit_defaults` counts as default.
_EMPTY_FACTORIES = (list, dict, set, frozenset, tuple)

_RECORD = 0  # a Struct or a dataclass: named fields
_MAPPING = 1
_SEQUENCE = 2  # a list or a tuple: filtered by index
_SET = 3  # never filtered
_LEAF = 4


def normalize_filter(value: Any, option: str) -> Filter | None:
    """FastAPI's include/exclude argument as nested dicts whose leaves are True.

    Refuses at registration what Pydantic would refuse on every request.
    """
    if value is None:
        return None
    if isinstance(value, (set, frozenset)):
        return {key: True for key in value}
    if isinstance(value, dict):
        found: Filter = {}
        for key, entry in value.items():
            if entry is True or entry is Ellipsis:
                found[key] = True
            elif isinstance(entry, (set, frozenset, dict)):
                found[key] = normalize_filter(entry, option)
            else:
                raise TypeError(
                    f"{option}: the entry for {key!r} must be True, ..., a set or a dict, "
                    f"not {entry!r}"
                )
        return found
    raise TypeError(f"{option} must be a set or a dict, not {type(value).__name__}")


def merge_filters(own: Any, every: Any) -> Any:
    """A key's own entry merged with the "__all__" entry, as Pydantic merges them: True on
    either side keeps the key's own entry, two filters are joined."""
    if own is True or every is True:
        return own
    merged = dict(own)
    for key, entry in every.items():
        if key not in merged:
            merged[key] = entry
        elif merged[key] is not True and entry is not True:
            merged[key] = merge_filters(merged[key], entry)
    return merged


def entry_for(node: Filter, key: Any) -> Any:
    """The filter `node` holds for `key` (True: the whole value), or _ABSENT."""
    own = node.get(key, _ABSENT)
    every = node.get(ALL, _ABSENT)
    if every is _ABSENT:
        return own
    if own is _ABSENT:
        return every
    return merge_filters(own, every)


def positive_indexes(node: Filter | None, length: int) -> Filter | None:
    """A filter of list indexes with negative ones counted from the end."""
    if node is None or not any(type(key) is int and key < 0 for key in node):
        return node
    return {
        key + length if type(key) is int and key < 0 else key: entry for key, entry in node.items()
    }


@dataclasses.dataclass(frozen=True, slots=True)
class RecordField:
    """One field of a Struct or a dataclass, as the walk reads it."""

    name: str
    key: str  # the key it is sent under
    default: Any  # _ABSENT without one
    factory: Any  # _ABSENT without one


@dataclasses.dataclass(frozen=True, slots=True)
class Record:
    """What the walk needs of a Struct or dataclass class, read once per class."""

    fields: tuple[RecordField, ...]
    tag_field: str | None
    tag: Any
    omit_defaults: bool


def struct_record(cls: type[msgspec.Struct], by_alias: bool) -> Record:
    config = cls.__struct_config__
    fields = tuple(
        RecordField(
            name=info.name,
            key=info.encode_name if by_alias else info.name,
            default=_ABSENT if info.default is msgspec.NODEFAULT else info.default,
            factory=_ABSENT if info.default_factory is msgspec.NODEFAULT else info.default_factory,
        )
        for info in msgspec.structs.fields(cls)
    )
    return Record(fields, config.tag_field, config.tag, config.omit_defaults)


def dataclass_record(cls: type) -> Record:
    fields = tuple(
        RecordField(
            name=field.name,
            key=field.name,
            default=_ABSENT if field.default is dataclasses.MISSING else field.default,
            factory=(
                _ABSENT if field.default_factory is dataclasses.MISSING else field.default_factory
            ),
        )
        for field in dataclasses.fields(cls)
    )
    return Record(fields, None, None, False)


def omitted_by_msgspec(value: Any, field: RecordField) -> bool:
    """Whether a Struct with `omit_defaults=True` leaves the value out, by msgspec's rule:
    the default itself, or an empty container of the type of an empty-container factory."""
    if field.default is not _ABSENT:
        return value is field.default
    factory = field.factory
    return factory in _EMPTY_FACTORIES and type(value) is factory and not value


def equals_default(value: Any, field: RecordField) -> bool:
    """Pydantic's `exclude_defaults` test: equal to the default or the factory's value."""
    if field.default is not _ABSENT:
        default = field.default
    elif field.factory is not _ABSENT:
        default = field.factory()
    else:
        return False
    try:
        return bool(value == default)
    except Exception:
        return False  # a value that cannot be compared is not the default


class ResponseShape:
    """The options of one route, applied to each value it sends (see the module doc)."""

    __slots__ = ("by_alias", "exclude", "exclude_defaults", "exclude_none", "include", "kinds")

    def __init__(
        self,
        include: Filter | None,
        exclude: Filter | None,
        by_alias: bool,
        exclude_defaults: bool,
        exclude_none: bool,
    ) -> None:
        self.include = include
        self.exclude = exclude
        self.by_alias = by_alias
        self.exclude_defaults = exclude_defaults
        self.exclude_none = exclude_none
        # Per class: (kind, Record or None), filled as classes are met.
        self.kinds: dict[type, tuple[int, Record | None]] = {}

    def __call__(self, value: Any) -> Any:
        return self.walk(value, self.include, self.exclude)

    def kind_of(self, cls: type) -> tuple[int, Record | None]:
        found = self.kinds.get(cls)
        if found is None:
            if issubclass(cls, msgspec.Struct):
                if cls.__struct_config__.array_like:
                    found = (_LEAF, None)
                else:
                    found = (_RECORD, struct_record(cls, self.by_alias))
            elif dataclasses.is_dataclass(cls):
                found = (_RECORD, dataclass_record(cls))
            elif issubclass(cls, dict):
                found = (_MAPPING, None)
            elif issubclass(cls, (list, tuple)):
                found = (_SEQUENCE, None)
            elif issubclass(cls, (set, frozenset)):
                found = (_SET, None)
            else:
                found = (_LEAF, None)
            self.kinds[cls] = found
        return found

    def walk(self, value: Any, include: Filter | None, exclude: Filter | None) -> Any:
        cls = type(value)
        if cls in _LEAVES:
            return value
        kind, record = self.kind_of(cls)
        if kind == _RECORD:
            assert record is not None
            return self.walk_record(value, record, include, exclude)
        if kind == _MAPPING:
            found = {}
            for key, item in value.items():
                entries = self.entries(key, include, exclude)
                if entries is not None:
                    found[key] = self.walk(item, *entries)
            return found
        if kind == _SEQUENCE:
            if include is None and exclude is None:
                return [self.walk(item, None, None) for item in value]
            include = positive_indexes(include, len(value))
            exclude = positive_indexes(exclude, len(value))
            items = []
            for index, item in enumerate(value):
                entries = self.entries(index, include, exclude)
                if entries is not None:
                    items.append(self.walk(item, *entries))
            return items
        if kind == _SET:
            return [self.walk(item, None, None) for item in value]
        return value

    def walk_record(
        self, value: Any, record: Record, include: Filter | None, exclude: Filter | None
    ) -> dict[str, Any]:
        found: dict[str, Any] = {}
        if record.tag_field is not None:
            found[record.tag_field] = record.tag
        for field in record.fields:
            item = getattr(value, field.name, msgspec.UNSET)
            if item is msgspec.UNSET:
                continue
            if record.omit_defaults and omitted_by_msgspec(item, field):
                continue
            if self.exclude_none and item is None:
                continue
            if self.exclude_defaults and equals_default(item, field):
                continue
            entries = self.entries(field.name, include, exclude)
            if entries is not None:
                found[field.key] = self.walk(item, *entries)
        return found

    @staticmethod
    def entries(
        key: Any, include: Filter | None, exclude: Filter | None
    ) -> tuple[Filter | None, Filter | None] | None:
        """The include and exclude filters for the value at `key`, None to drop it."""
        inner_exclude = None
        if exclude is not None:
            entry = entry_for(exclude, key)
            if entry is True:
                return None
            if entry is not _ABSENT:
                inner_exclude = entry
        inner_include = None
        if include is not None:
            entry = entry_for(include, key)
            if entry is _ABSENT:
                return None
            if entry is not True:
                inner_include = entry
        return inner_include, inner_exclude


def response_shape(where: str, options: dict[str, Any]) -> ResponseShape | None:
    """The route's `response_model_*` options as a ResponseShape; None when they change
    nothing (all at FastAPI's defaults, or only `exclude_unset`, see the module doc)."""
    include = normalize_filter(
        options.get("response_model_include"), f"{where}: response_model_include"
    )
    exclude = normalize_filter(
        options.get("response_model_exclude"), f"{where}: response_model_exclude"
    )
    by_alias = options.get("response_model_by_alias", True) is not False
    exclude_defaults = bool(options.get("response_model_exclude_defaults"))
    exclude_none = bool(options.get("response_model_exclude_none"))
    if include is None and not exclude and by_alias and not exclude_defaults and not exclude_none:
        return None
    return ResponseShape(include, exclude or None, by_alias, exclude_defaults, exclude_none)
