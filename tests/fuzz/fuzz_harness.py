"""The fuzz target: one arbitrary request, sent to both twins on both tiers.

A request is drawn from a `Source` of choices and bytes, so that the same drawing code
serves atheris (`AtherisSource`, coverage-guided, in `make fuzz`) and hypothesis
(`DrawSource`, in the normal test run). It mixes known shapes (the routes of
`hostile_app`, valid bodies, real content types) with arbitrary bytes in the method,
path, query string, header names and values, body and its chunking, so that most
requests get past routing and into the request path.

`check` sends the request to both tiers of `hostile_app.APPS["pure"]` and
`APPS["compiled"]` (where the compiled twin does not import, `twins.get_twin` skips the
test or fails it), and fails when
- the twins' answers differ in any byte, or when one raises and the other does not;
- the two tiers' answers differ (the design promises the same responses from both);
- an exception other than ResponseValidationError (which the /pick routes provoke on
  purpose, and which FastAPI leaves to the server) escapes the app, FastAPI's own
  failure to redirect a non-UTF-8 query string aside (`fastapi_redirect_failure`);
- the app answers with a 5xx, or leaves the response unfinished, or hangs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar
from urllib.parse import quote

import msgspec
from hostile_app import APPS, EVERYTHING, TIERS
from raw_asgi import run_on_one_loop as run
from raw_asgi import send_request
from twins import outcome

T = TypeVar("T")

ROUTES = [
    ("POST", "/everything"),
    ("POST", "/anything"),
    ("POST", "/optional"),
    ("POST", "/small"),
    ("GET", "/items/{}"),
    ("GET", "/filter"),
    ("POST", "/form"),
    ("GET", "/words/{}"),
    ("GET", "/pick/{}"),
]
METHODS = ["GET", "POST", "PUT", "HEAD", "OPTIONS", "DELETE"]
SEGMENTS = [b"1", b"1/", b"-3", b"+5", b"05", b"1_0", b"%31", b"9" * 30, b"", b"%FF", b"a/b"]
QUERIES = [
    b"",
    b"q=x&n=2",
    b"n=%2B5&flag=yes&tags=a&tags=b",
    b"when=2024-02-29&flag=off",
    b"n=&q",
    b"n=1e3",
    b"q=%E9%9B%BB&tags=%FF",
]
CONTENT_TYPES = [
    b"application/json",
    b"application/json",
    b"application/json",
    b"APPLICATION/JSON; charset=utf-8",
    b"application/problem+json",
    b"text/plain",
    b"",
    b"application/json\xff",
    b"multipart/form-data; boundary=x",
    b"application/x-www-form-urlencoded",
    b"multipart/form-data",
]
HEADER_NAMES = [b"content-type", b"content-length", b"x-token", b"cookie", b"accept"]
BODIES = [
    msgspec.json.encode(EVERYTHING),
    msgspec.json.encode({"name": "x"}),
    msgspec.json.encode({"x": 1, "y": 2}),
    b'{"value": [1, 2.5, "x", null, true, {"a": {}}]}',
    b"[" * 3000 + b"]" * 3000,
    b"1e400",
    b"9" * 400,
    b"",
    b"null",
    b"name=ada&age=3&tags=a&tags=b",
    b"name=&age=x&other=1",
    b'--x\r\nContent-Disposition: form-data; name="name"\r\n\r\nada\r\n'
    b'--x\r\nContent-Disposition: form-data; name="avatar"; filename="a"\r\n\r\n1\r\n--x--\r\n',
]


class Source(Protocol):
    """Where a request's choices and bytes come from."""

    def pick(self, options: Sequence[T]) -> T: ...

    def data(self, max_size: int) -> bytes: ...

    def number(self, upper: int) -> int: ...


@dataclass(frozen=True)
class FuzzRequest:
    method: str
    target: bytes  # after the /direct or /delegated prefix
    headers: tuple[tuple[bytes, bytes], ...]
    chunks: tuple[bytes, ...]
    leaves: bool  # the client disconnects instead of finishing the body


def draw_request(source: Source) -> FuzzRequest:
    method, template = source.pick(ROUTES)
    if source.number(9) == 0:
        method = source.pick(METHODS)
    segment = source.pick([*SEGMENTS, None])
    if segment is None:
        segment = quote(source.data(24), safe="/%+:@").encode()
    path = template.replace("{}", segment.decode("latin-1")).encode("latin-1")
    query = source.pick([*QUERIES, None])
    if query is None:
        query = source.data(60)
    elif source.number(3) == 0:
        query += source.data(20)
    headers: list[tuple[bytes, bytes]] = []
    content_type = source.pick([*CONTENT_TYPES, None, b"?"])
    if content_type == b"?":
        content_type = source.data(40)
    if content_type is not None:
        headers.append((b"content-type", content_type))
    for _ in range(source.number(3)):
        name = source.pick([*HEADER_NAMES, None])
        if name is None:
            name = source.data(12).lower()
        headers.append((name, source.data(40)))
    body = source.pick([*BODIES, None])
    if body is None:
        body = source.data(200)
    elif source.number(2) == 0:
        at = source.number(len(body))
        body = body[:at] + source.data(8) + body[at + source.number(4) :]
    cuts = sorted({source.number(len(body)) for _ in range(source.number(3))})
    chunks = [body[start:end] for start, end in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    return FuzzRequest(
        method=method,
        target=path + (b"?" + query if query else b""),
        headers=tuple(headers),
        chunks=tuple(chunks),
        leaves=source.number(15) == 0,
    )


def answer(app: Any, tier: str, request: FuzzRequest) -> tuple[Any, ...]:
    """`request` sent to `tier` of `app`: ("reply", the Reply) or ("raised", ...)."""
    target = b"/" + tier.encode() + request.target
    reply = send_request(
        app, request.method, target, request.headers, request.chunks, not request.leaves
    )
    return run(outcome(reply))


def check(request: FuzzRequest) -> None:
    """The properties listed in the module docstring, for one request."""
    answers = {}
    for tier in TIERS:
        pure = answers[tier] = answer(APPS["pure"], tier, request)
        compiled = answer(APPS["compiled"], tier, request)
        assert compiled == pure, f"twins differ on {tier}: {request}"
        if pure[0] == "raised":
            if fastapi_redirect_failure(request, pure):
                continue
            assert pure[1] == "ResponseValidationError", f"{pure} escaped on {tier}: {request}"
            assert b"/pick/" in request.target
            continue
        reply = pure[1]
        if not reply.sent:
            assert request.leaves, f"no answer on {tier}: {request}"
            continue
        assert reply.status is not None, f"no response start on {tier}: {request}"
        assert reply.status < 500, f"{reply.status} on {tier}: {request}"
        assert reply.finished, f"unfinished response on {tier}: {request}"
    direct, delegated = (without_prefix(answers[tier]) for tier in TIERS)
    assert direct == delegated, f"tiers differ: {request}"


def fastapi_redirect_failure(request: FuzzRequest, answer: tuple[Any, ...]) -> bool:
    """FastAPI's own failure, before any route runs, in any FastAPI app.

    A path that ends in "/" and matches no route gets a redirect to the path without the
    slash; FastAPI builds its URL with Starlette's `URL(scope=...)`, which decodes the
    query string as UTF-8, so a query string that is not UTF-8 raises UnicodeDecodeError.
    """
    path, _, query = request.target.partition(b"?")
    try:
        query.decode()
    except UnicodeDecodeError:
        return answer[1] == "UnicodeDecodeError" and path.endswith(b"/")
    return False


def without_prefix(answer: tuple[Any, ...]) -> tuple[Any, ...]:
    """An answer with the tier prefix blanked out (redirects name it in `location`)."""

    def blank(value: bytes) -> bytes:
        return value.replace(b"/direct", b"/TIER").replace(b"/delegated", b"/TIER")

    if answer[0] != "reply":
        return answer
    messages = []
    for message in answer[1].sent:
        message = dict(message)
        if "headers" in message:
            message["headers"] = [(name, blank(value)) for name, value in message["headers"]]
        if "body" in message:
            message["body"] = blank(message["body"])
        messages.append(message)
    return ("reply", messages)
