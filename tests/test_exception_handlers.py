"""Exception handlers get the request with its body readable, as FastAPI gives it.

The application's handlers for a 422, an HTTPException and a custom exception each answer
with `await request.body()`. The request path has read the body already, so the handler's
Request must return it instead of reading `receive` again, which would wait for ever for a
body the client already sent. Requests go straight to the ASGI app with a client that stays
connected after its body, so that a handler that waits fails the test with a timeout.
"""

import asyncio
from typing import Any

import msgspec
import pydantic
import pytest
from fastapi import APIRouter, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from raw_asgi import JSON, Reply, body_messages, scope_for, send_messages
from support import assert_tier, tier_router
from twins import Twin

TIMEOUT = 10.0


class City(msgspec.Struct):
    name: str
    population: int


class PydanticCity(pydantic.BaseModel):
    name: str
    population: int


class Oops(Exception):
    """An exception of the application's own, with a handler of its own."""


async def echo_body(request: Request, exc: Exception) -> JSONResponse:
    body = await request.body()
    return JSONResponse({"handled": type(exc).__name__, "body": body.decode()}, status_code=299)


def build_app(router: APIRouter, city: Any) -> FastAPI:
    async def invalid(city: city) -> str:  # type: ignore[valid-type]
        return "unreachable"

    async def teapot(city: city) -> str:  # type: ignore[valid-type]
        raise HTTPException(418, "I'm a teapot")

    async def custom(city: city) -> str:  # type: ignore[valid-type]
        raise Oops

    async def no_body() -> str:
        raise HTTPException(418, "I'm a teapot")

    router.add_api_route("/invalid", invalid, methods=["POST"])
    router.add_api_route("/teapot", teapot, methods=["POST"])
    router.add_api_route("/custom", custom, methods=["POST"])
    router.add_api_route("/no-body", no_body, methods=["POST"])
    app = FastAPI()
    app.add_exception_handler(RequestValidationError, echo_body)
    app.add_exception_handler(HTTPException, echo_body)
    app.add_exception_handler(Oops, echo_body)
    app.include_router(router)
    return app


def post(app: FastAPI, path: str, chunks: list[bytes]) -> Reply:
    """POST `chunks` as the body; the client stays connected after it (receive waits)."""
    scope = scope_for("POST", path.encode(), JSON)
    messages = body_messages(chunks)
    return asyncio.run(send_messages(app, scope, messages, then="wait", timeout=TIMEOUT))


CASES = [
    ("/invalid", [b'{"name": "Oslo", "population": "many"}'], "RequestValidationError"),
    ("/invalid", [b'{"name": "Oslo",', b' "population": "many"}'], "RequestValidationError"),
    ("/teapot", [b'{"name": "Oslo", "population": 1}'], "HTTPException"),
    ("/custom", [b'{"name": "Oslo", "population": 1}'], "Oops"),
    ("/no-body", [b"sent anyway"], "HTTPException"),
]


@pytest.mark.parametrize(("path", "chunks", "handled"), CASES)
def test_a_handler_reads_the_body_the_route_received(
    twin: Twin, tier: str, path: str, chunks: list[bytes], handled: str
) -> None:
    router = tier_router(twin, tier)
    app = build_app(router, City)
    assert_tier(router, tier)

    reply = post(app, path, chunks)

    assert reply.status == 299
    assert reply.json() == {"handled": handled, "body": b"".join(chunks).decode()}


@pytest.mark.parametrize(("path", "chunks", "handled"), CASES)
def test_the_handler_sees_what_fastapi_s_handler_sees(
    twin: Twin, tier: str, path: str, chunks: list[bytes], handled: str
) -> None:
    expected = post(build_app(APIRouter(), PydanticCity), path, chunks)

    reply = post(build_app(tier_router(twin, tier), City), path, chunks)

    assert (reply.status, reply.json()) == (expected.status, expected.json())
