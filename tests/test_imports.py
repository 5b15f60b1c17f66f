"""The package's modules import one another one way.

No import cycle, in the package (its subpackages included) or among the benchmark's
modules; and per-request code imports no registration code when it runs. The graph
counts every import the source writes, at module level or inside a function, except
those under `if TYPE_CHECKING:` (annotations only), and reads the compiled twin's `.pyx`
line by line (`from msgspec_fastapi.X`, `from .X`, `cimport`), so a cycle through a lazy
import fails too.
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
BENCH = Path(__file__).resolve().parent.parent / "bench"

Graph = dict[str, set[str]]

# When each module's code runs. Per-request modules may import only per-request and
# neutral ones at run time; registration modules may import anything. A module of the
# package missing here fails `test_every_module_has_a_lifecycle`.
PER_REQUEST = {
    "_fastpath",
    "_fastpath_py",
    "_shared",
    "responses",
    "_dependencies.executor_py",
    "_routing.dispatch_py",
    "_dependencies.standins",
    "_dependencies.teardown",
    "_dependencies.errors",
    "_dependencies.fastapi_params",
    "_endpoint.delegated",
    "_endpoint.telemetry",
    "_errors.handlers",
    "_errors.validation",
    "_routing.entry_py",
    "_errors.pydantic_style",
    "_errors.jsonscan_py",
}
# FastAPI's internals, read by both sides, and the subpackages (their docstrings say what
# each holds).
NEUTRAL = {"_compat", "_dependencies", "_endpoint", "_errors", "_openapi", "_params", "_routing"}
REGISTRATION = {
    "__init__",
    "router",
    "_select",
    "_dependencies.tree",
    "_dependencies.plan",
    "_endpoint.plan",
    "_endpoint.analysis",
    "_endpoint.pydantic_route",
    "_endpoint.shaping",
    "_openapi.schemas",
    "_openapi.install",
    "_openapi.body_docs",
    "_params.annotations",
    "_params.converters",
    "_params.models",
    "_routing.index",
    "_routing.install",
    "_routing.stack",
}

_PYX_IMPORT = re.compile(
    r"^\s*(?:from\s+(?P<source>\.+[\w.]*|msgspec_fastapi(?:\.[\w.]+)?)\s+c?import\s+(?P<names>.+)"
    r"|c?import\s+(?P<module>msgspec_fastapi(?:\.[\w.]+)?))"
)


def dotted(path: Path, root: Path) -> str:
    """A module's name below `root`: `_dependencies.plan`, `__init__` for the package."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def package_of(module: str, is_package: bool) -> str:
    """The package a module's relative imports start from ("" for the top)."""
    if is_package or module == "__init__":
        return "" if module == "__init__" else module
    return module.rpartition(".")[0]


def resolve(
    module: str,
    is_package: bool,
    source: str | None,
    level: int,
    names: list[str],
    known: set[str],
    top: str = PACKAGE,
) -> set[str]:
    """The modules an import statement in `module` loads (names below the package)."""
    if level == 0:
        if source is None or not (source == top or source.startswith(top + ".")):
            return set()
        base = source[len(top) + 1 :]
    else:
        parts = package_of(module, is_package).split(".") if package_of(module, is_package) else []
        if level - 1 > len(parts):
            return set()
        parts = parts[: len(parts) - (level - 1)]
        base = ".".join([*parts, source] if source else parts)
    found: set[str] = set()
    for name in names:
        candidate = f"{base}.{name}" if base else name
        if candidate in known:
            found.add(candidate)
    if not found:
        while base and base not in known:
            base = base.rpartition(".")[0]
        found.add(base or "__init__")
    return found


class _Imports(ast.NodeVisitor):
    """Every import a module runs, with those under `if TYPE_CHECKING:` left out."""

    def __init__(self, module: str, is_package: bool, known: set[str], top: str) -> None:
        self.module, self.is_package, self.known, self.top = module, is_package, known, top
        self.found: set[str] = set()

    def visit_If(self, node: ast.If) -> None:
        if "TYPE_CHECKING" in ast.unparse(node.test):
            for statement in node.orelse:
                self.visit(statement)
        else:
            self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        names = [alias.name for alias in node.names]
        self.found |= resolve(
            self.module, self.is_package, node.module, node.level, names, self.known, self.top
        )

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.found |= resolve(
                self.module, self.is_package, alias.name, 0, [], self.known, self.top
            )


def python_imports(
    text: str, module: str, known: set[str], is_package: bool = False, top: str = PACKAGE
) -> set[str]:
    visitor = _Imports(module, is_package, known, top)
    visitor.visit(ast.parse(text))
    return visitor.found


def pyx_imports(text: str, module: str, known: set[str]) -> set[str]:
    found: set[str] = set()
    for line in text.splitlines():
        matched = _PYX_IMPORT.match(line)
        if matched is None:
            continue
        if matched["module"]:
            found |= resolve(module, False, matched["module"], 0, [], known)
            continue
        source = matched["source"]
        level = len(source) - len(source.lstrip("."))
        names = [name.strip(" ()").split(" as ")[0] for name in matched["names"].split(",")]
        found |= resolve(module, False, source.lstrip(".") or None, level, names, known)
    return found


def package_files() -> list[Path]:
    return sorted([*SOURCE.rglob("*.py"), *SOURCE.rglob("*.pyx")])


def import_graph() -> Graph:
    """The package's modules and what each imports at run time."""
    files = package_files()
    known = {dotted(path, SOURCE) for path in files}
    graph: Graph = {}
    for path in files:
        module = dotted(path, SOURCE)
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".pyx":
            graph[module] = pyx_imports(text, module, known)
        else:
            graph[module] = python_imports(text, module, known, path.name == "__init__.py")
    for module, imported in graph.items():
        # Importing a submodule imports the packages above it first.
        imported.discard("__init__")
        imported -= {m for m in known if module.startswith(m + ".")}
        imported.discard(module)
    return graph


def bench_graph() -> Graph:
    """The benchmark's modules: bench/*.py and the package bench/micro/ (run with bench/ on
    the path), and bench/service/*.py (run with bench/service/ on the path)."""
    micro = sorted((BENCH / "micro").glob("*.py"))
    scripts = sorted(BENCH.glob("*.py"))
    known = {"micro"} | {f"micro.{p.stem}" for p in micro if p.stem != "__init__"}
    known |= {p.stem for p in scripts if p.stem != "micro"}  # the package shadows micro.py
    graph: Graph = {}
    for path in [*scripts, *micro]:
        if path.parent == BENCH:
            module = "micro (script)" if path.stem == "micro" else path.stem
        else:
            module = "micro" if path.stem == "__init__" else f"micro.{path.stem}"
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                # Only the micro package imports relatively, one level up at most.
                base = ("micro." + (node.module or "")).rstrip(".") if node.level else node.module
                hits = {f"{base}.{a.name}" for a in node.names} & known
                found |= hits or ({base} & known)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names} & known
        graph[module] = found - {module, "micro" if module.startswith("micro.") else ""}
    service = sorted((BENCH / "service").glob("*.py"))
    service_names = {p.stem for p in service}
    for path in service:
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module in service_names:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names} & service_names
        graph[f"service.{path.stem}"] = {f"service.{m}" for m in found - {path.stem}}
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


def longest_chain(graph: Graph) -> list[str]:
    """The longest import chain of an acyclic graph."""
    memo: dict[str, list[str]] = {}

    def chain(module: str) -> list[str]:
        if module not in memo:
            tails = [chain(m) for m in sorted(graph.get(module, ()))]
            memo[module] = [module, *max(tails, key=len, default=[])]
        return memo[module]

    return max((chain(m) for m in sorted(graph)), key=len, default=[])


def test_the_graph_reads_subpackages_both_twins_and_lazy_imports() -> None:
    graph = import_graph()
    assert {"_fastpath", "_fastpath_py", "_routing.index", "_select", "router"} <= set(graph)
    assert "_shared" in graph["_fastpath"] and "_shared" in graph["_fastpath_py"]
    assert "_dependencies.plan" in graph["_dependencies.tree"] or graph["_dependencies.plan"]
    known = {"_select", "_dependencies.plan", "_shared"}
    lazy = python_imports("def f():\n    from .. import _select\n", "_routing.install", known)
    assert lazy == {"_select"}
    sibling = python_imports("from .plan import DepPlan\n", "_dependencies.errors", known)
    assert sibling == {"_dependencies.plan"}


def test_an_import_under_type_checking_is_not_counted() -> None:
    text = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .plan import DepPlan\n"
    assert python_imports(text, "_dependencies.errors", {"_dependencies.plan"}) == set()


def test_a_cycle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]


def test_the_package_has_no_import_cycle() -> None:
    assert find_cycle(import_graph()) is None


def test_the_benchmark_has_no_import_cycle() -> None:
    if not BENCH.is_dir():
        pytest.skip("bench/ is not beside the tests (an installed package)")
    graph = bench_graph()
    assert "micro.driver" in graph and "common" in graph["micro.driver"]
    assert find_cycle(graph) is None


def test_every_module_has_a_lifecycle() -> None:
    modules = set(import_graph())
    unknown = modules - PER_REQUEST - NEUTRAL - REGISTRATION
    assert not unknown, f"say when these run (tests/test_imports.py): {sorted(unknown)}"
    assert not (PER_REQUEST | NEUTRAL | REGISTRATION) - modules


def test_per_request_code_imports_no_registration_code() -> None:
    graph = import_graph()
    crossing = {
        module: sorted(graph[module] & REGISTRATION)
        for module in PER_REQUEST
        if graph[module] & REGISTRATION
    }
    assert not crossing


def test_the_twins_import_neither_each_other_nor_the_twin_picker() -> None:
    graph = import_graph()
    for twin in ("_fastpath", "_fastpath_py"):
        assert not graph[twin] & {"_fastpath", "_fastpath_py", "_select", "router"}, twin


def test_the_longest_import_chain_is_short() -> None:
    # Fifteen modules long when the package was one folder; eleven in its subpackages.
    chain = longest_chain(import_graph())
    assert len(chain) <= 11, " -> ".join(chain)
