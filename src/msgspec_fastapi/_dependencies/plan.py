"""Registration: a route's dependencies flattened into the steps FastAPI takes.

`build_plan` walks the route's own FastAPI `Dependant` (the endpoint wrapper, with the
app's, the inclusions', the router's and the route's `dependencies=` in front) exactly as
`solve_dependencies` recurses through it, and records instead of running: one `Step` per
occurrence of a dependency, in FastAPI's post-order, each with its callable and kind
(decided by FastAPI's own tests), its cache slot (FastAPI's cache keys grouped by
equality), its exit stack, and where each argument comes from. The request path
(`_dependencies.executor_py`) only executes the steps.

A route whose body FastAPI validates with Pydantic (`FastAPIBody`) has each step's body
fields validated at its turn by FastAPI's own `request_body_to_args`, as its solving does.

Whatever the plan cannot reproduce exactly gives None, and the route (or, for an override
set, the request) stays with FastAPI: Pydantic-typed or otherwise unconverted parameters
on a route with msgspec types (on one without, FastAPI's own step solves them),
FastAPI body fields beside a msgspec body, forms and files, WebSocket parameters, a
Dependant field this module does not know (a newer FastAPI), a dependency FastAPI cannot
build.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import msgspec
from fastapi import params

from .. import _compat
from .._endpoint.plan import DirectPlan, EndpointSpec, RoutePlan
from .._params.converters import (
    OnFailure,
    defaults_need_fastapi,
    direct_param_specs,
    prepare_dependant,
)
from .._params.models import ModelPlan
from .._shared import (
    DEP_ASYNC,
    DEP_ASYNC_GENERATOR,
    DEP_GENERATOR,
    DEP_SYNC_GENERATOR,
    DEP_THREAD,
    SPECIAL_BACKGROUND,
    SPECIAL_REQUEST,
    SPECIAL_RESPONSE,
    SPECIAL_SCOPES,
    STREAM_NONE,
    RequestValidationError,
)
from .fastapi_params import FastAPIParams
from .standins import unwrap_stand_in


class Refused(Exception):
    """Something in the tree the plan cannot reproduce exactly."""


class BodyParts:
    """The parts of an embedded body one by one, for when it failed as a whole.

    FastAPI validates each dependency's parts at its turn: a dependency whose parts are
    valid is called even when another part of the body is invalid (or is taken by no
    dependency, its taker overridden). The request path decodes the body in one pass;
    only when that fails are the parts decoded each on its own, from the body as
    received, with a decoder of a Struct of that one field (its default, its key).
    """

    __slots__ = ("decoders",)

    def __init__(self, decode_type: Any) -> None:
        # (parameter name, key in the body, decoder of a Struct of that one field)
        self.decoders: tuple[tuple[str, str, msgspec.json.Decoder[Any]], ...] = tuple(
            (field.name, field.encode_name, msgspec.json.Decoder(_one_field(decode_type, field)))
            for field in msgspec.structs.fields(decode_type)
        )

    def valid(self, error: RequestValidationError, raw: bytes | None) -> dict[str, Any]:
        """The valid parts of the body that failed with `error` (by parameter name)."""
        received = error.body
        if not raw:
            received = {}
        elif not isinstance(received, dict):
            return {}  # not an object, or not decoded (a number out of range)
        found: dict[str, Any] = {}
        for name, key, decoder in self.decoders:
            part = {key: received[key]} if key in received else {}
            try:
                found[name] = getattr(decoder.decode(msgspec.json.encode(part)), name)
            except (msgspec.ValidationError, msgspec.EncodeError):
                continue
        return found


def _one_field(decode_type: Any, field: msgspec.structs.FieldInfo) -> Any:
    if field.required:
        spec: tuple[Any, ...] = (field.name, field.type)
    elif field.default_factory is not msgspec.NODEFAULT:
        spec = (field.name, field.type, msgspec.field(default_factory=field.default_factory))
    else:
        spec = (field.name, field.type, field.default)
    return msgspec.defstruct(
        f"{decode_type.__name__}_{field.name}", [spec], rename={field.name: field.encode_name}
    )


@dataclass(frozen=True, slots=True)
class FastAPIBody:
    """How a route without a msgspec body has its body solved: FastAPI's own body fields
    (Pydantic's), each step's at its turn."""

    embedded: bool  # FastAPI reads the fields by key (several, or `embed=True`)
    form: bool  # the body is a form (FastAPI parses it, and its fields are awaited)
    # Parameters as FastAPI gives them (a route without msgspec types): where the
    # request path cannot convert a step's parameters or make their defaults as FastAPI
    # does, FastAPI's own step solves them (`FastAPIParams`).
    fastapi_params: bool


@dataclass(frozen=True, slots=True)
class Step:
    """One call FastAPI makes while solving (or the endpoint, last).

    Its arguments, in FastAPI's order: earlier steps' values (`steps`), then path, query,
    header and cookie parameters and parameter models (extracted by `params`, a request
    path runtime of the route's twin, or None), then body parts, then special objects.
    """

    call: Callable[..., Any]  # for a sync generator, its `contextmanager`
    kind: int  # DEP_ASYNC, DEP_THREAD, DEP_ASYNC_GENERATOR or DEP_SYNC_GENERATOR
    dependant: Any  # its Dependant, the call unwrapped (for `_dependencies.errors`)
    key: int  # cache slot
    use_cache: bool
    first: int  # the first step of its subtree: its subtree is steps[first:i + 1]
    function_stack: bool  # a generator on the function-scope stack (else the request's)
    concurrency: Any  # FastAPI 0.165's max_concurrency limiter, or None
    steps: tuple[tuple[str, int], ...]  # (argument, index of the step whose value it is)
    params: Any
    has_models: bool
    # (argument, key of an embedded body's part or None for the whole body)
    body: tuple[tuple[str, str | None], ...]
    # The encoded keys of its body parts (None: the whole body), to pick its errors.
    body_keys: frozenset[str] | None
    parts: BodyParts | None  # an embedded body's parts, for a body that failed whole
    specials: tuple[tuple[str, int, tuple[str, ...]], ...]  # (argument, SPECIAL_*, scopes)
    # FastAPI's body fields it takes (a `FastAPIBody` route; else empty), whether they
    # are read by key, and whether they are a form's (validated by awaiting FastAPI's
    # step, which reads the form's files).
    fields: list[Any]
    embeds: bool
    form_fields: bool
    # Its override lookup, as FastAPI makes it when solving reaches the dependency (before
    # its subtree, so at step `first`): its number in the order of the build's lookups
    # (-1 for the endpoint, which has none), the callable looked up, what the lookup gave,
    # and whether overrides were set then (FastAPI then rebuilds the dependant).
    lookup: int = -1
    looked_up: Any = None
    resolved: Any = None
    overridden: bool = False


# A lookup's answer given to a build in place of the overrides' (`build_plan`'s
# `answers`): what it resolved to, and whether overrides were set when it was made.
Answer = tuple[Any, bool]


@dataclass(frozen=True, slots=True)
class DepPlan:
    """Every step of one route's dependencies, and the endpoint's own arguments."""

    steps: tuple[Step, ...]
    endpoint: Step
    n_keys: int
    # Whether FastAPI's two exit stacks are made, for a step given the request: code
    # holding the scope can read them and push onto them, so the generators' teardowns
    # go on them too; else they are left out.
    uses_stacks: bool
    # Whether, without the stacks, generator steps leave teardowns to close (`teardown`).
    teardowns: bool
    # Every (callable, what the overrides resolved it to) the build looked up.
    probes: tuple[tuple[Any, Any], ...]


class _Builder:
    def __init__(
        self,
        spec: EndpointSpec,
        overrides: Mapping[Any, Any] | None,
        make_runtime: Callable[[RoutePlan], Any],
        errors_only: bool = False,
        fastapi_body: FastAPIBody | None = None,
        on_failure: OnFailure | None = None,
        answers: tuple[Answer, ...] = (),
    ) -> None:
        self.spec = spec
        # The first lookups' answers, taken in place of `overrides` (see `build_plan`).
        self.answers = answers
        self.lookups = 0
        self.fastapi_body = fastapi_body
        self.on_failure = on_failure
        # A plan only for the order of a delegated route's errors: FastAPI validates the
        # parameters (`_dependencies.errors`), so any it can validate will do.
        self.errors_only = errors_only
        # One copy for the whole build: another thread may change the application's
        # overrides meanwhile, and the plan must follow one set of them.
        self.overrides = None if overrides is None else dict(overrides)
        self.make_runtime = make_runtime
        self.steps: list[Step] = []
        self.keys: dict[Any, int] = {}
        self.probes: list[tuple[Any, Any]] = []
        self.uses_stacks = False
        self.generators = False
        self.models = {plan.name: plan for plan in spec.models}
        body = spec.body
        self.embedded = body is not None and body.embedded
        self.aliases: dict[str, str] = {}
        self.parts: BodyParts | None = None
        if body is not None and body.embedded:
            self.aliases = {
                field.name: field.encode_name for field in msgspec.structs.fields(body.decode_type)
            }
            self.parts = BodyParts(body.decode_type)

    def check(self, dependant: Any) -> None:
        unknown = _compat.dependant_fields(dependant) - _compat.KNOWN_DEPENDANT_FIELDS
        if unknown or dependant.call is None:
            raise Refused
        if dependant.websocket_param_name is not None:
            raise Refused
        fastapi_body = self.fastapi_body
        if fastapi_body is None:
            if dependant.body_params:
                raise Refused
            return
        forms = [isinstance(field.field_info, params.Form) for field in dependant.body_params]
        if any(forms) and not fastapi_body.form:
            raise Refused  # form fields beside a JSON body: FastAPI reads JSON

    def solve(self, dependant: Any) -> list[tuple[str, int]]:
        """The steps of `dependant`'s sub-dependencies, as solve_dependencies takes them;
        returns (name, step) for those its call receives."""
        received = []
        for sub in dependant.dependencies:
            use_sub = sub
            call = resolved = sub.call
            lookup = self.lookups
            self.lookups += 1
            overridden = bool(self.overrides)
            if lookup < len(self.answers):
                resolved, overridden = self.answers[lookup]
            elif self.overrides is not None:
                try:
                    resolved = self.overrides.get(call, call)
                except TypeError as exc:  # an unhashable call: FastAPI fails too
                    raise Refused from exc
                # Also where the copy came out empty (emptied since the caller saw
                # them): the plan then holds only while nothing overrides this call.
                self.probes.append((call, resolved))
            answer = resolved  # what the lookup gave, before a self-override's stand-in
            if overridden:
                unwrapped = unwrap_stand_in(call)
                if unwrapped is not None and resolved == unwrapped[0]:
                    # A dependency that takes msgspec types, overriding itself: its
                    # stand-in is what FastAPI can read of it.
                    resolved = call
                try:
                    use_sub = _compat.rebuild_dependant(sub, resolved)
                    prepare_dependant(use_sub, self.on_failure)
                except Exception as exc:  # FastAPI fails on it per request
                    raise Refused from exc
            first = len(self.steps)
            index = self.step(sub, use_sub, first)
            self.steps[index] = replace(
                self.steps[index],
                lookup=lookup,
                looked_up=call,
                resolved=answer,
                overridden=overridden,
            )
            if sub.name is not None:
                received.append((sub.name, index))
        return received

    def step(self, sub: Any, use_sub: Any, first: int) -> int:
        self.check(use_sub)
        received = self.solve(use_sub)
        call = use_sub.call
        concurrency = getattr(use_sub, "concurrency", None)
        if _compat.is_async_gen_callable(call) or _compat.is_gen_callable(call):
            if concurrency is not None and _compat.concurrency_limit_generator is None:
                raise Refused  # a FastAPI whose limit the executor does not know
            if _compat.is_async_gen_callable(call):
                kind = DEP_ASYNC_GENERATOR
            elif _compat.threadpool_generator is not None:
                kind = DEP_SYNC_GENERATOR
            else:
                raise Refused
            self.generators = True
        elif _compat.is_coroutine_callable(call):
            kind = DEP_ASYNC
        else:
            kind = DEP_THREAD
        own_request = True
        body: tuple[tuple[str, str | None], ...] = ()
        models: tuple[tuple[str, str], ...] = ()
        step_dependant = use_sub
        unwrapped = unwrap_stand_in(call)
        if unwrapped is not None:
            # A dependency taking msgspec values: call it, with its values from the plan.
            call, takes = unwrapped
            step_dependant = replace(use_sub, call=call)
            if takes is not None:
                own_request = takes.own_request
                body, models = takes.body, takes.models
        if kind == DEP_SYNC_GENERATOR:
            call = contextmanager(call)  # as FastAPI wraps it, once here
        try:
            key = self.keys.setdefault(_compat.dependency_cache_key(sub), len(self.keys))
        except TypeError as exc:  # an unhashable callable: FastAPI fails on it too
            raise Refused from exc
        self.steps.append(
            Step(
                call=call,
                kind=kind,
                dependant=step_dependant,
                key=key,
                use_cache=sub.use_cache,
                first=first,
                function_stack=sub.scope == "function",
                concurrency=concurrency,
                steps=tuple(received),
                params=self.params_of(use_sub, models),
                has_models=bool(models),
                body=body,
                body_keys=self.body_keys(body),
                parts=self.parts if body else None,
                specials=self.specials(use_sub, own_request, own_response=True),
                fields=self.fields(use_sub),
                embeds=self.fields_embedded(),
                form_fields=self.form_fields(use_sub),
            )
        )
        return len(self.steps) - 1

    def params_of(self, dependant: Any, models: tuple[tuple[str, str], ...]) -> Any:
        fastapi_params = self.fastapi_body is not None and self.fastapi_body.fastapi_params
        # Before anything reads a default: FastAPI calls a factory only per request.
        if fastapi_params and defaults_need_fastapi(dependant):
            return FastAPIParams(dependant)
        specs = () if self.errors_only else direct_param_specs(dependant)
        if specs is None:
            if fastapi_params:
                return FastAPIParams(dependant)  # FastAPI's own step solves them
            raise Refused
        plans: list[ModelPlan] = [replace(self.models[key], name=name) for name, key in models]
        if not specs and not plans:
            return None
        return self.make_runtime(
            RoutePlan(
                body=None,
                output=None,
                strict_content_type=True,
                status_code=200,
                direct=DirectPlan(self.spec.endpoint, False, specs, None),
                models=tuple(plans),
            )
        )

    def fields(self, dependant: Any) -> list[Any]:
        return list(dependant.body_params) if self.fastapi_body is not None else []

    def fields_embedded(self) -> bool:
        return self.fastapi_body is not None and self.fastapi_body.embedded

    def form_fields(self, dependant: Any) -> bool:
        return (
            self.fastapi_body is not None
            and self.fastapi_body.form
            and bool(self.fields(dependant))
        )

    def body_keys(self, body: tuple[tuple[str, str | None], ...]) -> frozenset[str] | None:
        if not self.embedded:
            return None
        return frozenset(self.aliases.get(name, name) for name, _ in body)

    def specials(
        self, dependant: Any, own_request: bool, own_response: bool
    ) -> tuple[tuple[str, int, tuple[str, ...]], ...]:
        """FastAPI's order: HTTPConnection, Request, BackgroundTasks, Response, scopes."""
        found: list[tuple[str, int, tuple[str, ...]]] = []
        if dependant.http_connection_param_name:
            found.append((dependant.http_connection_param_name, SPECIAL_REQUEST, ()))
            self.uses_stacks = True
        if dependant.request_param_name and own_request:
            found.append((dependant.request_param_name, SPECIAL_REQUEST, ()))
            self.uses_stacks = True
        if dependant.background_tasks_param_name:
            found.append((dependant.background_tasks_param_name, SPECIAL_BACKGROUND, ()))
        if dependant.response_param_name and own_response:
            found.append((dependant.response_param_name, SPECIAL_RESPONSE, ()))
        if dependant.security_scopes_param_name:
            scopes = tuple(_compat.oauth_scopes(dependant))
            found.append((dependant.security_scopes_param_name, SPECIAL_SCOPES, scopes))
        return tuple(found)

    def endpoint(self, root: Any) -> Step:
        spec = self.spec
        self.check(root)
        received = self.solve(root)
        body = tuple((name, name if self.embedded else None) for name in spec.endpoint_body)
        models = tuple((name, name) for name in spec.endpoint_models)
        call = spec.endpoint
        streams = spec.output is not None and spec.output.stream != STREAM_NONE
        if streams or _compat.is_gen_callable(call) or _compat.is_async_gen_callable(call):
            kind = DEP_GENERATOR  # the call makes the stream (Pydantic items: FastAPI's)
        elif spec.is_coroutine:
            kind = DEP_ASYNC
        else:
            kind = DEP_THREAD
        return Step(
            call=spec.endpoint,
            kind=kind,
            dependant=root,
            key=-1,
            use_cache=False,
            first=0,
            function_stack=True,
            concurrency=None,
            steps=tuple(received),
            params=self.params_of(root, models),
            has_models=bool(models),
            body=body,
            body_keys=self.body_keys(body),
            parts=self.parts if body else None,
            # The wrapper's own Request and Response are not the endpoint's.
            specials=self.specials(
                root, not spec.injected_request, own_response=not spec.injected_response
            ),
            fields=self.fields(root),
            embeds=self.fields_embedded(),
            form_fields=self.form_fields(root),
        )


def build_plan(
    root: Any,
    spec: EndpointSpec,
    overrides: Mapping[Any, Any] | None,
    make_runtime: Callable[[RoutePlan], Any],
    errors_only: bool = False,
    fastapi_body: FastAPIBody | None = None,
    on_failure: OnFailure | None = None,
    answers: tuple[Answer, ...] = (),
) -> tuple[DepPlan | None, tuple[tuple[Any, Any], ...]]:
    """The plan of a route whose FastAPI Dependant is `root` (its endpoint the wrapper of
    `spec`'s endpoint), under `overrides` (None or empty: none set), with parameter
    extraction by `make_runtime` (the twin's RouteRuntime); None when it cannot be planned.
    Also returns the override lookups made, which decide when the plan holds again (made
    whenever `overrides` is not None, empty or not).
    `errors_only`: a plan whose steps extract no path, query, header or cookie parameter
    (FastAPI validates those), for the order of a delegated route's errors.
    `fastapi_body`: the route's body is FastAPI's body fields, not a msgspec body.
    `on_failure`: how the parameters of an overriding dependency answer their failures
    (as the route's own were prepared, `prepare_dependant`).
    `answers`: the first lookups' answers, in the order the build makes its lookups, taken
    in place of `overrides`: the plan of a request whose overrides changed while it ran,
    whose lookups up to then were answered as they were (the executor's `follow`)."""
    builder = _Builder(
        spec, overrides, make_runtime, errors_only, fastapi_body, on_failure, answers
    )
    try:
        endpoint = builder.endpoint(root)
    except Refused:
        return None, tuple(builder.probes)
    probes = tuple(builder.probes)
    plan = DepPlan(
        steps=tuple(builder.steps),
        endpoint=endpoint,
        n_keys=len(builder.keys),
        uses_stacks=builder.uses_stacks,
        teardowns=builder.generators and not builder.uses_stacks,
        probes=probes,
    )
    return plan, probes
