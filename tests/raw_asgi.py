"""Send one HTTP request straight to an ASGI app, as a server would, and record the reply.

No TestClient: the request is a scope plus the messages `receive` hands out, the reply
is every message the app sent. The scope is built the way uvicorn and hypercorn build
it: the request target's path is percent-decoded (UTF-8, invalid bytes replaced) and the
query string is passed on raw.

Nothing here catches an exception: one that escapes the app escapes the call, so a test
that expects it says so with `pytest.raises`. A hang is turned into TimeoutError.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import unquote

import msgspec

Headers = Sequence[tuple[bytes, bytes]]
Message = dict[str, Any]

DISCONNECT: Message = {"type": "http.disconnect"}
JSON = [(b"content-type", b"application/json")]
TIMEOUT = 30.0  # seconds before a request that hangs raises TimeoutError


@dataclass(frozen=True)
class Reply:
    """What the app sent, message by message, and how often it called `receive`."""

    sent: tuple[Message, ...]
    received: int

    @property
    def status(self) -> int | None:
        starts = [m["status"] for m in self.sent if m["type"] == "http.response.start"]
        return starts[0] if starts else None

    @property
    def headers(self) -> list[tuple[bytes, bytes]]:
        for message in self.sent:
            if message["type"] == "http.response.start":
                return [tuple(pair) for pair in message.get("headers", [])]
        return []

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body")

    @property
    def finished(self) -> bool:
        """The response was sent to its end: the last message is a final body message."""
        last = self.sent[-1] if self.sent else {}
        return last.get("type") == "http.response.body" and not last.get("more_body", False)

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


def body_messages(chunks: Sequence[bytes] = (b"",), complete: bool = True) -> list[Message]:
    """`http.request` messages carrying `chunks`, the last one without more_body.

    With `complete=False` every one says more_body: the body is never finished.
    """
    chunks = chunks or (b"",)
    last = len(chunks) - 1
    return [
        {"type": "http.request", "body": chunk, "more_body": not complete or i < last}
        for i, chunk in enumerate(chunks)
    ]


async def send_messages(
    app: Any,
    scope: dict[str, Any],
    messages: Sequence[Message],
    then: Literal["disconnect", "wait"] = "disconnect",
    timeout: float = TIMEOUT,
) -> Reply:
    """Run `app` on `scope`; each call to `receive` takes the next of `messages`.

    When they run out, `receive` answers `http.disconnect` (`then="disconnect"`: the
    client has gone) or never returns (`then="wait"`: the client is still there and
    sends nothing more, so an app that reads on hangs until `timeout`).
    """
    pending = list(messages)
    sent: list[Message] = []
    received = 0

    async def receive() -> Message:
        nonlocal received
        received += 1
        if pending:
            return pending.pop(0)
        if then == "wait":
            await asyncio.Event().wait()
        return dict(DISCONNECT)

    async def send(message: Message) -> None:
        sent.append(message)

    await asyncio.wait_for(app(scope, receive, send), timeout)
    return Reply(tuple(sent), received)


async def send_request(
    app: Any,
    method: str,
    target: bytes,
    headers: Headers = (),
    chunks: Sequence[bytes] = (b"",),
    complete: bool = True,
    then: Literal["disconnect", "wait"] = "disconnect",
) -> Reply:
    """One request with its body in `chunks`; with `complete=False` the client leaves
    (an `http.disconnect`) instead of finishing the body. After the body, `then` as for
    `send_messages` (a stream runs to its end only with "wait")."""
    return await send_messages(
        app, scope_for(method, target, headers), body_messages(chunks, complete), then
    )


def request(
    app: Any, method: str, target: bytes, headers: Headers = (), body: bytes = b""
) -> Reply:
    """`send_request` on a new event loop, with the body in one message."""
    return asyncio.run(send_request(app, method, target, headers, (body,)))


_runner: asyncio.Runner | None = None


def run_on_one_loop(coroutine: Any) -> Any:
    """Run `coroutine` on one event loop kept for the whole process (the fuzz harnesses
    send many requests, and a new loop per request is slow)."""
    global _runner
    if _runner is None:
        _runner = asyncio.Runner()
    return _runner.run(coroutine)
