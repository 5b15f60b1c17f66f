"""With errors="fastapi" a failing body is read again to validate it as FastAPI does; it
is read by msgspec's untyped decoder, and by Python's `json` only where msgspec refuses.
Whatever the bytes, that read gives the value `json.loads` gives (same types, same order),
or fails where `json.loads` fails.

Routes on the compiled twin find where Python's `json` refuses a body by a scan
(`_errors.jsonscan`) instead of `json.loads`: whatever the bytes, the scan gives the
message and position of `json.loads`'s `JSONDecodeError`, or nothing. Both builds of the
scan are held to that: the compiled one, and its source run as Python."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from typing import Any

import pytest
from fastapi import HTTPException
from fastapi.exceptions import RequestValidationError
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from msgspec_fastapi import _select
from msgspec_fastapi._errors import jsonscan_py
from msgspec_fastapi._errors.pydantic_style import JsonScan, _read_json, scanned_error

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.floats()
    | st.text()
    | st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=2)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    """JSON texts as clients write them, some then damaged."""
    text = json.dumps(draw(VALUES), ensure_ascii=draw(st.booleans()))
    raw = text.encode("utf-8", "surrogatepass")
    damage = draw(st.sampled_from(["none", "cut", "insert", "grammar", "bom", "utf-16"]))
    if damage == "cut" and raw:
        raw = raw[: draw(st.integers(0, len(raw) - 1))]
    elif damage == "insert":
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.binary(min_size=1, max_size=3)) + raw[at:]
    elif damage == "grammar":
        # Bytes the grammar names, put in or taken out where a scanner must decide.
        for _ in range(draw(st.integers(1, 3))):
            at = draw(st.integers(0, len(raw)))
            if draw(st.booleans()) and at < len(raw):
                raw = raw[:at] + raw[at + 1 :]
            else:
                raw = raw[:at] + draw(st.binary(min_size=1, max_size=2).map(_grammar)) + raw[at:]
    elif damage == "bom":
        raw = b"\xef\xbb\xbf" + raw
    elif damage == "utf-16":
        raw = text.encode("utf-16", "surrogatepass")
    return raw


GRAMMAR = b'[]{}",:\\ /u0123456789abcdefABCDEFeE+-.ntrfalsNIy\t\n\r\x01'


def _grammar(noise: bytes) -> bytes:
    return bytes(GRAMMAR[byte % len(GRAMMAR)] for byte in noise)


def same(left: Any, right: Any) -> bool:
    """Equal with the same types all the way down, key order included; NaN equals NaN."""
    if type(left) is not type(right):
        return False
    if isinstance(left, float):
        return left == right or (math.isnan(left) and math.isnan(right))
    if isinstance(left, list):
        return len(left) == len(right) and all(map(same, left, right))
    if isinstance(left, dict):
        return list(left) == list(right) and all(same(left[k], right[k]) for k in left)
    return bool(left == right)


def python_json(raw: bytes) -> tuple[bool, Any]:
    try:
        return True, json.loads(raw)
    except (ValueError, RecursionError):
        return False, None


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(bodies())
@example(b'{"a": NaN, "b": -Infinity}')
@example(b'"\\ud800"')
@example(b"1e400")
@example(b'{"a": 1, "a": 2}')
@example(b'{"00\xc2 \x80": null}')
@example(b"1" * 5000)
def test_a_failing_body_is_read_to_the_value_pythons_json_reads(raw: bytes) -> None:
    readable, expected = python_json(raw)
    if readable:
        assert same(_read_json(raw), expected)
    else:
        with pytest.raises((RequestValidationError, HTTPException)):  # a 422 or a 400
            _read_json(raw)


@pytest.fixture(params=["compiled", "pure"])
def scan(request: pytest.FixtureRequest) -> JsonScan:
    """The scan compiled (as routes on the compiled twin run it), then its source as Python.
    The compiled one fails the test where it does not import and the compiled build was
    expected, and skips it otherwise."""
    if request.param == "pure":
        return jsonscan_py.syntax_error
    module = _select.load(_select.JSONSCAN, "compiled")
    if module is None:
        reason = "the compiled _errors.jsonscan does not import"
        if os.environ.get("MSGSPEC_FASTAPI_EXPECT") == "compiled":
            pytest.fail(reason)
        pytest.skip(reason)
    found: JsonScan = module.syntax_error
    return found


def pythons_error(raw: bytes) -> tuple[str, int, str] | None:
    """The message, position and text of the JSONDecodeError `json.loads(raw)` raises."""
    try:
        json.loads(raw)
    except json.JSONDecodeError as exc:
        return exc.msg, exc.pos, exc.doc
    except (ValueError, RecursionError):
        return None
    return None


def scanned(raw: bytes, scan: JsonScan) -> tuple[str, int, str] | None:
    found = scanned_error(raw, scan)
    return None if found is None else (found.msg, found.pos, found.doc)


def is_utf8(raw: bytes) -> bool:
    return json.detect_encoding(raw).startswith("utf-8")


@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(raw=bodies())
def test_the_scan_finds_the_error_pythons_json_raises(scan: JsonScan, raw: bytes) -> None:
    expected = pythons_error(raw) if is_utf8(raw) else None
    assert scanned(raw, scan) == expected


# Each message of CPython's scanner, and where it puts the error.
MALFORMED = [
    b"",
    b"   ",
    b"[",
    b"[1 2]",
    b'{"a" 1}',
    b'{"a": }',
    b"{1: 2}",
    b"[1,]",
    b'{"a": 1,}',
    b"[1] x",
    b"1e",
    b"1e+",
    b"[-]",
    b"[01]",
    b"[1.]",
    b"[nul]",
    b"[Infinit]",
    b'"abc',
    b'"a\\x"',
    b'"a\\u12"',
    b'"a\\uzzzz"',
    b'"\\ud800\\uzzzz"',
    b'"\\ud800\\u12"',
    b'"\\ud800\\udc00',
    b'"a\\',
    b'"tab\\there\tthere"',
    '["Zürich", "東京", 1 2]'.encode(),
    '{"\U0001f600": tru}'.encode(),
    b"\xef\xbb\xbf[1,",
    b'"\xed\xa0\x80" x',
    # The text ending inside a token.
    b"1.",
    b"[1.",
    b"[1e",
    b"[1.5E+",
    b"[-",
    b"[0",
    b"[tru",
    b"[-Infinit",
    b'"\\u',
    b'"\\ud800\\u',
    b'"\\ud800\\ud800\\u12"',
]


@pytest.mark.parametrize("raw", MALFORMED, ids=repr)
def test_the_scan_gives_pythons_message_and_position(scan: JsonScan, raw: bytes) -> None:
    expected = pythons_error(raw)
    assert expected is not None
    assert scanned(raw, scan) == expected


@pytest.mark.parametrize("raw", [b"[NaN, Infinity, -Infinity]", b"1e400", b'"\\ud800"'])
def test_the_scan_finds_nothing_where_pythons_json_reads_the_body(
    scan: JsonScan, raw: bytes
) -> None:
    assert pythons_error(raw) is None
    assert scan(raw, 0) is None


LEFT_TO_PYTHONS_JSON: dict[str, Callable[[], bytes]] = {
    "nesting deeper than the scan follows": lambda: b"[" * (jsonscan_py.MAX_DEPTH + 1) + b"1,",
    "an integer longer than a digit limit may be": lambda: (
        b"[" + b"1" * (jsonscan_py.MAX_INT_CHARS + 1) + b",]"
    ),
}


@pytest.mark.parametrize("make", LEFT_TO_PYTHONS_JSON.values(), ids=list(LEFT_TO_PYTHONS_JSON))
def test_the_scan_leaves_to_pythons_json_what_it_cannot_be_sure_of(
    scan: JsonScan, make: Callable[[], bytes]
) -> None:
    assert scan(make(), 0) is None


def test_a_scan_just_inside_its_limits_still_answers(scan: JsonScan) -> None:
    raw = b"[" * jsonscan_py.MAX_DEPTH + b"1" * jsonscan_py.MAX_INT_CHARS + b","
    assert scanned(raw, scan) == pythons_error(raw)
