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
from collections import Counter
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
    Late,
    Outcome,
    Param,
    PathT,
    Plain,
    Reinclude,
    RouterT,
    Sub,
    Table,
    add_late,
    build,
    cases,
    exchange,
    make_static_dir,
)

from msgspec_fastapi._compat import HAS_NATIVE_BODY_LIMIT
from msgspec_fastapi._select import load_twin

Spoil = Callable[[FastAPI], Any]

PURE = load_twin("pure")
COMPILED = load_twin("compiled")
TWINS: list[ModuleType] = [t for t in (PURE, COMPILED) if t is not None]

# Long mode: at least this many cases (a case: one request compared on one twin).
LONG_CASES = int(os.environ.get("MSGSPEC_FASTAPI_DIFF_CASES") or 0)
LONG_CALLS = 20  # requests per batch at least, in long mode
NORMAL_EXAMPLES = 150
HARNESS_EXAMPLES = 40

# Requests compared per test, and what the oracle answered in the normal run, for the
# checks at the end that the differential was not vacuous.
COMPARED: dict[str, int] = {}
ANSWERS: list[str] = []
# What the normal run's requests reach between them, each hundreds of times in a run
# (rarer outcomes, such as 307 and 413, are pinned by the targeted tables below).
REACHED = {"200", "401", "404", "405", "websocket.accept", "websocket.close"}


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


def _answer(outcome: Outcome) -> str:
    """The oracle's answer in a word: the HTTP status, or the first websocket message."""
    if outcome.error is not None or not outcome.messages:
        return "none"
    first = dict(outcome.messages[0])
    if first["type"] == ["str", "http.response.start"]:
        return str(first["status"][1])
    return str(first["type"][1])


def run_case(
    case: Case,
    static_dir: Path,
    dispatch: bool = True,
    spoil: Spoil | None = None,
    answers: list[str] | None = None,
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
                    if answers is not None:
                        answers.append(_answer(expected))
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
    _count("dispatch", run_case(case, static_dir, answers=ANSWERS))


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


# --- targeted tables: corners the generators reach only now and then ---------------------

P = PathT
INT = Param("int", "p0")
LIMITED = (
    Api("e0", P(("items",)), ("POST",)),
    Api("e1", P(("items", INT)), ("POST",), auth=True),
    Plain("s0", P(("plain",)), ("POST",)),
)
BIG = b'{"a": "0123456789"}'
LATE_MOUNT = Table(
    (Include(RouterT("r0", True, P(("r",)), False, (Api("e0", P(("a",)), ("GET",)),))),),
    late=(Late("r0", Sub("m0", P(("m",)), (P((), True),))),),
)
TARGETED: dict[str, tuple[Table, tuple[Call, ...], tuple[Call, ...], list[int]]] = {
    # One router included twice: with include-level auth at /admin, without at /public.
    "reincluded router, auth on one inclusion": (
        Table(
            (
                Include(
                    RouterT("r0", True, P(), False, (Api("e0", P(("items",)), ("GET",)),)),
                    P(("admin",)),
                    auth=True,
                ),
                Reinclude("r0", P(("public",))),
            )
        ),
        (
            Call("GET", b"/admin/items"),
            Call("GET", b"/public/items"),
            Call("GET", b"/admin/items", auth=True),
        ),
        (),
        [401, 200, 200],
    ),
    # A route at the router's prefix itself, reached with the path equal to root_path.
    "path equal to root_path": (
        Table(
            (Include(RouterT("r0", True, P(("x",)), False, (Api("e0", P(), ("GET",)),))),),
            root_path="/api",
        ),
        (
            Call("GET", b"/api/x", root_path="/api"),
            Call("GET", b"/api/x/", root_path="/api"),
            Call("GET", b"/x/", root_path="/api"),
        ),
        (),
        [200, 307, 307],
    ),
    # "$" matches before a final newline: FastAPI routes these, so must the index.
    "final newline": (
        Table(
            (
                Include(
                    RouterT(
                        "r0",
                        True,
                        P(),
                        False,
                        (Api("e0", P(("items",)), ("GET",)), Api("e1", P(("n", INT)), ("GET",))),
                    )
                ),
            )
        ),
        (Call("GET", b"/items%0A"), Call("GET", b"/n/7%0A"), Call("GET", b"/n/%0A")),
        (),
        [200, 200, 404],
    ),
    # Body limits of a router and of the router it is included in, on each route kind.
    "body limits": (
        Table(
            (
                Include(
                    RouterT(
                        "r0",
                        True,
                        P(("r",)),
                        False,
                        (*LIMITED, Include(RouterT("r1", False, P(("in",)), False, LIMITED))),
                        8,
                    )
                ),
            )
        ),
        tuple(
            Call("POST", target, body=body, auth=True)
            for target in (b"/r/items", b"/r/items/1", b"/r/plain", b"/r/in/items")
            for body in (b"{}", BIG)
        ),
        (),
        # Before FastAPI 0.164 the limit is MsgspecRouter's, on its own msgspec routes only.
        [200, 413] * 4 if HAS_NATIVE_BODY_LIMIT else [200, 413, 200, 413, 200, 200, 200, 200],
    ),
    # Mounted after install_dispatch into an included router, which bumps no routes
    # version: FastAPI, having built the inclusion's candidates when it was included,
    # never sees the mount, and neither may the index, with or without a request before.
    "late mount in an included router, no request before": (
        LATE_MOUNT,
        (),
        (Call("GET", b"/r/m/"), Call("GET", b"/r/a")),
        [404, 200],
    ),
    "late mount in an included router, after a request": (
        LATE_MOUNT,
        (Call("GET", b"/r/a"),),
        (Call("GET", b"/r/m/"), Call("GET", b"/r/a")),
        [200, 404, 200],
    ),
    # Methods as sent: FastAPI compares them as they are.
    "methods": (
        Table(
            (
                Include(
                    RouterT(
                        "r0",
                        True,
                        P(),
                        False,
                        (Api("e0", P(("i",)), ("GET",)), Api("e1", P(("i",)), ("POST",))),
                    )
                ),
            )
        ),
        tuple(Call(m, b"/i") for m in ("get", "HEAD", "POST", "PROPFIND")),
        (),
        [405, 405, 200, 405],
    ),
}


@pytest.mark.parametrize("name", list(TARGETED))
def test_targeted_table(name: str, static_dir: Path) -> None:
    table, before, after, statuses = TARGETED[name]
    answers: list[str] = []
    case = Case(table, before, after)
    assert run_case(case, static_dir, answers=answers) == len(before + after) * len(TWINS)
    # The oracle answered as the table was meant to, so the comparison was not vacuous.
    assert answers == [str(s) for s in statuses] * len(TWINS)


def test_differential_was_not_vacuous() -> None:
    """After the normal run: it compared enough requests, and they reached every outcome."""
    if "dispatch" not in COMPARED:
        pytest.skip("test_dispatch_matches_fastapi did not run in this session")
    print(f"requests compared (all twins): {COMPARED}; oracle answers: {Counter(ANSWERS)}")
    assert COMPARED["dispatch"] >= NORMAL_EXAMPLES * 4 * len(TWINS)
    assert set(ANSWERS) >= REACHED, f"never reached: {REACHED - set(ANSWERS)}"
