"""Query strings are read exactly as Starlette's QueryParams reads them."""

from __future__ import annotations

from urllib.parse import parse_qsl

from hypothesis import given
from hypothesis import strategies as st

from msgspec_fastapi._fastpath_py import parse_query


@given(st.text(alphabet="ab=&;%+ 1\xe9\x00", max_size=24))
def test_query_string_splits_like_parse_qsl_with_blank_values_kept(text: str) -> None:
    raw = text.encode("latin-1")
    assert parse_query(raw) == parse_qsl(raw.decode("latin-1"), keep_blank_values=True)


def test_repeated_keys_keep_every_value_in_order() -> None:
    assert parse_query(b"a=1&a=2&b=&c") == [("a", "1"), ("a", "2"), ("b", ""), ("c", "")]
