# cython: freethreading_compatible=True
"""The request path of a route with dependencies: the direct tier's ASGI app for it.

`DependencyRoute(runtime, plan, ...)` executes the route's `_dependencies.plan.DepPlan` per request
as FastAPI's `request_response` and `get_request_handler` would run the route: the body
read and checked first (415, 400 and 413 before any dependency runs), the steps in
order with FastAPI's per-request cache, errors of every step collected in FastAPI's order
and one `RequestValidationError` raised when any failed (a step whose subtree failed is
not called; its siblings are), generators entered as FastAPI enters them (`Teardown`),
their teardowns on FastAPI's two exit stacks where a step is given the request, else in
lists closed as those stacks would be (the function stack before the response is sent,
the request stack after it and its background tasks), the endpoint, the response with
the status, headers and background tasks dependencies gave it, and exceptions handed to
the application's handlers with the request the dependencies saw.

Per request nothing is inspected or derived: the `Request`, the sub-response, the
background tasks and the stacks are made only when the plan says a step needs them.
`app.dependency_overrides` is read per request; each override set gets a plan of its own,
built once and reused while the overrides resolve as they did (`plan_for`). A request
with a live telemetry record, or an override set the plan cannot reproduce, goes to
FastAPI's own handler for the route (`delegated`).
"""

from __future__ import annotations

import sys
from asyncio import current_task, get_running_loop
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from weakref import ref

from anyio import CancelScope
from anyio.lowlevel import checkpoint_if_cancelled
from fastapi.background import BackgroundTasks
from fastapi.security import SecurityScopes
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from .. import _shared
from .._compat import (
    FUNCTION_STACK_KEY,
    REQUEST_STACK_KEY,
    SHIELDS_ASYNC_TEARDOWN,
    asyncio_cancel_scope,
    asyncio_checkpoint_if_cancelled,
    cache_request_body,
    concurrency_limit_generator,
    get_async_backend,
    read_form,
    run_in_exit_stacks,
    running_tasks,
    sniffio_cvar_get,
    sniffio_thread_local,
    stack_cleanup_scope,
    takes_asyncio_scope,
    task_state_records,
    threadpool_generator,
    validate_body,
    validate_form,
)
from .._errors.handlers import handle_route_exception
from .._errors.validation import received_body
from .._shared import (
    ClientDisconnect,
    PreparedResponse,
    RequestValidationError,
)
from .teardown import close_after, raise_again, returned, run_with_teardowns, stop_refused, unwind

if TYPE_CHECKING:
    from .._endpoint.plan import RoutePlan
    from .plan import DepPlan, Step

# Shared constants under their `_shared` names; the compiled build gives them C types (a
# step's kind compared as a C int, the cache's marker read without a lookup).
TELEMETRY_SCOPE_KEY = _shared.TELEMETRY_SCOPE_KEY
DEP_ASYNC = _shared.DEP_ASYNC
DEP_ASYNC_GENERATOR = _shared.DEP_ASYNC_GENERATOR
DEP_GENERATOR = _shared.DEP_GENERATOR
DEP_SYNC_GENERATOR = _shared.DEP_SYNC_GENERATOR
MISSING = _shared.MISSING
SPECIAL_BACKGROUND = _shared.SPECIAL_BACKGROUND
SPECIAL_REQUEST = _shared.SPECIAL_REQUEST
SPECIAL_RESPONSE = _shared.SPECIAL_RESPONSE

# The builtin `anext`, bound once: the compiled build looks a builtin it does not know
# (anext came in 3.10) up in the builtins module on every use.
next_of = anext

# Plans per route for override sets seen lately; older ones are rebuilt when needed.
PLANS_PER_ROUTE = 8


class RequestState:
    """One request as its steps see it: what was read, and the objects made on need."""

    __slots__ = (
        "body",
        "carried",
        "checkpoint",
        "cleanup",
        "exits",
        "function_exits",
        "parts",
        "raw",
        "receive",
        "request",
        "resume_at",
        "scope",
        "send",
        "skipped",
        "started",
        "sub",
        "task",
        "tasks",
    )

    def __init__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scope = scope
        self.receive = receive
        self.send = send
        self.body: Any = None
        self.raw: bytes | None = None
        self.parts: dict[str, Any] | None = None  # the valid parts of a body that failed
        self.request: Request | None = None
        self.sub: Response | None = None
        self.tasks: BackgroundTasks | None = None
        self.started = False
        # Steps that cannot be called for want of a body part that could not be decoded
        # although no error names it (a number out of range elsewhere in the body);
        # counted with the errors, so that their parents skip too.
        self.skipped = 0
        # Teardowns of generators set up without FastAPI's stacks, on the
        # request's scope (with the cleanup scope FastAPI 0.165 enters before the first
        # async generator) and on the function's, and that cleanup scope (None where it
        # is left out: `enter_cleanup_scope`).
        self.exits: list[Teardown | CancelScope] | None = None
        self.function_exits: list[Teardown | CancelScope] | None = None
        self.cleanup: CancelScope | None = None
        # The running library's `checkpoint_if_cancelled`, set when the cleanup scope is
        # entered or left out (at the first async generator), and the request's task
        # where it is left out. The request's own objects hold it only while it runs.
        self.checkpoint: Callable[[], Awaitable[None]] | None = None
        self.task: Any = None
        # Where a change of overrides while the request ran switched programs: the step
        # the new one takes up from, and the values, error marks, cache and errors so far.
        self.resume_at = 0
        self.carried: tuple[list[Any], list[int], list[Any], list[Any]] | None = None

    def get_request(self) -> Request:
        request = self.request
        if request is None:
            request = self.request = Request(self.scope, self.receive, self.send)
            if self.raw is not None:
                cache_request_body(request, self.raw)  # what request.body() returns
        return request

    def get_sub_response(self) -> Response:
        sub = self.sub
        if sub is None:
            # FastAPI's: no content-length of its own, no status until one is set.
            sub = self.sub = Response()
            del sub.headers["content-length"]
            sub.status_code = None  # type: ignore[assignment]
        return sub

    def get_tasks(self) -> BackgroundTasks:
        tasks = self.tasks
        if tasks is None:
            tasks = self.tasks = BackgroundTasks()
        return tasks

    def track(self, message: Message) -> Awaitable[None]:
        """`send`, noting when the response has started (for the exception handlers)."""
        if message["type"] == "http.response.start":
            self.started = True
        return self.send(message)

    async def close_exits(self, exits: list[Teardown | CancelScope]) -> BaseException | None:
        """Close `exits` last first with no exception in flight, as `teardown.unwind`
        would, while each closes cleanly; the exception the first one to fail raised
        (None: all closed), the rest left in `exits` for `unwind` to take up. Closing
        without an exception needs no Python frame (see `_dependencies.teardown`), and a
        teardown is closed here as its `__aexit__` would close it, without a coroutine of
        its own."""
        while exits:
            entry = exits.pop()
            if not isinstance(entry, Teardown):  # the cleanup scope
                try:
                    entry.__exit__(None, None, None)
                except BaseException as raised:
                    return raised
                continue
            teardown: Teardown = entry
            cleanup = teardown.shield_exit()
            failure: BaseException | None = None
            stopped = False
            try:
                await next_of(teardown.gen)
            except StopAsyncIteration:
                stopped = True
            except BaseException as raised:
                failure = raised
            if not stopped and failure is None:
                try:
                    await stop_refused(teardown.gen, "generator didn't stop")
                except BaseException as raised:
                    failure = raised
            if cleanup is not None:
                cleanup.shield = teardown.was_shielded
            if failure is not None:
                return failure
            checkpoint = teardown.due_checkpoint(cleanup)
            if checkpoint is not None:
                try:
                    await checkpoint()
                except BaseException as raised:
                    return raised
        return None


# What a response whose class keeps Starlette's `__call__` does on an HTTP request: send
# the start with its status and raw headers, then its body, then run its background. The
# executor sends those two messages itself (no coroutine, no `track` between it and the
# server) for its own prepared parts (`solve`) and for the responses of such classes: a
# JSON or plain response an endpoint returns.
RESPONSE_CALL = Response.__call__


def plain_messages(response: Any, tasks: BackgroundTasks | None) -> tuple[Any, ...] | None:
    """(start message, body message, background) as Starlette's `Response.__call__` would
    send and run them, for `solve`'s outcome: the route's prepared (status, raw headers,
    body), whose background is the request's `tasks`, or a response whose class keeps
    that `__call__`. None for any other response, which is called."""
    if type(response) is tuple:
        status, headers, body = response
        background = tasks
    elif type(response).__call__ is RESPONSE_CALL:
        status, headers, body = response.status_code, response.raw_headers, response.body
        background = response.background
    else:
        return None
    start = {"type": "http.response.start", "status": status, "headers": headers}
    return start, {"type": "http.response.body", "body": body}, background


def as_response(outcome: Any, tasks: BackgroundTasks | None) -> Response:
    """`solve`'s outcome as the Response FastAPI's handler would have: prepared parts in a
    PreparedResponse with the request's background `tasks`."""
    if type(outcome) is tuple:
        status, headers, body = outcome
        return PreparedResponse(body, status, headers, tasks)
    return outcome  # type: ignore[no-any-return]


def running_task() -> Any:
    """asyncio's running task, as `asyncio.current_task()` finds it (RuntimeError outside
    a running loop)."""
    tasks = running_tasks
    if tasks is None:
        return current_task()
    return tasks.get(get_running_loop())


def enter_cleanup_scope() -> tuple[CancelScope | None, Callable[[], Awaitable[None]], Any]:
    """FastAPI 0.165's cleanup scope, entered in the running task as `anyio.CancelScope()`
    makes it, and `checkpoint_if_cancelled` as `anyio.lowlevel` gives it; or, where the
    scope would be its task's outermost, no scope (None) and the running asyncio task
    (else None), for `in_a_cancel_scope`.

    The scope would be outermost in an asyncio task inside no anyio cancel scope: the
    request's task of an ASGI server, outside any task group. No cancellation can come from
    outside it there, so its shield keeps nothing out, and the route leaves it out with
    its anyio bookkeeping. One thing differs from FastAPI 0.165 then, as it did before
    0.165: a task the request starts with `TaskGroup.start()` in a task group of the
    application's belongs to that group's scope until it reports started, rather than to
    the request's (see the README).

    anyio looks the running library's backend up again for each of the two, and makes the
    scope through keyword arguments equal to the class's defaults. On asyncio the library
    is named as anyio names it, and the scope's class and the checkpoint are taken
    directly (anyio's names, found by `_compat`)."""
    scope: CancelScope
    checkpoint: Callable[[], Awaitable[None]]
    task = None
    if takes_asyncio_scope:
        # sniffio's order, then asyncio while an asyncio task runs (without sniffio, anyio
        # takes asyncio while its loop runs, and no name is set).
        library = None if sniffio_thread_local is None else sniffio_thread_local.name
        if library is None and sniffio_cvar_get is not None:
            library = sniffio_cvar_get()
        if library is None or library == "asyncio":
            try:
                task = running_task()
            except RuntimeError:
                task = None
    if task is not None:
        checkpoint = asyncio_checkpoint_if_cancelled  # type: ignore[assignment]
        if not in_a_cancel_scope(task):
            return None, checkpoint, task
        scope = asyncio_cancel_scope()  # type: ignore[misc]
    elif get_async_backend is None:
        scope, checkpoint = CancelScope(), checkpoint_if_cancelled
    else:
        backend = get_async_backend()
        scope, checkpoint = backend.create_cancel_scope(), backend.checkpoint_if_cancelled
    scope.__enter__()
    return scope, checkpoint, None


def in_a_cancel_scope(task: Any) -> bool:
    """Whether the asyncio `task` is inside an anyio cancel scope: where it is not,
    `checkpoint_if_cancelled()` returns without a checkpoint, as it starts from the task's
    current scope. anyio's records are keyed by weak references; while it holds none (no
    task entered a scope, or every such task is gone), no reference is made."""
    records = task_state_records
    if not records:
        return False
    state = records.get(ref(task))
    return state is not None and state.cancel_scope is not None


# contextlib's error for a generator dependency that ends before its yield.
NO_YIELD = "generator didn't yield"

# 3.12 deprecated athrow's (type, value, traceback) form; contextlib uses the one it has.
_ATHROW_VALUE_ONLY = sys.version_info >= (3, 12)


class Teardown:
    """One generator dependency entered as FastAPI enters it: an async generator as
    `asynccontextmanager` enters it, on 0.165 with the shielded exit around its exit (the
    request's cleanup scope shielded during the teardown, its shield restored, then a
    pending cancellation delivered when no exception leaves the teardown). Where the
    cleanup scope is left out (`enter_cleanup_scope`: it would be its task's
    outermost scope), there is no shield to set, and the checkpoint is skipped while the
    request's task is inside no cancel scope, where it would return at once. A sync
    generator or a concurrency limit is FastAPI's own wrapper generator, entered the same
    way.

    The compiled build's coroutines await only outside `except` and `finally` clauses
    (see `_dependencies.teardown`)."""

    __slots__ = ("checkpoint", "cleanup", "gen", "task", "was_shielded")

    def __init__(
        self,
        gen: Any,
        cleanup: CancelScope | None = None,
        checkpoint: Callable[[], Awaitable[None]] | None = None,
        task: Any = None,
    ) -> None:
        self.gen = gen
        self.cleanup = cleanup  # the request's cleanup scope (shielded exit), or None
        # `checkpoint_if_cancelled` after a shielded exit; None: no shielded exit.
        self.checkpoint = checkpoint
        self.task = task  # the request's task, where the cleanup scope is left out
        self.was_shielded = False  # its shield when the generator was set up

    def first(self) -> Awaitable[Any]:
        """The generator's first step, to await (its `StopAsyncIteration` is contextlib's
        "generator didn't yield"); the cleanup scope's shield is noted first."""
        cleanup = self.cleanup
        if cleanup is not None:
            self.was_shielded = cleanup.shield
        # anext() calls the generator's slot: no method lookup, no argument tuple.
        return next_of(self.gen)

    async def __aenter__(self) -> Any:
        try:
            return await self.first()
        except StopAsyncIteration:
            raise RuntimeError(NO_YIELD) from None

    def shield_exit(self) -> CancelScope | None:
        """The request's cleanup scope, shielded for the exit, where the exit is shielded
        (0.165's); else None."""
        cleanup = self.cleanup if self.checkpoint is not None else None
        if cleanup is not None:
            cleanup.shield = True
        return cleanup

    def due_checkpoint(self, cleanup: CancelScope | None) -> Callable[[], Awaitable[None]] | None:
        """The shielded exit's checkpoint, to await after an exit that raised nothing, or
        None: where the cleanup scope is left out, it is due only while the task is inside
        a cancel scope (else it would return at once)."""
        checkpoint = self.checkpoint
        if checkpoint is None or (cleanup is None and not in_a_cancel_scope(self.task)):
            return None
        return checkpoint

    async def __aexit__(self, typ: Any, exc: Any, tb: Any) -> bool:
        """`_AsyncGeneratorContextManager.__aexit__`, inside 0.165's shielded exit where
        there is one. Without an exception the generator is resumed here rather than in
        `throw`: one coroutine less. After success the executor does not come here:
        `RequestState.close_exits` closes the teardown in its own loop."""
        cleanup = self.shield_exit()
        try:
            if typ is None:
                suppressed = stopped = False
                try:
                    await next_of(self.gen)
                except StopAsyncIteration:
                    stopped = True
                if not stopped:
                    await stop_refused(self.gen, "generator didn't stop")
            else:
                suppressed = await self.throw(typ, exc, tb)
        finally:
            if cleanup is not None:
                cleanup.shield = self.was_shielded
        checkpoint = self.due_checkpoint(cleanup) if typ is None or suppressed else None
        if checkpoint is not None:
            await checkpoint()
        return suppressed

    async def throw(self, typ: Any, exc: Any, tb: Any) -> bool:
        """What `_AsyncGeneratorContextManager.__aexit__` does with the generator when an
        exception is in flight."""
        gen = self.gen
        if exc is None:
            exc = typ()  # so that the exception coming back can be told apart
        try:
            if _ATHROW_VALUE_ONLY:
                await gen.athrow(exc)
            else:
                await gen.athrow(typ, exc, tb)
        except StopAsyncIteration as stop:
            return stop is not exc  # suppressed, unless the thrown-in exception itself
        except RuntimeError as error:
            if error is exc:
                error.__traceback__ = tb
                return False
            # A thrown-in Stop(Async)Iteration the generator turned into RuntimeError.
            if isinstance(exc, (StopIteration, StopAsyncIteration)) and error.__cause__ is exc:
                exc.__traceback__ = tb
                return False
            raise
        except BaseException as error:
            if error is not exc:
                raise
            error.__traceback__ = tb
            return False
        await stop_refused(gen, "generator didn't stop after athrow()")


def prepare_generator(
    step: Op, kwargs: dict[str, Any], state: RequestState, on_stacks: bool
) -> Teardown:
    """The generator dependency `step` called with `kwargs`, as the context manager
    FastAPI's `_solve_generator` would enter (not entered yet). On 0.165 the request's
    cleanup scope is entered before the first async generator, so that it encloses their
    scopes; where FastAPI's stacks are not used, it is closed where FastAPI's request
    stack closes it (it goes into `state.exits` first), or left out where it would be its
    task's outermost scope (`enter_cleanup_scope`)."""
    if step.kind == DEP_SYNC_GENERATOR:
        assert threadpool_generator is not None  # else `_dependencies.plan` refuses the step
        teardown = Teardown(threadpool_generator(step.call(**kwargs)))
    else:
        gen = step.call(**kwargs)
        if not SHIELDS_ASYNC_TEARDOWN:
            teardown = Teardown(gen)
        elif on_stacks:
            teardown = Teardown(gen, stack_cleanup_scope(state.scope), checkpoint_if_cancelled)
        else:
            if state.checkpoint is None:
                cleanup, state.checkpoint, state.task = enter_cleanup_scope()
                if cleanup is not None:
                    state.cleanup = cleanup
                    if state.exits is None:
                        state.exits = [cleanup]
                    else:
                        state.exits.append(cleanup)
            teardown = Teardown(gen, state.cleanup, state.checkpoint, state.task)
    concurrency = step.concurrency
    if concurrency is not None:
        assert concurrency_limit_generator is not None  # else `_dependencies.plan` refuses the step
        limited = concurrency_limit_generator(teardown, concurrency.get_semaphore())
        teardown = Teardown(limited)
    return teardown


def keep_teardown(teardown: Teardown, step: Op, state: RequestState, on_stacks: bool) -> None:
    """Keep the exit of the entered `teardown`: on FastAPI's stack for the step's scope in
    the request's scope (`on_stacks`), else in `state.function_exits` or `state.exits`."""
    if on_stacks:
        stack = state.scope[FUNCTION_STACK_KEY if step.function_stack else REQUEST_STACK_KEY]
        stack.push_async_exit(teardown)
    elif step.function_stack:
        if state.function_exits is None:
            state.function_exits = [teardown]
        else:
            state.function_exits.append(teardown)
    elif state.exits is None:
        state.exits = [teardown]
    else:
        state.exits.append(teardown)


class Op:
    """A plan's `Step` as the request path reads it: its fields copied once, when the plan
    is taken up (`Program`), into a class the compiled build lays out as a C struct
    (`_dependencies/executor.pxd`), so that each read per request is a field load."""

    __slots__ = (
        "body",
        "body_keys",
        "call",
        "concurrency",
        "dependant",
        "embeds",
        "fields",
        "first",
        "form_fields",
        "function_stack",
        "has_models",
        "key",
        "kind",
        "looked_up",
        "lookup",
        "overridden",
        "params",
        "parts",
        "resolved",
        "specials",
        "steps",
        "use_cache",
    )

    def __init__(self, step: Step) -> None:
        self.call = step.call
        self.kind = step.kind
        self.dependant = step.dependant
        self.key = step.key
        self.use_cache = step.use_cache
        self.first = step.first
        self.function_stack = step.function_stack
        self.concurrency = step.concurrency
        self.steps = step.steps
        self.params = step.params
        self.has_models = step.has_models
        self.body = step.body
        self.body_keys = step.body_keys
        self.parts = step.parts
        self.specials = step.specials
        self.fields = step.fields
        self.embeds = step.embeds
        self.form_fields = step.form_fields
        self.lookup = step.lookup
        self.looked_up = step.looked_up
        self.resolved = step.resolved
        self.overridden = step.overridden


class Program:
    """A `DepPlan` as the request path runs it: its steps as `Op`s, made once per plan.

    `checks[i]`: the steps whose override lookups FastAPI makes once step i-1 has run
    (their subtrees start at step i), which the request path checks against the overrides
    then set; none before step 0, whose lookups chose this program. `overridden`: some
    lookup was made with overrides set."""

    __slots__ = ("checks", "endpoint", "n_keys", "ops", "overridden", "teardowns", "uses_stacks")

    def __init__(self, plan: DepPlan) -> None:
        self.ops = [Op(step) for step in plan.steps]
        self.endpoint = Op(plan.endpoint)
        self.n_keys = plan.n_keys
        self.uses_stacks = plan.uses_stacks
        self.teardowns = plan.teardowns
        self.overridden = any(op.overridden for op in self.ops)
        checks: list[list[Op]] = [[] for _ in self.ops]
        for op in self.ops:
            if op.first > 0:
                checks[op.first].append(op)
        self.checks = tuple([tuple(found) for found in checks])


def lookups_hold(checks: tuple[Any, ...], current: Any) -> bool:
    """Whether FastAPI's lookups of `checks` under the overrides `current` give what their
    plan was built with: the same callable, and overrides set or not alike."""
    overridden = bool(current)
    for op in checks:
        try:
            resolved = current.get(op.looked_up, op.looked_up) if overridden else op.looked_up
        except TypeError:  # an unhashable callable: the plan was refused for it
            return True
        if resolved is not op.resolved or op.overridden != overridden:
            return False
    return True


def arguments(
    step: Op, values: list[Any], errors: list[Any], state: RequestState
) -> dict[str, Any]:
    """A step's arguments; its parameters' errors go to `errors`, in FastAPI's order.

    The dict of its path, query, header and cookie parameters is filled in with the rest
    (a call's keyword arguments have no order), rather than copied into a new one."""
    kwargs: dict[str, Any]
    params = step.params
    if params is None:
        kwargs = {}
    else:
        kwargs, problems = params.extract_params(state.scope)
        if step.has_models:
            params.extract_models(state.scope, kwargs, problems)
        if problems:
            errors.extend(problems)
    for name, index in step.steps:
        kwargs[name] = values[index]
    if step.body:
        body = state.body
        if type(body) is RequestValidationError:
            own = body_errors(body, step.body_keys)
            if own:
                errors.extend(own)
            else:
                # Its parts are valid, others are not: it gets its own, as in FastAPI.
                parts = state.parts
                if parts is None:
                    assert step.parts is not None  # a whole body's errors are every step's
                    parts = state.parts = step.parts.valid(body, state.raw)
                for name, key in step.body:
                    if key not in parts:
                        state.skipped += 1
                        break
                    kwargs[name] = parts[key]
        else:
            for name, key in step.body:
                kwargs[name] = body if key is None else body[key]
    elif step.fields and not step.form_fields:
        # FastAPI's body fields, validated at the step's turn as its solving does.
        found, problems = validate_body(step.fields, state.body, step.embeds)
        if problems:
            errors.extend(problems)
        kwargs.update(found)
    for name, source, scopes in step.specials:
        if source == SPECIAL_REQUEST:
            kwargs[name] = state.get_request()
        elif source == SPECIAL_RESPONSE:
            kwargs[name] = state.get_sub_response()
        elif source == SPECIAL_BACKGROUND:
            kwargs[name] = state.get_tasks()
        else:
            kwargs[name] = SecurityScopes(scopes=list(scopes))
    return kwargs


async def form_arguments(
    step: Op, kwargs: dict[str, Any], errors: list[Any], state: RequestState
) -> None:
    """A step's form fields, validated at its turn by FastAPI's own step (awaited: it
    reads the form's files), into `kwargs`; their errors go to `errors`."""
    found, problems = await validate_form(step.fields, state.body, step.embeds)
    if problems:
        errors.extend(problems)
    kwargs.update(found)


def body_errors(body: RequestValidationError, keys: frozenset[str] | None) -> list[Any]:
    """The errors of an invalid body that belong to the parts a step takes: all of them
    for a body that is not embedded, else those under its keys and the whole body's."""
    errors = body.errors()
    if keys is None:
        return list(errors)
    return [error for error in errors if len(error["loc"]) < 2 or error["loc"][1] in keys]


async def call_step(step: Op, kwargs: dict[str, Any]) -> Any:
    kind = step.kind
    concurrency = step.concurrency
    if concurrency is not None:
        async with concurrency.get_semaphore():
            if kind == DEP_ASYNC:
                return await step.call(**kwargs)
            return await run_in_threadpool(step.call, **kwargs)
    if kind == DEP_ASYNC:
        return await step.call(**kwargs)
    return await run_in_threadpool(step.call, **kwargs)


def carry_over(carried: Any, program: Program) -> tuple[Any, ...]:
    """A request's values, error marks, cache and errors so far, grown to `program`'s
    steps and cache slots, for the program it switched to (`DependencyRoute.followed`)."""
    values, marks, cache, errors = carried
    count = len(program.ops)
    values.extend([None] * (count - len(values)))
    marks.extend([0] * (count - len(marks)))
    cache.extend([MISSING] * (program.n_keys - len(cache)))
    return values, marks, cache, errors


def telemetry_observes(scope: Scope) -> bool:
    """Whether FastAPI's telemetry observes the request (its record is in the scope)."""
    return scope.get(TELEMETRY_SCOPE_KEY) is not None


class DependencyRoute:
    """The direct tier's ASGI app for one route (one place it is included) with
    dependencies; see the module docstring."""

    __slots__ = (
        "build",
        "checks_length",
        "delegated",
        "form_limits",
        "has_body",
        "plan",
        "plans",
        "program",
        "provider",
        "pydantic",
        "response_send",
        "runtime",
    )

    def __init__(
        self,
        runtime: Any,
        route_plan: RoutePlan,
        plan: DepPlan,
        build: Callable[..., tuple[DepPlan | None, tuple[tuple[Any, Any], ...]]],
        provider: Any,
        delegated: Callable[[Scope, Receive, Send], Awaitable[None]],
        response_send: Callable[[Send], Send],
        pydantic: bool = False,
        reads_body: bool = False,
        form_limits: dict[str, Any] | None = None,
    ) -> None:
        self.runtime = runtime
        self.plan = plan
        self.program = Program(plan)
        self.build = build  # the plan under an override set
        self.provider = provider  # whose dependency_overrides apply (the app), or None
        self.delegated = delegated  # FastAPI's handler for the route, as an ASGI app
        # A route FastAPI validates with Pydantic: `runtime` is the twin's
        # PydanticRuntime, which reads the body (where the route `reads_body`) and renders
        # the response as FastAPI's handler does.
        self.pydantic = pydantic
        self.has_body = route_plan.body is not None or reads_body
        # A form body (FastAPI parses it, with the route's own limits): the route's
        # `form_limits`; None: no form.
        self.form_limits = form_limits
        # Where the request path enforces the body limit (FastAPI before 0.164).
        self.checks_length = route_plan.max_body_size >= 0
        # The twin's `response_send`: where the route sends its response's two messages.
        self.response_send = response_send
        # The latest used first. A tuple, replaced whole and never changed in place: a
        # request in another thread keeps reading the one it took (see `plan_for`). It is
        # kept in a cell that is never replaced, so that a free-threaded build reads it
        # with a reference taken safely while another thread stores a new tuple.
        self.plans: list[tuple[tuple[tuple[tuple[Any, Any], ...], Program | None], ...]] = [()]

    def plan_for(self, overrides: Any) -> Program | None:
        """The plan under these overrides: a recent one whose lookups all resolve as they
        did when it was built (so the build would make the same plan), else a new one.

        Requests on other threads (other event loops) may look at the same time: each
        reads the tuple once and publishes a new one, so the worst a race does is lose
        one's reordering or its new plan, which is built again when next needed."""
        plans = self.plans[0]
        for i in range(len(plans)):
            probes, program = plans[i]
            holds = True
            for call, resolved in probes:
                try:
                    if overrides.get(call, call) is not resolved:
                        holds = False
                        break
                except TypeError:  # an unhashable key: FastAPI fails on it too
                    return None
            if holds:
                if i:
                    self.plans[0] = (plans[i], *plans[:i], *plans[i + 1 :])
                return program
        try:
            plan, probes = self.build(overrides)
        except Exception:  # whatever FastAPI makes of these overrides, it makes per request
            return None
        program = None if plan is None else Program(plan)
        self.plans[0] = ((probes, program), *plans[: PLANS_PER_ROUTE - 1])
        return program

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if telemetry_observes(scope):
            return await self.delegated(scope, receive, send)
        program: Program | None = self.program
        provider = self.provider
        if provider is not None:
            overrides = provider.dependency_overrides
            if overrides:
                program = self.plan_for(overrides)
                if program is None:
                    return await self.delegated(scope, receive, send)
        assert program is not None
        state = RequestState(scope, receive, send)
        runtime = self.runtime
        error: Exception | None = None
        try:
            if self.form_limits is not None:
                try:
                    state.body = await self.parse_form(state)
                except ClientDisconnect:
                    return None  # the client left mid-body: nothing to answer or raise
            elif self.has_body:
                # read_raw's steps, so that a body in one message needs no coroutine.
                if self.checks_length:
                    runtime.check_declared_length(scope["headers"])
                try:
                    message = await receive()
                    raw = runtime.one_message_body(message)
                    if raw is None:
                        raw = await runtime.read_rest(receive, message)
                    state.raw = raw
                except ClientDisconnect:
                    return None  # the client left mid-body: nothing to answer or raise
                # 415 and 400 (FastAPI's 422 for malformed JSON) here, before any
                # dependency runs.
                if self.pydantic:
                    state.body = runtime.read_json(scope, state.raw)
                else:
                    state.body = runtime.parse_body(scope, state.raw)
            elif self.checks_length:
                runtime.check_declared_length(scope["headers"])
            if program.uses_stacks:
                await self.run_in_stacks(program, state)
            elif program.teardowns:
                # `teardown.run_with_teardowns` over the steps, run here while nothing
                # raises and no function-scope generator was set up; that frame takes over
                # from the first exception (see `_dependencies.teardown`).
                failure: BaseException | None = None
                try:
                    response = await self.solve(program, state, True)
                except BaseException as raised:
                    failure = raised
                if failure is not None:
                    if state.function_exits is None:
                        await close_after(state, failure)
                    await run_with_teardowns(state, raise_again, failure)
                    return None
                if state.function_exits is not None:
                    response = as_response(response, state.tasks)
                    await run_with_teardowns(state, returned, response)
                    return None
                try:
                    plain = plain_messages(response, state.tasks)
                    if plain is None:
                        await response(scope, receive, state.track)
                    else:
                        # Starlette's `Response.__call__` on HTTP, without its coroutine.
                        state.started = True
                        sender = self.response_send(send)
                        await sender(plain[0])
                        await sender(plain[1])
                        if plain[2] is not None:
                            await plain[2]()
                except BaseException as raised:
                    failure = raised
                if failure is not None:
                    await close_after(state, failure)
                exits = state.exits
                if exits is not None:
                    closing = await state.close_exits(exits)
                    if closing is not None:
                        await unwind(exits, None, closing)
            else:
                response = await self.solve(program, state, True)
                plain = plain_messages(response, state.tasks)
                if plain is None:
                    await response(scope, receive, state.track)
                else:
                    state.started = True
                    sender = self.response_send(send)
                    await sender(plain[0])
                    await sender(plain[1])
                    if plain[2] is not None:
                        await plain[2]()
        except Exception as exc:
            error = exc
        if error is not None:
            await handle_route_exception(
                error, scope, receive, send, state.started, state.raw, state.request
            )
        return None

    async def parse_form(self, state: RequestState) -> Any:
        """The form body, parsed as FastAPI's handler parses it (400 and 413 before any
        dependency runs), from the body read first where the request path enforces the
        body limit."""
        limits = self.form_limits
        assert limits is not None  # called only for a form
        if self.checks_length:
            state.raw = await self.runtime.read_raw(state.scope, state.receive)
        return await read_form(state.get_request(), limits)

    async def run_in_stacks(self, program: Program, state: RequestState) -> None:
        """The steps and the response inside FastAPI's two exit stacks; the stacks are
        handled in `_compat` (plain Python, see there why)."""
        await run_in_exit_stacks(
            state.scope, state.receive, state.track, self.solve, program, state
        )

    def follow(self, program: Program, boundary: int, current: Any) -> Program | None:
        """The program of a request whose overrides changed while it ran, before step
        `boundary`: the lookups made until then answered as they were, the later ones by
        `current`, as FastAPI looks each dependency up when solving reaches it. None
        where that plan cannot take over (it is refused, or it needs FastAPI's exit
        stacks or teardowns the request was not started with): the request then goes on
        with its plan."""
        ops = program.ops
        made = [op for op in ops if op.first < boundary]
        answers: list[Any] = [None] * len(made)
        for op in made:
            if op.lookup >= len(made):
                return None
            answers[op.lookup] = (op.resolved, op.overridden)
        try:
            plan, _ = self.build(current, tuple(answers))
        except Exception:  # whatever FastAPI makes of these overrides, it makes itself
            return None
        if plan is None:
            return None
        followed = Program(plan)
        if followed.uses_stacks != program.uses_stacks:
            return None
        if followed.teardowns and not program.teardowns and not program.uses_stacks:
            return None
        if len(followed.ops) < boundary:
            return None
        for k in range(boundary):  # the steps run so far, alike in both
            if followed.ops[k].key != ops[k].key or followed.ops[k].first != ops[k].first:
                return None
        return followed

    def followed(self, program: Program, boundary: Any) -> Program | None:
        """Where step `boundary` is due and FastAPI's lookups at it (of the dependencies
        whose subtrees start there) give other callables than `program` was built with
        (a dependency changed the overrides), the program to go on with; else None."""
        provider = self.provider
        if provider is None:
            return None
        current = provider.dependency_overrides
        if not current and not program.overridden:
            return None  # nothing set then or now: every lookup gives the callable itself
        if lookups_hold(program.checks[boundary], current):
            return None
        return self.follow(program, boundary, current)

    async def solve(self, program: Program, state: RequestState, parts: bool = False) -> Any:
        """The steps, then the endpoint: its response, or the RequestValidationError. With
        `parts`, a route's own response is its prepared (status, raw headers, body), which
        the caller sends (`plain_messages`).

        From step `state.resume_at` with the request's values so far in `state.carried`
        where a change of overrides switched programs (see `followed`)."""
        ops: list[Op] = program.ops
        count = len(ops)
        values: list[Any]
        marks: list[int]
        cache: list[Any]
        errors: list[Any]
        if state.carried is None:
            values = [None] * count
            marks = [0] * count
            cache = [MISSING] * program.n_keys
            errors = []
        else:
            values, marks, cache, errors = carry_over(state.carried, program)
        scope = state.scope
        step: Op
        for i in range(state.resume_at, count):
            if program.checks[i]:
                # FastAPI looks these dependencies up now, under the overrides set now.
                followed = self.followed(program, i)
                if followed is not None:
                    state.resume_at = i
                    state.carried = (values, marks, cache, errors)
                    return await self.solve(followed, state, parts)
            step = ops[i]
            marks[i] = len(errors) + state.skipped
            kwargs = arguments(step, values, errors, state)
            if step.form_fields:
                await form_arguments(step, kwargs, errors, state)
            if len(errors) + state.skipped > marks[step.first]:
                continue  # its subtree failed: FastAPI does not call it
            key = step.key
            if step.use_cache:
                cached = cache[key]
                if cached is not MISSING:
                    values[i] = cached
                    continue
            kind = step.kind
            if kind in (DEP_ASYNC_GENERATOR, DEP_SYNC_GENERATOR):
                teardown = prepare_generator(step, kwargs, state, program.uses_stacks)
                # `__aenter__` without its coroutine.
                try:
                    result = await teardown.first()
                except StopAsyncIteration:
                    raise RuntimeError(NO_YIELD) from None
                keep_teardown(teardown, step, state, program.uses_stacks)
            elif step.concurrency is not None:
                result = await call_step(step, kwargs)
            elif kind == DEP_ASYNC:
                result = await step.call(**kwargs)
            else:
                result = await run_in_threadpool(step.call, **kwargs)
            values[i] = result
            if cache[key] is MISSING:
                cache[key] = result
        endpoint: Op = program.endpoint
        kwargs = arguments(endpoint, values, errors, state)
        if endpoint.form_fields:
            await form_arguments(endpoint, kwargs, errors, state)
        if errors:
            body = state.body
            if self.pydantic:
                raise self.runtime.invalid_request(errors, body, scope)
            if type(body) is RequestValidationError:
                raise RequestValidationError(errors, body=body.body)
            raise RequestValidationError(errors, body=received_body(state.raw))
        kind = endpoint.kind
        if kind == DEP_GENERATOR:
            result = endpoint.call(**kwargs)
        elif kind == DEP_ASYNC:
            result = await endpoint.call(**kwargs)
        else:
            result = await run_in_threadpool(endpoint.call, **kwargs)
        tasks = state.tasks
        if isinstance(result, Response):
            if result.background is None:
                result.background = tasks
            return result
        sub = state.sub
        if self.pydantic:
            return await self.runtime.render(result, sub, tasks, scope)
        if sub is None:
            outcome = self.runtime.prepare(result, None, [], scope["headers"])
        else:
            outcome = self.runtime.prepare(
                result, sub.status_code, sub.raw_headers, scope["headers"]
            )
        if type(outcome) is tuple:
            return outcome if parts else as_response(outcome, tasks)
        if tasks is not None:  # a stream route's response
            outcome.background = tasks
        return outcome
