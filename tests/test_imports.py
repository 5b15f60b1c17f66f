"""The package's modules import one another one way: no import cycle.

Registration modules may import the request path; the request-path twins import nothing
that imports them back. The graph counts every import the source writes, at module level
or inside a function, and reads the compiled twin's `.pyx` line by line (`from
msgspec_fastapi.X`, `from .X`, `cimport`), so a cycle through a lazy import fails too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import msgspec_fastapi

pytestmark = pytest.mark.pure_smoke

# src/ in a checkout, site-packages for an installed wheel or sdist (both ship the .pyx).
SOURCE = Path(msgspec_fastapi.__file__).resolve().parent
PACKAGE = "msgspec_fastapi"

Graph = dict[str, set[str]]

_PYX_IMPORT = re.compile(
    r"^\s*(?:from\s+(?P<source>\.+\w*|msgspec_fastapi(?:\.\w+)?)\s+c?import\s+(?P<names>.+)"
    r"|c?import\s+(?P<module>msgspec_fastapi(?:\.\w+)?))"
)


def module_names() -> set[str]:
    return {path.stem for path in SOURCE.glob("*.py")} | {p.stem for p in SOURCE.glob("*.pyx")}


def resolve(source: str | None, level: int, names: list[str], known: set[str]) -> set[str]:
    """The package modules an import statement loads: `from . import _x` loads `_x`."""
    if level == 0:
        if source is None or not (source == PACKAGE or source.startswith(PACKAGE + ".")):
            return set()
        source = source[len(PACKAGE) + 1 :]
    elif level > 1:
        return set()
    if source:
        return {source.split(".")[0]}
    return {name for name in names if name in known} or {"__init__"}


def python_imports(text: str, known: set[str]) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom):
            names = [alias.name for alias in node.names]
            found |= resolve(node.module, node.level, names, known)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                found |= resolve(alias.name, 0, [], known)
    return found


def pyx_imports(text: str, known: set[str]) -> set[str]:
    found: set[str] = set()
    for line in text.splitlines():
        matched = _PYX_IMPORT.match(line)
        if matched is None:
            continue
        if matched["module"]:
            found |= resolve(matched["module"], 0, [], known)
            continue
        source = matched["source"]
        level = len(source) - len(source.lstrip("."))
        names = [name.strip(" ()").split(" as ")[0] for name in matched["names"].split(",")]
        found |= resolve(source.lstrip(".") or None, level, names, known)
    return found


def import_graph() -> Graph:
    known = module_names()
    graph: Graph = {}
    for path in sorted(SOURCE.glob("*.py")):
        graph[path.stem] = python_imports(path.read_text(encoding="utf-8"), known)
    for path in sorted(SOURCE.glob("*.pyx")):
        graph[path.stem] = pyx_imports(path.read_text(encoding="utf-8"), known)
    for imported in graph.values():
        imported.discard("__init__")  # importing any submodule imports the package first
    return graph


def find_cycle(graph: Graph) -> list[str] | None:
    """One import cycle as a list of modules (first == last), or None."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        for imported in sorted(graph.get(module, ())):
            cycle = visit(imported, [*path, module])
            if cycle is not None:
                return cycle
        done.add(module)
        return None

    for module in sorted(graph):
        cycle = visit(module, [])
        if cycle is not None:
            return cycle
    return None


def test_the_graph_reads_both_twins_and_lazy_imports() -> None:
    graph = import_graph()
    assert {"_fastpath", "_fastpath_py", "_routing", "_impl", "router"} <= set(graph)
    assert "_shared" in graph["_fastpath"] and "_shared" in graph["_fastpath_py"]
    lazy = python_imports("def f():\n    from . import _impl\n", {"_impl"})
    assert lazy == {"_impl"}


def test_a_cycle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]


def test_the_package_has_no_import_cycle() -> None:
    assert find_cycle(import_graph()) is None


def test_the_twins_import_neither_each_other_nor_the_twin_picker() -> None:
    graph = import_graph()
    for twin in ("_fastpath", "_fastpath_py"):
        assert not graph[twin] & {"_fastpath", "_fastpath_py", "_impl", "router"}, twin
