"""Hostile requests, one table: each row's documented status, on both tiers and both twins.

The contract (docs/behaviour.md, `_fastpath_py` docstring): a non-JSON content type is a
415, malformed JSON or JSON nested too deeply a 400, a missing or invalid body or
parameter a 422 in FastAPI's error shape. Whatever arrives, the answer is a JSON body with
the row's status, never a 500 and never an exception escaping the app (`raw_asgi` lets
one propagate, so the test fails with it). Every row is sent to both twins, which must
answer it with the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec
import pytest
from hostile_app import (
    ALWAYS_DELEGATED,
    APPS,
    EVERYTHING,
    FORM_LIMIT,
    SMALL_LIMIT,
    TIERS,
    route_tiers,
)
from raw_asgi import JSON, Reply, request
from twins import Twin

from msgspec_fastapi._compat import HAS_NATIVE_BODY_LIMIT

DEEP = 200_000
HUGE_INT = b"9" * 10_000


@dataclass(frozen=True)
class Row:
    """One request and what the contract says it gets."""

    name: str
    method: str
    target: bytes  # after the /direct or /delegated prefix
    status: int
    headers: list[tuple[bytes, bytes]] = field(default_factory=lambda: list(JSON))
    body: bytes = b""
    expected: Any = None  # the whole JSON payload, where the row pins it
    mentions: str | None = None  # a fragment of the error message
    loc: tuple[str, ...] | None = None  # how the first error's location starts
    plain_text: bool = False  # answered before any route runs, by Starlette (see the row)

    def with_headers(self, headers: list[tuple[bytes, bytes]]) -> Row:
        return Row(**{**self.__dict__, "headers": headers})

    def send(self, app: Any, tier: str) -> Reply:
        target = b"/" + tier.encode() + self.target
        return request(app, self.method, target, self.headers, self.body)


def everything(**changes: Any) -> bytes:
    return msgspec.json.encode({**EVERYTHING, **changes})


def splice(key: str, raw: bytes) -> bytes:
    """A valid Everything body whose `key` holds raw JSON text (not re-encoded)."""
    marker = b'"@@"'
    return everything(**{key: "@@"}).replace(marker, raw)


def body_row(name: str, body: bytes, status: int, route: bytes = b"/everything", **kw: Any) -> Row:
    return Row(name, "POST", route, status, body=body, **kw)


def wrong_type(key: str, value: Any) -> Row:
    return body_row(
        f"wrong type: {key}={value!r}", everything(**{key: value}), 422, loc=("body", key)
    )


def content_type_row(name: str, headers: list[tuple[bytes, bytes]], status: int) -> Row:
    return Row(name, "POST", b"/everything", status, headers=headers, body=everything())


URLENCODED = [(b"content-type", b"application/x-www-form-urlencoded")]
MULTIPART = [(b"content-type", b"multipart/form-data; boundary=xx")]


def form_row(name: str, body: bytes, status: int, multipart: bool = False, **kw: Any) -> Row:
    headers = MULTIPART if multipart else URLENCODED
    return Row(name, "POST", b"/form", status, headers=headers, body=body, **kw)


def part(name: bytes, value: bytes, filename: bytes | None = None) -> bytes:
    disposition = b'Content-Disposition: form-data; name="' + name + b'"'
    if filename is not None:
        disposition += b'; filename="' + filename + b'"'
    return b"--xx\r\n" + disposition + b"\r\n\r\n" + value + b"\r\n"


def signup(**values: Any) -> dict[str, Any]:
    """The /form reply for the given values."""
    return {"name": "ada", "age": 0, "tags": [], "avatar": None, **values}


def get_row(name: str, target: bytes, status: int, expected: Any = None, **kw: Any) -> Row:
    return Row(name, "GET", target, status, headers=[], expected=expected, **kw)


def item(**values: Any) -> dict[str, Any]:
    """The /items reply for the given values."""
    base = {
        "item_id": 1,
        "q": None,
        "n": None,
        "flag": False,
        "when": None,
        "tags": [],
        "x_token": None,
    }
    return {**base, **values}


# fmt: off
ROWS = [
    # -- the baseline: a valid body -----------------------------------------------------
    body_row("valid body", everything(), 200, expected=EVERYTHING),
    # -- bytes that are not JSON ----------------------------------------------------------
    body_row("invalid UTF-8 in a string", splice("text", b'"caf\xe9"'), 400),
    body_row("invalid UTF-8 in a key", everything().replace(b'"text"', b'"t\xffxt"'), 400),
    body_row("invalid UTF-8 after a wrong field",
             everything(count="3").replace(b'"Lyon"', b'"Ly\xf0n"'), 400),
    body_row("invalid UTF-8 in an untyped body", b'["\xc3"]', 400, route=b"/anything"),
    body_row("invalid UTF-8 outside strings", b"\xff" + everything(), 400),
    body_row("UTF-8 byte order mark", b"\xef\xbb\xbf" + everything(), 400),
    body_row("trailing garbage", everything() + b"x", 400),
    body_row("a second JSON value", everything() + b" {}", 400),
    body_row("trailing whitespace is fine", everything() + b" \r\n\t", 200),
    body_row("NaN literal", splice("ratio", b"NaN"), 400),
    body_row("Infinity literal", splice("ratio", b"Infinity"), 400),
    body_row("-Infinity literal", splice("ratio", b"-Infinity"), 400),
    body_row("NaN literal in an untyped body", b"[NaN]", 400, route=b"/anything"),
    body_row("truncated after a wrong field", everything(text=1)[:-20], 400),
    body_row("single quotes", b"{'text': 'x'}", 400),
    body_row("whitespace only", b" \r\n\t ", 400),
    body_row("whitespace only, body with a default", b"   ", 400, route=b"/optional"),
    body_row("a lone NUL byte", b"\x00", 400),
    # -- numbers at the edge ----------------------------------------------------------------
    body_row("1e400 in a float field", splice("ratio", b"1e400"), 422,
             mentions="Number out of range"),
    body_row("1e400 in an untyped body", b"1e400", 422, route=b"/anything",
             mentions="Number out of range"),
    body_row("10,000-digit integer in an int field", splice("count", HUGE_INT), 422,
             mentions="Integer value out of range"),
    body_row("10,000-digit negative integer, untyped", b"[-" + HUGE_INT + b"]", 422,
             route=b"/anything", mentions="Integer value out of range"),
    body_row("10,000-digit integer after a wrong field",
             everything(text=1).replace(b'"count":3', b'"count":' + HUGE_INT), 422,
             mentions="Expected `str`, got `int`"),
    body_row("1e308 is a float", splice("ratio", b"1e308"), 200),
    body_row("20-digit integer fits an untyped body", b"[18446744073709551615]", 200,
             route=b"/anything", expected=[18446744073709551615]),
    # -- duplicate keys: valid JSON, the last one wins ----------------------------------------
    body_row("duplicate keys, last wins",
             everything().replace(b'"count":3', b'"count":1,"count":3'), 200, expected=EVERYTHING),
    body_row("duplicate keys, the first invalid",
             everything().replace(b'"count":3', b'"count":"1","count":3'), 422,
             mentions="`$.count`"),
    body_row("duplicate keys in an untyped object", b'{"a":1,"a":2}', 200, route=b"/anything",
             expected={"a": 2}),
    # -- nesting ----------------------------------------------------------------------------
    body_row("200,000 nested arrays for a Struct", b"[" * DEEP + b"]" * DEEP, 400,
             mentions="nested too deeply"),
    body_row("200,000 nested arrays, untyped", b"[" * DEEP + b"]" * DEEP, 400,
             route=b"/anything", mentions="nested too deeply"),
    body_row("200,000 nested objects, untyped", b'{"a":' * DEEP + b"1" + b"}" * DEEP, 400,
             route=b"/anything", mentions="nested too deeply"),
    body_row("200,000 nested arrays in a list field",
             splice("items", b"[" * DEEP + b"]" * DEEP), 400, mentions="nested too deeply"),
    # Deeper than Python recurses, not than msgspec decodes on CPython 3.12+: the 422's
    # `input` would be too deep for FastAPI to encode (a RecursionError escaped on 3.13).
    body_row("2,000 nested arrays for a Struct", b"[" * 2000 + b"]" * 2000, 400,
             mentions="nested too deeply"),
    body_row("200,000 unclosed arrays", b"[" * DEEP, 400, route=b"/anything"),
    body_row("100 nested arrays are fine", b"[" * 100 + b"]" * 100, 200, route=b"/anything"),
    # -- top-level values that are not the body's type ---------------------------------------
    body_row("top-level integer", b"1", 422, mentions="Expected `object`, got `int`"),
    body_row("top-level string", b'"text"', 422, mentions="Expected `object`, got `str`"),
    body_row("top-level true", b"true", 422, mentions="Expected `object`, got `bool`"),
    body_row("top-level null", b"null", 422, mentions="Expected `object`, got `null`"),
    body_row("top-level array", b"[]", 422, mentions="Expected `object`, got `array`"),
    body_row("top-level null for an optional body", b"null", 200, route=b"/optional",
             expected={"point": None}),
    body_row("top-level scalar for an untyped body", b"12", 200, route=b"/anything",
             expected=12),
    # -- missing bodies -----------------------------------------------------------------------
    body_row("empty body", b"", 422, expected={  # FastAPI's error, `input` included
        "detail": [{"type": "missing", "loc": ["body"], "msg": "Field required",
                    "input": None}]}),
    body_row("empty body, body with a default", b"", 200, route=b"/optional",
             expected={"point": None}),
    Row("empty body without a content type", "POST", b"/everything", 422, headers=[]),
    Row("empty body with a text content type", "POST", b"/everything", 422,
        headers=[(b"content-type", b"text/plain")]),
    # -- content types ------------------------------------------------------------------------
    content_type_row("no content type", [], 415),
    content_type_row("empty content type", [(b"content-type", b"")], 415),
    content_type_row("upper case", [(b"content-type", b"APPLICATION/JSON")], 200),
    content_type_row("with a charset", [(b"content-type", b"application/json; charset=utf-8")],
                     200),
    content_type_row("quoted parameter, no space",
                     [(b"content-type", b'application/json;charset="UTF-8"')], 200),
    content_type_row("surrounding whitespace", [(b"content-type", b" \tapplication/json \t")],
                     200),
    content_type_row("structured +json suffix",
                     [(b"content-type", b"Application/Problem+JSON")], 200),
    content_type_row("json-patch+json", [(b"content-type", b"application/json-patch+json")], 200),
    content_type_row("text/plain", [(b"content-type", b"text/plain")], 415),
    content_type_row("text/json", [(b"content-type", b"text/json")], 415),
    content_type_row("application/jsonp", [(b"content-type", b"application/jsonp")], 415),
    content_type_row("form", [(b"content-type", b"application/x-www-form-urlencoded")], 415),
    content_type_row("multipart", [(b"content-type", b"multipart/form-data; boundary=x")], 415),
    content_type_row("a list of types", [(b"content-type", b"application/json, text/plain")],
                     415),
    content_type_row("two headers, JSON first",
                     [(b"content-type", b"application/json"), (b"content-type", b"text/plain")],
                     200),
    content_type_row("two headers, JSON second",
                     [(b"content-type", b"text/plain"), (b"content-type", b"application/json")],
                     415),
    content_type_row("non-ASCII byte after the type",
                     [(b"content-type", b"application/json\xff")], 415),
    content_type_row("non-ASCII byte in the type", [(b"content-type", b"\xe1pplication/json")],
                     415),
    content_type_row("non-ASCII byte in a parameter",
                     [(b"content-type", b"application/json; charset=\xe9")], 200),
    content_type_row("NUL byte after the type", [(b"content-type", b"application/json\x00")],
                     415),
    # -- a wrong type in every kind of field ----------------------------------------------------
    wrong_type("text", 1),
    wrong_type("text", None),
    wrong_type("count", "3"),
    wrong_type("count", 1.5),
    wrong_type("count", True),
    wrong_type("ratio", "0.5"),
    wrong_type("flag", 1),
    wrong_type("flag", "true"),
    wrong_type("items", {"a": 1}),
    wrong_type("items", ["1"]),
    wrong_type("scores", [1]),
    wrong_type("scores", {"a": "1"}),
    wrong_type("color", "blue"),
    wrong_type("color", 1),
    wrong_type("when", "yesterday"),
    wrong_type("when", "2024-13-01T00:00:00Z"),
    wrong_type("when", 1714979289),
    wrong_type("ident", "not-a-uuid"),
    wrong_type("ident", 123),
    wrong_type("maybe", "x"),
    wrong_type("point", [1, 2]),
    wrong_type("point", {"x": 1}),
    wrong_type("point", {"x": 1, "y": "2"}),
    wrong_type("pet", {"type": "fish"}),
    wrong_type("pet", {"lives": 9}),
    wrong_type("pet", {"type": "dog", "good": "yes"}),
    wrong_type("pet", "cat"),
    body_row("unknown field", everything(extra=1), 422, mentions="unknown field `extra`"),
    body_row("missing field", msgspec.json.encode({"text": "x"}), 422,
             mentions="Field required", loc=("body", "count")),
    body_row("every field wrong", msgspec.json.encode({key: [] for key in EVERYTHING}), 422,
             loc=("body", "text")),
    # -- several body parameters (embedded by name) -----------------------------------------
    body_row("parts: empty body", b"", 422, route=b"/parts", headers=[],
             mentions="Field required", loc=("body", "point")),
    body_row("parts: a wrong part", b'{"point": {"x": 1, "y": "2"}, "count": 1}', 422,
             route=b"/parts", loc=("body", "point", "y")),
    body_row("parts: not an object", b"[1, 2]", 422, route=b"/parts", loc=("body",)),
    body_row("parts: malformed after a wrong part", b'{"point": 1, "count": ', 400,
             route=b"/parts", mentions="Malformed JSON body"),
    body_row("parts and a bad query parameter", b'{"point": {"x": "a", "y": 1}, "count": 1}',
             422, route=b"/parts?page=x", loc=("query", "page")),
    # -- body limits ----------------------------------------------------------------------------
    body_row("body over the route limit", msgspec.json.encode({"name": "x" * SMALL_LIMIT}), 413,
             route=b"/small", expected={"detail": "Content Too Large"}),
    # From FastAPI 0.164 the limit is FastAPI's: Starlette's limiter answers a declared
    # length over it in plain text, for any route, before the route runs.
    Row("declared length over the route limit", "POST", b"/small", 413,
        headers=[*JSON, (b"content-length", str(SMALL_LIMIT + 1).encode())], body=b'{"name":"x"}',
        plain_text=HAS_NATIVE_BODY_LIMIT),
    Row("unparsable declared length", "POST", b"/small", 200,
        headers=[*JSON, (b"content-length", b"12abc")], body=b'{"name":"x"}'),
    # -- path and query values ------------------------------------------------------------------
    # -- query and header models ----------------------------------------------------------------
    get_row("query model", b"/filter?q=x&tags=a&tags=b", 200,
            {"filter": {"q": "x", "n": None, "flag": False, "when": None, "tags": ["a", "b"]},
             "token": None}),
    get_row("query model: wrong value", b"/filter?n=x", 422, loc=("query", "n")),
    get_row("query model: impossible date", b"/filter?when=2024-02-30", 422, loc=("query", "when")),
    get_row("query model: unknown key", b"/filter?other=1", 422, loc=("query", "other"),
            mentions="unknown field `other`"),
    get_row("query model: blank value for an int", b"/filter?n=", 422, loc=("query", "n")),
    # -- form models --------------------------------------------------------------------------
    form_row("form", b"name=ada&age=3&tags=a&tags=b", 200, expected=signup(age=3, tags=["a", "b"])),
    form_row("form: duplicate scalar keys, the last wins", b"name=x&name=ada", 200,
             expected=signup()),
    form_row("form: empty value is absent", b"name=ada&age=", 200, expected=signup()),
    form_row("form: missing field", b"age=3", 422, loc=("body", "name")),
    form_row("form: invalid value", b"name=ada&age=old", 422, loc=("body", "age")),
    form_row("form: unknown key", b"name=ada&other=1", 422, loc=("body", "other"),
             mentions="unknown field `other`"),
    form_row("form: non-UTF-8 percent escape", b"name=%FF", 200, expected=signup(name="\ufffd")),
    # Starlette decodes form bytes as latin-1 when they are not UTF-8.
    form_row("form: raw non-UTF-8 bytes", b"name=\xff\xfe", 200, expected=signup(name="ÿþ")),
    form_row("form: 1,001 fields", b"name=ada" + b"&t" * 1000, 400,
             expected={"detail": "Too many fields. Maximum number of fields is 1000."}),
    form_row("form: body over the route limit", b"name=" + b"a" * FORM_LIMIT, 413,
             expected={"detail": "Content Too Large"}),
    Row("form: JSON body", "POST", b"/form", 422, body=b'{"name": "ada"}', loc=("body", "name")),
    form_row("multipart form", part(b"name", b"ada") + part(b"avatar", b"123", b"a.png")
             + b"--xx--\r\n", 200, multipart=True, expected=signup(avatar=3)),
    form_row("multipart: text for a file", part(b"name", b"ada") + part(b"avatar", b"x")
             + b"--xx--\r\n", 422, multipart=True, loc=("body", "avatar")),
    form_row("multipart: file for a text field", part(b"name", b"x", b"n.txt") + b"--xx--\r\n",
             422, multipart=True, loc=("body", "name")),
    # python-multipart drops a part cut off before its boundary: the field is missing.
    form_row("multipart: truncated", part(b"name", b"ada")[:-10], 422, multipart=True,
             loc=("body", "name")),
    form_row("multipart: no boundary", b"garbage", 400, multipart=True,
             expected={"detail": "Missing boundary in multipart."}).with_headers(
                 [(b"content-type", b"multipart/form-data")]),
    form_row("multipart: garbage", b"\x00\xff" * 100, 400, multipart=True),
    form_row("multipart: header without a name", b"--xx\r\nContent-Disposition: form-data\r\n"
             b"\r\nx\r\n--xx--\r\n", 400, multipart=True),
    get_row("plain path and query", b"/items/7?q=x&n=2", 200, item(item_id=7, q="x", n=2)),
    get_row("percent-encoded path digits", b"/items/%31%32", 200, item(item_id=12)),
    get_row("percent-encoded non-UTF-8 path", b"/items/%FF", 422, mentions="Expected `int`"),
    get_row("percent-encoded slash in the path", b"/items/1%2F2", 404,
            {"detail": "Not Found"}),
    get_row("percent-encoded UTF-8 query", b"/items/1?q=%E9%9B%BB", 200, item(q="電")),
    get_row("percent-encoded non-UTF-8 query", b"/items/1?q=%FF%FE", 200, item(q="\ufffd\ufffd")),
    get_row("raw non-UTF-8 byte in the query", b"/items/1?q=\xff", 200, item(q="ÿ")),
    get_row("broken percent escape", b"/items/1?q=%zz%", 200, item(q="%zz%")),
    get_row("plus is a space", b"/items/1?q=a+b%2B", 200, item(q="a b+")),
    get_row("blank value", b"/items/1?q&&n=", 422, mentions="Expected `int | null`, got `str`"),
    get_row("percent-encoded sign", b"/items/1?n=%2B5", 200, item(n=5)),
    get_row("percent-encoded NUL after a number", b"/items/1?n=5%00", 422),
    get_row("10,000-digit query integer", b"/items/1?n=" + HUGE_INT, 422),
    get_row("10,000-digit path integer", b"/items/" + HUGE_INT, 422),
    get_row("100,000-character query string", b"/items/1?q=" + b"a" * 100_000, 200,
            item(q="a" * 100_000)),
    get_row("not a boolean", b"/items/1?flag=maybe", 422),
    get_row("not a date", b"/items/1?when=2024-02-30", 422),
    get_row("repeated values", b"/items/1?tags=a&tags=%FF&tags=", 200,
            item(tags=["a", "\ufffd", ""])),
    Row("non-ASCII header value", "GET", b"/items/1", 200, headers=[(b"x-token", b"caf\xe9")],
        expected=item(x_token="café")),
    Row("100,000-byte header value", "GET", b"/items/1", 200,
        headers=[(b"x-token", b"t" * 100_000)], expected=item(x_token="t" * 100_000)),
    get_row("percent-encoded word", b"/words/%C3%A9t%C3%A9", 200, {"word": "été"}),
    get_row("12 multi-byte characters fit max_length=12", b"/words/" + b"%C3%A9" * 12, 200,
            {"word": "é" * 12}),
    get_row("overlong path word", b"/words/" + b"w" * 13, 422, mentions="length <= 12"),
    get_row("GET on a POST route", b"/everything", 405, {"detail": "Method Not Allowed"}),
]
# fmt: on


def row_params() -> list[Any]:
    return [pytest.param(row, id=row.name) for row in ROWS]


def test_every_hostile_route_runs_on_the_tier_of_its_prefix(twin: Twin) -> None:
    tiers = route_tiers(APPS[twin.name])
    assert sorted(set(tiers.values())) == sorted(TIERS)
    for path, tier in tiers.items():
        if path.endswith(ALWAYS_DELEGATED):
            assert tier == "delegated", path
        else:
            assert path.startswith(f"/{tier}/")


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("row", row_params())
def test_row_gets_its_documented_status_as_json(row: Row, tier: str, twin: Twin) -> None:
    reply = row.send(APPS[twin.name], tier)
    if row.plain_text:
        assert (reply.status, reply.body) == (row.status, b"Content Too Large")
        return
    payload = reply.json()
    expected = payload if row.expected is None else row.expected
    assert (reply.status, payload) == (row.status, expected)
    assert reply.headers[-1] == (b"content-type", b"application/json")
    if row.status >= 400:
        assert list(payload) == ["detail"]
    if row.status == 422 and row.loc is None:
        first_loc = payload["detail"][0]["loc"][0]
        assert first_loc == ("query" if row.method == "GET" else "body") or first_loc == "path"
    if row.mentions:
        assert row.mentions in msgspec.json.encode(payload).decode()
    if row.loc:
        assert payload["detail"][0]["loc"][: len(row.loc)] == list(row.loc)


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("row", row_params())
def test_row_gets_the_same_bytes_from_both_twins(row: Row, tier: str) -> None:
    assert row.send(APPS["compiled"], tier).sent == row.send(APPS["pure"], tier).sent
