"""Routes whose path parameters are whole segments are matched by splitting the path on "/"
instead of running Starlette's regex, with the regex's answer.

`_endpoint.plan.segment_template` decides at registration which routes qualify: every
parameter a whole segment, of Starlette's string (`[^/]+`) or integer (`[0-9]+`)
convertor, and the route's regex exactly the one Starlette compiles for that shape.
Per request, a path ending in a newline still goes to the regex (its `$` also matches
before a final newline). Every matcher test runs on both twins and compares with
`APIRoute.matches`, Starlette's regex.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi.routing import APIRoute
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.convertors import Convertor, register_url_convertor
from starlette.routing import Match, compile_path
from twins import TWIN_NAMES, Twin, get_twin

from msgspec_fastapi._endpoint.plan import literal_path, segment_template


async def endpoint() -> None:
    return None


def template_of(path: str) -> Any:
    path_regex, path_format, convertors = compile_path(path)
    return segment_template(path_regex, path_format, convertors)


def matcher_for(twin: Twin, route: APIRoute, segments: Any = "from the route") -> Any:
    """The matcher the router gives an inclusion of `route` (`_bind_inclusion`)."""
    if segments == "from the route":
        segments = segment_template(route.path_regex, route.path_format, route.param_convertors)
    literal = literal_path(route.path_regex, route.path_format)
    return twin.module.RouteMatcher(
        route,
        route.path_regex,
        literal,
        segments,
        route.param_convertors,
        route.endpoint,
        route.methods,
    )


def scope_for(path: str, method: str = "GET") -> dict[str, Any]:
    return {"type": "http", "method": method, "path": path, "root_path": ""}


def matches_as_starlette(twin: Twin, template: str, path: str, method: str = "GET") -> None:
    route = APIRoute(template, endpoint, methods=["GET"])
    expected_match, expected_child = route.matches(scope_for(path, method))
    got_match, got_child = matcher_for(twin, route).match(scope_for(path, method))
    assert got_match == expected_match, (template, path)
    if expected_match is not Match.NONE:
        assert got_child["path_params"] == expected_child["path_params"], (template, path)
        assert type(got_child["path_params"].get("id")) is type(
            expected_child["path_params"].get("id")
        )


def test_a_path_of_whole_segment_parameters_gets_a_segment_template() -> None:
    assert template_of("/cities/{id}") == (3, ((0, ""), (1, "cities")), ((2, "id", False),))
    assert template_of("/a/{x:int}/b/{y}/") == (
        6,
        ((0, ""), (1, "a"), (3, "b"), (5, "")),
        ((2, "x", True), (4, "y", False)),
    )


@pytest.mark.parametrize(
    "path",
    [
        "/static/page",  # no parameter: compared whole as a literal path
        "/files/{name}.txt",  # a parameter inside a segment
        "/files/v{version}",
        "/files/{rest:path}",
        "/prices/{value:float}",
        "/things/{key:uuid}",
        "/odd/{x}{y}",
    ],
)
def test_paths_the_segments_cannot_decide_keep_the_regex(path: str) -> None:
    assert template_of(path) is None


def test_a_custom_convertor_keeps_the_regex() -> None:
    class Lowercase(Convertor[str]):
        regex = "[a-z]+"

        def convert(self, value: str) -> str:
            return value

        def to_string(self, value: str) -> str:
            return value

    register_url_convertor("segments_lowercase", Lowercase())
    assert template_of("/words/{w:segments_lowercase}") is None


def test_a_regex_other_than_starlettes_keeps_the_regex() -> None:
    path_regex, path_format, convertors = compile_path("/cities/{id}")
    other = re.compile(path_regex.pattern, re.IGNORECASE)
    assert segment_template(other, path_format, convertors) is None


def test_the_segment_template_is_what_answers(twin: Twin) -> None:
    """A template that disagrees with its regex (never built so) decides the match: the
    tests below compare the segment walk, not the regex, with Starlette."""
    route = APIRoute("/regex/{id}", endpoint, methods=["GET"])
    segments = template_of("/walk/{id}")
    matched, child = matcher_for(twin, route, segments).match(scope_for("/walk/7"))
    assert matched == Match.FULL
    assert child["path_params"] == {"id": "7"}


# (template, paths): each path compared with Starlette on both twins.
SAME_AS_STARLETTE = [
    (
        "/cities/{id}",
        [
            "/cities/7",
            "/cities/a b",
            "/cities/é",
            "/cities/",
            "/cities",
            "/cities/7/",
            "/cities//7",
            "//cities/7",
            "cities/7",
            "/Cities/7",
            "/cities/7\n",  # "$" before a final newline: the regex decides
            "/cities/\n",
            "/cities/a\nb",
            "/cities/7\n\n",
            "",
            "/",
        ],
    ),
    (
        "/a/{x:int}/b/{y}/",
        [
            "/a/12/b/z/",
            "/a/007/b/z/",
            "/a/99999999999999999999/b/z/",
            "/a/12/b/z",
            "/a/-1/b/z/",
            "/a/1.5/b/z/",
            "/a/٣/b/z/",  # a digit, but not ASCII
            "/a/²/b/z/",
            "/a//b/z/",
            "/a/12/b//",
            "/a/12/b/z/\n",
            "/a/12\n/b/z/",
        ],
    ),
    ("/{x:int}", ["/1", "/", "/x", "/1\n", "/1/"]),
    ("/{first}/{second}", ["/a/b", "/a/", "//b", "/a/b/c", "/a/b\n"]),
]


@pytest.mark.parametrize(
    ("template", "path"), [(t, p) for t, paths in SAME_AS_STARLETTE for p in paths]
)
def test_a_segment_match_agrees_with_starlettes_regex(twin: Twin, template: str, path: str) -> None:
    matches_as_starlette(twin, template, path)


def test_another_method_is_a_partial_match_as_in_starlette(twin: Twin) -> None:
    matches_as_starlette(twin, "/cities/{id}", "/cities/7", method="POST")


class PathText(str):
    """A str subclass as the scope's path (a test client's or a middleware's)."""


@pytest.mark.parametrize("path", ["/cities/7", "/cities/7\n", "/cities/", "/a/12/b/z/"])
def test_a_str_subclass_path_matches_as_starlettes_regex(twin: Twin, path: str) -> None:
    """The segment walk takes exact strings; anything else goes to the regex."""
    matches_as_starlette(twin, "/cities/{id}", PathText(path))
    matches_as_starlette(twin, "/a/{x:int}/b/{y}/", PathText(path))


@pytest.mark.parametrize("name", TWIN_NAMES)
def test_any_path_matches_as_starlettes_regex(name: str) -> None:
    twin = get_twin(name)

    @settings(max_examples=300, deadline=None)
    @given(
        template=st.sampled_from([t for t, _ in SAME_AS_STARLETTE]),
        path=st.text(alphabet="/ab19٣\n é", max_size=14).map(lambda p: "/" + p),
    )
    def check(template: str, path: str) -> None:
        matches_as_starlette(twin, template, path)

    check()
