"""With errors="fastapi" a failing body is read again to validate it as FastAPI does; it
is read by msgspec's untyped decoder, and by Python's `json` only where msgspec refuses.
Whatever the bytes, that read gives the value `json.loads` gives (same types, same order),
or fails where `json.loads` fails."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from fastapi import HTTPException
from fastapi.exceptions import RequestValidationError
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from msgspec_fastapi._errors.pydantic_style import _read_json

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
    damage = draw(st.sampled_from(["none", "cut", "insert", "bom", "utf-16"]))
    if damage == "cut" and raw:
        raw = raw[: draw(st.integers(0, len(raw) - 1))]
    elif damage == "insert":
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.binary(min_size=1, max_size=3)) + raw[at:]
    elif damage == "bom":
        raw = b"\xef\xbb\xbf" + raw
    elif damage == "utf-16":
        raw = text.encode("utf-16", "surrogatepass")
    return raw


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
