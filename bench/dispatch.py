"""Routing cost with many included routers: GET to the first and the last of N.

Each of N `MsgspecRouter(prefix=f"/r{k}")` has `GET /items/{item_id}` (a Struct) and
`POST /items` (echoes a Struct). The whole application (FastAPI's middleware stack
included) is called as an ASGI app, without a server; the figure is the best of several
batches, in µs of process CPU time per request (`time.process_time`: a core shared with
other work inflates wall time, not this). Each twin runs in its own process (MSGSPEC_FASTAPI_PURE);
pin it, e.g. `taskset -c 1 .venv/bin/python bench/dispatch.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from typing import Any

import msgspec


class Item(msgspec.Struct):
    id: int
    name: str


def build(routers: int, install: bool) -> Any:
    from fastapi import FastAPI

    import msgspec_fastapi
    from msgspec_fastapi import MsgspecRouter

    app = FastAPI()
    for k in range(routers):
        router = MsgspecRouter(prefix=f"/r{k}")

        @router.get("/items/{item_id}")
        async def get_item(item_id: int) -> Item:
            return Item(item_id, "x")

        @router.post("/items")
        async def post_item(item: Item) -> Item:
            return item

        app.include_router(router)
    if install:
        msgspec_fastapi.install_dispatch(app)
    return app


def scope(path: str) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"test")],
        "client": ("127.0.0.1", 1),
        "server": ("test", 80),
    }


async def per_request(app: Any, path: str, requests: int, batches: int) -> float:
    message = {"type": "http.request", "body": b"", "more_body": False}
    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        return message

    async def send(sent: dict[str, Any]) -> None:
        if sent["type"] == "http.response.start":
            statuses.append(sent["status"])

    for _ in range(50):
        await app(scope(path), receive, send)
    assert set(statuses) == {200}, statuses[:3]
    best = float("inf")
    for _ in range(batches):
        start = time.process_time()
        for _ in range(requests):
            await app(scope(path), receive, send)
        best = min(best, (time.process_time() - start) / requests)
    return best * 1e6


async def measure(routers: int, requests: int, batches: int) -> dict[str, float]:
    import msgspec_fastapi

    results: dict[str, float] = {"implementation": msgspec_fastapi.IMPLEMENTATION}  # type: ignore[dict-item]
    for install in (False, True):
        one, many = build(1, install), build(routers, install)
        tag = "install" if install else "plain"
        # FastAPI's own loop at the last router is slow: fewer requests there.
        slow = max(20, requests // 20) if not install else requests
        results[f"{tag} 1 router"] = await per_request(one, "/r0/items/5", requests, batches)
        results[f"{tag} first"] = await per_request(many, "/r0/items/5", requests, batches)
        results[f"{tag} last"] = await per_request(many, f"/r{routers - 1}/items/5", slow, batches)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--routers", type=int, default=300)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--batches", type=int, default=9)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(measure(args.routers, args.requests, args.batches))))
        return
    rows = []
    for pure in ("0", "1"):
        env = {**os.environ, "MSGSPEC_FASTAPI_PURE": pure}
        command = [sys.executable, __file__, "--child", *sys.argv[1:]]
        output = subprocess.run(command, env=env, check=True, capture_output=True, text=True)
        rows.append(json.loads(output.stdout))
    print(f"GET /r{{k}}/items/5, {args.routers} included MsgspecRouters, µs per request")
    header = ["", "1 router", "first of N", "last of N"]
    print("".join(f"{h:>14}" for h in header))
    for row in rows:
        for tag in ("plain", "install"):
            label = f"{row['implementation']} {tag}"
            cells = [row[f"{tag} 1 router"], row[f"{tag} first"], row[f"{tag} last"]]
            print(f"{label:>14}" + "".join(f"{c:14.1f}" for c in cells))


if __name__ == "__main__":
    main()
