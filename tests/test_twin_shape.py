"""The two request-path twins define the same things, in the same order, under the same names.

The pure twin is the readable reference; the compiled twin mirrors it, so that a diff of the
two files shows only types and Cython idioms. The shape of a file is its ordered list of
module constants, functions, classes and methods. A helper that exists only in the compiled
twin (for a measured gain) stands under a comment starting with `# compiled only:`, and is
left out of the comparison.

Routing (`_routing/dispatch_py.py`) is written once for both twins, which re-export it:
it stands in neither twin's shape.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import msgspec_fastapi

# The package's own folder: src/ in a checkout, site-packages for an installed wheel or
# sdist (both ship the .pyx beside the pure twin).
SOURCE = Path(msgspec_fastapi.__file__).resolve().parent
PURE = SOURCE / "_fastpath_py.py"
COMPILED = SOURCE / "_fastpath.pyx"
COMPILED_ONLY = "# compiled only:"

Shape = list[str]

_DEFINITION = re.compile(r"(?:async\s+def|def|cpdef|cdef)\s")
_CLASS = re.compile(r"(?:cdef\s+)?class\s+(\w+)")
_CONSTANT = re.compile(r"(?:cdef\s+[\w\s\[\]]+?\s)?(\w+)\s*=[^=]")


def pure_shape(text: str) -> Shape:
    """The shape of a Python module, read with `ast`."""
    shape: Shape = []
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign):
            shape.extend(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            shape.append(node.target.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            shape.append(f"{node.name}()")
        elif isinstance(node, ast.ClassDef):
            shape.append(f"class {node.name}")
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    shape.append(f"{node.name}.{item.name}()")
    return shape


def _function_name(line: str) -> str | None:
    """The name a `def`, `cdef` or `cpdef` line defines, if it defines a function."""
    if not _DEFINITION.match(line):
        return None
    head = line.split("(", 1)[0]
    if "(" not in line or "=" in head:
        return None
    return head.split()[-1]


def compiled_shape(text: str) -> Shape:
    """The shape of a Cython module, read line by line (no Cython parser is needed)."""
    shape: Shape = []
    in_string = False
    skipping_class = False
    current_class: str | None = None
    previous = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.count('"""') % 2 == 1:
            in_string = not in_string
            continue
        if in_string or not line.strip():
            continue
        marked = previous.strip().startswith(COMPILED_ONLY)
        previous = line
        indent = len(line) - len(line.lstrip())
        stripped = line.strip()
        if indent == 0:
            current_class, skipping_class = None, False
            found_class = _CLASS.match(stripped)
            if found_class:
                current_class, skipping_class = found_class.group(1), marked
                if not marked:
                    shape.append(f"class {current_class}")
                continue
            name = _function_name(stripped)
            if name is not None:
                if not marked:
                    shape.append(f"{name}()")
                continue
            constant = _CONSTANT.match(stripped)
            if constant and not stripped.startswith(("from ", "import ", "#")) and not marked:
                shape.append(constant.group(1))
        elif indent == 4 and current_class is not None and not skipping_class:
            name = _function_name(stripped)
            if name is not None and not marked:
                shape.append(f"{current_class}.{name}()")
    return shape


def first_difference(pure: Shape, compiled: Shape) -> str | None:
    """Where two shapes part, in words; None when they are the same."""
    for index, (ours, theirs) in enumerate(zip(pure, compiled, strict=False)):
        if ours != theirs:
            return f"definition {index}: pure has {ours!r}, compiled has {theirs!r}"
    if len(pure) != len(compiled):
        longer, name = (pure, "pure") if len(pure) > len(compiled) else (compiled, "compiled")
        return f"only the {name} twin has {longer[min(len(pure), len(compiled)) :]!r}"
    return None


@pytest.fixture(scope="module")
def pure_text() -> str:
    return PURE.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def compiled_text() -> str:
    return COMPILED.read_text(encoding="utf-8")


def test_twins_define_the_same_names_in_the_same_order(pure_text: str, compiled_text: str) -> None:
    difference = first_difference(pure_shape(pure_text), compiled_shape(compiled_text))

    assert difference is None, difference


def test_shape_lists_constants_functions_classes_and_methods(compiled_text: str) -> None:
    shape = compiled_shape(compiled_text)

    assert "PARAM_HEADER" in shape
    assert "receive_body()" in shape
    assert "class RouteRuntime" in shape
    assert "RouteRuntime.__call__()" in shape
    assert "SendTracker.__call__()" in shape


def test_shape_check_catches_a_renamed_helper(pure_text: str, compiled_text: str) -> None:
    renamed = compiled_text.replace("cdef object pick_header(", "cdef object pick_headers(")

    difference = first_difference(pure_shape(pure_text), compiled_shape(renamed))

    assert difference is not None
    assert "pick_headers()" in difference


def test_shape_check_catches_a_reordered_helper(pure_text: str, compiled_text: str) -> None:
    start = compiled_text.index("cdef dict parse_cookies(")
    end = compiled_text.index("cdef class SendTracker")
    block = compiled_text[start:end]
    moved = compiled_text.replace(block, "")
    moved = moved.replace("cdef list parse_query(", block + "cdef list parse_query(")

    difference = first_difference(pure_shape(pure_text), compiled_shape(moved))

    assert difference is not None
    assert "parse_cookies()" in difference


def test_shape_check_catches_a_renamed_constant(pure_text: str, compiled_text: str) -> None:
    renamed = compiled_text.replace("cdef int PARAM_PATH =", "cdef int at_path =")

    assert first_difference(pure_shape(pure_text), compiled_shape(renamed)) is not None


def test_shape_check_catches_a_method_the_pure_twin_lacks(pure_text: str) -> None:
    method = "    def encode(self, result: Any, msgpack: bool = False) -> bytes:"
    assert method in pure_text
    extra = pure_text.replace(
        method, "    def encode_twice(self) -> bytes:\n        return b''\n\n" + method
    )
    compiled = compiled_shape(COMPILED.read_text(encoding="utf-8"))

    difference = first_difference(pure_shape(extra), compiled)

    assert difference is not None
    assert "encode_twice" in difference


def test_a_helper_marked_compiled_only_is_left_out(pure_text: str, compiled_text: str) -> None:
    helper = (
        "# compiled only: a C loop the pure twin writes inline, for a measured gain\n"
        "cdef inline bint is_ascii_digit(Py_UCS4 ch):\n"
        "    return u'0' <= ch <= u'9'\n\n\n"
    )
    with_helper = compiled_text.replace("cdef object pick(", helper + "cdef object pick(")

    assert first_difference(pure_shape(pure_text), compiled_shape(with_helper)) is None


def test_an_unmarked_compiled_helper_is_drift(pure_text: str, compiled_text: str) -> None:
    helper = "cdef inline bint is_ascii_digit(Py_UCS4 ch):\n    return u'0' <= ch <= u'9'\n\n\n"
    with_helper = compiled_text.replace("cdef object pick(", helper + "cdef object pick(")

    assert first_difference(pure_shape(pure_text), compiled_shape(with_helper)) is not None


def test_routing_is_defined_in_neither_twin(pure_text: str, compiled_text: str) -> None:
    routing = {"class RouteMatcher", "route_matches()", "class AppDispatcher", "select()"}

    assert routing & set(pure_shape(pure_text)) == set()
    assert routing & set(compiled_shape(compiled_text)) == set()
