"""Body validation errors as FastAPI reports them, worked out only when a body fails.

msgspec stops at the first wrong value. When a body fails its typed decoding, the request
path hands it to the route's `BodyErrors`, which decodes it again without a type (a body
that is not JSON at all is still a 400) and walks the declared type over the decoded value
to list every invalid field, each with FastAPI's `loc`: `("body", "population")`,
`("body", 1, "population")`, `("body", "scores", "k")`. The walk checks each field against
its own type with a decoder built once per type, and stops after `MAX_ERRORS` errors or
once its checks have cost `WORK_BUDGET`, so a hostile body cannot make reporting
expensive. The successful decode never comes here.

A MessagePack body gets its own `BodyErrors` (``msgpack=True``), which decodes and checks
values as MessagePack; inputs it reports are made JSON-ready (bytes as base64, extension
types by their code), as FastAPI's handler encodes them as JSON.

Errors keep msgspec's wording with the full path (`Expected `int`, got `str` - at
`$.population``) and the type `value_error.msgspec`; a missing field is FastAPI's own
`missing` / `Field required`. `input` is the offending value.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from types import FrameType, NoneType, UnionType
from typing import Annotated, Any, Union, get_args, get_origin

import msgspec
from fastapi.exceptions import RequestValidationError

from .._shared import malformed_json, malformed_msgpack, nested_too_deeply

MAX_ERRORS = 100
# What one report's checks may cost, in bytes: a check encodes a value again and decodes
# it with its type's decoder, counted as its encoded size plus `CHECK_COST` for the calls.
# Counted, not timed, so that a body gets the same report however loaded the machine is;
# the budget is some tens of milliseconds of checks on a current core.
WORK_BUDGET = 16 * 2**20
CHECK_COST = 512

Loc = tuple[str | int, ...]

# msgspec's path of a value: `$`, then `.field`, `[index]` or `[...]` (a dict value).
_AT = re.compile(r" - at `(\$[^`]*)`$")
_KEY_AT = re.compile(r" - at `key` in `(\$[^`]*)`$")
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]|\[\.\.\.\]")
_MISSING_FIELD = re.compile(r"^Object missing required field `(.*)`$")
_UNKNOWN_FIELD = re.compile(r"^Object contains unknown field `(.*)`$")
_SEQUENCES = (list, tuple, set, frozenset)
_NO_VALUE = object()


# Frames FastAPI's exception handling takes besides encoding an error's `input` with its
# (recursive, Python) jsonable_encoder, which takes one frame per level of nesting.
_HANDLER_FRAMES = 50


def nests_deeper_than(raw: bytes, value: Any, msgpack: bool) -> bool:
    """Whether `value`, decoded from `raw`, nests lists and dicts too deeply for FastAPI to
    encode as an error's `input` in the frames left on the stack.

    msgspec decodes deeper than Python recurses where the interpreter counts C recursion
    apart (CPython 3.12 and later). Walked without recursion, and only for a body with
    enough brackets (or, in MessagePack, bytes) to nest that deep.
    """
    frame: FrameType | None = sys._getframe()
    in_use = 0
    while frame is not None:
        frame, in_use = frame.f_back, in_use + 1
    limit = sys.getrecursionlimit() - in_use - _HANDLER_FRAMES
    if len(raw) <= limit or (not msgpack and raw.count(b"[") + raw.count(b"{") <= limit):
        return False
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            item = item.values()
        elif not isinstance(item, list):
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in item)
    return False


def decode_untyped(raw: bytes, msgpack: bool = False) -> Any:
    """The body as builtins; `_NO_VALUE` when it is well-formed but out of range.

    Raises the 400 for a body that is not JSON (or MessagePack) at all, or that nests
    deeper than FastAPI can encode in an error.
    """
    try:
        value = msgspec.msgpack.decode(raw) if msgpack else msgspec.json.decode(raw)
    except msgspec.ValidationError:
        return _NO_VALUE  # well-formed, but a number is out of range: the value's fault
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        # msgspec 0.22 reports invalid UTF-8 in a string as UnicodeDecodeError.
        raise (malformed_msgpack(exc) if msgpack else malformed_json(exc)) from exc
    except RecursionError as exc:
        raise nested_too_deeply(msgpack) from exc
    if nests_deeper_than(raw, value, msgpack):
        raise nested_too_deeply(msgpack)
    return value


def _ext_text(value: Any) -> Any:
    if isinstance(value, msgspec.msgpack.Ext):
        return f"<MessagePack extension {value.code}>"
    raise TypeError(f"{type(value).__name__} has no JSON form")


def json_ready(value: Any) -> Any:
    """A MessagePack-decoded value as JSON builtins, for an error's `input`; None when a
    map has keys JSON cannot have."""
    try:
        return msgspec.json.decode(msgspec.json.encode(value, enc_hook=_ext_text))
    except (TypeError, msgspec.DecodeError):
        return None


def received_body(raw: bytes | None) -> Any:
    """What FastAPI passes as `RequestValidationError.body`: the JSON, else the bytes."""
    if not raw:
        return None
    try:
        value = msgspec.json.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError):
        return raw
    return raw if nests_deeper_than(raw, value, False) else value


def path_text(loc: Loc) -> str:
    """A location in msgspec's path notation."""
    return "$" + "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in loc)


def parse_path(path: str) -> Loc:
    """`$.a[2].b` -> ("a", 2, "b"); a dict value (`[...]`) ends the known part."""
    loc: list[str | int] = []
    for found in _STEP.finditer(path[1:]):
        name, index = found.groups()
        if name is not None:
            loc.append(name)
        elif index is not None:
            loc.append(int(index))
        else:
            break
    return tuple(loc)


def split_message(message: str) -> tuple[str, Loc]:
    """msgspec's message without its path, and the location it names."""
    for pattern in (_KEY_AT, _AT):
        found = pattern.search(message)
        if found is not None:
            return message[: found.start()], parse_path(found.group(1))
    return message, ()


def _strip(annotation: Any) -> tuple[Any, bool]:
    """The type inside `Annotated`, and whether constraints sit on the outer type."""
    if get_origin(annotation) is Annotated:
        return get_args(annotation)[0], True
    return annotation, False


def _struct_class(annotation: Any) -> type[msgspec.Struct] | None:
    origin = get_origin(annotation) or annotation
    if isinstance(origin, type) and issubclass(origin, msgspec.Struct):
        return origin
    return None


class _Walk:
    """One report: the errors found so far, within the caps."""

    __slots__ = ("checker", "errors", "spent")

    def __init__(self, checker: BodyErrors) -> None:
        self.checker = checker
        self.errors: list[dict[str, Any]] = []
        self.spent = 0

    def full(self) -> bool:
        return len(self.errors) >= MAX_ERRORS or self.spent > WORK_BUDGET

    def problem(self, annotation: Any, value: Any) -> str | None:
        """msgspec's message for `value` as `annotation`, its cost counted."""
        checker = self.checker
        encoded = msgspec.msgpack.encode(value) if checker.msgpack else msgspec.json.encode(value)
        self.spent += CHECK_COST + len(encoded)
        return checker.problem(annotation, encoded)

    def key_problem(self, key_type: Any, key: Any) -> str | None:
        """msgspec's message (without its path) for `key` as a dict key of `key_type`, or
        None when it is valid."""
        problem = self.problem(self.checker.key_annotation(key_type), {key: None})
        return None if problem is None else split_message(problem)[0]

    def add(self, loc: Loc, message: str, value: Any, missing: bool = False) -> None:
        if len(self.errors) >= MAX_ERRORS:
            return
        if missing:
            error = {"type": "missing", "loc": ("body", *loc), "msg": "Field required"}
        else:
            error = {"type": "value_error.msgspec", "loc": ("body", *loc), "msg": message}
        error["input"] = json_ready(value) if self.checker.msgpack else value
        self.errors.append(error)

    def leaf(self, value: Any, loc: Loc, problem: str) -> None:
        """Report `problem` (msgspec's message for `value`) at its absolute location."""
        text, inner = split_message(problem)
        where = loc + inner
        found = _MISSING_FIELD.match(text)
        if found is not None:
            self.add((*where, found.group(1)), "", value_at(value, inner), missing=True)
            return
        found = _UNKNOWN_FIELD.match(text)
        if found is not None:
            name = found.group(1)
            container = value_at(value, inner)
            extra = container.get(name) if isinstance(container, dict) else None
            where = (*where, name)
            self.add(where, f"{text} - at `{path_text(where[:-1])}`", extra)
            return
        if _KEY_AT.search(problem):
            suffix = f" - at `key` in `{path_text(where)}`"
        else:
            suffix = f" - at `{path_text(where)}`" if where else ""
        self.add(where, text + suffix, value_at(value, inner))

    def check(self, annotation: Any, value: Any, loc: Loc, start: int = 0) -> None:
        """Add the errors of `value` against `annotation`, found at `loc`."""
        if self.full():
            return
        problem = self.problem(annotation, value)
        if problem is None:
            return
        before = len(self.errors)
        bare, constrained = _strip(annotation)
        if not constrained:
            self.descend(bare, value, loc, start)
        if len(self.errors) == before:
            self.leaf(value, loc, problem)

    def descend(self, bare: Any, value: Any, loc: Loc, start: int) -> None:
        """Check the parts of a container one by one; report nothing when it has none."""
        cls = _struct_class(bare)
        if cls is not None:
            config = cls.__struct_config__
            if isinstance(value, dict) and not config.array_like and config.tag_field is None:
                self.fields(cls, value, loc)
            return
        origin, args = get_origin(bare), get_args(bare)
        if origin in _SEQUENCES and isinstance(value, list):
            item_type = args[0] if args else Any
            if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
                return  # a fixed-length tuple: its length is the problem or its items are
            for index in range(start, len(value)):
                if self.full():
                    return
                self.check(item_type, value[index], (*loc, index))
        elif origin is dict and isinstance(value, dict) and len(args) == 2:
            key_type, value_type = args
            for key, item in value.items():
                if self.full():
                    return
                problem = self.key_problem(key_type, key)
                if problem is not None:
                    # As Pydantic: the key at `[key]` under its own name, then its value.
                    where = (*loc, key, "[key]")
                    self.add(where, f"{problem} - at `key` in `{path_text(loc)}`", key)
                self.check(value_type, item, (*loc, key))
        elif origin in (Union, UnionType):
            members = [arg for arg in args if arg is not NoneType]
            if value is not None and len(members) == 1:
                self.check(members[0], value, loc)

    def parts(self, cls: type[msgspec.Struct], value: Any) -> None:
        """An embedded body's parts, in the order of the parameters, as FastAPI reads
        each from the body with `.get`: a missing required part has no input, and a body
        that is no object (a list, a number) misses every part, even those with defaults."""
        fields = {field.encode_name: field for field in self.checker.fields_of(cls)}
        for key in self.checker.parts:
            if self.full():
                return
            field = fields[key]
            if not isinstance(value, dict):
                self.add((key,), "", None, missing=True)
            elif key in value:
                self.check(field.type, value[key], (key,))
            elif field.required:
                self.add((key,), "", None, missing=True)

    def fields(self, cls: type[msgspec.Struct], value: dict[str, Any], loc: Loc) -> None:
        names = set()
        for field in self.checker.fields_of(cls):
            names.add(field.encode_name)
            if field.encode_name not in value:
                if field.required:
                    self.add((*loc, field.encode_name), "", value, missing=True)
                continue
            self.check(field.type, value[field.encode_name], (*loc, field.encode_name))
        if cls.__struct_config__.forbid_unknown_fields:
            for key, item in value.items():
                if key not in names:
                    where = (*loc, key)
                    message = f"Object contains unknown field `{key}`"
                    if loc:
                        message += f" - at `{path_text(loc)}`"
                    self.add(where, message, item)


def value_at(value: Any, loc: Loc) -> Any:
    """The part of `value` at `loc` (None where it has no such part)."""
    for step in loc:
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError):
            return None
    return value


class BodyErrors:
    """Turns a body's failed decoding into FastAPI's 422; built once per body type and
    format (JSON, or MessagePack with `msgpack=True`)."""

    __slots__ = ("decode_type", "decoders", "fields", "key_types", "msgpack", "parts")

    def __init__(
        self, decode_type: Any, msgpack: bool = False, parts: tuple[str, ...] = ()
    ) -> None:
        self.decode_type = decode_type
        self.msgpack = msgpack
        # An embedded body's keys, in the order of its parameters; () for another body.
        self.parts = parts
        # By the annotation's id (typing objects hash slowly), holding the annotation so
        # that the id stays its own. Filled on the error path, once per type.
        self.decoders: dict[int, tuple[Any, Any]] = {}
        self.fields: dict[type, tuple[msgspec.structs.FieldInfo, ...]] = {}
        # By the key type's id: a dict of such keys, to check one key as a key.
        self.key_types: dict[int, tuple[Any, Any]] = {}

    def fields_of(self, cls: type[msgspec.Struct]) -> tuple[msgspec.structs.FieldInfo, ...]:
        found = self.fields.get(cls)
        if found is None:
            found = self.fields[cls] = msgspec.structs.fields(cls)
        return found

    def problem(self, annotation: Any, encoded: bytes) -> str | None:
        """msgspec's message for `encoded` decoded as `annotation`, or None when it is
        valid."""
        entry = self.decoders.get(id(annotation))
        if entry is None:
            codec = msgspec.msgpack if self.msgpack else msgspec.json
            entry = self.decoders[id(annotation)] = (annotation, codec.Decoder(annotation))
        try:
            entry[1].decode(encoded)
        except msgspec.ValidationError as exc:
            return str(exc)
        return None

    def key_annotation(self, key_type: Any) -> Any:
        """A dict of `key_type` keys, to check one key as a key: a JSON key is a string,
        which msgspec reads as a number or another type only where it is a dict's key."""
        entry = self.key_types.get(id(key_type))
        if entry is None:
            entry = self.key_types[id(key_type)] = (key_type, dict[key_type, Any])
        return entry[1]

    def malformed(self, exc: BaseException, raw: bytes) -> Exception:
        """The error for a body msgspec could not parse: the 400."""
        return malformed_msgpack(exc) if self.msgpack else malformed_json(exc)

    def __call__(self, exc: msgspec.ValidationError, raw: bytes) -> RequestValidationError:
        """The 422 for `raw`, which failed with `exc`; raises the 400 if it is malformed."""
        data = decode_untyped(raw, self.msgpack) if raw else {}
        if data is _NO_VALUE:
            _, loc = split_message(str(exc))
            only: dict[str, Any] = {"type": "value_error.msgspec", "loc": ("body", *loc)}
            only["msg"] = str(exc)
            return RequestValidationError([only], body=None)
        walk = _Walk(self)
        _, first = split_message(str(exc))
        # Everything before msgspec's first error decoded: a list is checked from there.
        start = first[0] if first and isinstance(first[0], int) else 0
        bare, constrained = _strip(self.decode_type)
        try:
            if self.parts:
                walk.parts(bare, data)
            elif not constrained:
                walk.descend(bare, data, (), start)
        except RecursionError:
            walk.errors.clear()  # a recursive type nested deeper than the walk can go
        if not walk.errors:
            walk.leaf(data, (), str(exc))
        body = (json_ready(data) if self.msgpack else data) if raw else None
        if not raw:
            for error in walk.errors:
                error["input"] = None
        return RequestValidationError(walk.errors, body=body)


def request_invalid(errors: Sequence[Any], body: Any, raw: bytes | None) -> RequestValidationError:
    """Parameter errors, followed by the body's as FastAPI orders them."""
    if type(body) is RequestValidationError:
        return RequestValidationError([*errors, *body.errors()], body=body.body)
    return RequestValidationError(errors, body=received_body(raw))
