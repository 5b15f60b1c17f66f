"""`install_dispatch` routes every request exactly as FastAPI does.

Each hypothesis example is a route table (tests/route_tables.py) and requests aimed at
it. The table is built twice per twin: once as the oracle, where routing is FastAPI's own
(MsgspecRouter and its routes matching as APIRouter and APIRoute do: the package's
MsgspecRouter routes through its index even without install_dispatch), and once with
the package's classes and `install_dispatch(app)`. Every request goes to both; the ASGI
messages (status, all headers in order, body), any escaping exception, the log of which
endpoints and auth dependencies ran, and what routing left in the scope (endpoint, route,
inclusion, path parameters) must be identical. Some items are added after the install
call, between two batches of requests.

MSGSPEC_FASTAPI_DIFF_CASES=N runs the long mode (`make fuzz-routing`): at least N cases,
a case being one request compared on one twin.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from route_tables import (
    Api,
    Call,
    Case,
    Include,
    Param,
    PathT,
    RouterT,
    Table,
    add_late,
    build,
    cases,
    exchange,
    make_static_dir,
)

from msgspec_fastapi._impl import load_twin

Spoil = Callable[[FastAPI], Any]

PURE = load_twin("pure")
COMPILED = load_twin("compiled")
TWINS: list[ModuleType] = [t for t in (PURE, COMPILED) if t is not None]

# Long mode: at least this many cases (a case: one request compared on one twin).
LONG_CASES = int(os.environ.get("MSGSPEC_FASTAPI_DIFF_CASES") or 0)
LONG_CALLS = 20  # requests per batch at least, in long mode
NORMAL_EXAMPLES = 150
HARNESS_EXAMPLES = 40

# Requests compared, per test, for the report at the end of a run.
COMPARED: dict[str, int] = {}


@pytest.fixture(scope="session")
def static_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_static_dir(tmp_path_factory.mktemp("static"))


def test_compiled_twin_loaded() -> None:
    """Both twins take part; a missing compiled twin fails where it is expected."""
    if COMPILED is None:
        if os.environ.get("MSGSPEC_FASTAPI_EXPECT") == "compiled":
            pytest.fail("the compiled twin does not import")
        pytest.skip("the compiled twin does not import: the differential runs on pure only")
    assert [t.IMPLEMENTATION for t in TWINS] == ["pure", "compiled"]


class Divergence(AssertionError):
    pass


def _describe(case: Case, twin: str, phase: str, call: Call, expected: Any, got: Any) -> str:
    return "\n".join(
        [
            f"routing differs ({twin} twin, {phase} the late items): {call}",
            case.table.render(),
            f"requests before the late items: {list(case.before)}",
            "FastAPI:",
            expected.show(),
            "dispatch:",
            got.show(),
        ]
    )


def run_case(
    case: Case, static_dir: Path, dispatch: bool = True, spoil: Spoil | None = None
) -> int:
    """Compare every request of `case` on every twin; the number of requests compared.

    The oracle is FastAPI's routing; the other app routes through the index (`dispatch`)
    or, to check the harness, is a second oracle, possibly spoiled after it is built.
    """

    async def run() -> int:
        compared = 0
        for twin in TWINS:
            oracle = build(case.table, twin, static_dir)
            candidate = build(case.table, twin, static_dir, dispatch)
            if spoil is not None:
                spoil(candidate.app)
            for phase, batch in (("before", case.before), ("after", case.after)):
                if phase == "after":
                    add_late(oracle, case.table)
                    add_late(candidate, case.table)
                for call in batch:
                    expected = await exchange(oracle, call)
                    got = await exchange(candidate, call)
                    if got != expected:
                        message = _describe(case, twin.IMPLEMENTATION, phase, call, expected, got)
                        raise Divergence(message)
                    compared += 1
        return compared

    return asyncio.run(run())


def _count(name: str, n: int) -> None:
    COMPARED[name] = COMPARED.get(name, 0) + n


differential = settings(
    max_examples=NORMAL_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@settings(differential, max_examples=HARNESS_EXAMPLES)
@given(case=cases())
def test_harness_against_itself(case: Case, static_dir: Path) -> None:
    """Two plain builds of one table answer alike: nothing in the comparison is noise."""
    _count("harness", run_case(case, static_dir, dispatch=False))


@differential
@given(case=cases())
def test_dispatch_matches_fastapi(case: Case, static_dir: Path) -> None:
    _count("dispatch", run_case(case, static_dir))


@pytest.mark.fuzz_routing
@pytest.mark.skipif(not LONG_CASES, reason="long mode: set MSGSPEC_FASTAPI_DIFF_CASES")
@settings(
    # Every example compares at least LONG_CALLS requests on every twin.
    max_examples=max(1, -(-LONG_CASES // (LONG_CALLS * len(TWINS)))),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(case=cases(min_calls=LONG_CALLS, max_calls=30))
def test_dispatch_matches_fastapi_long(case: Case, static_dir: Path) -> None:
    _count("long", run_case(case, static_dir))


@pytest.mark.fuzz_routing
@pytest.mark.skipif(not LONG_CASES, reason="long mode: set MSGSPEC_FASTAPI_DIFF_CASES")
def test_long_mode_compared_enough() -> None:
    """Runs after the long test: it compared the cases asked for."""
    print(f"long mode: {COMPARED.get('long', 0)} cases compared")
    assert COMPARED.get("long", 0) >= LONG_CASES


# --- the harness sees misroutes ----------------------------------------------------------


def reversed_top_level(app: FastAPI) -> None:
    """A broken dispatcher: the app's own routes tried last to first."""
    app.router.routes.reverse()


def dropped_include_dependencies(app: FastAPI) -> None:
    """A broken dispatcher: include_router(dependencies=...) forgotten."""
    for route in app.router.routes:
        context = getattr(route, "include_context", None)
        if context is not None:
            context.dependencies = []


ITEMS = PathT(("items",))
ORDER = Table(
    (
        Api("e0", PathT(("items", "new")), ("GET",)),
        Api("e1", PathT(("items", Param("int", "p0"))), ("GET",)),
        Api("e2", PathT(("items", Param("str", "p1"))), ("GET", "POST")),
    )
)
AUTH = Table(
    (
        Include(RouterT("r0", True, PathT(), False, (Api("e0", ITEMS, ("GET",)),)), auth=True),
        Api("e1", PathT(("users",)), ("GET",)),
    )
)


@pytest.mark.parametrize(
    ("table", "call", "spoil"),
    [
        (ORDER, Call("GET", b"/items/new"), reversed_top_level),
        (ORDER, Call("GET", b"/items/7"), reversed_top_level),
        (AUTH, Call("GET", b"/items"), dropped_include_dependencies),
    ],
)
def test_a_misroute_is_caught(table: Table, call: Call, spoil: Spoil, static_dir: Path) -> None:
    case = Case(table, (call,), ())
    assert run_case(case, static_dir, dispatch=False) == len(TWINS)
    with pytest.raises(Divergence, match="routing differs"):
        run_case(case, static_dir, dispatch=False, spoil=spoil)


def test_report_counts() -> None:
    """Not a check: how many requests the differential compared, shown with -rA or -s."""
    print(f"requests compared per test (all twins): {COMPARED}")
