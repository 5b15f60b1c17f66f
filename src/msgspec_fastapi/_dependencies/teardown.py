"""`request_response`'s frame around generator dependencies' teardowns, and the teardowns
closed with an exception in flight as FastAPI's exit stacks close them.

FastAPI's `_solve_generator` enters a generator dependency on one of two `AsyncExitStack`s
as a context manager: an async generator as `asynccontextmanager(call)(**values)` (0.165
wraps it in `_asynccontextmanager_with_shielded_exit` under one cancel scope per request,
entered on the request stack before the first one), a sync generator as
`contextmanager_in_threadpool(contextmanager(call)(**values))`, and on 0.165 a dependency
with `max_concurrency` inside `_contextmanager_with_concurrency_limit`. `request_response`
closes the function stack before the response and the request stack after it.

The executor (`_dependencies.executor`) sets each generator up as such a context manager
(its `Teardown`) and, where nothing can reach FastAPI's stacks, keeps the exits in two
lists of the request's state; it also closes those lists while no exit raises
(`RequestState.close_exits`). This module holds the frames that await inside an `except`
or `finally` clause, and what they await there that reads the exception being handled:

- `run_with_teardowns` is `request_response`'s frame around the teardowns: the lists
  closed by the executor after success, by `unwind` inside its `except` clauses. The
  executor runs the same steps itself while nothing raises and no function-scope
  generator is set up (in `DependencyRoute.__call__`), and hands the rest of the
  frame to this module from the first exception on: to `run_with_teardowns` given the
  exception or the response (`raise_again`, `returned`), or to `close_after`, its outer
  `except` clause.
- `unwind` is `AsyncExitStack.__aexit__` over such exits and the cleanup scope (LIFO, an
  exception one raises passed to the next with its context fixed the same way,
  suppression), taking over from `close_exits` at the first exit that raises.
- `stop_refused` is contextlib's error for a generator that yields again, raised while
  the generator is closed in a `finally` clause.

Plain Python for both twins, as `_compat.run_in_exit_stacks` and for the same reason: an
exception thrown into the awaiting frames takes its `__context__` from the exception the
frame closing a stack is handling, which a Cython coroutine frame does not provide. The
executor's teardown code never awaits inside an `except` or `finally` clause.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

from anyio import CancelScope
from starlette.responses import Response

from .._compat import response_not_awaited


async def stop_refused(gen: Any, message: str) -> NoReturn:
    """contextlib's RuntimeError for a generator that yielded again where it should have
    stopped, raised while the generator is closed."""
    try:
        raise RuntimeError(message)
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


async def unwind(exits: list[Any], exc: Any, raised: BaseException | None = None) -> bool:
    """Close `exits` (teardowns, and the cleanup scope where FastAPI entered it) last
    first, as `AsyncExitStack.__aexit__` closes its callbacks with `exc` (None: no
    exception) in flight; whether the exception was suppressed. Call it where the stack's
    `async with` would exit: inside the `except` block that caught `exc`, so that the
    handled exception is the same. `raised`: what an exit closed before this call raised
    (`RequestState.close_exits`), taken up as the stack takes up an exit's exception."""
    received = exc is not None
    frame = sys.exc_info()[1]
    suppressed = pending = False
    if raised is not None:
        _fix_context(raised, exc, frame)
        pending = True
        exc = raised
    while exits:
        typ = None if exc is None else type(exc)
        tb = None if exc is None else exc.__traceback__
        entry = exits.pop()
        try:
            if isinstance(entry, CancelScope):  # the cleanup scope
                done = entry.__exit__(typ, exc, tb)
            else:
                done = await entry.__aexit__(typ, exc, tb)
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
                raised = await state.close_exits(exits)
                if raised is not None:
                    await unwind(exits, None, raised)
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
            raised = await state.close_exits(exits)
            if raised is not None:
                await unwind(exits, None, raised)
    if not response_awaited:
        raise response_not_awaited()


async def raise_again(exc: BaseException) -> NoReturn:
    """`exc` raised again, as the `solve` of `run_with_teardowns` for a request whose steps
    already raised it."""
    raise exc


async def returned(response: Response) -> Response:
    """`response`, as the `solve` of `run_with_teardowns` for a request whose steps already
    made it."""
    return response


async def close_after(state: Any, exc: BaseException) -> NoReturn:
    """`run_with_teardowns`' outer `except` clause for `exc`, raised by the steps (with no
    function-scope exits to close first) or while the response was sent: the request
    scope's exits closed with `exc` handled here, then `exc` raised on, or FastAPI's error
    for a response never sent where an exit swallowed it."""
    try:
        raise exc
    except BaseException:
        exits = state.exits
        if exits is None or not await unwind(exits, exc):
            raise
    raise response_not_awaited()
