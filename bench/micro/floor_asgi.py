"""Raw ASGI plumbing the hand-written floors share (app_floor.py, deps_floor.py): reading
a body, sending a JSON answer, the lifespan protocol, and the `bare` app's dict lookup."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

JSON_CONTENT_TYPE = (b"content-type", b"application/json")


async def read_body(receive: Receive) -> bytes:
    message = await receive()
    body: bytes = message.get("body", b"")
    if not message.get("more_body", False):
        return body
    # Only reached with a chunked body; the benchmark always sends one message.
    chunks = [body]
    while message.get("more_body", False):
        message = await receive()
        chunks.append(message.get("body", b""))
    return b"".join(chunks)


async def answer(send: Send, status: int, payload: bytes) -> None:
    headers = [JSON_CONTENT_TYPE, (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


async def lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        kind = message["type"].removeprefix("lifespan.")
        await send({"type": f"lifespan.{kind}.complete"})
        if kind == "shutdown":
            return


class BareApp:
    """The `bare` floor: no FastAPI, exact paths in one dict (`exact`), and a path with a
    trailing integer found by its parent (`with_id`), keyed by (method, path); the integer
    reaches the endpoint as the path parameter `id_name`."""

    def __init__(self, id_name: str = "item_id") -> None:
        self.exact: dict[tuple[str, str], ASGIApp] = {}
        self.with_id: dict[tuple[str, str], ASGIApp] = {}
        self.id_name = id_name

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        method, path = scope["method"], scope["path"]
        endpoint = self.exact.get((method, path))
        if endpoint is None:
            parent, _, last = path.rpartition("/")
            endpoint = self.with_id.get((method, parent)) if last.isdigit() else None
            if endpoint is None:
                await answer(send, 404, b'{"detail":"Not Found"}')
                return
            scope["path_params"] = {self.id_name: int(last)}
        await endpoint(scope, receive, send)
