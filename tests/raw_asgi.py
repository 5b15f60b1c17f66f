"""Send one HTTP request straight to an ASGI app, as a server would, and record the reply.

No TestClient: the request is a scope plus `http.request` messages, the reply is the list
of messages the app sent. The scope is built the way uvicorn and hypercorn build it: the
request target's path is percent-decoded (UTF-8, invalid bytes replaced) and the query
string is passed on raw.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import msgspec

Headers = Sequence[tuple[bytes, bytes]]


@dataclass(frozen=True)
class Reply:
    """What the app sent: status, headers and body, and the messages themselves."""

    messages: tuple[tuple[Any, Any, Any], ...]

    @property
    def status(self) -> int | None:
        return self.messages[0][0] if self.messages else None

    @property
    def headers(self) -> list[tuple[bytes, bytes]]:
        return list(self.messages[0][1]) if self.messages else []

    @property
    def body(self) -> bytes:
        return b"".join(body or b"" for _, _, body in self.messages[1:])

    def json(self) -> Any:
        return msgspec.json.decode(self.body)


def scope_for(method: str, target: bytes, headers: Headers) -> dict[str, Any]:
    raw_path, _, query = target.partition(b"?")
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": unquote(raw_path.decode("latin-1")),
        "raw_path": raw_path,
        "root_path": "",
        "query_string": query,
        "headers": [(b"host", b"test"), *headers],
        "client": ("127.0.0.1", 1),
        "server": ("test", 80),
    }


async def send_request(
    app: Any,
    method: str,
    target: bytes,
    headers: Headers = (),
    chunks: Sequence[bytes] = (b"",),
    complete: bool = True,
) -> Reply:
    """Run one request through `app`; exceptions escaping the app propagate.

    With `complete=False` every message says more_body: the client leaves (an
    `http.disconnect`) instead of finishing the body.
    """
    chunks = chunks or (b"",)
    pending = [
        {"type": "http.request", "body": chunk, "more_body": not complete or i < len(chunks) - 1}
        for i, chunk in enumerate(chunks)
    ]
    sent: list[tuple[Any, Any, Any]] = []

    async def receive() -> dict[str, Any]:
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append((message.get("status"), message.get("headers"), message.get("body")))

    await app(scope_for(method, target, headers), receive, send)
    return Reply(tuple(sent))


def request(
    app: Any, method: str, target: bytes, headers: Headers = (), body: bytes = b""
) -> Reply:
    """`send_request` on a new event loop, with the body in one message."""
    return asyncio.run(send_request(app, method, target, headers, (body,)))


JSON = [(b"content-type", b"application/json")]
