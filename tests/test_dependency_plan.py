"""Routes with dependencies on the direct tier behave as FastAPI's own routes do.

Each test registers the same endpoints and dependencies on a MsgspecRouter of one twin
(`twin`) and on a plain APIRouter (the oracle), sends the same requests to both, and
compares the responses (status, headers, body) and the log of what ran, in what order,
with what arguments, including when the response went out (`sent`). Our routes are
checked to be on the direct tier, so the plan, not FastAPI's solving, ran them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Annotated, Any

import msgspec
import pytest
from fastapi import (
    APIRouter,
    BackgroundTasks,
    Depends,
    FastAPI,
    Header,
    HTTPException,
    Query,
    Request,
    Response,
    Security,
)
from fastapi.responses import JSONResponse
from fastapi.security import SecurityScopes
from fastapi.telemetry._api import _RequestTelemetry
from fastapi.testclient import TestClient
from raw_asgi import send_request
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from support import NoFields, app_including, client_for
from twins import Twin

from msgspec_fastapi import MsgspecRouter, _compat
from msgspec_fastapi import router as router_module

EVENTS: list[Any] = []


def logged(app: ASGIApp) -> ASGIApp:
    """`app`, logging "sent" when the last body message of a response went out."""

    async def wrapper(scope: Scope, receive: Receive, send: Send) -> None:
        async def logging_send(message: Message) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body"):
                EVENTS.append("sent")
            await send(message)

        await app(scope, receive, logging_send)

    return wrapper


class Pair:
    """The same routes on a MsgspecRouter of `twin` and on an APIRouter, each in an app."""

    def __init__(
        self,
        twin: Twin,
        build: Callable[[APIRouter], None],
        app_options: dict[str, Any] | None = None,
        include_options: dict[str, Any] | None = None,
    ) -> None:
        self.ours_router = MsgspecRouter(route_class=twin.route_class)
        self.theirs_router = APIRouter()
        self.apps: list[FastAPI] = []
        self.clients = []
        for router in (self.ours_router, self.theirs_router):
            build(router)
            app = FastAPI(**(app_options or {}))

            @app.exception_handler(KeyError)
            async def key_error(request: Request, exc: KeyError) -> JSONResponse:
                EVENTS.append(("handler", repr(exc), request.scope.get("same")))
                return JSONResponse({"key_error": str(exc)}, status_code=418)

            app.include_router(router, **(include_options or {}))
            self.apps.append(app)
            self.clients.append(TestClient(logged(app), raise_server_exceptions=False))
        assert {route.tier for route in self.ours_router.routes} == {"direct"}  # type: ignore[attr-defined]

    @property
    def overrides(self) -> list[dict[Any, Any]]:
        return [app.dependency_overrides for app in self.apps]

    def request(self, method: str, url: str, **options: Any) -> list[tuple[Any, ...]]:
        """(status, headers, body, events) from ours, then from theirs."""
        results = []
        for client in self.clients:
            EVENTS.clear()
            response = client.request(method, url, **options)
            results.append(
                (
                    response.status_code,
                    response.headers.multi_items(),
                    response.content,
                    list(EVENTS),
                )
            )
        return results

    def same(self, method: str, url: str, **options: Any) -> tuple[Any, ...]:
        ours, theirs = self.request(method, url, **options)
        assert ours == theirs
        return ours


class City(msgspec.Struct):
    name: str
    population: int = 0


# -- the two-dependency route: a session from a generator, the user from a header --------


async def session() -> AsyncIterator[str]:
    EVENTS.append("session open")
    try:
        yield "db"
    except Exception as exc:
        EVENTS.append(("session saw", type(exc).__name__))
        raise
    finally:
        EVENTS.append("session close")


async def current_user(
    authorization: Annotated[str, Header()], db: Annotated[str, Depends(session)]
) -> str:
    EVENTS.append(("user", authorization, db))
    if authorization != "Bearer alice":
        raise HTTPException(401, "who?", headers={"www-authenticate": "Bearer"})
    return "alice"


def session_routes(router: APIRouter) -> None:
    @router.get("/me")
    async def me(
        user: Annotated[str, Depends(current_user)], db: Annotated[str, Depends(session)]
    ) -> dict[str, str]:
        EVENTS.append(("endpoint", user, db))
        return {"user": user, "db": db}

    @router.get("/fails")
    async def fails(user: Annotated[str, Depends(current_user)]) -> dict[str, str]:
        raise KeyError("boom")


def test_session_and_current_user_run_open_call_close_as_in_fastapi(twin: Twin) -> None:
    pair = Pair(twin, session_routes)

    status, _, _, events = pair.same("GET", "/me", headers={"authorization": "Bearer alice"})

    assert status == 200
    assert events == [
        "session open",
        ("user", "Bearer alice", "db"),
        ("endpoint", "alice", "db"),
        "sent",
        "session close",
    ]


def test_http_exception_of_a_dependency_is_thrown_into_the_session_as_in_fastapi(
    twin: Twin,
) -> None:
    pair = Pair(twin, session_routes)

    status, headers, _, events = pair.same("GET", "/me", headers={"authorization": "Bearer bob"})

    assert status == 401
    assert ("www-authenticate", "Bearer") in headers
    assert ("session saw", "HTTPException") in events


def test_missing_header_is_a_422_after_the_session_opened_as_in_fastapi(twin: Twin) -> None:
    pair = Pair(twin, session_routes)

    status, _, _, events = pair.same("GET", "/me")

    assert status == 422
    assert events[0] == "session open"


def test_endpoint_exception_reaches_the_apps_handler_after_teardown(twin: Twin) -> None:
    pair = Pair(twin, session_routes)

    status, _, _, events = pair.same("GET", "/fails", headers={"authorization": "Bearer alice"})

    assert status == 418
    assert events[-4:] == [
        ("session saw", "KeyError"),
        "session close",
        ("handler", "KeyError('boom')", None),
        "sent",
    ]


# -- kinds, threads, caching -------------------------------------------------------------


def in_worker() -> bool:
    return threading.current_thread() is not threading.main_thread()


def sync_dependency() -> str:
    EVENTS.append(("sync", in_worker() is not LOOP_THREAD[0]))
    return "sync"


LOOP_THREAD: list[bool] = [False]


def sync_generator() -> Iterator[str]:
    EVENTS.append(("sync gen open", threading.get_ident() != LOOP_IDENT[0]))
    yield "gen"
    EVENTS.append(("sync gen close", threading.get_ident() != LOOP_IDENT[0]))


LOOP_IDENT: list[int] = [0]


async def loop_ident() -> int:
    LOOP_IDENT[0] = threading.get_ident()
    return LOOP_IDENT[0]


class Settings:
    def __init__(self, q: int = 1) -> None:
        EVENTS.append(("settings", q))
        self.q = q


class Counter:
    async def __call__(self) -> str:
        EVENTS.append("counter")
        return "counted"


counter = Counter()


def kinds_routes(router: APIRouter) -> None:
    @router.get("/kinds")
    async def kinds(
        ident: Annotated[int, Depends(loop_ident)],
        plain: Annotated[str, Depends(sync_dependency)],
        gen: Annotated[str, Depends(sync_generator)],
        settings: Annotated[Settings, Depends()],
        counted: Annotated[str, Depends(counter)],
    ) -> list[Any]:
        EVENTS.append("endpoint")
        return [plain, gen, settings.q, counted]


def test_sync_functions_generators_and_classes_run_in_worker_threads_as_in_fastapi(
    twin: Twin,
) -> None:
    pair = Pair(twin, kinds_routes)

    status, _, body, events = pair.same("GET", "/kinds?q=3")

    assert status == 200
    assert msgspec.json.decode(body) == ["sync", "gen", 3, "counted"]
    assert ("sync gen open", True) in events
    assert ("sync gen close", True) in events
    assert events.index("sent") < events.index(("sync gen close", True))


def shared() -> str:
    EVENTS.append("shared")
    return "s"


def uncached() -> str:
    EVENTS.append("uncached")
    return "u"


def left(
    s: Annotated[str, Depends(shared)], u: Annotated[str, Depends(uncached, use_cache=False)]
) -> str:
    EVENTS.append("left")
    return "l"


def right(
    s: Annotated[str, Depends(shared)], u: Annotated[str, Depends(uncached, use_cache=False)]
) -> str:
    EVENTS.append("right")
    return "r"


def cache_routes(router: APIRouter) -> None:
    @router.get("/diamond")
    async def diamond(
        a: Annotated[str, Depends(left)],
        b: Annotated[str, Depends(right)],
        c: Annotated[str, Depends(shared, use_cache=False)],
        d: Annotated[str, Depends(left)],
    ) -> str:
        return a + b + c + d

    @router.get("/uncached-first")
    async def uncached_first(
        a: Annotated[str, Depends(uncached, use_cache=False)],
        b: Annotated[str, Depends(uncached)],
    ) -> str:
        return a + b


def test_shared_dependency_runs_once_and_use_cache_false_every_time_as_in_fastapi(
    twin: Twin,
) -> None:
    pair = Pair(twin, cache_routes)

    _, _, body, events = pair.same("GET", "/diamond")

    assert body == b'"lrsl"'
    assert events.count("shared") == 2  # once cached, once with use_cache=False
    assert events.count("uncached") == 3  # again under the cached `left`


def test_use_cache_false_fills_the_cache_a_later_use_reads_as_in_fastapi(twin: Twin) -> None:
    pair = Pair(twin, cache_routes)

    _, _, _, events = pair.same("GET", "/uncached-first")

    assert events.count("uncached") == 1


# -- errors ---------------------------------------------------------------------------------


def common(q: int) -> int:
    EVENTS.append(("common", q))
    return q


def first(c: Annotated[int, Depends(common)], r: int) -> int:
    EVENTS.append("first")
    return c + r


def second(c: Annotated[int, Depends(common)]) -> int:
    EVENTS.append("second")
    return c


def fine() -> str:
    EVENTS.append("fine")
    return "fine"


def error_routes(router: APIRouter) -> None:
    @router.get("/errors")
    async def errors(
        a: Annotated[int, Depends(first)],
        f: Annotated[str, Depends(fine)],
        b: Annotated[int, Depends(second)],
        z: int,
    ) -> int:
        return a + b + z


def locations(body: bytes) -> list[Any]:
    return [error["loc"] for error in msgspec.json.decode(body)["detail"]]


def test_errors_of_every_dependency_come_in_fastapis_order_with_repeats(twin: Twin) -> None:
    pair = Pair(twin, error_routes)
    (status, _, ours, ours_events), (_, _, theirs, theirs_events) = pair.request(
        "GET", "/errors?q=x&r=y"
    )

    assert status == 422
    assert (
        locations(ours)
        == locations(theirs)
        == [
            ["query", "q"],
            ["query", "r"],
            ["query", "q"],
            ["query", "z"],
        ]
    )
    # A dependency whose parameters are fine is called, even beside failing ones.
    assert ours_events == theirs_events == ["fine", "sent"]


def test_a_dependency_whose_subtree_failed_is_skipped_and_its_siblings_called(twin: Twin) -> None:
    pair = Pair(twin, error_routes)
    (_, _, ours, ours_events), (_, _, theirs, theirs_events) = pair.request(
        "GET", "/errors?q=1&r=y"
    )

    assert locations(ours) == locations(theirs) == [["query", "r"], ["query", "z"]]
    assert ours_events == theirs_events == [("common", 1), "fine", "second", "sent"]


def test_valid_request_runs_every_dependency_once(twin: Twin) -> None:
    pair = Pair(twin, error_routes)

    _, _, body, events = pair.same("GET", "/errors?q=1&r=2&z=3")

    assert body == b"7"
    assert events == [("common", 1), "first", "fine", "second", "sent"]


# -- generators: scopes, exceptions, swallowing ----------------------------------------------


async def function_scoped() -> AsyncIterator[str]:
    EVENTS.append("function open")
    yield "f"
    EVENTS.append("function close")


def request_scoped() -> Iterator[str]:
    EVENTS.append("request open")
    yield "r"
    EVENTS.append("request close")


async def replacing() -> AsyncIterator[str]:
    try:
        yield "x"
    except KeyError as exc:
        EVENTS.append("replacing")
        raise HTTPException(409, "replaced") from exc


async def swallowing() -> AsyncIterator[str]:
    try:
        yield "x"
    except Exception:
        EVENTS.append("swallowed")


def scope_routes(router: APIRouter) -> None:
    @router.get("/scopes")
    async def scopes(
        tasks: BackgroundTasks,
        f: Annotated[str, Depends(function_scoped, scope="function")],
        r: Annotated[str, Depends(request_scoped, scope="request")],
    ) -> str:
        tasks.add_task(EVENTS.append, "task")
        EVENTS.append("endpoint")
        return f + r

    @router.get("/replaced")
    async def replaced(x: Annotated[str, Depends(replacing)]) -> str:
        raise KeyError("original")

    @router.get("/swallowed-request")
    async def swallowed_request(x: Annotated[str, Depends(swallowing)]) -> str:
        raise KeyError("lost")

    @router.get("/swallowed-function")
    async def swallowed_function(
        x: Annotated[str, Depends(swallowing, scope="function")],
    ) -> str:
        raise KeyError("lost")


def test_function_scope_closes_before_the_response_and_request_scope_after_tasks(
    twin: Twin,
) -> None:
    pair = Pair(twin, scope_routes)

    _, _, _, events = pair.same("GET", "/scopes")

    assert events == [
        "function open",
        "request open",
        "endpoint",
        "function close",
        "sent",
        "task",
        "request close",
    ]


def test_exception_a_generator_raises_instead_is_what_the_handlers_see(twin: Twin) -> None:
    pair = Pair(twin, scope_routes)

    status, _, body, events = pair.same("GET", "/replaced")

    assert (status, body) == (409, b'{"detail":"replaced"}')
    assert events == ["replacing", "sent"]


@pytest.mark.parametrize("path", ["/swallowed-request", "/swallowed-function"])
def test_generator_that_swallows_the_exception_gives_fastapis_500(twin: Twin, path: str) -> None:
    pair = Pair(twin, scope_routes)

    status, _, _, events = pair.same("GET", path)

    assert status == 500
    assert events[0] == "swallowed"


# -- special parameters ----------------------------------------------------------------------


def sets_cookie(response: Response) -> None:
    response.set_cookie("seen", "1")
    response.headers["x-dependency"] = "yes"
    response.status_code = 202


def adds_task(tasks: BackgroundTasks, request: Request) -> None:
    request.scope["same"] = id(request)
    tasks.add_task(EVENTS.append, "dependency task")


def scoped(scopes: SecurityScopes) -> list[str]:
    return scopes.scopes


def scoped_twice(
    a: Annotated[list[str], Security(scoped, scopes=["read"])],
    b: Annotated[list[str], Security(scoped, scopes=["write"])],
) -> list[list[str]]:
    return [a, b]


def special_routes(router: APIRouter) -> None:
    @router.get("/response", dependencies=[Depends(sets_cookie)])
    async def with_response() -> str:
        return "ok"

    @router.get("/response-returned", dependencies=[Depends(sets_cookie)])
    async def returned():  # type: ignore[no-untyped-def]
        return Response("raw", media_type="text/plain")

    @router.get("/tasks", dependencies=[Depends(adds_task)])
    async def with_tasks(request: Request, tasks: BackgroundTasks) -> bool:
        tasks.add_task(EVENTS.append, "endpoint task")
        return request.scope["same"] == id(request)

    @router.get("/scopes")
    async def with_scopes(
        both: Annotated[list[list[str]], Security(scoped_twice, scopes=["admin"])],
    ) -> list[list[str]]:
        return both


def test_status_headers_and_cookies_a_dependency_sets_are_kept(twin: Twin) -> None:
    pair = Pair(twin, special_routes)

    status, headers, _, _ = pair.same("GET", "/response")

    assert status == 202
    assert ("x-dependency", "yes") in headers


def test_returned_response_drops_what_a_dependency_set(twin: Twin) -> None:
    pair = Pair(twin, special_routes)

    status, headers, _, _ = pair.same("GET", "/response-returned")

    assert status == 200
    assert ("x-dependency", "yes") not in headers


def test_background_tasks_and_request_are_shared_by_dependencies_and_endpoint(twin: Twin) -> None:
    pair = Pair(twin, special_routes)

    _, _, body, events = pair.same("GET", "/tasks")

    assert body == b"true"
    assert events == ["sent", "dependency task", "endpoint task"]


def test_security_scopes_accumulate_as_in_fastapi(twin: Twin) -> None:
    pair = Pair(twin, special_routes)

    _, _, body, _ = pair.same("GET", "/scopes")

    assert msgspec.json.decode(body) == [["admin", "read"], ["admin", "write"]]


# -- levels of dependencies= ----------------------------------------------------------------


def marker(name: str) -> Callable[[], None]:
    def mark() -> None:
        EVENTS.append(name)

    mark.__name__ = f"mark_{name}"
    return mark


APP_MARK, INCLUDE_MARK, ROUTE_MARK = marker("app"), marker("include"), marker("route")


def test_app_include_and_route_dependencies_run_in_fastapis_order(twin: Twin) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/levels", dependencies=[Depends(ROUTE_MARK)])
        async def levels() -> str:
            EVENTS.append("endpoint")
            return "ok"

    pair = Pair(
        twin,
        build,
        app_options={"dependencies": [Depends(APP_MARK)]},
        include_options={"dependencies": [Depends(INCLUDE_MARK)]},
    )

    _, _, _, events = pair.same("GET", "/levels")

    assert events == ["app", "include", "route", "endpoint", "sent"]


# -- overrides -------------------------------------------------------------------------------


def real_user() -> str:
    return "real"


def fake_user(name: str = "fake") -> str:
    return name


def unrelated() -> None:
    pass


def override_routes(router: APIRouter) -> None:
    @router.get("/who")
    async def who(user: Annotated[str, Depends(real_user)]) -> str:
        return user


def test_overrides_are_honoured_per_request_set_changed_and_cleared(twin: Twin) -> None:
    pair = Pair(twin, override_routes)

    assert pair.same("GET", "/who")[2] == b'"real"'
    for overrides in pair.overrides:
        overrides[real_user] = fake_user
    assert pair.same("GET", "/who?name=zed")[2] == b'"zed"'
    for overrides in pair.overrides:
        overrides[real_user] = lambda: "other"
    assert pair.same("GET", "/who")[2] == b'"other"'
    for overrides in pair.overrides:
        overrides.clear()
        overrides[unrelated] = unrelated
    assert pair.same("GET", "/who")[2] == b'"real"'
    for overrides in pair.overrides:
        overrides.clear()
    assert pair.same("GET", "/who")[2] == b'"real"'


def test_an_override_sets_plan_is_built_once_and_reused_while_it_resolves_alike(
    twin: Twin, monkeypatch: pytest.MonkeyPatch
) -> None:
    builds: list[Any] = []
    real_build = router_module.build_plan

    def counted_build(root: Any, spec: Any, overrides: Any, *args: Any, **kwargs: Any) -> Any:
        if overrides:
            builds.append(dict(overrides))
        return real_build(root, spec, overrides, *args, **kwargs)

    monkeypatch.setattr(router_module, "build_plan", counted_build)
    router = MsgspecRouter(route_class=twin.route_class)
    override_routes(router)
    app = app_including(router)
    client = TestClient(app)

    app.dependency_overrides[real_user] = fake_user
    answers = [client.get("/who", params={"name": name}).json() for name in ("a", "b", "c")]
    assert answers == ["a", "b", "c"]
    assert len(builds) == 1
    app.dependency_overrides[real_user] = lambda: "other"
    assert client.get("/who").json() == "other"
    app.dependency_overrides[real_user] = fake_user
    assert client.get("/who").json() == "fake"
    assert len(builds) == 2  # the first set's plan was kept


def test_override_fastapi_must_solve_goes_to_fastapi_for_that_request(
    twin: Twin, solved: list[Any]
) -> None:
    pair = Pair(twin, override_routes)

    def pydantic_user(_: Annotated[NoFields, Query()]) -> str:
        return "pydantic"

    for overrides in pair.overrides:
        overrides[real_user] = pydantic_user

    assert pair.same("GET", "/who")[2] == b'"pydantic"'
    assert len(solved) == 2  # ours delegated, and the reference


# -- overrides changed while a request runs ---------------------------------------------------
# FastAPI looks each dependency's override up when its solving reaches it, so an override a
# dependency installs or removes applies to the dependencies solved after it.


async def original() -> str:
    EVENTS.append("original")
    return "original"


async def replacement() -> str:
    EVENTS.append("replacement")
    return "replacement"


async def second_replacement() -> str:
    EVENTS.append("second replacement")
    return "second replacement"


async def wraps_original(inner: Annotated[str, Depends(original)]) -> str:
    return f"outer({inner})"


def apps_changing_overrides(
    twin: Twin, build: Callable[[APIRouter, FastAPI], None]
) -> list[tuple[int, bytes, list[Any]]]:
    """One GET of "/" on a MsgspecRouter of `twin` and on an APIRouter, each in an app of
    its own that `build` defines the route for (its dependencies may change that app's
    overrides): (status, body, events) of each, ours first."""
    results = []
    for router in (MsgspecRouter(route_class=twin.route_class), APIRouter()):
        app = FastAPI()
        build(router, app)
        app.include_router(router)
        if isinstance(router, MsgspecRouter):
            assert {route.tier for route in router.routes} == {"direct"}  # type: ignore[attr-defined]
        EVENTS.clear()
        response = TestClient(app).get("/")
        results.append((response.status_code, response.content, list(EVENTS)))
    return results


def configure_then(
    change: Callable[[dict[Any, Any]], None],
    before: dict[Any, Any] | None = None,
    takes: Callable[..., Any] = original,
) -> Callable[[APIRouter, FastAPI], None]:
    """A route whose first dependency applies `change` to its app's overrides (`before`
    set when the app is built), and whose second is `takes`, its answer."""

    def build(router: APIRouter, app: FastAPI) -> None:
        app.dependency_overrides.update(before or {})

        async def configure() -> None:
            change(app.dependency_overrides)

        @router.get("/")
        async def endpoint(_: None = Depends(configure), value: str = Depends(takes)) -> str:
            return value

    return build


def test_an_override_an_earlier_dependency_installs_applies_to_a_later_one(twin: Twin) -> None:
    build = configure_then(lambda overrides: overrides.update({original: replacement}))

    ours, theirs = apps_changing_overrides(twin, build)
    assert ours == theirs == (200, b'"replacement"', ["replacement"])


def test_an_override_installed_after_a_dependency_ran_leaves_its_next_use_to_the_cache(
    twin: Twin,
) -> None:
    """The second use resolves to the replacement, but FastAPI's cache is keyed by the
    dependency as declared, so it takes the first use's value and calls nothing."""

    def build(router: APIRouter, app: FastAPI) -> None:
        async def configure(_: Annotated[str, Depends(original)]) -> None:
            app.dependency_overrides[original] = replacement

        @router.get("/")
        async def endpoint(_: None = Depends(configure), value: str = Depends(original)) -> str:
            return value

    ours, theirs = apps_changing_overrides(twin, build)
    assert ours == theirs == (200, b'"original"', ["original"])


def test_an_override_removed_by_a_dependency_stops_applying_to_later_ones(twin: Twin) -> None:
    build = configure_then(dict.clear, before={original: replacement})

    ours, theirs = apps_changing_overrides(twin, build)
    assert ours == theirs == (200, b'"original"', ["original"])


def test_an_override_replaced_by_a_dependency_applies_its_new_value(twin: Twin) -> None:
    build = configure_then(
        lambda overrides: overrides.update({original: second_replacement}),
        before={original: replacement},
    )

    ours, theirs = apps_changing_overrides(twin, build)
    assert ours == theirs == (200, b'"second replacement"', ["second replacement"])


def test_an_override_installed_for_a_nested_dependency_applies_inside_a_later_one(
    twin: Twin,
) -> None:
    build = configure_then(
        lambda overrides: overrides.update({original: replacement}), takes=wraps_original
    )

    ours, theirs = apps_changing_overrides(twin, build)
    assert ours == theirs == (200, b'"outer(replacement)"', ["replacement"])


def test_an_override_installed_inside_a_dependencys_subtree_applies_to_its_later_part(
    twin: Twin,
) -> None:
    """The outer dependency was looked up before the change; its second sub-dependency
    is looked up after it."""

    def build(router: APIRouter, app: FastAPI) -> None:
        async def configure() -> None:
            app.dependency_overrides[original] = replacement

        async def around(_: None = Depends(configure), value: str = Depends(original)) -> str:
            return f"around({value})"

        @router.get("/")
        async def endpoint(value: str = Depends(around)) -> str:
            return value

    ours, theirs = apps_changing_overrides(twin, build)
    assert ours == theirs == (200, b'"around(replacement)"', ["replacement"])


async def generated() -> AsyncIterator[str]:
    EVENTS.append("generator set up")
    yield "generated"
    EVENTS.append("generator closed")


def test_a_generator_override_installed_mid_request_waits_for_the_next_request(
    twin: Twin,
) -> None:
    """The one change the direct tier does not follow within the request (a listed
    difference): a generator where the request's plan set up no teardowns."""

    build = configure_then(lambda overrides: overrides.update({original: generated}))

    ours, theirs = apps_changing_overrides(twin, build)
    assert theirs == (200, b'"generated"', ["generator set up", "generator closed"])
    assert ours == (200, b'"original"', ["original"])


def test_unchanged_overrides_keep_the_plan_chosen_when_the_request_started(
    twin: Twin, monkeypatch: pytest.MonkeyPatch
) -> None:
    builds: list[Any] = []
    real_build = router_module.build_plan

    def counted_build(root: Any, spec: Any, overrides: Any, *args: Any, **kwargs: Any) -> Any:
        builds.append(kwargs.get("answers"))
        return real_build(root, spec, overrides, *args, **kwargs)

    monkeypatch.setattr(router_module, "build_plan", counted_build)

    build = configure_then(  # the same override set again
        lambda overrides: overrides.update({original: replacement}),
        before={original: replacement},
    )

    ours, theirs = apps_changing_overrides(twin, build)
    assert ours == theirs == (200, b'"replacement"', ["replacement"])
    assert all(not answers for answers in builds)  # no plan built for a change


# -- bodies -----------------------------------------------------------------------------------


def takes_city(city: City) -> str:
    EVENTS.append(("city", city.name))
    return city.name


def needs_token(x_token: Annotated[str, Header()] = "") -> None:
    EVENTS.append("token")
    if x_token != "secret":
        raise HTTPException(401, "no token")


def test_dependency_taking_the_body_gets_the_decoded_struct_on_the_direct_tier(
    twin: Twin,
) -> None:
    router = MsgspecRouter(route_class=twin.route_class)

    @router.post("/cities", dependencies=[Depends(needs_token)])
    async def create(name: Annotated[str, Depends(takes_city)], city: City) -> City:
        return city

    assert router.routes[0].tier == "direct"  # type: ignore[attr-defined]
    client = client_for(router)
    EVENTS.clear()
    response = client.post("/cities", json={"name": "Oslo"}, headers={"x-token": "secret"})
    assert response.json() == {"name": "Oslo", "population": 0}
    assert EVENTS == ["token", ("city", "Oslo")]
    EVENTS.clear()
    assert client.post("/cities", json={"nam": "Oslo"}).status_code == 401
    assert EVENTS == ["token"]


# -- streams and telemetry -----------------------------------------------------------------------


def stream_routes(router: APIRouter) -> None:
    @router.get("/stream")
    async def stream(
        db: Annotated[str, Depends(session)],
        f: Annotated[str, Depends(function_scoped, scope="function")],
    ) -> AsyncIterator[int]:
        for i in range(3):
            EVENTS.append(("item", i))
            yield i


def test_stream_runs_between_function_and_request_scope_teardown(twin: Twin) -> None:
    pair = Pair(twin, stream_routes)

    _, _, body, events = pair.same("GET", "/stream")

    assert body == b"0\n1\n2\n"
    assert events == [
        "session open",
        "function open",
        "function close",
        ("item", 0),
        ("item", 1),
        ("item", 2),
        "sent",
        "session close",
    ]


def test_request_with_a_telemetry_record_goes_to_the_delegated_handling(
    twin: Twin, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The delegated handling reports an observed request as FastAPI does (`telemetry`),
    solving its dependencies with FastAPI's solve_dependencies."""
    solved: list[Any] = []
    original = _compat.solve_dependencies

    async def spy(request: Any, dependant: Any, provider: Any) -> Any:
        solved.append(dependant.call)
        return await original(request, dependant, provider)

    monkeypatch.setattr(_compat, "solve_dependencies", spy)
    router = MsgspecRouter(route_class=twin.route_class)
    session_routes(router)
    app = app_including(router)

    async def with_telemetry(scope: Scope, receive: Receive, send: Send) -> None:
        scope["fastapi.telemetry"] = _RequestTelemetry(span=None, span_method=scope["method"])
        await app(scope, receive, send)

    headers = {"authorization": "Bearer alice"}
    assert TestClient(app).get("/me", headers=headers).json() == {"user": "alice", "db": "db"}
    assert solved == []
    assert TestClient(with_telemetry).get("/me", headers=headers).json() == {
        "user": "alice",
        "db": "db",
    }
    assert len(solved) == 1


# -- more of FastAPI's corners ---------------------------------------------------------------


async def reads_body(request: Request) -> int:
    return len(await request.body())


async def raises_in_teardown() -> AsyncIterator[None]:
    yield
    EVENTS.append("teardown raises")
    raise HTTPException(500, "late")


def inner_real() -> str:
    return "inner real"


def outer(inner: Annotated[str, Depends(inner_real)]) -> str:
    return f"outer({inner})"


def outer_override(inner: Annotated[str, Depends(inner_real)]) -> str:
    return f"override({inner})"


def corner_routes(router: APIRouter) -> None:
    @router.get("/late")
    async def late(_: Annotated[None, Depends(raises_in_teardown)]) -> str:
        return "sent before the teardown"

    @router.get("/nested")
    async def nested(value: Annotated[str, Depends(outer)]) -> str:
        return value


def test_dependency_reading_the_request_body_gets_the_bytes_already_read(twin: Twin) -> None:
    router = MsgspecRouter(route_class=twin.route_class)

    @router.post("/body-read")
    async def body_read(size: Annotated[int, Depends(reads_body)], city: City) -> list[Any]:
        return [size, city.name]

    assert router.routes[0].tier == "direct"  # type: ignore[attr-defined]
    body = b'{"name": "Oslo"}'
    headers = {"content-type": "application/json"}
    response = client_for(router).post("/body-read", content=body, headers=headers)

    assert response.json() == [len(body), "Oslo"]


def test_exception_from_a_teardown_after_the_response_escapes_as_in_fastapi(twin: Twin) -> None:
    pair = Pair(twin, corner_routes)

    status, _, body, events = pair.same("GET", "/late")

    assert (status, body) == (200, b'"sent before the teardown"')
    assert events == ["sent", "teardown raises"]


def test_override_applies_inside_an_overridden_dependencys_own_tree(twin: Twin) -> None:
    pair = Pair(twin, corner_routes)
    for overrides in pair.overrides:
        overrides[outer] = outer_override
        overrides[inner_real] = lambda: "inner fake"

    assert pair.same("GET", "/nested")[2] == b'"override(inner fake)"'
    for overrides in pair.overrides:
        del overrides[outer]
    assert pair.same("GET", "/nested")[2] == b'"outer(inner fake)"'


class Item(msgspec.Struct):
    title: str


def takes_item(item: Item) -> str:
    return item.title


def test_override_leaving_an_embedded_body_part_to_no_dependency_validates_none_of_it(
    twin: Twin, solved: list[Any]
) -> None:
    router = MsgspecRouter(route_class=twin.route_class)

    @router.post("/parts")
    async def parts(city: City, item: Annotated[str, Depends(takes_item)]) -> list[str]:
        return [city.name, item]

    app = app_including(router)
    client = TestClient(app)
    body = {"city": {"name": "Oslo"}, "item": {"title": "x"}}

    assert client.post("/parts", json=body).json() == ["Oslo", "x"]
    assert solved == []
    app.dependency_overrides[takes_item] = lambda: "overridden"
    assert client.post("/parts", json=body).json() == ["Oslo", "overridden"]
    # As FastAPI: the part nobody takes is not validated, and the plan still runs it.
    assert client.post("/parts", json={"city": {"name": "Oslo"}}).json() == ["Oslo", "overridden"]
    invalid = {"city": {"name": "Oslo"}, "item": {"title": 1}}
    assert client.post("/parts", json=invalid).json() == ["Oslo", "overridden"]
    assert solved == []


async def yields_twice() -> AsyncIterator[str]:
    yield "first"
    EVENTS.append("second yield")
    yield "second"


async def raises_on_throw() -> AsyncIterator[str]:
    try:
        yield "x"
    except KeyError:
        EVENTS.append("caught")
        yield "again"


def test_generator_that_does_not_stop_fails_as_in_fastapi(twin: Twin) -> None:
    def build(router: APIRouter) -> None:
        @router.get("/twice")
        async def twice(x: Annotated[str, Depends(yields_twice)]) -> str:
            return x

        @router.get("/twice-after-error")
        async def twice_after_error(x: Annotated[str, Depends(raises_on_throw)]) -> str:
            raise KeyError("endpoint")

    pair = Pair(twin, build)

    assert pair.same("GET", "/twice")[3] == ["sent", "second yield"]
    status, _, _, events = pair.same("GET", "/twice-after-error")
    assert status == 500
    assert events == ["caught", "sent"]


HAS_MAX_CONCURRENCY = "max_concurrency" in {
    field.name for field in dataclasses.fields(Depends(lambda: None))
}


@pytest.mark.skipif(not HAS_MAX_CONCURRENCY, reason="max_concurrency is FastAPI 0.165's")
@pytest.mark.parametrize("kind", ["function", "generator", "sync generator"])
def test_max_concurrency_limits_a_dependency_across_requests_as_in_fastapi(
    twin: Twin, kind: str
) -> None:
    """Three requests at once through a dependency with max_concurrency=2: a third waits
    (for a generator, until a teardown)."""
    running = [0]
    lock = threading.Lock()

    async def limited_function() -> int:
        running[0] += 1
        EVENTS.append(("running", running[0]))
        await asyncio.sleep(0.01)
        running[0] -= 1
        return 1

    async def limited_generator() -> AsyncIterator[int]:
        running[0] += 1
        EVENTS.append(("running", running[0]))
        yield 1
        await asyncio.sleep(0.01)
        running[0] -= 1

    def limited_sync_generator() -> Iterator[int]:
        with lock:
            running[0] += 1
            EVENTS.append(("running", running[0]))
        yield 1
        time.sleep(0.01)
        with lock:
            running[0] -= 1

    limited = {
        "function": limited_function,
        "generator": limited_generator,
        "sync generator": limited_sync_generator,
    }[kind]

    def build(router: APIRouter) -> None:
        @router.get("/limited")
        async def endpoint(
            value: int = Depends(limited, max_concurrency=2),
        ) -> int:
            await asyncio.sleep(0.01)
            return value

    pair = Pair(twin, build)
    results = []
    for app in pair.apps:
        EVENTS.clear()

        async def three(app: Any = app) -> list[Any]:
            return await asyncio.gather(*(send_request(app, "GET", b"/limited") for _ in range(3)))

        replies = asyncio.run(three())
        # The most running at once (when each set-up runs is up to the threads).
        results.append(([reply.status for reply in replies], max(count for _, count in EVENTS)))
    assert results[0] == results[1] == ([200, 200, 200], 2)
