"""Every code example of the docs site runs here, so that none can rot.

The examples are the files under `docs_src/`, which the pages include (`--8<--`). Each one
is registered below with the check that runs it: the module is imported fresh and requests
go through its `app` with the raw-ASGI driver. An example that builds routes is imported
once per twin, with `MsgspecRouter` and `install_dispatch` bound to that twin, and the
check first asserts that its routers really run on it. A file under `docs_src/` that no
check runs, or that no page includes, fails the suite.
"""

from __future__ import annotations

import asyncio
import importlib.util
import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec
import pytest
from raw_asgi import JSON, Reply, send_request
from twins import TWIN_NAMES, Twin, get_twin

import msgspec_fastapi
from msgspec_fastapi import MsgspecRouter

ROOT = Path(__file__).resolve().parent.parent
DOCS_SRC = ROOT / "docs_src"
DOCS = ROOT / "docs"

Check = Callable[[ModuleType], None]
# Path under docs_src/ -> (the check, whether the example builds routes and so runs per twin)
EXAMPLES: dict[str, tuple[Check, bool]] = {}


def example(path: str, per_twin: bool = True) -> Callable[[Check], Check]:
    def register(check: Check) -> Check:
        EXAMPLES[path] = (check, per_twin)
        return check

    return register


def module_name(path: str, twin_name: str = "") -> str:
    return "docs_example_" + re.sub(r"\W", "_", twin_name + path)


def load(path: str, name: str) -> ModuleType:
    """The example at `path`, imported as a new module (nothing cached between runs)."""
    spec = importlib.util.spec_from_file_location(name, DOCS_SRC / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_on(path: str, twin: Twin, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The example imported with the package's router and install_dispatch on `twin`."""
    monkeypatch.setattr(msgspec_fastapi, "MsgspecRouter", twin.router_class)
    monkeypatch.setattr(msgspec_fastapi, "install_dispatch", twin.install_dispatch)
    module = load(path, module_name(path, twin.name))
    routers = [value for value in vars(module).values() if isinstance(value, MsgspecRouter)]
    for router in routers:
        assert isinstance(router, twin.router_class), router
        assert all(isinstance(route, twin.route_class) for route in router.routes)
    return module


def call(
    module: ModuleType,
    method: str,
    target: str,
    headers: list[tuple[bytes, bytes]] | None = None,
    body: bytes = b"",
) -> Reply:
    # "wait": the client stays connected after its body, so a stream runs to its end.
    reply = send_request(module.app, method, target.encode(), headers or [], (body,), then="wait")
    return asyncio.run(reply)


def post_json(module: ModuleType, target: str, value: Any) -> Reply:
    return call(module, "POST", target, JSON, msgspec.json.encode(value))


def header(reply: Reply, name: bytes) -> bytes | None:
    return dict(reply.headers).get(name)


def error_locs(reply: Reply) -> list[list[Any]]:
    assert reply.status == 422, reply.body
    return [error["loc"] for error in reply.json()["detail"]]


def openapi(module: ModuleType) -> dict[str, Any]:
    document: dict[str, Any] = module.app.openapi()
    return document


LYON = {"name": "Lyon", "population": 522250}


@example("getting_started/implementation.py", per_twin=False)
def check_implementation(module: ModuleType) -> None:
    # The printed value is checked by the test through capsys; here, only what it reads.
    assert module.msgspec_fastapi.IMPLEMENTATION in ("compiled", "pure")


@example("getting_started/usage.py")
def check_usage(module: ModuleType) -> None:
    reply = post_json(module, "/cities", LYON)
    assert (reply.status, reply.json()) == (200, LYON)
    assert error_locs(post_json(module, "/cities", {**LYON, "population": "many"})) == [
        ["body", "population"]
    ]
    assert "City" in openapi(module)["components"]["schemas"]


@example("migrating/before.py", per_twin=False)
def check_before(module: ModuleType) -> None:
    reply = post_json(module, "/cities", LYON)
    assert (reply.status, reply.json()) == (200, LYON)


@example("migrating/after.py")
def check_after(module: ModuleType) -> None:
    # The same requests as the APIRouter version, the same answers.
    before = load("migrating/before.py", module_name("migrating/before.py", "for_after"))
    for method, target, body in [
        ("POST", "/cities", LYON),
        ("GET", "/cities/7", None),
        ("POST", "/cities", {"name": "Lyon"}),
        ("GET", "/cities/seven", None),
    ]:
        raw = b"" if body is None else msgspec.json.encode(body)
        ours, theirs = (call(m, method, target, JSON, raw) for m in (module, before))
        assert ours.status == theirs.status
        if ours.status == 200:
            assert ours.json() == theirs.json()
        else:
            assert [e["loc"] for e in ours.json()["detail"]] == [
                e["loc"] for e in theirs.json()["detail"]
            ]


@example("migrating/custom_route_class.py")
def check_custom_route_class(module: ModuleType) -> None:
    reply = post_json(module, "/cities", LYON)
    assert (reply.status, reply.json()) == (200, LYON)
    assert float(header(reply, b"x-response-time") or b"nan") >= 0
    assert all(isinstance(route, module.TimedRoute) for route in module.router.routes)


@example("behaviour/several_bodies.py")
def check_several_bodies(module: ModuleType) -> None:
    body = {"city": LYON, "point": {"x": 4.8, "y": 45.8}}
    reply = post_json(module, "/places", body)
    assert (reply.status, reply.json()) == (200, {"city": "Lyon", "x": 4.8, "note": ""})
    reply = post_json(module, "/places", {**body, "note": "river"})
    assert reply.json()["note"] == "river"
    assert error_locs(post_json(module, "/places", {"city": LYON})) == [["body", "point"]]


@example("behaviour/query_model.py")
def check_query_model(module: ModuleType) -> None:
    reply = call(module, "GET", "/cities?country=DE&limit=5&tags=a&tags=b")
    assert reply.status == 200
    assert reply.json() == {"country": "DE", "limit": 5, "order": "name", "tags": ["a", "b"]}
    assert error_locs(call(module, "GET", "/cities?country=DE&limit=0")) == [["query", "limit"]]
    assert error_locs(call(module, "GET", "/cities?country=DE&page=2")) == [["query", "page"]]


@example("behaviour/form_model.py")
def check_form_model(module: ModuleType) -> None:
    form = [(b"content-type", b"application/x-www-form-urlencoded")]
    reply = call(module, "POST", "/login", form, b"username=ada&password=pw&remember=on")
    assert (reply.status, reply.json()) == (200, {"user": "ada", "remember": True})
    assert error_locs(call(module, "POST", "/login", form, b"username=ada")) == [
        ["body", "password"]
    ]


@example("behaviour/response_model_options.py")
def check_response_model_options(module: ModuleType) -> None:
    assert call(module, "GET", "/cities/lyon").json() == LYON
    assert call(module, "GET", "/cities/lyon/name").json() == {"name": "Lyon"}


@example("behaviour/body_limit.py")
def check_body_limit(module: ModuleType) -> None:
    reply = post_json(module, "/notes", {"text": "short"})
    assert (reply.status, reply.json()) == (200, {"text": "short"})
    reply = post_json(module, "/notes", {"text": "x" * 2000})
    assert (reply.status, reply.json()) == (413, {"detail": "Content Too Large"})


@example("behaviour/error_models.py")
def check_error_models(module: ModuleType) -> None:
    reply = call(module, "GET", "/cities/1")
    assert (reply.status, reply.json()) == (200, LYON)
    reply = call(module, "GET", "/cities/2")
    assert (reply.status, reply.json()) == (404, {"detail": "no such city"})
    documented = openapi(module)["paths"]["/cities/{city_id}"]["get"]["responses"]["404"]
    assert documented["description"] == "Not Found"
    schema = documented["content"]["application/json"]["schema"]
    assert schema == {"$ref": "#/components/schemas/Problem"}


@example("routing/many_routers.py")
def check_many_routers(module: ModuleType) -> None:
    assert call(module, "GET", "/users/3").json() == {"id": 3, "name": "ada"}
    assert call(module, "GET", "/orders/7").json() == {"id": 7, "user_id": 1}
    assert call(module, "GET", "/health").json() == {"status": "ok"}
    assert call(module, "GET", "/users/3/orders").status == 404
    assert call(module, "POST", "/users/3").status == 405


@example("streaming/jsonl.py")
def check_jsonl(module: ModuleType) -> None:
    reply = call(module, "GET", "/cities/stream")
    assert reply.status == 200
    assert header(reply, b"content-type") == b"application/jsonl"
    lines = reply.body.splitlines()
    assert [msgspec.json.decode(line) for line in lines] == [
        LYON,
        {"name": "Porto", "population": 231800},
    ]


@example("streaming/sse.py")
def check_sse(module: ModuleType) -> None:
    reply = call(module, "GET", "/ticks")
    assert reply.status == 200
    assert header(reply, b"content-type") == b"text/event-stream; charset=utf-8"
    events = [block for block in reply.body.decode().split("\n\n") if block]
    assert events[0] == 'data: {"n":1}'
    assert sorted(events[1].splitlines()) == ['data: {"n":2}', "event: tick", "id: 2"]


@example("msgpack/router.py")
def check_msgpack(module: ModuleType) -> None:
    packed = [(b"content-type", b"application/msgpack"), (b"accept", b"application/msgpack")]
    reply = call(module, "POST", "/cities", packed, msgspec.msgpack.encode(LYON))
    assert reply.status == 200
    assert header(reply, b"content-type") == b"application/msgpack"
    assert header(reply, b"vary") == b"Accept"
    assert msgspec.msgpack.decode(reply.body) == LYON
    reply = post_json(module, "/cities", LYON)  # no Accept: JSON
    assert (header(reply, b"content-type"), reply.json()) == (b"application/json", LYON)
    reply = call(module, "GET", "/cities/raw", [(b"accept", b"application/msgpack")])
    assert (header(reply, b"content-type"), reply.json()) == (b"application/json", LYON)


@example("dependencies/struct_dependency.py")
def check_struct_dependency(module: ModuleType) -> None:
    auth = [*JSON, (b"authorization", b"Bearer secret")]
    reply = call(module, "POST", "/cities", auth, msgspec.json.encode(LYON))
    assert (reply.status, reply.json()) == (200, LYON)
    negative = msgspec.json.encode({**LYON, "population": -1})
    assert call(module, "POST", "/cities", auth, negative).status == 400
    invalid = msgspec.json.encode({"name": "Lyon"})
    assert error_locs(call(module, "POST", "/cities", auth, invalid)) == [["body", "population"]]
    # Without credentials the authentication dependency answers, even for a bad body.
    assert call(module, "POST", "/cities", JSON, invalid).status == 401


@example("dependencies/inclusion_dependency.py")
def check_inclusion_dependency(module: ModuleType) -> None:
    city = msgspec.json.encode({"name": "Lyon"})
    assert call(module, "POST", "/open/cities", JSON, city).json() == {"name": "Lyon"}
    assert call(module, "POST", "/signed/cities", JSON, city).status == 422
    both = msgspec.json.encode({"city": {"name": "Lyon"}, "signature": {"author": "ada"}})
    assert call(module, "POST", "/signed/cities", JSON, both).json() == {"name": "Lyon"}
    paths = openapi(module)["paths"]
    schemas = [
        paths[path]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        for path in ("/open/cities", "/signed/cities")
    ]
    assert schemas == [
        "#/components/schemas/City",
        "#/components/schemas/Body_create_city_signed_cities_post",
    ]


@example("differences/vendor_media_type.py")
def check_vendor_media_type(module: ModuleType) -> None:
    reply = call(module, "GET", "/cities/1")
    assert (reply.status, reply.json()) == (200, LYON)
    assert header(reply, b"content-type") == b"application/vnd.api+json"
    responses = openapi(module)["paths"]["/cities/1"]["get"]["responses"]
    assert list(responses["200"]["content"]) == ["application/vnd.api+json"]


@pytest.mark.parametrize(
    "path", sorted(path for path, (_, per_twin) in EXAMPLES.items() if per_twin)
)
@pytest.mark.parametrize("twin_name", TWIN_NAMES)
def test_example_on_each_twin(path: str, twin_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    check, _ = EXAMPLES[path]
    check(load_on(path, get_twin(twin_name), monkeypatch))


@pytest.mark.parametrize(
    "path", sorted(path for path, (_, per_twin) in EXAMPLES.items() if not per_twin)
)
def test_example_without_routes_of_ours(path: str, capsys: pytest.CaptureFixture[str]) -> None:
    check, _ = EXAMPLES[path]
    check(load(path, module_name(path)))
    printed = capsys.readouterr().out.split()
    if printed:
        assert printed == [msgspec_fastapi.IMPLEMENTATION]


def test_every_example_file_is_run_by_a_test() -> None:
    files = {path.relative_to(DOCS_SRC).as_posix() for path in DOCS_SRC.rglob("*.py")}
    assert files == set(EXAMPLES)


def test_every_example_file_is_included_in_a_page() -> None:
    included = {
        match
        for page in DOCS.rglob("*.md")
        for match in re.findall(r'--8<-- "docs_src/([^"]+)"', page.read_text())
    }
    assert set(EXAMPLES) <= included
