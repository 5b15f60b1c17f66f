"""Generated Pydantic apps and requests, for tests/test_pydantic_differential.py.

An `AppSpec` is drawn from one hypothesis-controlled `Random`: enums, Pydantic models
(`BaseModel`s with their config, aliases, constraints, validators and computed fields,
a Pydantic dataclass, a `TypedDict`, the tagged variants of a discriminated union) and
routes using them (bodies, responses, query/header/cookie models) with dependencies
drawn from `DEPENDENCIES`, on the route or on the router: one taking a part of the body,
`yield` ones (async and sync, either scope) logging their set-up, the exception they saw
and their teardown, one setting the status and a header on the `Response`, one adding a
background task, two sharing a sub-dependency (cached, and `use_cache=False`), one
raising `HTTPException` on a query value, and ones whose header and query parameters can
fail. It is rendered as Python source (`source`), which is what a failing example prints,
and run once (`namespace`); every app built from it (`build`) shares those classes and
endpoints, so that the routers compared serve the very same route.

Requests (`Call`) start from a valid value of the route's types, in the JSON form a
client sends, and are then mutated: wrong types, missing and extra keys, `NaN` and
`Infinity`, duplicate keys, huge integers, lone surrogates, malformed or empty bodies,
other encodings, other content types, bodies in two chunks.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from random import Random
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, FastAPI
from raw_asgi import body_messages, scope_for, send_messages
from twins import Twin, outcome

# --- specifications ---------------------------------------------------------------------

LEAVES = ("int", "float", "str", "bool", "datetime", "date", "uuid", "decimal", "bytes")
ENUMS = {"E0": ("a", "b", "é"), "E1": (1, 2)}  # the values of HEADER's enums
SENTINELS = (13, "bad")  # what the validators that raise refuse (ValueError)
BOOM = "boom"  # what they refuse with an exception that is no validation error
# Routes without a response model or return annotation. Off: MsgspecRouter encodes their
# values with msgspec, not as FastAPI's `jsonable_encoder` and `json.dumps` do (floats,
# non-finite floats, UTC datetimes); `test_an_untyped_response_renders_as_fastapi_does`
# pins it.
UNTYPED_RESPONSES = False


@dataclass(frozen=True)
class T:
    """A type: a leaf kind, "enum"/"literal" (args: name / values), "ref" (a model's
    name), "list"/"dict"/"optional" (args: the item type), "union" (its members) or
    "disc" (the tagged models of a discriminated union)."""

    kind: str
    args: tuple[Any, ...] = ()


@dataclass(frozen=True)
class FieldSpec:
    name: str
    type: T
    default: str | None = None  # Python source of the default; None: required
    alias: str = ""  # "", "alias", "validation", "serialization" or "split"
    constraints: tuple[tuple[str, Any], ...] = ()
    strict: bool = False

    def input_key(self) -> str:
        if self.alias == "alias":
            return self.name.upper()
        if self.alias in ("validation", "split"):
            return f"v_{self.name}"
        return self.name

    def output_key(self) -> str:
        if self.alias == "alias":
            return self.name.upper()
        if self.alias in ("serialization", "split"):
            return f"s_{self.name}é"
        return self.name


@dataclass(frozen=True)
class ModelSpec:
    name: str
    kind: str  # "model", "dataclass", "typeddict"
    fields: tuple[FieldSpec, ...]
    strict: bool = False
    extra: str | None = None  # None (the default, "ignore"), "ignore", "forbid", "allow"
    by_name: bool = False  # populate_by_name
    tag: str | None = None  # the literal of a discriminated union's variant
    # (kind, field name): "peek" (before, looks at the input's type), "raises" (wrap:
    # Boom before validating, ValueError after); (kind, "") for the model validators
    # "whole" and "shape".
    validators: tuple[tuple[str, str], ...] = ()
    computed: bool = False
    total: bool = True  # TypedDict only


@dataclass(frozen=True)
class DepSpec:
    """One dependency of a route or router: a kind of `DEPENDENCIES`, given as a
    parameter of the endpoint or in `dependencies=[...]` (`listed`; always so for the
    router's), with `Depends(..., scope=...)` where `scope` is set."""

    kind: str
    listed: bool = False
    scope: str | None = None

    def depends(self, call: str) -> str:
        scope = "" if self.scope is None else f", scope={self.scope!r}"
        return f"Depends({call}{scope})"


@dataclass(frozen=True)
class RouteSpec:
    name: str
    kind: str  # "body", "get", "params"
    body: tuple[tuple[str, T, bool], ...] = ()  # (parameter, type, Body(embed=True))
    optional_body: bool = False
    response: T | None = None
    declared: str = "annotation"  # "annotation", "response_model", "none"
    options: tuple[tuple[str, Any], ...] = ()  # response_model_* keyword arguments
    status_code: int | None = None
    is_async: bool = True
    dependencies: tuple[DepSpec, ...] = ()  # in the order the endpoint's source has them
    part: T | None = None  # the type of the body part the "part" dependency takes
    query_q: bool = False
    payloads: tuple[Any, ...] = ()  # what a "get" route returns, its index as the key
    as_model: bool = False  # a "get" route returns Model.model_validate(payload)
    param_models: tuple[tuple[str, str], ...] = ()  # ("query"|"header"|"cookie", model)
    streams: bool = False  # a "get" route yields its payload twice, as JSON Lines

    @property
    def method(self) -> str:
        return "POST" if self.kind == "body" else "GET"

    @property
    def path(self) -> str:
        return f"/{self.name}/{{key}}" if self.kind == "get" else f"/{self.name}"


@dataclass(frozen=True)
class AppSpec:
    models: tuple[ModelSpec, ...]
    routes: tuple[RouteSpec, ...]
    # MsgspecRouter's errors=: a route without msgspec types reports a failing parameter
    # in FastAPI's words whichever it is (docs/differences.md), so every app may have such
    # parameters (`q`, `limit`).
    errors: str | None = None
    router_dependencies: tuple[DepSpec, ...] = ()  # the router's dependencies=[...]


# --- source -----------------------------------------------------------------------------

HEADER = f'''\
import datetime
from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from enum import Enum, IntEnum
from typing import Annotated, Literal, Optional, Union
from uuid import UUID

from fastapi import BackgroundTasks, Body, Cookie, Depends, Header, HTTPException, Path, Query
from fastapi import Response
from pydantic import BaseModel, ConfigDict, Field, computed_field, field_validator
from pydantic import model_validator
from pydantic.dataclasses import dataclass as pydantic_dataclass
from typing_extensions import NotRequired, TypedDict

SENTINELS = {SENTINELS!r}
LOG = []


class Boom(Exception):
    """What a validator raises that is no validation error: FastAPI answers 500."""


class E0(str, Enum):
    A = "a"
    B = "b"
    C = "é"


class E1(IntEnum):
    ONE = 1
    TWO = 2


def note(value):
    """What an endpoint received, as its log records it."""
    fields_set = getattr(value, "model_fields_set", None)
    return (type(value).__name__, repr(value), sorted(fields_set or ()))


def guard(x_deny: Annotated[Optional[str], Header()] = None):
    LOG.append(("guard", x_deny))
    if x_deny == "yes":
        raise HTTPException(403, "denied", headers={{"x-denied": "1"}})


async def limit(limit: int = 10):
    LOG.append(("limit", limit))
    return limit


async def session():
    LOG.append(("session", "set up"))
    try:
        yield "session"
    except Exception as exc:
        LOG.append(("session", "saw", type(exc).__name__))
        raise
    finally:
        LOG.append(("session", "torn down"))


def sync_session():
    LOG.append(("sync_session", "set up"))
    try:
        yield "sync session"
    except Exception as exc:
        LOG.append(("sync_session", "saw", type(exc).__name__))
        raise
    finally:
        LOG.append(("sync_session", "torn down"))


def stamp(response: Response):
    LOG.append(("stamp", response.status_code))
    response.status_code = 203
    response.headers["x-stamp"] = "stamped"


async def later(tasks: BackgroundTasks, x_later: Annotated[Optional[str], Header()] = None):
    LOG.append(("later", x_later))
    tasks.add_task(LOG.append, ("background", x_later))


def shared():
    LOG.append(("shared",))
    return len(LOG)


def cached(value: Annotated[int, Depends(shared)]):
    LOG.append(("cached", value))
    return value


async def uncached(value: Annotated[int, Depends(shared, use_cache=False)]):
    LOG.append(("uncached", value))
    return value


def teapot(mode: str = "tea"):
    LOG.append(("teapot", mode))
    if mode == "coffee":
        raise HTTPException(418, {{"mode": mode}}, headers={{"x-teapot": "short and stout"}})


async def window(
    x_window: Annotated[int, Header(gt=0)],
    start: Annotated[Optional[datetime.date], Query()] = None,
):
    LOG.append(("window", x_window, start))
    return x_window
'''

# The dependencies a route or router may have: kind: (the endpoint's parameter taking its
# value, the parameter's type, the dependency called). "part" is a function of the route's
# own (`part_source`), taking a part of the body, which embeds the body.
DEPENDENCIES = {
    "guard": ("guarded", "None", "guard"),
    "limit": ("limited", "int", "limit"),
    "session": ("db", "str", "session"),
    "sync_session": ("sync_db", "str", "sync_session"),
    "stamp": ("stamped", "None", "stamp"),
    "later": ("deferred", "None", "later"),
    "cached": ("kept", "int", "cached"),
    "uncached": ("fresh", "int", "uncached"),
    "teapot": ("brewed", "None", "teapot"),
    "window": ("windowed", "int", "window"),
    "part": ("parted", "", ""),
}
GENERATORS = ("session", "sync_session")

TYPE_SOURCE = {
    "datetime": "datetime.datetime",
    "date": "datetime.date",
    "uuid": "UUID",
    "decimal": "Decimal",
}


def type_source(t: T) -> str:
    if t.kind in LEAVES:
        return TYPE_SOURCE.get(t.kind, t.kind)
    if t.kind in ("enum", "ref"):
        return str(t.args[0])
    if t.kind == "literal":
        return f"Literal[{', '.join(map(repr, t.args))}]"
    if t.kind == "list":
        return f"list[{type_source(t.args[0])}]"
    if t.kind == "dict":
        return f"dict[str, {type_source(t.args[0])}]"
    if t.kind == "optional":
        return f"Optional[{type_source(t.args[0])}]"
    if t.kind == "union":
        return f"Union[{', '.join(type_source(a) for a in t.args)}]"
    assert t.kind == "disc", t
    return f'Annotated[Union[{", ".join(t.args)}], Field(discriminator="kind")]'


def _field_source(f: FieldSpec, in_typeddict: bool, total: bool) -> str:
    options = [f"{key}={value!r}" for key, value in f.constraints]
    if f.alias == "alias":
        options.append(f"alias={f.input_key()!r}")
    if f.alias in ("validation", "split"):
        options.append(f"validation_alias={f.input_key()!r}")
    if f.alias in ("serialization", "split"):
        options.append(f"serialization_alias={f.output_key()!r}")
    if f.strict:
        options.append("strict=True")
    annotation = type_source(f.type)
    if options:
        annotation = f"Annotated[{annotation}, Field({', '.join(options)})]"
    if in_typeddict:  # a field with a default is a key that may be left out
        optional = f.default is not None and total
        return f"    {f.name}: {f'NotRequired[{annotation}]' if optional else annotation}"
    default = "" if f.default is None else f" = {f.default}"
    return f"    {f.name}: {annotation}{default}"


def _validator_source(kind: str, target: str) -> list[str]:
    if kind == "peek":
        return [
            f'    @field_validator("{target}", mode="before")',
            "    @classmethod",
            f"    def peek_{target}(cls, v):",
            "        if isinstance(v, str):",
            "            return v.strip()",
            "        if isinstance(v, float) and v.is_integer():",
            "            return int(v)",
            "        return v",
        ]
    if kind == "raises":
        return [
            f'    @field_validator("{target}", mode="wrap")',
            "    @classmethod",
            f"    def refuse_{target}(cls, v, handler):",
            f"        if v == {BOOM!r}:",
            '            raise Boom("a validator failed")',
            "        v = handler(v)",
            "        if v in SENTINELS:",
            '            raise ValueError(f"{v!r} is refused")',
            "        return v",
        ]
    if kind == "whole":
        return [
            '    @model_validator(mode="after")',
            "    def check_whole(self):",
            "        if len(self.model_fields_set) == 1:",
            '            raise ValueError("one field set is not enough")',
            "        return self",
        ]
    assert kind == "shape", kind
    return [
        '    @model_validator(mode="before")',
        "    @classmethod",
        "    def shape(cls, data):",
        "        if isinstance(data, str):",
        '            raise ValueError("a string is no object here")',
        '        if isinstance(data, dict) and "legacy" in data:',
        '            return {k: v for k, v in data.items() if k != "legacy"}',
        "        return data",
    ]


def model_source(m: ModelSpec) -> str:
    config = []
    if m.strict:
        config.append("strict=True")
    if m.extra is not None:
        config.append(f"extra={m.extra!r}")
    if m.by_name:
        config.append("populate_by_name=True")
    config_source = f"ConfigDict({', '.join(config)})"
    lines: list[str] = []
    if m.kind == "typeddict":
        total = "" if m.total else ", total=False"
        lines.append(f"class {m.name}(TypedDict{total}):")
    elif m.kind == "dataclass":
        lines.append(f"@pydantic_dataclass(config={config_source})")
        lines.append(f"class {m.name}:")
    else:
        lines.append(f"class {m.name}(BaseModel):")
        if config:
            lines.append(f"    model_config = {config_source}")
    if m.tag is not None:
        lines.append(f"    kind: Literal[{m.tag!r}]")
    lines += [_field_source(f, m.kind == "typeddict", m.total) for f in m.fields]
    for kind, target in m.validators:
        lines += ["", *_validator_source(kind, target)]
    if m.computed:
        first = m.fields[0].name
        lines += [
            "",
            "    @computed_field",
            "    @property",
            "    def kind_of_first(self) -> str:",
            f"        return type(self.{first}).__name__",
        ]
    if len(lines) == 1:
        lines.append("    pass")
    return "\n".join(lines)


def _route_parameters(route: RouteSpec) -> list[str]:
    params: list[str] = []
    if route.kind == "body":
        for name, t, embed in route.body:
            annotation = type_source(t)
            if route.optional_body:
                annotation = f"Optional[{annotation}]"
            if embed:
                annotation = f"Annotated[{annotation}, Body(embed=True)]"
            params.append(f"{name}: {annotation}" + (" = None" if route.optional_body else ""))
    elif route.kind == "get":
        params.append("key: str")
    else:
        for where, model in route.param_models:
            params.append(f"{where}: Annotated[{model}, {where.capitalize()}()]")
    for dep in route.dependencies:
        if not dep.listed:
            name, annotation, _ = DEPENDENCIES[dep.kind]
            if dep.kind == "part":
                assert route.part is not None
                annotation = type_source(route.part)
            params.append(f"{name}: Annotated[{annotation}, {dep.depends(call_of(dep, route))}]")
    if route.query_q:
        params.append("q: Annotated[Optional[int], Query(le=100)] = None")
    # Required parameters first, as Python wants them.
    return sorted(params, key=lambda p: " = " in p)


def call_of(dep: DepSpec, route: RouteSpec | None) -> str:
    """The name of the function `dep` calls (on `route`; None: on the router)."""
    if dep.kind == "part":
        assert route is not None
        return f"part_{route.name}"
    return DEPENDENCIES[dep.kind][2]


def part_source(route: RouteSpec) -> str:
    """The route's dependency taking a part of the body (a second body parameter)."""
    assert route.part is not None
    name = f"part_{route.name}"
    return "\n".join(
        [
            f"def {name}(part: {type_source(route.part)}):",
            f"    LOG.append(({name!r}, note(part)))",
            "    return part",
        ]
    )


def route_source(route: RouteSpec) -> str:
    params = _route_parameters(route)
    names = [p.split(":")[0] for p in params]
    returns = ""
    if route.declared == "annotation" and route.response is not None:
        returns = f" -> {type_source(route.response)}"
        if route.streams:
            returns = f" -> {'AsyncIterator' if route.is_async else 'Iterator'}[{returns[4:]}]"
    prefix = "async def" if route.is_async else "def"
    lines = [f"{prefix} {route.name}({', '.join(params)}){returns}:"]
    lines.append(f"    LOG.append(({route.name!r}, {', '.join(f'note({n})' for n in names)}))")
    if route.kind == "body":
        lines.append(f"    return {route.body[0][0]}")
    elif route.kind == "get":
        lines.append(f"    if key not in PAYLOADS[{route.name!r}]:")
        lines.append('        raise HTTPException(404, "no such payload")')
        payload = f"PAYLOADS[{route.name!r}][key]"
        if route.as_model:
            assert route.response is not None
            payload = f"{type_source(route.response)}.model_validate({payload})"
        if route.streams:
            lines += [f"    yield {payload}", f"    yield {payload}"]
        else:
            lines.append(f"    return {payload}")
    else:
        lines.append(f"    return {route.param_models[0][0]}")
    return "\n".join(lines)


def source(app: AppSpec) -> str:
    """The app as Python source: its classes and endpoints (the routes are added by
    `build`, which `describe` shows as `route_line`)."""
    parts = [HEADER]
    parts += [model_source(m) for m in app.models]
    parts += [part_source(r) for r in app.routes if r.part is not None]
    parts += [route_source(r) for r in app.routes]
    return "\n\n\n".join(parts) + "\n"


def route_line(route: RouteSpec) -> str:
    options = [f"{k}={v!r}" for k, v in route.options]
    if route.declared == "response_model" and route.response is not None:
        options.insert(0, f"response_model={type_source(route.response)}")
    if route.status_code is not None:
        options.append(f"status_code={route.status_code}")
    listed = [dep.depends(call_of(dep, route)) for dep in route.dependencies if dep.listed]
    if listed:
        options.append(f"dependencies=[{', '.join(listed)}]")
    return (
        f"router.add_api_route({route.path!r}, {route.name}, methods=[{route.method!r}]"
        + "".join(f", {o}" for o in options)
        + ")"
    )


def router_line(app: AppSpec) -> str:
    options = [f"errors={app.errors!r}"]
    if app.router_dependencies:
        listed = ", ".join(dep.depends(call_of(dep, None)) for dep in app.router_dependencies)
        options.append(f"dependencies=[{listed}]")
    return f"router = MsgspecRouter({', '.join(options)})"


def _depends(dep: DepSpec, route: RouteSpec | None, ns: dict[str, Any]) -> Any:
    scope = {} if dep.scope is None else {"scope": dep.scope}
    return ns["Depends"](ns[call_of(dep, route)], **scope)


def namespace(app: AppSpec) -> dict[str, Any]:
    """The app's source, run: its classes, endpoints, LOG, and PAYLOADS for "get" routes."""
    text = source(app)
    payloads = {r.name: {str(i): p for i, p in enumerate(r.payloads)} for r in app.routes}
    ns: dict[str, Any] = {"PAYLOADS": payloads}
    # Not under this module's `from __future__ import annotations`: FastAPI and Pydantic
    # read the annotations as the source writes them.
    exec(compile(text, "<pydantic app>", "exec", dont_inherit=True), ns)
    return ns


def build(
    app: AppSpec, ns: dict[str, Any], twin: Twin | None, dispatch: bool = False
) -> tuple[FastAPI, APIRouter]:
    """The app on FastAPI's `APIRouter` (`twin=None`: the oracle) or on `twin`'s
    `MsgspecRouter`, with `install_dispatch` where `dispatch`. Also returns the router."""
    router_options: dict[str, Any] = {}
    if app.router_dependencies:
        router_options["dependencies"] = [_depends(d, None, ns) for d in app.router_dependencies]
    if twin is None:
        router = APIRouter(**router_options)
    else:
        router = twin.router_class(errors=app.errors, **router_options)
    for route in app.routes:
        options: dict[str, Any] = dict(route.options)
        if route.declared == "response_model" and route.response is not None:
            options["response_model"] = eval(type_source(route.response), ns)
        if route.status_code is not None:
            options["status_code"] = route.status_code
        listed = [_depends(dep, route, ns) for dep in route.dependencies if dep.listed]
        if listed:
            options["dependencies"] = listed
        router.add_api_route(route.path, ns[route.name], methods=[route.method], **options)
    fastapi_app = FastAPI()
    fastapi_app.include_router(router)
    if dispatch:
        assert twin is not None
        twin.install_dispatch(fastapi_app)
    return fastapi_app, router


# --- drawing an app ---------------------------------------------------------------------


def _chance(r: Random, one_in: int) -> bool:
    # Not 0: hypothesis's Random draws 0 about three times as often as other values.
    return r.randrange(one_in) == one_in - 1


CONSTRAINTS: dict[str, list[tuple[tuple[str, Any], ...]]] = {
    "int": [(("gt", 0),), (("ge", -10), ("le", 1000)), (("multiple_of", 2),)],
    # allow_inf_nan first: hypothesis's Random picks the first item most often, and the
    # run must reach it.
    "float": [(("allow_inf_nan", False),), (("ge", 0.0),), (("lt", 1e6),)],
    "str": [(("max_length", 4),), (("min_length", 1),), (("pattern", "^[a-z]*$"),)],
    "bytes": [(("max_length", 5),)],
    "decimal": [(("max_digits", 6), ("decimal_places", 2))],
    "list": [(("max_length", 2),), (("min_length", 1),)],
}
DEFAULTS = {
    "int": ["0", "5"],
    "float": ["0.5"],
    "str": ['"dflt"'],
    "bool": ["False"],
    "optional": ["None"],
    "list": ["[]"],
    "dict": ["{}"],
}


def holds_model(t: T) -> bool:
    return t.kind in ("ref", "disc") or any(isinstance(a, T) and holds_model(a) for a in t.args)


def draw_type(r: Random, depth: int, refs: Sequence[str], variants: Sequence[str]) -> T:
    roll = r.randrange(100)
    if depth < 2 and roll < 40:
        composite = r.choice(["ref", "list", "dict", "optional", "optional", "union", "disc"])
        if composite == "ref" and refs:
            return T("ref", (r.choice(refs),))
        if composite == "disc" and variants:
            return T("disc", tuple(variants))
        if composite in ("list", "dict", "optional"):
            return T(composite, (draw_type(r, depth + 1, refs, variants),))
        if composite == "union":
            pairs = [("int", "str"), ("str", "int"), ("float", "bool"), ("int", "float")]
            members = [T(k) for k in r.choice(pairs)]
            if len(refs) >= 2 and _chance(r, 2):
                members = [T("ref", (name,)) for name in r.sample(list(refs), 2)]
            return T("union", tuple(members))
    if roll < 50:
        return T("enum", (r.choice(list(ENUMS)),))
    if roll < 55:
        return T("literal", r.choice([("x", "y"), (1, "one"), (True,)]))
    return T(r.choice(LEAVES))


def draw_field(r: Random, name: str, t: T, aliases: bool, mutable: bool = True) -> FieldSpec:
    default = None
    options = DEFAULTS.get(t.kind, [])
    if not mutable:  # a dataclass takes no list or dict as a default
        options = [o for o in options if o not in ("[]", "{}")]
    if t.kind == "enum":
        options = ["E0.B"] if t.args[0] == "E0" else ["E1.TWO"]
    if options and _chance(r, 2):
        default = r.choice(options)
    constraints: tuple[tuple[str, Any], ...] = ()
    if t.kind in CONSTRAINTS and _chance(r, 3):
        constraints = r.choice(CONSTRAINTS[t.kind])
    alias = ""
    if aliases and _chance(r, 3):
        alias = r.choice(["alias", "validation", "serialization", "split"])
    inner = t.args[0] if t.kind == "optional" else t
    strict = inner.kind in (*LEAVES, "enum") and _chance(r, 12)  # not on a Literal
    return FieldSpec(name, t, default, alias, constraints, strict)


def draw_model(
    r: Random, name: str, kind: str, refs: Sequence[str], variants: Sequence[str], tag: Any = None
) -> ModelSpec:
    count = r.randint(1, 5) if tag is None else r.randint(0, 2)
    fields = [
        draw_field(
            r, f"f{i}", draw_type(r, 0, refs, variants), kind == "model", kind != "dataclass"
        )
        for i in range(count)
    ]
    if kind == "dataclass":  # required fields first, as dataclasses want them
        fields.sort(key=lambda f: f.default is not None)
    validators: list[tuple[str, str]] = []
    if kind == "model" and fields:
        for validator in ("peek", "raises"):
            if _chance(r, 3):
                validators.append((validator, r.choice(fields).name))
        for validator in ("whole", "shape"):
            if _chance(r, 5):
                validators.append((validator, ""))
    return ModelSpec(
        name,
        kind,
        tuple(fields),
        strict=kind != "typeddict" and _chance(r, 8),
        extra=r.choice([None, None, "ignore", "forbid", "allow"]) if kind != "typeddict" else None,
        by_name=kind == "model" and _chance(r, 4),
        tag=tag,
        validators=tuple(validators),
        computed=kind == "model" and bool(fields) and _chance(r, 4),
        total=kind != "typeddict" or not _chance(r, 3),
    )


PARAM_LEAVES = ("int", "str", "bool", "float", "date", "uuid", "decimal")


def draw_param_model(r: Random, name: str, where: str) -> ModelSpec:
    fields = []
    for i in range(r.randint(1, 3)):
        t = T(r.choice(PARAM_LEAVES)) if not _chance(r, 5) else T("enum", ("E0",))
        if where == "query" and _chance(r, 5):
            t = T("list", (T(r.choice(("int", "str"))),))
        if _chance(r, 4):
            t = T("optional", (t,))
        fields.append(draw_field(r, f"p{i}_x" if where == "header" else f"p{i}", t, False))
    return ModelSpec(
        name,
        "model",
        tuple(fields),
        strict=_chance(r, 8),
        # Every request has headers the model does not name (host, at least).
        extra=r.choice([None, "forbid"]) if where != "header" else None,
    )


def _option_sets(
    r: Random, response: T | None, app_models: dict[str, ModelSpec]
) -> tuple[tuple[str, Any], ...]:
    options: list[tuple[str, Any]] = []
    if response is not None and response.kind == "ref":
        model = app_models[response.args[0]]
        names = [f.name for f in model.fields]
        if names and _chance(r, 5):
            key = r.choice(["response_model_include", "response_model_exclude"])
            options.append((key, set(r.sample(names, r.randint(1, len(names))))))
    for key in ("exclude_unset", "exclude_defaults", "exclude_none"):
        if _chance(r, 6):
            options.append((f"response_model_{key}", True))
    if _chance(r, 6):
        options.append(("response_model_by_alias", False))
    return tuple(options)


# What a router's dependencies are drawn from: not "part", which a route without a body
# would take from requests that send none.
ROUTER_DEPENDENCIES = ("guard", "session", "sync_session", "stamp", "later", "teapot", "window")


def draw_dependencies(
    r: Random, kinds: Sequence[str], count: int, listed: bool = False
) -> tuple[DepSpec, ...]:
    """`count` dependencies of `kinds` (at most one of each) in a random order, each in
    `dependencies=[...]` where `listed` (else one in three), a generator with
    `scope="function"` one in three; "cached" and "uncached", which share their
    sub-dependency, often come together."""
    chosen = r.sample(list(kinds), count)
    for one, other in (("cached", "uncached"), ("uncached", "cached")):
        if one in chosen and other in kinds and other not in chosen and not _chance(r, 3):
            chosen.insert(r.randint(0, len(chosen)), other)
    return tuple(
        DepSpec(
            kind,
            listed or _chance(r, 3),
            "function" if kind in GENERATORS and _chance(r, 3) else None,
        )
        for kind in chosen
    )


def draw_app(r: Random) -> AppSpec:
    errors = r.choice([None, "fastapi"])
    models: list[ModelSpec] = []
    variants: list[str] = []
    if _chance(r, 2):
        for i, tag in enumerate(("cat", "dog")):
            models.append(draw_model(r, f"A{i}", "model", (), (), tag=tag))
            variants.append(f"A{i}")
    refs: list[str] = []
    if _chance(r, 3):
        models.append(draw_model(r, "D0", "dataclass", (), variants))
        refs.append("D0")
    if _chance(r, 3):
        models.append(draw_model(r, "TD0", "typeddict", (), variants))
        refs.append("TD0")
    for i in range(r.randint(1, 3)):
        models.append(draw_model(r, f"M{i}", "model", list(refs), variants))
        refs.append(f"M{i}")
    by_name = {m.name: m for m in models}
    top = [name for name in refs if name.startswith("M")]
    # A TypedDict is msgspec's on MsgspecRouter (docs/behaviour.md): a route's own types
    # hold one only inside a Pydantic model.
    pydantic = [name for name in refs if name != "TD0"]
    routes: list[RouteSpec] = []
    for index in range(r.randint(1, 4)):
        kind = r.choice(["body", "body", "get", "params"])
        main = T("ref", (r.choice(top),))
        if _chance(r, 4):
            main = r.choice(
                [T("list", (main,)), T("dict", (main,)), T("ref", (r.choice(pydantic),))]
            )
        if _chance(r, 8):
            # Any type, where it holds a Pydantic model: else it is no Pydantic route.
            drawn = draw_type(r, 0, pydantic, variants)
            main = drawn if holds_model(drawn) else main
        declared = r.choice(
            ["annotation", "response_model", "none"][: 3 if UNTYPED_RESPONSES else 2]
        )
        as_model = main.kind == "ref" and main.args[0].startswith("M") and _chance(r, 3)
        if kind == "get" and declared == "none" and not as_model:
            declared = "annotation"  # else nothing of the route is Pydantic's
        common = dict(
            name=f"r{index}",
            response=main,
            declared=declared,
            status_code=r.choice([None, None, None, 201, 202]),
            is_async=not _chance(r, 3),
            query_q=_chance(r, 3),
        )
        kinds = [k for k in DEPENDENCIES if k != "part" or kind == "body"]
        dependencies = draw_dependencies(r, kinds, r.choice([0, 1, 1, 2, 2, 3]))
        common["dependencies"] = dependencies
        if any(dep.kind == "part" for dep in dependencies):
            common["part"] = T("ref", (r.choice(pydantic),))
        options = _option_sets(r, main, by_name) if declared != "none" else ()
        if kind == "body":
            body = [("item", main, _chance(r, 4))]
            if _chance(r, 5):
                body.append(("other", T("ref", (r.choice(pydantic),)), False))
            routes.append(
                RouteSpec(
                    kind="body",
                    body=tuple(body),
                    optional_body=_chance(r, 8),
                    options=options,
                    **common,  # type: ignore[arg-type]
                )
            )
        elif kind == "get":
            payloads = []
            for _ in range(r.randint(1, 3)):
                value = draw_value(r, main, by_name)
                if _chance(r, 3):
                    value = mutate_value(r, value)
                payloads.append(plain(value))
            routes.append(
                RouteSpec(
                    kind="get",
                    payloads=tuple(payloads),
                    as_model=as_model,
                    # Streams with an item type only: an untyped one is msgspec's.
                    streams=declared == "annotation" and _chance(r, 4),
                    options=options,
                    **common,  # type: ignore[arg-type]
                )
            )
        else:
            wanted = [w for w in ("query", "header", "cookie") if _chance(r, 2)] or ["query"]
            params = []
            for where in wanted:
                name = f"{where.capitalize()}{index}"
                models.append(draw_param_model(r, name, where))
                params.append((where, name))
            response = T("ref", (params[0][1],))
            by_name = {m.name: m for m in models}
            routes.append(
                replace(
                    RouteSpec(kind="params", param_models=tuple(params), **common),  # type: ignore[arg-type]
                    response=response,
                    options=_option_sets(r, response, by_name) if declared != "none" else (),
                )
            )
    router_dependencies = ()
    if _chance(r, 4):
        router_dependencies = draw_dependencies(r, ROUTER_DEPENDENCIES, r.randint(1, 2), True)
    return AppSpec(tuple(models), tuple(routes), errors, router_dependencies)


# --- values -----------------------------------------------------------------------------

LEAF_VALUES: dict[str, list[Any]] = {
    "int": [0, 1, 2, 7, 13, 42, 999, -3, 2**31],
    "float": [0.5, 1.0, 2.25, 1e-7, 123456.789, 0.1, -0.0, 1e300, 3, 13.0],
    "str": ["", "a", "hé", "漢字", "x y", "😀", 'q"uote', "<b>", "\u2028", " pad ", "bad", BOOM],
    "bool": [True, False],
    "datetime": [
        "2024-02-29T12:30:00",
        "2024-02-29T12:30:00Z",
        "2024-02-29T12:30:00.123456+05:30",
        "2024-03-01",
        1700000000,
    ],
    "date": ["2024-02-29", "1999-12-31", "2024-02-29T00:00:00"],
    "uuid": [
        "12345678-1234-5678-1234-567812345678",
        "12345678-1234-5678-1234-56781234567A".lower(),
        "123456781234567812345678123456AB",
    ],
    "decimal": [1.5, "2.50", 0, "-3.14", 12345.67],
    "bytes": ["abc", "", "héllo", "b3"],
}


def _fits(value: Any, constraints: tuple[tuple[str, Any], ...]) -> bool:
    for key, bound in constraints:
        try:
            if key == "gt" and not value > bound:
                return False
            if key == "ge" and not value >= bound:
                return False
            if key in ("lt", "le") and not value <= bound:
                return False
            if key == "max_length" and len(value) > bound:
                return False
            if key == "min_length" and len(value) < bound:
                return False
            if key == "multiple_of" and value % bound:
                return False
            if key == "pattern" and not ((value.isascii() and value.isalpha()) or value == ""):
                return False
        except TypeError:
            return False
    return True


def draw_value(
    r: Random, t: T, models: dict[str, ModelSpec], constraints: Any = (), depth: int = 0
) -> Any:
    """A value of type `t` as a client sends it (JSON: strings for datetimes, UUIDs,
    bytes), keyed by each field's input key; mostly within its constraints."""
    kind = t.kind
    if kind in LEAF_VALUES:
        pool = [v for v in LEAF_VALUES[kind] if _fits(v, constraints)] or LEAF_VALUES[kind]
        return r.choice(pool)
    if kind == "enum":
        return r.choice(ENUMS[t.args[0]])
    if kind == "literal":
        return r.choice(t.args)
    if kind == "list":
        size = r.randint(0, 3 if depth < 2 else 1)
        if constraints:
            size = min(max(size, 1), 2)
        return [draw_value(r, t.args[0], models, (), depth + 1) for _ in range(size)]
    if kind == "dict":
        keys = r.sample(["k", "é", "1", "a b"], r.randint(0, 2 if depth < 2 else 1))
        return {k: draw_value(r, t.args[0], models, (), depth + 1) for k in keys}
    if kind == "optional":
        return None if _chance(r, 3) else draw_value(r, t.args[0], models, constraints, depth)
    if kind == "union":
        return draw_value(r, r.choice(t.args), models, constraints, depth)
    if kind == "disc":
        return draw_value(r, T("ref", (r.choice(t.args),)), models, (), depth)
    assert kind == "ref", t
    model = models[t.args[0]]
    value: dict[str, Any] = {} if model.tag is None else {"kind": model.tag}
    for f in model.fields:
        optional = f.default is not None or (model.kind == "typeddict" and not model.total)
        if optional and _chance(r, 3):
            continue
        key = f.name if model.by_name and _chance(r, 4) else f.input_key()
        value[key] = draw_value(r, f.type, models, f.constraints, depth + 1)
    return value


class Dup(list):  # type: ignore[type-arg]
    """An object as key/value pairs, a key repeated: JSON that `json.dumps` cannot write."""


class Raw(str):
    """A JSON token written as it is (a number `json` would write otherwise)."""


WRONG = [
    "x",
    1,
    1.5,
    True,
    None,
    [],
    {},
    "2020-01-01T00:00:00",
    "00000000-0000-0000-0000-000000000000",
    "13",
    " 7 ",
    "bad",
    BOOM,
    13,
    "YWJj",
    "1e3",
    "true",
]
EDGES: list[Any] = [
    float("nan"),
    float("inf"),
    float("-inf"),
    10**20,
    2**63,
    -(2**64),
    Raw("1" + "0" * 5000),  # longer than int() reads by default: FastAPI's 400
    Raw("1e400"),
    Raw("-0"),
    Raw("1E2"),
    Raw("1.0e0"),
    "\ud800",
    "a\udfffb",
    "\x00",
    1.0,
    5e-324,
]


def _containers(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = []
    if isinstance(value, dict):
        found.append(path)
        for key, item in value.items():
            found += _containers(item, (*path, key))
    elif isinstance(value, list):
        found.append(path)
        for index, item in enumerate(value):
            found += _containers(item, (*path, index))
    return found


def _places(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into `value`, itself included."""
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _places(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _places(item, (*path, index))
    return found


def _set(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {k: (_set(v, rest, new) if k == head else v) for k, v in value.items()}
    return [_set(v, rest, new) if i == head else v for i, v in enumerate(value)]


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


def refused_keys(app: AppSpec) -> frozenset[str]:
    """The input keys of the fields whose validators raise."""
    return frozenset(
        f.input_key() for m in app.models for f in m.fields if ("raises", f.name) in m.validators
    )


def mutate_value(r: Random, value: Any, refusing: frozenset[str] = frozenset()) -> Any:
    """`value` with one thing changed at a random place; "refused" puts what a validator
    refuses where one of `refusing` (the keys of fields with such validators) is."""
    how = r.choice(
        ["wrong", "wrong", "missing", "extra", "edge", "edge", "dup", "unwrap", "refused"]
    )
    containers = [p for p in _containers(value) if isinstance(_get(value, p), dict)]
    if how in ("missing", "extra", "dup") and containers:
        path = r.choice(containers)
        target = dict(_get(value, path))
        if how == "missing" and target:
            del target[r.choice(list(target))]
        elif how == "extra":
            target[r.choice(["zz", "legacy", "kind", "f0", "F0", "s_f0é"])] = r.choice(WRONG)
        elif target:
            key = r.choice(list(target))
            pairs = [*target.items(), (key, r.choice(WRONG))]
            return _set(value, path, Dup(pairs if _chance(r, 2) else pairs[::-1]))
        return _set(value, path, target)
    places = _places(value)
    if how == "refused":
        places = [p for p in places if p and p[-1] in refusing] or places
    path = r.choice(places)
    if how == "unwrap":
        return _get(value, path[:-1]) if path else [value]
    if how == "refused":  # what the validators that raise refuse
        return _set(value, path, r.choice([*SENTINELS, BOOM]))
    return _set(value, path, r.choice(WRONG if how == "wrong" else EDGES))


def plain(value: Any) -> Any:
    """`value` as an endpoint returns it: a `Dup` as a dict (its last value wins), a
    `Raw` as a string."""
    if isinstance(value, Dup):
        return {k: plain(v) for k, v in value}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return str(value) if isinstance(value, Raw) else value


def encode(value: Any, r: Random) -> str:
    """`value` as JSON text, with `NaN`/`Infinity` for those floats, a `Dup`'s key
    repeated, a `Raw` token as written, and ASCII-only or not, with spaces or not."""
    ascii_only = _chance(r, 2)
    comma, colon = (", ", ": ") if _chance(r, 2) else (",", ":")

    def write(v: Any) -> str:
        if isinstance(v, Raw):
            return str(v)
        if isinstance(v, Dup):
            return "{" + comma.join(f"{write(k)}{colon}{write(x)}" for k, x in v) + "}"
        if isinstance(v, dict):
            return "{" + comma.join(f"{write(k)}{colon}{write(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + comma.join(write(x) for x in v) + "]"
        return json.dumps(v, ensure_ascii=ascii_only)

    return write(value)


# --- requests ---------------------------------------------------------------------------

JSON_TYPES = [
    "application/json",
    "application/json; charset=utf-8",
    "application/problem+json",
    "APPLICATION/JSON",
    None,
    "text/plain",
    "application/x-www-form-urlencoded",
    "application/jsonx",
    "multipart/form-data",
    "application/json;",
]


@dataclass(frozen=True)
class Call:
    route: str
    method: str
    target: bytes
    headers: tuple[tuple[bytes, bytes], ...] = ()
    chunks: tuple[bytes, ...] = (b"",)

    def show(self) -> str:
        return (
            f"{self.method} {self.target!r} headers={list(self.headers)!r} "
            f"body={b''.join(self.chunks)!r}" + (" (two chunks)" if len(self.chunks) > 1 else "")
        )


def body_params(route: RouteSpec) -> tuple[tuple[str, T, bool], ...]:
    """Every body parameter of the route: the endpoint's, then the part its dependency
    takes (two or more embed the body)."""
    if route.part is None:
        return route.body
    return (*route.body, ("part", route.part, False))


def _body_bytes(
    r: Random, route: RouteSpec, models: dict[str, ModelSpec], refusing: frozenset[str]
) -> bytes:
    roll = r.randrange(100)
    if roll < 4:
        return b""
    if roll < 8:
        return r.choice([b" ", b"null", b"[]", b'"str"', b"0", b"{}", b"\xff", b"{\x00}"])
    body = body_params(route)
    if len(body) == 1 and not body[0][2]:
        value = draw_value(r, body[0][1], models)
    else:
        value = {name: draw_value(r, t, models) for name, t, _ in body}
    for _ in range(r.choice([0, 0, 0, 1, 1, 2])):
        value = mutate_value(r, value, refusing)
    text = encode(value, r)
    roll = r.randrange(100)
    if roll < 5:
        text = text[: r.randrange(len(text))]  # cut short
    elif roll < 8:
        text = r.choice([text + ",", text + "}", "[" + text, text.replace('"', "'", 2)])
    elif roll < 10:
        return text.encode(r.choice(["utf-16", "utf-8-sig", "utf-32-le", "latin-1"]), "replace")
    return text.encode("utf-8", "surrogatepass")


def _param_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _param_pairs(r: Random, model: ModelSpec, models: dict[str, ModelSpec]) -> list[list[str]]:
    pairs = []
    for f in model.fields:
        if f.default is not None and _chance(r, 3):
            continue
        value = draw_value(r, f.type, models, f.constraints)
        items = value if isinstance(value, list) else [value]
        pairs += [[f.input_key(), _param_text(v)] for v in items]
    roll = r.randrange(10)
    if roll == 0 and pairs:
        pairs[r.randrange(len(pairs))][1] = _param_text(r.choice(WRONG))
    elif roll == 1 and pairs:
        del pairs[r.randrange(len(pairs))]
    elif roll == 2:
        pairs.append([r.choice(["zz", "p0", "p9"]), "1"])
    elif roll == 3 and pairs:
        pairs.append(list(r.choice(pairs)))
    elif roll == 4 and pairs:
        pairs[r.randrange(len(pairs))][1] = r.choice(["é", "\u2028", "a b", "99999999999999999999"])
    return pairs


def make_call(r: Random, app: AppSpec) -> Call:
    models = {m.name: m for m in app.models}
    route = r.choice(app.routes)
    query: list[list[str]] = []
    headers: list[tuple[bytes, bytes]] = []
    chunks: tuple[bytes, ...] = (b"",)
    path = f"/{route.name}"
    method = route.method if not _chance(r, 40) else r.choice(["GET", "POST", "PUT"])
    if route.kind == "get":
        path += "/" + r.choice([str(r.randrange(len(route.payloads)))] * 10 + ["x", "%C3%A9"])
    elif route.kind == "body":
        body = _body_bytes(r, route, models, refused_keys(app))
        chunks = (body,)
        if len(body) > 1 and _chance(r, 5):
            cut = r.randrange(1, len(body))
            chunks = (body[:cut], body[cut:])
        content_type = "application/json" if _chance(r, 4) else r.choice(JSON_TYPES)
        if not _chance(r, 4):
            content_type = "application/json"
        if content_type is not None:
            headers.append((b"content-type", content_type.encode()))
    else:
        for where, name in route.param_models:
            pairs = _param_pairs(r, models[name], models)
            if where == "query":
                query += pairs
            elif where == "header":
                for key, value in pairs:
                    if not _chance(r, 4):
                        key = key.replace("_", "-")
                    headers.append((key.encode(), value.encode("utf-8")))
            else:
                cookie = "; ".join(f"{k}={v}" for k, v in pairs)
                headers.append((b"cookie", cookie.encode("utf-8")))
    if route.query_q and not _chance(r, 3):
        query.append(["q", r.choice(["1", "100", "101", "x", "-5"])])
    kinds = {dep.kind for dep in (*app.router_dependencies, *route.dependencies)}
    if "limit" in kinds and _chance(r, 3):
        query.append(["limit", r.choice(["3", "x", "1e2"])])
    if "guard" in kinds and _chance(r, 4):
        headers.append((b"x-deny", b"yes"))
    if "later" in kinds and _chance(r, 2):
        headers.append((b"x-later", r.choice([b"soon", b"\xc3\xa9"])))
    if "teapot" in kinds and _chance(r, 2):
        query.append(["mode", r.choice(["tea", "coffee", "coffee"])])
    if "window" in kinds:
        # Required, and greater than 0: one request in five fails or leaves it out.
        width = b"3" if not _chance(r, 5) else r.choice([b"0", b"x", b"", None])
        if width is not None:
            headers.append((b"x-window", width))
        if _chance(r, 3):
            query.append(["start", r.choice(["2024-02-29", "x", "2024-02-30"])])
    target = path + ("?" + "&".join(f"{quote(k)}={quote(v)}" for k, v in query) if query else "")
    return Call(route.name, method, target.encode(), tuple(headers), chunks)


# --- one exchange -----------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """Everything observable of one answer: the messages sent (status, every header in
    order, body bytes), the exception that escaped, what the endpoints and dependencies
    received and did, with the messages sent in between (the log: set-ups, teardowns and
    background tasks in their order), and how often the app called `receive`."""

    status: int | None
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    messages: tuple[str, ...]
    escaped: Any
    log: tuple[Any, ...]
    received: int | None

    def show(self) -> str:
        lines = [f"  status {self.status}", f"  escaped {self.escaped}"]
        lines += [f"  header {k!r}: {v!r}" for k, v in self.headers]
        lines += [f"  body {self.body!r}", f"  messages {list(self.messages)}"]
        lines += [f"  receive calls {self.received}"]
        lines += [f"  log {entry}" for entry in self.log]
        return "\n".join(lines)


async def exchange(app: Any, ns: dict[str, Any], call: Call) -> Outcome:
    """Send `call` to `app`; everything observable of the answer."""
    log: list[Any] = ns["LOG"]
    log.clear()
    sent: list[dict[str, Any]] = []

    async def tee(scope: Any, receive: Any, send: Any) -> None:
        async def recorded(message: dict[str, Any]) -> None:
            sent.append(message)
            # In the log: when teardowns and background tasks ran, sends between them.
            log.append(("sent", message["type"]))
            await send(message)

        await app(scope, receive, recorded)

    scope = scope_for(call.method, call.target, call.headers)
    result = await outcome(send_messages(tee, scope, body_messages(list(call.chunks))))
    start = next((m for m in sent if m["type"] == "http.response.start"), {})
    return Outcome(
        start.get("status"),
        tuple(tuple(h) for h in start.get("headers", ())),
        b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body"),
        tuple(f"{m['type']} more_body={m.get('more_body', False)}" for m in sent),
        result[1:] if result[0] == "raised" else None,
        tuple(log),
        result[1].received if result[0] == "reply" else None,
    )


# --- what an answer reached -------------------------------------------------------------


def app_features(app: AppSpec) -> set[str]:
    """What the app declares, for the check that the normal run reached all of it."""
    found: set[str] = set()

    def walk(t: T) -> None:
        found.add(f"type {t.kind}")
        for arg in t.args:
            if isinstance(arg, T):
                walk(arg)

    for m in app.models:
        found.add(f"model {m.kind}")
        found |= {f"validator {kind}" for kind, _ in m.validators}
        if m.strict:
            found.add("strict model")
        if m.extra:
            found.add(f"extra {m.extra}")
        if m.computed:
            found.add("computed field")
        if m.by_name:
            found.add("populate_by_name")
        for f in m.fields:
            walk(f.type)
            if f.alias:
                found.add(f"alias {f.alias}")
            if f.strict:
                found.add("strict field")
            found |= {f"constraint {key}" for key, _ in f.constraints}
    if app.router_dependencies:
        found.add("router dependencies")
    found |= {f"router dependency {dep.kind}" for dep in app.router_dependencies}
    for route in app.routes:
        found.add(f"route {route.kind}")
        if route.streams:
            found.add("streams JSON Lines")
        found.add(f"declared {route.declared}")
        found |= {f"option {key}" for key, _ in route.options}
        found |= {f"{where} model" for where, _ in route.param_models}
        if any(embed for _, _, embed in route.body):
            found.add("Body(embed=True)")
        if len(route.body) > 1:
            found.add("several bodies")
        for dep in route.dependencies:
            found.add(f"dependency {dep.kind}")
            if dep.listed:
                found.add("dependencies=[...]")
            if dep.scope is not None:
                found.add(f"scope {dep.scope}")
        kinds = {dep.kind for dep in route.dependencies}
        if {"cached", "uncached"} <= kinds:
            found.add("a shared sub-dependency")
        if route.as_model:
            found.add("returns a model")
    return found


def answer_features(answer: Outcome) -> set[str]:
    found = {f"status {answer.status}"}
    if answer.escaped is not None:
        found.add(f"escaped {answer.escaped[0]}")
    if answer.status == 422:
        for error in json.loads(answer.body)["detail"]:
            found.add(f"error {error['type']}")
    for entry in answer.log:
        if entry[0] == "background":
            found.add("background task ran")
        elif entry[0] in GENERATORS and entry[1] == "saw":
            found.add(f"teardown saw {entry[2]}")
    return found


@dataclass
class Tally:
    """What a run compared and reached."""

    cases: int = 0
    seen: dict[str, int] = field(default_factory=dict)
    direct: int = 0  # MsgspecRouter routes on the direct tier, over the apps built
    routes: int = 0
    per_app: Counter[str] = field(default_factory=Counter)  # "k of n" direct: apps

    def note(self, features: set[str]) -> None:
        for feature in features:
            self.seen[feature] = self.seen.get(feature, 0) + 1
