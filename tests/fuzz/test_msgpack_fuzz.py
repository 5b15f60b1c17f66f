"""A short, bounded fuzz run of MessagePack bodies, in every test session.

Hypothesis sends arbitrary bytes and arbitrary MessagePack-encoded values (some cut short
or with bytes spliced in) with a MessagePack content type, and an `Accept` that may ask
for MessagePack or be arbitrary bytes, to the body routes of `msgpack_app` on both tiers
of both twins. Each answer must be a 200 (201 from /created), 400, 413 or 422, finished,
with errors in JSON ({"detail": ...}); no exception may escape; both twins must send the
same messages, and so must both tiers.
"""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from msgpack_app import APPS, CITY, RECORD, SMALL_LIMIT, TIERS
from raw_asgi import run_on_one_loop as run
from raw_asgi import send_request
from twins import outcome

ALLOWED = {200, 201, 400, 413, 422}
BODY_ROUTES = [
    "/city",
    "/cities",
    "/record",
    "/anything",
    "/holder",
    "/optional",
    "/parts",
    "/small",
    "/created",
]
CONTENT_TYPES = [
    b"application/msgpack",
    b"application/x-msgpack",
    b"application/vnd.msgpack",
    b"Application/MsgPack; charset=binary",
]
ACCEPTS = [
    None,
    b"application/msgpack",
    b"application/json",
    b"application/json;q=0.5, application/msgpack",
    b"application/msgpack;q=0",
    b"*/*",
]

# What msgpack can carry: every integer from -2**63 to 2**64 - 1, bin, str and int keys.
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=10)
    | st.binary(max_size=10)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=6) | st.integers(-5, 5), inner, max_size=4)
    ),
    max_leaves=12,
)
# Valid bodies for the routes, with a field or two replaced, so that many get past the
# first key.
shaped = st.one_of(
    st.just(CITY),
    st.just([CITY, CITY]),
    st.just(RECORD),
    st.just({"point": {"x": 1, "y": 2}, "count": 3}),
    st.just({"payload": [1, {"a": b"x"}]}),
    st.just({"name": "x" * SMALL_LIMIT}),
).flatmap(
    lambda base: (
        st.dictionaries(st.sampled_from(sorted(base)), values, max_size=2).map(
            lambda changes: {**base, **changes}
        )
        if isinstance(base, dict)
        else st.just(base)
    )
)
encoded = st.one_of(values, shaped).map(msgspec.msgpack.encode)


@st.composite
def bodies(draw: Any) -> bytes:
    """Arbitrary bytes, or msgpack, maybe cut short or with arbitrary bytes spliced in."""
    kind = draw(st.sampled_from(["bytes", "msgpack", "cut", "spliced"]))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    body = draw(encoded)
    if kind == "cut":
        return body[: draw(st.integers(0, max(len(body) - 1, 0)))]
    if kind == "spliced":
        at = draw(st.integers(0, len(body)))
        return body[:at] + draw(st.binary(min_size=1, max_size=8)) + body[at:]
    return body


def answer(twin: str, tier: str, path: str, headers: list, body: bytes) -> tuple[Any, ...]:
    target = f"/{tier}{path}".encode()
    return run(outcome(send_request(APPS[twin], "POST", target, headers, (body,))))


def check(path: str, content_type: bytes, accept: bytes | None, body: bytes) -> None:
    headers = [(b"content-type", content_type)]
    if accept is not None:
        headers.append((b"accept", accept))
    replies = []
    for tier in TIERS:
        pure = answer("pure", tier, path, headers, body)
        compiled = answer("compiled", tier, path, headers, body)
        assert compiled == pure, f"twins differ on {tier}"
        assert pure[0] == "reply", f"{pure} escaped on {tier}"
        reply = pure[1]
        assert reply.status in ALLOWED, (tier, reply.status, reply.body)
        assert reply.finished
        if reply.status >= 400:
            content_types = [v for k, v in reply.headers if k == b"content-type"]
            assert content_types == [b"application/json"], (tier, reply.headers)
            payload = reply.json()
            assert list(payload) == ["detail"], payload
        replies.append(reply.sent)
    assert replies[0] == replies[1], "tiers differ"


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    path=st.sampled_from(BODY_ROUTES),
    content_type=st.sampled_from(CONTENT_TYPES),
    accept=st.sampled_from(ACCEPTS) | st.binary(max_size=40),
    body=bodies(),
)
@example(path="/anything", content_type=CONTENT_TYPES[0], accept=None, body=b"\x91" * 10_000)
@example(path="/holder", content_type=CONTENT_TYPES[0], accept=None, body=b"\xdd\xff\xff\xff\xff")
@example(path="/anything", content_type=CONTENT_TYPES[0], accept=ACCEPTS[1], body=b"\xd4\x05\x00")
def test_arbitrary_msgpack_bodies_get_a_4xx_or_200_alike_from_both_twins_and_tiers(
    path: str, content_type: bytes, accept: bytes | None, body: bytes
) -> None:
    check(path, content_type, accept, body)
