"""Calls into the memory allocators, read from a callgrind output file.

callgrind records, for each pair of caller and callee, how many times the one called the
other (`calls=` lines). An allocation here is one request for a new block made to an
allocator by code outside the allocators: a call to any malloc- or calloc-like entry point
(CPython's PyObject_*, PyMem_* and PyMem_Raw* families, pymalloc's own functions behind
them, and libc's malloc and calloc) whose caller is not itself one of those functions. So a
PyObject_Malloc that pymalloc serves from a pool counts once, and so does one that pymalloc
passes on to libc's malloc (the inner calls have an allocator as caller). An object taken
from a type's free list calls no allocator and is not counted. Resizes (realloc-like calls)
are counted the same way, apart. Only the standard library: tests import it by its path.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

MALLOC_LIKE = frozenset(
    {
        "PyObject_Malloc",
        "PyObject_Calloc",
        "PyMem_Malloc",
        "PyMem_Calloc",
        "PyMem_RawMalloc",
        "PyMem_RawCalloc",
        "_PyObject_Malloc",
        "_PyObject_Calloc",
        "_PyMem_RawMalloc",
        "_PyMem_RawCalloc",
        "malloc",
        "calloc",
    }
)
REALLOC_LIKE = frozenset(
    {"PyObject_Realloc", "PyMem_Realloc", "PyMem_RawRealloc", "_PyObject_Realloc"}
    | {"_PyMem_RawRealloc", "realloc"}
)
FREE_LIKE = frozenset(
    {"PyObject_Free", "PyMem_Free", "PyMem_RawFree", "_PyObject_Free", "_PyMem_RawFree", "free"}
)
ALLOCATORS = MALLOC_LIKE | REALLOC_LIKE | FREE_LIKE

# `fn=(12) name` defines a compressed name, `fn=(12)` reuses it; fn and cfn share the ids.
_COMPRESSED = re.compile(r"\((\d+)\)(?: (.*))?$")
# callgrind names recursion levels `f'2`, `f'3`, ... (--separate-recs).
_RECURSION = re.compile(r"'\d+$")
# Code without a symbol, such as a PLT stub that jumps to libc's malloc: `0x00000000049367f0`.
_NO_SYMBOL = re.compile(r"0x[0-9a-f]+$")


def call_edges(text: str) -> Counter[tuple[str, str]]:
    """How many times each function called each other one, by name (recursion levels
    merged), from the text of a callgrind output file."""
    names: dict[str, str] = {}

    def name(value: str) -> str:
        found = _COMPRESSED.match(value)
        if found is None:
            return _RECURSION.sub("", value)
        key, given = found.groups()
        if given is not None:
            names[key] = _RECURSION.sub("", given)
        return names[key]

    edges: Counter[tuple[str, str]] = Counter()
    caller = callee = ""
    for line in text.splitlines():
        if line.startswith("fn="):
            caller = name(line[3:])
        elif line.startswith("cfn="):
            callee = name(line[4:])
        elif line.startswith("calls="):
            edges[caller, callee] += int(line[6:].split()[0])
    return edges


def through_stubs(edges: Counter[tuple[str, str]]) -> Counter[tuple[str, str]]:
    """The edges with each call to code without a symbol that only calls one function
    (a PLT stub) taken as a call to that function, by the stub's own callers."""
    targets: dict[str, set[str]] = {}
    for (caller, callee), _ in edges.items():
        if _NO_SYMBOL.match(caller):
            targets.setdefault(caller, set()).add(callee)
    stubs = {stub: next(iter(found)) for stub, found in targets.items() if len(found) == 1}
    merged: Counter[tuple[str, str]] = Counter()
    for (caller, callee), calls in edges.items():
        if caller in stubs:
            continue
        merged[caller, stubs.get(callee, callee)] += calls
    return merged


def allocator_calls(text: str) -> dict[str, int]:
    """`allocations` and `resizes` of a callgrind output file's text (see the module's
    docstring)."""
    found = {"allocations": 0, "resizes": 0}
    for (caller, callee), calls in through_stubs(call_edges(text)).items():
        if caller in ALLOCATORS:
            continue
        if callee in MALLOC_LIKE:
            found["allocations"] += calls
        elif callee in REALLOC_LIKE:
            found["resizes"] += calls
    return found


def read_allocator_calls(path: Path) -> dict[str, int]:
    return allocator_calls(path.read_text())
