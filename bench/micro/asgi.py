"""Calling an ASGI app in-process the way a server would, without sockets or HTTP parsing.

The same code drives every variant, so its own cost is a constant added to each of them.
"""

import asyncio
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any

import msgspec

Message = MutableMapping[str, Any]
ASGIApp = Callable[..., Awaitable[None]]

_ASGI = {"version": "3.0", "spec_version": "2.3"}
_DISCONNECT = {"type": "http.disconnect"}


class WrongAnswer(Exception):
    """A variant answered with another status or body than expected."""


@dataclass(frozen=True)
class Case:
    """One benchmarked request and the response every variant must give."""

    key: str
    method: str
    path: str
    query: bytes
    body: bytes
    expected: object
    label: str
    # Request headers besides those every request has (see http_scope).
    headers: tuple[tuple[bytes, bytes], ...] = ()

    @property
    def expected_body(self) -> bytes:
        return msgspec.json.encode(self.expected)

    @property
    def target(self) -> str:
        """The path as a client sends it, with the query string if there is one."""
        return f"{self.path}?{self.query.decode()}" if self.query else self.path


@dataclass
class Response:
    status: int
    body: bytes
    headers: Iterable[tuple[bytes, bytes]] = ()


def http_scope(
    method: str,
    path: str,
    query: bytes,
    body: bytes,
    extra_headers: tuple[tuple[bytes, bytes], ...] = (),
) -> dict[str, Any]:
    """A scope shaped like the one uvicorn builds for an HTTP/1.1 request."""
    headers = [(b"host", b"127.0.0.1:8000"), (b"accept", b"*/*")]
    if method != "GET":
        headers.append((b"content-type", b"application/json"))
        headers.append((b"content-length", str(len(body)).encode()))
    headers.extend(extra_headers)
    return {
        "type": "http",
        "asgi": _ASGI,
        "http_version": "1.1",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
        "scheme": "http",
        "method": method,
        "root_path": "",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "headers": headers,
    }


async def call(app: ASGIApp, scope: dict[str, Any], body: bytes, state: dict[str, Any]) -> Response:
    """Run one request; the body comes in a single `http.request` message."""
    response = Response(0, b"")
    chunks: list[bytes] = []
    body_sent = False
    finished: asyncio.Future[None] | None = None
    done = False

    async def receive() -> Message:
        nonlocal body_sent, finished
        if not body_sent:
            body_sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        # Like a server: a later receive() waits until the response is complete, then the
        # client is gone. Apps that never ask again pay nothing for this.
        if not done:
            finished = asyncio.get_running_loop().create_future()
            await finished
        return _DISCONNECT

    async def send(message: Message) -> None:
        nonlocal done
        kind = message["type"]
        if kind == "http.response.start":
            response.status = message["status"]
            # Kept as sent, not copied: a constant cost, but as small as it can be.
            response.headers = message.get("headers", ())
        elif kind == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                done = True
                if finished is not None and not finished.done():
                    finished.set_result(None)

    # Apps write into the scope (route, path_params, ...), so each request gets its own copy,
    # and its own copy of the lifespan state as uvicorn does.
    request_scope = scope.copy()
    request_scope["state"] = state.copy()
    await app(request_scope, receive, send)
    response.body = b"".join(chunks)
    return response


class Lifespan:
    """Runs the app's lifespan protocol, so startup hooks and state exist as under a server."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.state: dict[str, Any] = {}
        self._inbox: asyncio.Queue[Message] = asyncio.Queue()
        self._outbox: asyncio.Queue[Message] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        scope = {"type": "lifespan", "asgi": _ASGI, "state": self.state}
        await self.app(scope, self._inbox.get, self._outbox.put)

    async def _expect(self, event: str) -> None:
        await self._inbox.put({"type": f"lifespan.{event}"})
        assert self._task is not None
        getter = asyncio.ensure_future(self._outbox.get())
        await asyncio.wait({getter, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if not getter.done():
            getter.cancel()
            self._task.result()  # re-raises the app's error, if any
            raise RuntimeError(f"the app ended its lifespan before lifespan.{event}.complete")
        message = getter.result()
        if message["type"] != f"lifespan.{event}.complete":
            raise RuntimeError(f"lifespan {event} failed: {message}")

    async def startup(self) -> None:
        self._task = asyncio.create_task(self._run())
        await self._expect("startup")

    async def shutdown(self) -> None:
        await self._expect("shutdown")
        assert self._task is not None
        await self._task
