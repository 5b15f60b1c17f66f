"""bench/causes.py reads callgrind output: allocations per request from the call counts (a
block asked of the allocators counts once, however many allocator layers pass it on), and
the cache misses by the binary whose code missed. No timing and no valgrind here: the
callgrind output is written out below."""

from __future__ import annotations

from support import load_bench_script

calls = load_bench_script("callgrind_calls.py")

HEADER = "# callgrind format\nversion: 1\nevents: Ir\n"


def callgrind(*blocks: str) -> str:
    return HEADER + "\n".join(blocks) + "\n"


def test_a_block_passed_through_the_allocator_layers_counts_once() -> None:
    text = callgrind(
        "fn=(1) _PyObject_GC_New\n0 10\ncfn=(2) PyObject_Malloc\ncalls=3 0\n0 30",
        "fn=(2)\n0 5\ncfn=(3) _PyObject_Malloc\ncalls=3 0\n0 20",
        "fn=(3)\ncfn=(4) PyMem_RawMalloc\ncalls=1 0\n0 4",
        "fn=(4)\ncfn=(5) malloc\ncalls=1 0\n0 4",
    )
    assert calls.allocator_calls(text) == {"allocations": 3, "resizes": 0}


def test_a_call_through_a_stub_without_a_symbol_counts_for_its_callers() -> None:
    text = callgrind(
        "fn=(1) ms_encode\ncfn=(2) 0x0000000004936730\ncalls=2 0\n0 2",
        "fn=(3) other_module_function\ncfn=(2)\ncalls=1 0\n0 2",
        "fn=(2)\ncfn=(4) malloc\ncalls=3 0\n0 2",
    )
    assert calls.allocator_calls(text)["allocations"] == 3


def test_a_stub_called_by_the_allocators_is_not_counted() -> None:
    text = callgrind(
        "fn=(1) _PyMem_RawMalloc\ncfn=(2) 0x0000000004936730\ncalls=4 0\n0 2",
        "fn=(2)\ncfn=(3) malloc\ncalls=4 0\n0 2",
    )
    assert calls.allocator_calls(text)["allocations"] == 0


def test_resizes_are_counted_apart_and_frees_not_at_all() -> None:
    text = callgrind(
        "fn=(1) list_resize\ncfn=(2) PyMem_Realloc\ncalls=4 0\n0 1",
        "fn=(2)\ncfn=(3) _PyObject_Realloc\ncalls=4 0\n0 1",
        "fn=(4) dict_dealloc\ncfn=(5) PyObject_Free\ncalls=5 0\n0 1",
    )
    assert calls.allocator_calls(text) == {"allocations": 0, "resizes": 4}


def test_recursion_levels_count_as_one_function() -> None:
    text = callgrind(
        "fn=(1) subtype_dealloc'2\ncfn=(2) PyObject_Malloc\ncalls=2 0\n0 1",
        "fn=(3) subtype_dealloc\ncfn=(2)\ncalls=1 0\n0 1",
    )
    assert calls.call_edges(text) == {("subtype_dealloc", "PyObject_Malloc"): 3}


objects = load_bench_script("callgrind_objects.py")


def test_misses_are_summed_by_binary_where_they_were_spent_not_where_called_from() -> None:
    text = (
        "# callgrind format\nevents: Ir I1mr\n"
        "ob=(1) /usr/lib/libpython3.11.so.1.0\nfn=(1) PyObject_Call\n10 100 5\n"
        "cob=(2) /venv/site-packages/msgspec_fastapi/_fastpath.so\ncfn=(2) handle\n"
        "calls=1 0\n10 50 3\n"
        "ob=(2)\nfn=(2)\n20 50 3\n+1 7\n"
    )
    assert objects.self_cost_by_group(text, "I1mr") == {"interpreter": 5, "ours": 3}
    assert objects.self_cost_by_group(text, "Ir") == {"interpreter": 100, "ours": 57}
