"""A request's content type is JSON exactly when its media type, before any parameters and
without surrounding ASCII whitespace, is `application/json` or `application/*+json` in any
letter case; both twins decide it alike, whatever bytes the header holds."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from twins import TWIN_NAMES, get_twin

SPACE = b" \t\r\n\x0b\x0c"


def is_json_by_definition(value: bytes) -> bool:
    media = value.split(b";", 1)[0].strip(SPACE).lower()
    return media == b"application/json" or (
        media.startswith(b"application/") and media.endswith(b"+json")
    )


# Mostly the bytes the definition turns on, so that near misses come up often.
PIECES = st.sampled_from(
    [b"application/", b"APPLICATION/", b"json", b"JSON", b"+json", b"+", b"/", b";", b"a"]
    + [bytes([ch]) for ch in SPACE]
    + [b"\x00", b"\x80", b"\xff", b"@", b"[", b"`", b"{"]
)
CONTENT_TYPES = st.lists(PIECES, max_size=8).map(b"".join) | st.binary(max_size=24)


@pytest.mark.parametrize("name", TWIN_NAMES)
@given(value=CONTENT_TYPES)
@example(value=b"")
@example(value=b";")
@example(value=b" \t")
@example(value=b"application/+json")
@example(value=b"application/json\x0b")
@example(value=b"Application/JSON ; charset=utf-8")
@example(value=b"application/jsonx")
@example(value=b"application/vnd.api+json;")
def test_json_media_type_is_recognised_as_defined(name: str, value: bytes) -> None:
    twin = get_twin(name)
    assert twin.module.is_json_media_type(value) is is_json_by_definition(value)
