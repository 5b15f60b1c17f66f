"""Pick the request-path twin once, at import time.

The compiled module when it imports and MSGSPEC_FASTAPI_PURE is not "1"; the pure twin
otherwise, and on interpreters other than CPython. Router code reaches the request path
only through `twin`, the chosen module.
"""

from __future__ import annotations

import importlib
import os
import platform
from types import ModuleType
from typing import TYPE_CHECKING

# The twins by the name `IMPLEMENTATION` gives them.
TWIN_MODULES = {"compiled": "msgspec_fastapi._fastpath", "pure": "msgspec_fastapi._fastpath_py"}

_PURE = os.environ.get("MSGSPEC_FASTAPI_PURE") == "1"

if TYPE_CHECKING or _PURE or platform.python_implementation() != "CPython":
    from . import _fastpath_py as twin
else:
    try:
        from . import _fastpath as twin
    except ImportError:
        from . import _fastpath_py as twin

IMPLEMENTATION: str = twin.IMPLEMENTATION


# The executor of dependency plans each twin runs: one source, `_depexec.py`, run as it
# is by the pure twin and compiled by Cython as `_depexec_c` for the compiled one (where
# the extension was not built, `_depexec_c` is that same source run as Python).
EXECUTOR_MODULES = {"compiled": "msgspec_fastapi._depexec_c", "pure": "msgspec_fastapi._depexec"}


def executor_for(twin: ModuleType) -> ModuleType:
    """The dependency-plan executor that goes with `twin`."""
    return importlib.import_module(EXECUTOR_MODULES[twin.IMPLEMENTATION])


def executor_compiled(module: ModuleType) -> bool:
    """Whether an executor module is the Cython-compiled one."""
    return not (module.__file__ or "").endswith(".py")


# The application entry each twin runs (`_entry_install`): one source, `_entry_py.py`, run
# as it is by the pure twin and compiled by Cython as `_entry` for the compiled one (which
# falls back to the source where the extension was not built).
ENTRY_MODULES = {"compiled": "msgspec_fastapi._entry", "pure": "msgspec_fastapi._entry_py"}


def entry_for(twin: ModuleType) -> ModuleType:
    """The application entry that goes with `twin`."""
    try:
        return importlib.import_module(ENTRY_MODULES[twin.IMPLEMENTATION])
    except ImportError:
        return importlib.import_module(ENTRY_MODULES["pure"])


def load_twin(name: str) -> ModuleType | None:
    """The twin called `name` ("compiled" or "pure"), or None where it does not import.

    For tests and benchmarks that run both twins in one process.
    """
    try:
        return importlib.import_module(TWIN_MODULES[name])
    except ImportError:
        return None


__all__ = [
    "ENTRY_MODULES",
    "EXECUTOR_MODULES",
    "IMPLEMENTATION",
    "TWIN_MODULES",
    "entry_for",
    "executor_compiled",
    "executor_for",
    "load_twin",
    "twin",
]
