"""The stand-ins of dependencies that take msgspec values, as they run per request.

Registration (`tree`) makes one for each dependency of a route that takes a msgspec body
or model, or depends on one that does; FastAPI calls it in the dependency's place, and it
fills in what the request path decoded before calling the dependency.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from functools import partial
from typing import Any

from .._shared import PARTS_KEY, SCOPE_KEY, VALID_PARTS_KEY, RequestValidationError

# What a stand-in returns instead of calling its dependency when the request path could
# not decode what the dependency takes, and what a stand-in given it passes on: FastAPI
# does not call a dependency whose parameters are invalid, and goes on solving the others.
UNDECODED: Any = type("Undecoded", (), {"__repr__": lambda self: "UNDECODED"})()
# Set on the scope when a stand-in returned UNDECODED: the endpoint wrapper then raises
# the request path's 422 (with FastAPI's own errors, when FastAPI raises first).
UNDECODED_KEY = "msgspec_fastapi.undecoded"


@dataclasses.dataclass(frozen=True, slots=True)
class Takes:
    """What a stand-in fills in before calling its dependency."""

    request_name: str  # the Request parameter the stand-in is given
    own_request: bool  # the dependency's own (kept), or added for the stand-in (dropped)
    body: tuple[tuple[str, str | None], ...]  # (parameter, key of an embedded body or None)
    models: tuple[tuple[str, str], ...]  # (parameter, key among the route's models)


def _undecoded_generator() -> Iterator[Any]:
    yield UNDECODED


async def _undecoded_async_generator() -> AsyncIterator[Any]:
    yield UNDECODED


class StandInBase:
    """A dependency as FastAPI sees it on a msgspec route.

    It hashes and compares equal to the callable it stands for, so that
    `dependency_overrides[original]` still finds it, and unwraps to it (`__wrapped__`),
    so that FastAPI still tells a generator or a class for what it is. Its signature
    has a Request in place of the msgspec parameters, which it fills in from what the
    request path decoded.
    """

    def __init__(
        self, original: Callable[..., Any], signature: inspect.Signature, takes: Takes | None
    ) -> None:
        self.__wrapped__ = original
        self.__signature__ = signature
        self._takes = takes
        for attribute in ("__module__", "__name__", "__qualname__", "__doc__"):
            if hasattr(original, attribute):
                setattr(self, attribute, getattr(original, attribute))
        if inspect.isasyncgenfunction(_target(original)):
            self._instead: Callable[[], Any] = _undecoded_async_generator
        elif inspect.isgeneratorfunction(_target(original)):
            self._instead = _undecoded_generator
        else:
            self._instead = lambda: UNDECODED

    @property
    def takes(self) -> Takes | None:
        """What it fills in (None: nothing, it only leads to dependencies that do)."""
        return self._takes

    def _ready(self, values: dict[str, Any]) -> bool:
        """Fill in `values`; False when the dependency must not be called."""
        if any(value is UNDECODED for value in values.values()):
            return False
        takes = self._takes
        if takes is None:
            return True
        if takes.own_request:
            scope = values[takes.request_name].scope
        else:
            scope = values.pop(takes.request_name).scope
        _runtime, body, raw, models, _errors = scope[SCOPE_KEY]
        if takes.body:
            if type(body) is RequestValidationError:
                # Its parts may be valid while others are not: FastAPI calls it then.
                parts = valid_parts(scope, body, raw)
                picked = {n: parts[k] for n, k in takes.body if k is not None and k in parts}
                if len(picked) < len(takes.body):
                    scope[UNDECODED_KEY] = True
                    return False
                values.update(picked)
            else:
                for name, key in takes.body:
                    values[name] = body if key is None else body[key]
        for name, key in takes.models:
            if key not in models:  # gathered with errors
                scope[UNDECODED_KEY] = True
                return False
            values[name] = models[key]
        return True

    def __hash__(self) -> int:
        return hash(self.__wrapped__)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StandInBase):
            other = other.__wrapped__
        # `==`: each access to a bound method makes a new one, equal to the others.
        return bool(other == self.__wrapped__)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__wrapped__!r})"


class StandIn(StandInBase):
    """The stand-in of a function, generator, class or callable object."""

    def __call__(self, **values: Any) -> Any:
        return self.__wrapped__(**values) if self._ready(values) else self._instead()


class AsyncStandIn(StandInBase):
    """The stand-in of a coroutine function: async itself, since FastAPI looks for an
    async `__call__` where the callable it unwraps to is no function (a partial, say)."""

    async def __call__(self, **values: Any) -> Any:
        return await self.__wrapped__(**values) if self._ready(values) else UNDECODED


def valid_parts(scope: Any, body: RequestValidationError, raw: bytes | None) -> dict[str, Any]:
    """The valid parts of an embedded body that failed (by parameter name), decoded once
    per request; none for a body that is not embedded."""
    found: dict[str, Any] | None = scope.get(VALID_PARTS_KEY)
    if found is None:
        parts = scope.get(PARTS_KEY)
        found = scope[VALID_PARTS_KEY] = {} if parts is None else parts.valid(body, raw)
    return found


def _target(call: Any) -> Any:
    """What a call of `call` runs: through partials, and a callable object's `__call__`."""
    while isinstance(call, partial):
        call = call.func
    if inspect.isroutine(call) or isinstance(call, type):
        return call
    return type(call).__call__


def stand_in_for(
    original: Callable[..., Any], signature: inspect.Signature, takes: Takes | None
) -> StandInBase:
    if inspect.iscoroutinefunction(_target(original)):
        return AsyncStandIn(original, signature, takes)
    return StandIn(original, signature, takes)


def unwrap_stand_in(call: Any) -> tuple[Any, Takes | None] | None:
    """(the dependency, what its stand-in fills in) when `call` is a stand-in, else None."""
    if isinstance(call, StandInBase):
        return call.__wrapped__, call.takes
    return None
