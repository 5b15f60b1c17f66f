"""The compiled modules declare that they run without the GIL (docs/development.md,
"Threads and free-threaded CPython", has the audit that allows it). On a free-threaded
interpreter, importing them leaves the GIL disabled; a module that had not declared it
would re-enable the GIL for the whole process, with a RuntimeWarning naming it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from msgspec_fastapi import _select

DECLARATION = "# cython: freethreading_compatible=True"
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def _source(pair: str) -> Path:
    """The file Cython compiles `pair` from: `_fastpath.pyx`, or a one-source `name_py.py`."""
    spec = importlib.util.find_spec(_select.PACKAGE)
    assert spec is not None and spec.submodule_search_locations
    package = Path(next(iter(spec.submodule_search_locations)))
    if pair == _select.TWIN:
        return package / f"{pair}.pyx"
    return package.joinpath(*pair.split(".")).with_name(
        pair.rsplit(".", 1)[-1] + _select.PURE_SUFFIX + ".py"
    )


def _header(path: Path) -> list[str]:
    """The directive comments at the top of `path`, before its docstring."""
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line)
    return lines


@pytest.mark.parametrize("pair", _select.PAIRS)
def test_every_compiled_module_declares_it_runs_without_the_gil(pair: str) -> None:
    assert DECLARATION in _header(_source(pair))


PROBE = """
import importlib, sys, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for pair in sys.argv[1:]:
        module = importlib.import_module("msgspec_fastapi." + pair)
        print("LOADED", pair, module.__file__)
for warning in caught:
    print("WARNING", str(warning.message).replace("\\n", " "))
print("GIL", sys._is_gil_enabled())
"""


@pytest.mark.skipif(not FREE_THREADED, reason="needs a free-threaded interpreter (3.14t)")
def test_importing_the_compiled_modules_leaves_the_gil_disabled() -> None:
    if _select.IMPLEMENTATION != "compiled":
        pytest.skip("the compiled modules are not built here")
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *_select.PAIRS],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = result.stdout.splitlines()
    loaded = [line.split()[1] for line in lines if line.startswith("LOADED ")]
    assert loaded == list(_select.PAIRS)
    ours = [line for line in lines if line.startswith("WARNING ") and "msgspec_fastapi" in line]
    assert ours == []
    others = [line for line in lines if line.startswith("WARNING ") and "GIL" in line]
    if not others:  # no dependency re-enabled it either
        assert "GIL False" in lines
