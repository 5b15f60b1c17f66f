"""The application's entry (`entry`) put in place of FastAPI's default layers.

`install_entry(app, entry)` hooks how the application builds its middleware stack: when
FastAPI builds it (on the first request or lifespan), the hook builds FastAPI's own
layers without the user middleware, checks they are exactly the default ones it knows,
reads their settings off them, and returns the entry with the user middleware between
its two halves (one entry without user middleware). Where the stack is not FastAPI's
default, FastAPI's stack stays and the reason is logged (logger "msgspec_fastapi") and
left in `app.msgspec_fastapi_entry` (an `EntryStatus`). `take_call` gives the application
a subclass of its class whose `__call__` is the entry's `serve_app`.
"""

from __future__ import annotations

import logging
from types import FunctionType, ModuleType
from typing import Any
from weakref import WeakKeyDictionary, WeakValueDictionary

from fastapi import FastAPI
from fastapi.middleware.asyncexitstack import AsyncExitStackMiddleware
from starlette.applications import Starlette
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.routing import Router
from starlette.types import ASGIApp

from .. import _compat

logger = logging.getLogger("msgspec_fastapi")

STATUS_ATTR = "msgspec_fastapi_entry"

# FastAPI's own layers without user middleware, outermost first, each found by `.app`.
_OUTER_LAYERS: tuple[type, ...] = (ServerErrorMiddleware, _compat.ExceptionTelemetryMiddleware)
if _compat.AppBodyLimitMiddleware is not None:
    _OUTER_LAYERS += (_compat.AppBodyLimitMiddleware,)
_INNER_LAYERS: tuple[type, ...] = (ExceptionMiddleware, AsyncExitStackMiddleware)


class EntryStatus:
    """Whether the entry serves the application (`installed`), and if not, why (`reason`,
    "" when installed). Read at any time; before the stack is built it says so."""

    def __init__(self, app: FastAPI) -> None:
        self._app = app
        self._entry: ASGIApp | None = None
        self._refused = ""
        self._reported = ""

    @property
    def installed(self) -> bool:
        return not self.reason

    @property
    def reason(self) -> str:
        if self._refused:
            return self._refused
        stack = self._app.middleware_stack
        if stack is None:
            return "the middleware stack is not built yet"
        if self._entry is None:
            reason = "app.middleware_stack was set without FastAPI building it"
        elif not self._serves(stack):
            reason = "app.middleware_stack was replaced after the entry was built"
        else:
            return ""
        if reason != self._reported:
            # Noticed only now: reported once, when first read.
            self._reported = reason
            logger.warning("msgspec_fastapi entry not used: %s", reason)
        return reason

    def _serves(self, stack: Any) -> bool:
        # The entry, or a stack wrapping it (as OpenTelemetry's instrument_app wraps
        # whatever builds the stack), each layer's app found by `.app`.
        for _ in range(64):
            if stack is self._entry:
                return True
            stack = getattr(stack, "app", None)
            if stack is None:
                return False
        return False

    def refuse(self, reason: str) -> None:
        self._refused = reason
        logger.warning("msgspec_fastapi entry not used, FastAPI's stack kept: %s", reason)

    def built(self, entry: ASGIApp) -> None:
        self._entry = entry


class EntryBuilder:
    """The application's `build_middleware_stack`: the entry where FastAPI's stack is the
    default one, else FastAPI's stack."""

    def __init__(self, app: FastAPI, module: ModuleType, status: EntryStatus) -> None:
        self.app = app
        self.module = module
        self.status = status

    def __call__(self) -> ASGIApp:
        app = self.app
        saved = app.user_middleware
        app.user_middleware = []
        try:
            bare = FastAPI.build_middleware_stack(app)
        finally:
            app.user_middleware = saved
        layers = default_layers(bare, app)
        if isinstance(layers, str):
            self.status.refuse(layers)
            return FastAPI.build_middleware_stack(app)
        entry = build_entry(app, self.module, layers)
        self.status.built(entry)
        return entry


def default_layers(stack: Any, app: FastAPI) -> list[Any] | str:
    """FastAPI's layers in `stack` (`app`'s, built without user middleware), outermost
    first, or why they are not exactly the default ones."""
    layers: list[Any] = []
    node = stack
    while node is not app.router:
        if node is None or len(layers) > 16:
            return "the router is not at the bottom of FastAPI's middleware stack"
        layers.append(node)
        node = getattr(node, "app", None)
    kinds = [type(layer) for layer in layers]
    expected = list(_OUTER_LAYERS)
    if getattr(app, "max_body_size", None) is not None:
        expected += _compat.BODY_LIMIT_INNER_LAYERS
    expected += _INNER_LAYERS
    if kinds != expected:
        names = ", ".join(kind.__qualname__ for kind in kinds)
        return f"FastAPI's middleware stack has layers the entry does not know: {names}"
    if layers[-1].context_name != _compat.FILE_STACK_KEY:
        return "AsyncExitStackMiddleware keeps its stack under another scope key"
    return layers


def build_entry(app: FastAPI, module: ModuleType, layers: list[Any]) -> ASGIApp:
    """The entry for `app`, with its user middleware between the two halves."""
    server_error = layers[0]
    exceptions = layers[-2]
    handlers = _compat.exception_middleware_handlers(exceptions)
    async_handlers = {
        id(handler): _compat.is_async_callable(handler)
        for table in handlers
        for handler in table.values()
    }
    through_stack = type(app.router).__call__ is Router.__call__
    inner = module.Inner(app.router, exceptions, handlers, async_handlers, through_stack)
    chain: ASGIApp = inner
    for cls, args, kwargs in reversed(app.user_middleware):
        chain = cls(chain, *args, **kwargs)
    limit = getattr(app, "max_body_size", None)
    body_limit = None
    if _compat.AppBodyLimitMiddleware is not None:
        body_limit = _compat.AppBodyLimitMiddleware(chain, max_body_size=limit)
    handler = server_error.handler
    gate = _compat.telemetry_gate_parts(app)
    if gate is not None:
        # FastAPI's own telemetry test runs before the entry on every request.
        telemetry, args = gate
        _compat.replace_telemetry_test(telemetry, module.TelemetryGate(*args))
    return module.Outer(  # type: ignore[no-any-return]
        chain,
        inner if chain is inner else None,
        body_limit,
        limit is not None,
        server_error,
        handler is not None and _compat.is_async_callable(handler),
    )


def install_entry(app: FastAPI, module: ModuleType) -> None:
    """Have `app` build the entry (of `module`: `_routing.entry` or its pure twin) in place
    of FastAPI's default layers; `app.msgspec_fastapi_entry` tells whether it did."""
    take_call(app, module)
    current = vars(app).get("build_middleware_stack")
    if isinstance(current, EntryBuilder):
        # install_dispatch again: the same hook, with the twin of this call.
        current.module = module
        return
    status = EntryStatus(app)
    setattr(app, STATUS_ATTR, status)
    if app.middleware_stack is not None:
        status.refuse("the middleware stack was built before install_dispatch")
    elif current is not None:
        status.refuse("build_middleware_stack is replaced on the application object")
    elif type(app).build_middleware_stack is not FastAPI.build_middleware_stack:
        status.refuse(f"{type(app).__name__} overrides build_middleware_stack")
    else:
        app.build_middleware_stack = EntryBuilder(app, module, status)  # type: ignore[method-assign]


# The classes `take_call` made: by the application class each was made from, one per
# twin's `serve_app`; and each made class's own base. Weak both ways, so that a class
# made from another defined at run time (in a test, say) goes with its applications.
_CALL_CLASSES: WeakKeyDictionary[type, WeakValueDictionary[Any, type]] = WeakKeyDictionary()
_MADE_FROM: WeakKeyDictionary[type, type] = WeakKeyDictionary()


def take_call(app: FastAPI, module: ModuleType) -> None:
    """Give `app` a subclass of its class, of the same name, whose `__call__` is the entry
    module's `serve_app`: FastAPI's and Starlette's `__call__` in one coroutine. Where the
    class has a `__call__` of its own, or FastAPI's or Starlette's is not theirs, the
    class stays (the reason is logged)."""
    cls = type(app)
    base = _MADE_FROM.get(cls, cls)
    reason = call_kept_because(base, module)
    if reason:
        logger.info("msgspec_fastapi: %s keeps its __call__: %s", base.__qualname__, reason)
        return
    made = _CALL_CLASSES.setdefault(base, WeakValueDictionary())
    serve = module.serve_app
    try:
        subclass = made.get(serve)
        if subclass is None:
            namespace = {
                "__call__": serve,
                "__doc__": base.__doc__,
                "__module__": base.__module__,
                "__qualname__": base.__qualname__,
            }
            subclass = made[serve] = type(base)(base.__name__, (base,), namespace)
            _MADE_FROM[subclass] = base
        app.__class__ = subclass
    except TypeError as exc:  # a metaclass or `__init_subclass__` that refuses it
        logger.info("msgspec_fastapi: %s keeps its __call__: %s", base.__qualname__, exc)


def call_kept_because(cls: type, module: ModuleType) -> str:
    """Why an application of class `cls` keeps its `__call__` ("" where it can take the
    entry's): `serve_app` does only what FastAPI's and Starlette's own do."""
    fastapi_call, starlette_call = module.FASTAPI_CALL, module.STARLETTE_CALL
    if not (
        is_own(fastapi_call, "fastapi.applications", "FastAPI.__call__")
        and is_own(starlette_call, "starlette.applications", "Starlette.__call__")
    ):
        return "FastAPI's or Starlette's __call__ was replaced before msgspec_fastapi's import"
    if FastAPI.__call__ is not fastapi_call or Starlette.__call__ is not starlette_call:
        return "FastAPI's or Starlette's __call__ is replaced"
    if cls.__call__ is not fastapi_call:
        return "it defines __call__"
    # FastAPI's `super().__call__()` must reach Starlette's.
    mro = cls.__mro__
    for klass in mro[mro.index(FastAPI) + 1 :]:
        if "__call__" in vars(klass):
            if vars(klass)["__call__"] is not starlette_call:
                return f"{klass.__qualname__} defines __call__"
            break
    return ""


def is_own(function: Any, module: str, qualname: str) -> bool:
    """Whether `function` is the plain function `qualname` of `module`."""
    return (
        type(function) is FunctionType
        and function.__module__ == module
        and function.__qualname__ == qualname
    )
