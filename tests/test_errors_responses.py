"""`errors="fastapi"` and responses: a returned value that fails validation against the
response model raises FastAPI's `ResponseValidationError` with the errors FastAPI gives
(Pydantic's, under `("response", ...)`) and the same `body`.

The differential returns a generated table of values from the same routes written with
`APIRouter` and Pydantic models and with `MsgspecRouter(errors="fastapi")` and Structs,
on both tiers and both twins; an exception handler answers with the error's `errors()`
and `body`, which are compared whole. MSGSPEC_FASTAPI_ERROR_CASES sets the number of
generated values (half of it); `make fuzz-errors` runs more.
"""

from __future__ import annotations

import json
import os
import random
from typing import Annotated, Any

import msgspec
import pytest
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import ResponseValidationError
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient
from pydantic import BaseModel, Field
from support import delegating_dependency
from twins import Twin

SEED = 20261204
# Half the body differential's count (`make fuzz-errors` sets it).
CASES = int(os.environ.get("MSGSPEC_FASTAPI_ERROR_CASES", "300")) // 2


class Part(msgspec.Struct):
    label: Annotated[str, msgspec.Meta(max_length=3)]
    size: float = 1.0


class PartModel(BaseModel):
    label: Annotated[str, Field(max_length=3)]
    size: float = 1.0


class Item(msgspec.Struct):
    n: int
    tags: list[int] = []
    part: Part | None = None
    flag: bool = False


class ItemModel(BaseModel):
    n: int
    tags: list[int] = []
    part: PartModel | None = None
    flag: bool = False


def _routes(router: APIRouter, item: Any, delegated: bool) -> None:
    prefix = "/delegated" if delegated else ""
    dependencies = [Depends(delegating_dependency)] if delegated else []

    def returned(v: str) -> Any:
        return json.loads(v)

    def annotated(v: str) -> Any:
        return json.loads(v)

    annotated.__annotations__ = {"v": str, "return": item}
    for path, endpoint, model in [
        ("/model", returned, item),
        ("/many", returned, list[item]),
        ("/annotated", annotated, None),
    ]:
        options: dict[str, Any] = {"dependencies": dependencies}
        if model is not None:
            options["response_model"] = model
        router.add_api_route(prefix + path, endpoint, methods=["GET"], **options)


def _client(router: APIRouter, item: Any) -> TestClient:
    for delegated in (False, True):
        _routes(router, item, delegated)
    app = FastAPI()

    @app.exception_handler(ResponseValidationError)
    async def report(request: Request, exc: ResponseValidationError) -> JSONResponse:
        return JSONResponse({"errors": exc.errors(), "body": exc.body}, status_code=500)

    app.include_router(router)
    return TestClient(app)


def fastapi_client() -> TestClient:
    return _client(APIRouter(), ItemModel)


def msgspec_client(twin: Twin, **options: Any) -> TestClient:
    return _client(twin.router_class(**options), Item)


def _item(rng: random.Random) -> Any:
    item: dict[str, Any] = {"n": rng.choice([1, "2", "x", None, 1.5, []])}
    if rng.random() < 0.5:
        item["tags"] = rng.choice([[1], [1, "y"], ["3"], "z", None])
    if rng.random() < 0.4:
        item["part"] = rng.choice(
            [{"label": "ab"}, {"label": "abcd"}, {"size": 1}, {"label": "a", "size": "q"}, 5]
        )
    if rng.random() < 0.3:
        item["flag"] = rng.choice([True, "true", 2, "x"])
    if rng.random() < 0.1:
        del item["n"]
    return item


def generate(count: int) -> list[str]:
    """`count` distinct request paths, each carrying the value its route returns."""
    rng = random.Random(SEED)
    table: dict[str, None] = {}
    while len(table) < count:
        prefix = rng.choice(["", "/delegated"])
        shape = rng.choice(["model", "many", "annotated"])
        value: Any = (
            [_item(rng) for _ in range(rng.randint(0, 3))] if shape == "many" else _item(rng)
        )
        if rng.random() < 0.1:
            value = rng.choice([[], "x", 1, None])
        table[f"{prefix}/{shape}?v={json.dumps(value)}"] = None
    return list(table)


@pytest.fixture(scope="module")
def fastapi_answers() -> dict[str, tuple[int, Any]]:
    client = fastapi_client()
    answers = {}
    for path in generate(CASES):
        response = client.get(path)
        answers[path] = (response.status_code, response.json())
    return answers


def test_generated_responses_fail_as_in_fastapi(
    twin: Twin, fastapi_answers: dict[str, tuple[int, Any]]
) -> None:
    client = msgspec_client(twin, errors="fastapi")
    differing = []
    for path, expected in fastapi_answers.items():
        response = client.get(path)
        got = (response.status_code, response.json())
        if got != expected:
            differing.append((path, expected, got))
    statuses = {status for status, _ in fastapi_answers.values()}
    assert statuses >= {200, 500}, "the table should hold valid and invalid values"
    assert not differing, (
        f"{len(differing)} of {len(fastapi_answers)} differ; first: {differing[0]}"
    )


def test_default_response_errors_stay_msgspecs(twin: Twin) -> None:
    response = msgspec_client(twin).get('/model?v={"n": "x"}')
    assert response.status_code == 500
    assert response.json()["errors"] == [
        {
            "loc": ["response"],
            "msg": "Expected `int`, got `str` - at `$.n`",
            "type": "value_error.msgspec",
        }
    ]


def test_a_value_pydantic_would_take_keeps_msgspecs_error(twin: Twin) -> None:
    # Pydantic's lax bool takes "yes"; msgspec's refuses it, and the value is not sent.
    path = '/model?v={"n": 1, "flag": "yes"}'
    assert fastapi_client().get(path).status_code == 200
    response = msgspec_client(twin, errors="fastapi").get(path)
    assert response.status_code == 500
    assert response.json()["errors"][0]["type"] == "value_error.msgspec"
