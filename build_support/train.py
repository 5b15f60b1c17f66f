"""The training run of a profile-guided build (setup.py, MSGSPEC_FASTAPI_PGO=1).

Serves a FastAPI application the routes a service and the micro benchmark run (Struct
and Pydantic bodies, a path parameter, a query, two dependencies with a generator, the
error answers) in process, through FastAPI's own layers and the compiled route index,
so that the compiler learns which paths of the compiled modules are hot. Every answer's
status is checked: a profile taken from broken routes would train the build on the
error path.

Run by setup.py with the instrumented build first on the path:
    python build_support/train.py [--requests N]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

import msgspec
from fastapi import Depends, FastAPI, Header, HTTPException, Path, Query
from pydantic import BaseModel

import msgspec_fastapi
from msgspec_fastapi import MsgspecRouter, install_dispatch


class Point(msgspec.Struct):
    name: str
    x: float
    y: float
    tags: list[str] = []


class Page(msgspec.Struct):
    count: int
    items: list[Point]


class Search(msgspec.Struct):
    prefix: str
    limit: int = 10


class Order(BaseModel):
    item: str
    quantity: int
    note: str | None = None


class Session:
    def __init__(self) -> None:
        self.added: list[Any] = []


POINTS = [Point(f"p{k}", k * 0.5, -k * 0.25, ["a", "b"][: k % 3]) for k in range(200)]
USERS = {"Bearer token": "ada"}


async def session() -> AsyncIterator[Session]:
    yield Session()


async def current_user(
    db: Annotated[Session, Depends(session)], authorization: Annotated[str, Header()]
) -> str:
    user = USERS.get(authorization)
    if user is None:
        raise HTTPException(status_code=401, detail="unknown token")
    return user


def build_app(
    router_class: type[MsgspecRouter] = MsgspecRouter,
    install: Callable[[FastAPI], None] = install_dispatch,
) -> FastAPI:
    """The application, its routes on `router_class`, `install` putting in the route index
    and the entry."""
    router = router_class()

    @router.get("/points/{index}")
    async def get_point(index: Annotated[int, Path(ge=0)]) -> Point:
        if index >= len(POINTS):
            raise HTTPException(status_code=404, detail="no such point")
        return POINTS[index]

    @router.get("/points")
    async def list_points(
        limit: Annotated[int, Query(ge=1, le=200)] = 20, offset: Annotated[int, Query(ge=0)] = 0
    ) -> Page:
        items = POINTS[offset : offset + limit]
        return Page(len(items), items)

    @router.post("/points/search")
    async def search(query: Search) -> Page:
        items = [p for p in POINTS if p.name.startswith(query.prefix)][: query.limit]
        return Page(len(items), items)

    @router.post("/points/validate")
    async def validate(points: list[Point]) -> int:
        return len(points)

    @router.get("/owned/{index}")
    async def owned(
        index: int,
        db: Annotated[Session, Depends(session)],
        user: Annotated[str, Depends(current_user)],
    ) -> dict[str, Any]:
        return {"point": POINTS[index % len(POINTS)], "owner": user}

    @router.post("/owned")
    async def add_owned(
        point: Point,
        db: Annotated[Session, Depends(session)],
        user: Annotated[str, Depends(current_user)],
    ) -> Point:
        db.added.append(point)
        return point

    @router.post("/orders")
    async def order(body: Order, user: Annotated[str, Depends(current_user)]) -> Order:
        return body

    @router.post("/orders/batch")
    async def orders(batch: list[Order]) -> int:
        return len(batch)

    @router.get("/orders/{item}")
    def order_of(item: str, quantity: int = 1) -> Order:
        return Order(item=item, quantity=quantity)

    app = FastAPI()
    app.include_router(router)
    install(app)
    return app


AUTH = ((b"authorization", b"Bearer token"),)
JSON = ((b"content-type", b"application/json"),)
SEARCH = msgspec.json.encode(Search("p1"))
VALID = msgspec.json.encode(POINTS[:20])
POINT = msgspec.json.encode(POINTS[3])
ORDER = b'{"item": "tea", "quantity": 2}'
# Long enough that the scans of a body run as they do on a large one.
ORDERS = b"[" + b",".join([ORDER] * 500) + b"]"

# (method, path, query, headers, body, the status it must answer)
REQUESTS: tuple[tuple[str, str, bytes, tuple[tuple[bytes, bytes], ...], bytes, int], ...] = (
    ("GET", "/points/7", b"", (), b"", 200),
    ("GET", "/points/999", b"", (), b"", 404),
    ("GET", "/points/x", b"", (), b"", 422),
    ("GET", "/points", b"limit=100&offset=5", (), b"", 200),
    ("GET", "/points", b"limit=0", (), b"", 422),
    ("POST", "/points/search", b"", JSON, SEARCH, 200),
    ("POST", "/points/search", b"", JSON, b'{"prefix": 1}', 422),
    ("POST", "/points/search", b"", JSON, b"{", 400),
    ("POST", "/points/validate", b"", JSON, VALID, 200),
    ("GET", "/owned/3", b"", AUTH, b"", 200),
    ("GET", "/owned/3", b"", (), b"", 422),
    ("POST", "/owned", b"", (*AUTH, *JSON), POINT, 200),
    ("POST", "/orders", b"", (*AUTH, *JSON), ORDER, 200),
    ("POST", "/orders", b"", (*AUTH, *JSON), b'{"item": "tea"}', 422),
    ("POST", "/orders/batch", b"", JSON, ORDERS, 200),
    ("GET", "/orders/tea", b"quantity=3", (), b"", 200),
    ("GET", "/nowhere", b"", (), b"", 404),
)


async def call(app: Any, request: tuple[Any, ...]) -> int:
    method, path, query, headers, body, _ = request
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query,
        "headers": [(b"host", b"train"), *headers, (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 1),
        "server": ("train", 80),
    }
    sent = False
    status = 0

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    return status


async def train(app: Any, requests: int) -> None:
    """`requests` of each kind, in turn, through `app`; stops at an unexpected status, or
    where the application's entry does not serve it."""
    for request in REQUESTS:
        for _ in range(requests):
            status = await call(app, request)
            if status != request[-1]:
                raise SystemExit(
                    f"train.py: {request[0]} {request[1]} answered {status}, not {request[-1]}"
                )
    status = getattr(app, "msgspec_fastapi_entry", None)
    if status is None or not status.installed:
        reason = "install_dispatch was not called" if status is None else status.reason
        raise SystemExit(f"train.py: the application's entry is not used: {reason}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="per request kind")
    args = parser.parse_args()
    # A profile of the pure twin would train nothing.
    if msgspec_fastapi.IMPLEMENTATION != "compiled":
        sys.exit("train.py: the compiled modules did not load")
    asyncio.run(train(build_app(), args.requests))


if __name__ == "__main__":
    main()
