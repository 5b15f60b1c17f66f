"""Pick, once at import time, the compiled or the pure module of each pair the package has.

Every pair follows one naming rule: the compiled module has the plain name and its pure
twin the `_py` suffix. `_fastpath` is compiled from its own `.pyx` beside `_fastpath_py.py`;
a one-source module such as `_dependencies.executor` or `_routing.dispatch` is compiled by
Cython from `name_py.py` under the plain name, typed by `name.pxd`.

The compiled modules are used when they import and MSGSPEC_FASTAPI_PURE is not "1"; the
pure ones otherwise, and on interpreters other than CPython. The request path a route runs
on is `twin`; the other modules of a pair go with the twin's implementation
(`companion`), so that one process can run both twins side by side.
"""

from __future__ import annotations

import importlib
import os
import platform
from types import ModuleType
from typing import TYPE_CHECKING

PACKAGE = "msgspec_fastapi"
PURE_SUFFIX = "_py"
IMPLEMENTATIONS = ("compiled", "pure")

# The request path's twins, and what goes with each (same implementation).
TWIN = "_fastpath"
EXECUTOR = "_dependencies.executor"
DISPATCH = "_routing.dispatch"
ENTRY = "_routing.entry"
JSONSCAN = "_errors.jsonscan"
# Every pair: a build with the extensions has each compiled module.
PAIRS = (TWIN, EXECUTOR, DISPATCH, ENTRY, JSONSCAN)

_FORCE_PURE = os.environ.get("MSGSPEC_FASTAPI_PURE") == "1"


def module_name(pair: str, implementation: str) -> str:
    """The module of `pair` ("_fastpath", "_dependencies.executor") for an implementation."""
    if implementation not in IMPLEMENTATIONS:
        raise ValueError(f"unknown implementation {implementation!r}")
    name = f"{PACKAGE}.{pair}"
    return name if implementation == "compiled" else name + PURE_SUFFIX


def load(pair: str, implementation: str) -> ModuleType | None:
    """The module of `pair` for an implementation, or None where it does not import.

    Tests and benchmarks run both implementations in one process through this.
    """
    try:
        return importlib.import_module(module_name(pair, implementation))
    except ImportError:
        return None


def pick(pair: str) -> ModuleType:
    """The compiled module of `pair` unless pure is forced or it does not import."""
    if not _FORCE_PURE and platform.python_implementation() == "CPython":
        compiled = load(pair, "compiled")
        if compiled is not None:
            return compiled
    return importlib.import_module(module_name(pair, "pure"))


def companion(pair: str, twin: ModuleType) -> ModuleType:
    """The module of `pair` that goes with `twin`: of the same implementation."""
    return importlib.import_module(module_name(pair, twin.IMPLEMENTATION))


def is_compiled(module: ModuleType) -> bool:
    """Whether a module was loaded from a compiled extension rather than Python source."""
    return not (module.__file__ or "").endswith(".py")


def load_twin(implementation: str) -> ModuleType | None:
    """The request-path twin of an implementation, or None where it does not import."""
    return load(TWIN, implementation)


if TYPE_CHECKING:
    from . import _fastpath_py as twin
else:
    twin = pick(TWIN)

IMPLEMENTATION: str = twin.IMPLEMENTATION

__all__ = [
    "DISPATCH",
    "ENTRY",
    "EXECUTOR",
    "IMPLEMENTATION",
    "IMPLEMENTATIONS",
    "JSONSCAN",
    "PAIRS",
    "TWIN",
    "companion",
    "is_compiled",
    "load",
    "load_twin",
    "module_name",
    "pick",
    "twin",
]
