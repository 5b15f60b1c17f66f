"""Generator dependencies set up and torn down by the direct tier, as FastAPI's would be.

FastAPI's `_solve_generator` enters a generator dependency on one of two `AsyncExitStack`s
as a context manager: an async generator as `asynccontextmanager(call)(**values)` (0.165
wraps it in `_asynccontextmanager_with_shielded_exit` under one cancel scope per request,
entered on the request stack before the first one), a sync generator as
`contextmanager_in_threadpool(contextmanager(call)(**values))` (set-up and teardown in
worker threads, each FastAPI version with its own exception handling), and on 0.165 a
dependency with `max_concurrency` inside `_contextmanager_with_concurrency_limit`.
`request_response` closes the function stack before the response and the request stack
after it. `_dependencies.plan` decides each step's kind at registration; per request
`enter_generator` builds the same layers without inspecting anything, from FastAPI's own
wrapper generators where FastAPI has them (the threadpool and the concurrency limit, from
`_compat`), and keeps each teardown either on FastAPI's stacks (a route where a step is
given the request, whose code can reach the stacks through the scope) or, where nothing
can reach them, in two lists of the request's state, closed here as the stacks would:

- `Teardown` is one `asynccontextmanager` over an async generator: its `__aenter__`, and
  its `__aexit__` (resumed after success, the exception thrown in otherwise, the same
  errors for a generator that does not stop), on 0.165 with the shielded exit around it
  (the request's cleanup scope shielded during the teardown, its shield restored, then a
  pending cancellation delivered when no exception leaves the teardown). Where the
  cleanup scope is the outermost scope of its task (`_compat.enter_cleanup_scope`: an ASGI
  server's task, on asyncio), the shield keeps nothing out and is left alone, and the
  checkpoint is skipped while it would return at once (`_compat.scope_is_idle`): the
  same behaviour, without anyio's Python code for them.
- `unwind` is `AsyncExitStack.__aexit__` over such exits and the cleanup scope (LIFO, an
  exception one raises passed to the next with its context fixed the same way,
  suppression).
- `run_with_teardowns` is `request_response`'s frame around them.

Plain Python for both twins, as `_compat.run_in_exit_stacks` and for the same reason: an
exception thrown into the awaiting frames takes its `__context__` from the exception the
frame closing a stack is handling, which a Cython coroutine frame does not provide.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

from anyio import CancelScope
from anyio.lowlevel import checkpoint_if_cancelled
from starlette.responses import Response

from .._compat import (
    FUNCTION_STACK_KEY,
    REQUEST_STACK_KEY,
    SHIELDS_ASYNC_TEARDOWN,
    concurrency_limit_generator,
    enter_cleanup_scope,
    response_not_awaited,
    scope_is_idle,
    stack_cleanup_scope,
    threadpool_generator,
)
from .._shared import DEP_SYNC_GENERATOR

# 3.12 deprecated athrow's (type, value, traceback) form; contextlib uses the one it has.
_ATHROW_VALUE_ONLY = sys.version_info >= (3, 12)


class Teardown:
    """One async generator entered as `asynccontextmanager` enters it, and its exit."""

    __slots__ = ("checkpoint", "cleanup", "gen", "outermost", "was_shielded")

    def __init__(
        self,
        gen: Any,
        cleanup: CancelScope | None,
        checkpoint: Callable[[], Awaitable[None]] = checkpoint_if_cancelled,
        outermost: bool = False,
    ) -> None:
        self.gen = gen
        self.cleanup = cleanup  # the request's cleanup scope (shielded exit), or None
        self.checkpoint = checkpoint  # `checkpoint_if_cancelled` after a shielded exit
        self.outermost = outermost  # the cleanup scope is its task's outermost scope
        self.was_shielded = False  # its shield when the generator was set up

    async def __aenter__(self) -> Any:
        cleanup = self.cleanup
        if cleanup is not None and not self.outermost:
            self.was_shielded = cleanup.shield
        try:
            return await anext(self.gen)
        except StopAsyncIteration:
            raise RuntimeError("generator didn't yield") from None

    async def __call__(self, typ: Any, exc: Any, tb: Any) -> bool:
        cleanup = self.cleanup
        if cleanup is None:
            return await self.close(typ, exc, tb)
        if self.outermost:
            # Its shield keeps nothing out (see the module docstring).
            suppressed = await self.close(typ, exc, tb)
            if (typ is None or suppressed) and not scope_is_idle(cleanup):
                await self.checkpoint()
            return suppressed
        cleanup.shield = True
        try:
            suppressed = await self.close(typ, exc, tb)
        finally:
            cleanup.shield = self.was_shielded
        if typ is None or suppressed:
            await self.checkpoint()
        return suppressed

    __aexit__ = __call__  # for `async with` in FastAPI's concurrency limit

    async def close(self, typ: Any, exc: Any, tb: Any) -> bool:
        """What `_AsyncGeneratorContextManager.__aexit__` does with the generator."""
        gen = self.gen
        if typ is None:
            try:
                await anext(gen)
            except StopAsyncIteration:
                return False
            try:
                raise RuntimeError("generator didn't stop")
            finally:
                await gen.aclose()
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
        try:
            raise RuntimeError("generator didn't stop after athrow()")
        finally:
            await gen.aclose()


def _fix_context(new: BaseException, old: BaseException | None, frame: Any) -> None:
    """Make the chain of `new` end in `old`, as nested `with` blocks would have: the
    link that reaches the exception the closing frame handles is re-pointed."""
    while True:
        context = new.__context__
        if context is None or context is old:
            return
        if context is frame:
            break
        new = context
    new.__context__ = old


async def unwind(exits: list[Teardown | CancelScope], exc: Any) -> bool:
    """Close `exits` (teardowns, and the cleanup scope where FastAPI entered it) last
    first, as `AsyncExitStack.__aexit__` closes its callbacks with `exc` (None: no
    exception) in flight; whether the exception was suppressed. Call it where the stack's
    `async with` would exit: inside the `except` block that caught `exc`, so that the
    handled exception is the same."""
    received = exc is not None
    frame = sys.exc_info()[1]
    suppressed = pending = False
    while exits:
        typ = None if exc is None else type(exc)
        tb = None if exc is None else exc.__traceback__
        entry = exits.pop()
        try:
            if isinstance(entry, Teardown):
                done = await entry(typ, exc, tb)
            else:  # the cleanup scope
                done = entry.__exit__(typ, exc, tb)
            if done:
                suppressed = True
                pending = False
                exc = None
        except BaseException as new:
            _fix_context(new, exc, frame)
            pending = True
            exc = new
    if pending:
        fixed = exc.__context__
        try:
            raise exc  # re-raising sets a new context: the fixed one is put back below
        except BaseException:
            exc.__context__ = fixed
            raise
    return received and suppressed


async def enter_generator(step: Any, kwargs: dict[str, Any], state: Any, on_stacks: bool) -> Any:
    """Set up the generator dependency `step` with `kwargs`, as FastAPI's `_solve_generator`
    would, and keep its exit: on FastAPI's stack for its scope in the request's scope
    (`on_stacks`), else in `state.function_exits` or `state.exits`."""
    if step.kind == DEP_SYNC_GENERATOR:
        assert threadpool_generator is not None  # else `_dependencies.plan` refuses the step
        teardown = Teardown(threadpool_generator(step.call(**kwargs)), None)
    else:
        gen = step.call(**kwargs)
        cleanup = None
        checkpoint = checkpoint_if_cancelled
        outermost = False
        if SHIELDS_ASYNC_TEARDOWN:
            if on_stacks:
                cleanup = stack_cleanup_scope(state.scope)
            else:
                cleanup = state.cleanup
                if cleanup is None:
                    # Entered before the first async generator, so that it encloses
                    # their scopes; closed where FastAPI's request stack closes it.
                    cleanup, state.checkpoint, state.outermost = enter_cleanup_scope()
                    state.cleanup = cleanup
                    if state.exits is None:
                        state.exits = [cleanup]
                    else:
                        state.exits.append(cleanup)
                checkpoint = state.checkpoint
                outermost = state.outermost
        teardown = Teardown(gen, cleanup, checkpoint, outermost)
    concurrency = step.concurrency
    if concurrency is not None:
        assert concurrency_limit_generator is not None  # else `_dependencies.plan` refuses the step
        limited = concurrency_limit_generator(teardown, concurrency.get_semaphore())
        teardown = Teardown(limited, None)
    value = await teardown.__aenter__()
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
    return value


async def run_with_teardowns(
    state: Any,
    solve: Callable[..., Awaitable[Response | None]],
    *args: Any,
) -> None:
    """`request_response`'s frame with the stacks' teardowns in `state.function_exits`
    and `state.exits`, filled while `solve(*args)` runs: the function-scope ones closed
    before the response is sent, the request-scope ones after it and its background
    tasks."""
    response: Response | None = None
    response_awaited = False
    try:
        try:
            response = await solve(*args)
        except BaseException as exc:
            exits = state.function_exits
            if exits is None or not await unwind(exits, exc):
                raise
        else:
            exits = state.function_exits
            if exits is not None:
                await unwind(exits, None)
        if response is None:
            # A function-scope generator swallowed the exception: FastAPI reads its
            # unbound `response` here.
            raise UnboundLocalError(
                "cannot access local variable 'response' where it is not associated with a value"
            )
        await response(state.scope, state.receive, state.track)
        response_awaited = True
    except BaseException as exc:
        exits = state.exits
        if exits is None or not await unwind(exits, exc):
            raise
    else:
        exits = state.exits
        if exits is not None:
            await unwind(exits, None)
    if not response_awaited:
        raise response_not_awaited()
