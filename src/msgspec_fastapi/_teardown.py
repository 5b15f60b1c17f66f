"""Async generator dependencies driven by hand, where FastAPI's exit stacks are unseen.

FastAPI enters an async generator dependency as `asynccontextmanager(call)(**values)` on
one of two `AsyncExitStack`s (0.165 wraps it in `_asynccontextmanager_with_shielded_exit`
under one cancel scope per request), and `request_response` closes the function stack
before the response and the request stack after it. Where nothing can reach those stacks
(no step is given the request, so no code holds the scope; every generator is a plain
async generator without a concurrency limit; `_depplan` decides), the executor sets the
generators up itself with `anext` and keeps their teardowns in two lists, and this module
closes them as FastAPI's stacks would:

- `Teardown` is one generator's exit: `_AsyncGeneratorContextManager.__aexit__` (resumed
  after success, the exception thrown in otherwise, the same errors for a generator that
  does not stop) and, on 0.165, the shielded exit around it (the request's cleanup scope
  shielded during the teardown, its shield restored, then a pending cancellation
  delivered when no exception leaves the teardown).
- `unwind` is `AsyncExitStack.__aexit__` over such exits (LIFO, an exception one raises
  passed to the next with its context fixed the same way, suppression), then the cleanup
  scope's own exit, which FastAPI enters at the bottom of the request stack.
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

from ._compat import response_not_awaited

# 3.12 deprecated athrow's (type, value, traceback) form; contextlib uses the one it has.
_ATHROW_VALUE_ONLY = sys.version_info >= (3, 12)


class Teardown:
    """The exit of one async generator dependency whose set-up yielded."""

    __slots__ = ("cleanup", "gen", "was_shielded")

    def __init__(self, gen: Any, cleanup: CancelScope | None, was_shielded: bool) -> None:
        self.gen = gen
        self.cleanup = cleanup  # the request's cleanup scope on 0.165, else None
        self.was_shielded = was_shielded  # its shield when the generator was set up

    async def __call__(self, typ: Any, exc: Any, tb: Any) -> bool:
        cleanup = self.cleanup
        if cleanup is None:
            return await self.close(typ, exc, tb)
        cleanup.shield = True
        try:
            suppressed = await self.close(typ, exc, tb)
        finally:
            cleanup.shield = self.was_shielded
        if typ is None or suppressed:
            await checkpoint_if_cancelled()
        return suppressed

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


async def unwind(exits: list[Teardown], cleanup: CancelScope | None, exc: Any) -> bool:
    """Close `exits` last first, then `cleanup` (if any), as `AsyncExitStack.__aexit__`
    closes its callbacks with `exc` (None: no exception) in flight; whether the exception
    was suppressed. Call it where the stack's `async with` would exit: inside the
    `except` block that caught `exc`, so that the handled exception is the same."""
    received = exc is not None
    frame = sys.exc_info()[1]
    suppressed = pending = False
    while exits or cleanup is not None:
        typ = None if exc is None else type(exc)
        tb = None if exc is None else exc.__traceback__
        try:
            if exits:
                done = await exits.pop()(typ, exc, tb)
            else:
                scope, cleanup = cleanup, None
                assert scope is not None
                done = scope.__exit__(typ, exc, tb)
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


async def run_with_teardowns(
    state: Any,
    solve: Callable[..., Awaitable[Response | None]],
    *args: Any,
) -> None:
    """`request_response`'s frame with the stacks' teardowns in `state.function_exits`
    and `state.exits` (and `state.cleanup`), filled while `solve(*args)` runs: the
    function-scope ones closed before the response is sent, the request-scope ones and
    the cleanup scope after it and its background tasks."""
    response: Response | None = None
    response_awaited = False
    try:
        try:
            response = await solve(*args)
        except BaseException as exc:
            exits = state.function_exits
            if exits is None or not await unwind(exits, None, exc):
                raise
        else:
            exits = state.function_exits
            if exits is not None:
                await unwind(exits, None, None)
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
        if (exits is None and state.cleanup is None) or not await unwind(
            exits or [], state.cleanup, exc
        ):
            raise
    else:
        exits = state.exits
        if exits is not None or state.cleanup is not None:
            await unwind(exits or [], state.cleanup, None)
    if not response_awaited:
        raise response_not_awaited()
