"""The streaming mode (--stream): 1,000 cities as JSON Lines and as Server-Sent Events.

GET /stream/jsonl answers `application/jsonl`, one City per line; GET /stream/sse answers
`text/event-stream`, one `data:` event per City. Every variant streams the same first
STREAM_COUNT cities of the dataset from a generator, one item per body message, as a
server would send them. The measure is µs per request (all 1,000 items); the table also
shows items per second.

Frameworks frame the items a little differently (Litestar ends SSE lines with CRLF,
FastAPI's own streaming formats JSON itself), so each variant's first answer is checked
by parsing it back into items, which must equal the cities; after that, every timed
response must repeat that variant's first answer byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from .asgi import Case
from .cities import Dataset

STREAM_COUNT = 1000
ROUTE_LABELS = {
    "jsonl": f"GET /stream/jsonl ({STREAM_COUNT} items, JSON Lines)",
    "sse": f"GET /stream/sse ({STREAM_COUNT} items, Server-Sent Events)",
}
ROUTE_KEYS = tuple(ROUTE_LABELS)
PATHS = {"jsonl": "/stream/jsonl", "sse": "/stream/sse"}


def stream_items(data: Dataset) -> list[Any]:
    """The cities every variant streams (a variant may convert them to its own models)."""
    return data.cities[:STREAM_COUNT]


def parse_jsonl(body: bytes) -> list[Any]:
    if not body.endswith(b"\n"):
        raise ValueError("a JSON Lines body must end with a newline")
    return [msgspec.json.decode(line) for line in body.split(b"\n")[:-1]]


def parse_sse(body: bytes) -> list[Any]:
    """The JSON `data` of each event; comments (keep-alive pings) and other fields skipped."""
    text = body.decode().replace("\r\n", "\n").replace("\r", "\n")
    if not text.endswith("\n\n"):
        raise ValueError("an event stream must end with a blank line")
    items = []
    for block in text.split("\n\n")[:-1]:
        lines = block.split("\n")
        data = [line[5:].removeprefix(" ") for line in lines if line.startswith("data:")]
        if data:
            items.append(msgspec.json.decode("\n".join(data)))
    return items


PARSERS = {"jsonl": parse_jsonl, "sse": parse_sse}


@dataclass(frozen=True)
class StreamCase(Case):
    """A streamed request: `expected` is the list of items; the body is parsed to compare."""

    @property
    def expected_body(self) -> bytes:
        # The canonical framing (what FastAPI sends for compact JSON), for the fingerprint.
        encode = msgspec.json.encode
        if self.key == "jsonl":
            return b"".join(encode(item) + b"\n" for item in self.expected)
        return b"".join(b"data: " + encode(item) + b"\n\n" for item in self.expected)

    def items(self, body: bytes) -> list[Any]:
        return PARSERS[self.key](body)

    def same_items(self, body: bytes) -> bool:
        return self.items(body) == msgspec.to_builtins(self.expected)


def make_cases(data: Dataset) -> dict[str, Case]:
    items = stream_items(data)
    return {
        key: StreamCase(key, "GET", PATHS[key], b"", b"", items, ROUTE_LABELS[key])
        for key in ROUTE_KEYS
    }
