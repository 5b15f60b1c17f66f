"""Objects both request-path twins import, so that each exists exactly once.

Nothing here runs per request except the small constructors of errors and responses,
and helpers for the rarer values: dataclass defaults of a validated response, untyped
stream items, a ServerSentEvent's data.
"""

from __future__ import annotations

import dataclasses
import email.message
import inspect
import itertools
import math
from collections.abc import Callable
from functools import partial
from json import JSONDecodeError
from typing import Any

import msgspec
from fastapi import HTTPException
from fastapi.exceptions import RequestValidationError, ResponseValidationError
from fastapi.sse import KEEPALIVE_COMMENT, ServerSentEvent, format_sse_event
from pydantic import BaseModel
from starlette.background import BackgroundTask
from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.routing import Match

from ._compat import (
    FASTAPI_SCOPE_KEY,
    INCLUDED_ROUTER_KEY,
    INCLUSION_ROUTER_ATTR,
    ROUTE_CONTEXT_KEY,
    TELEMETRY_SCOPE_KEY,
    apply_form_limits,
    endpoint_context,
    get_route_path,
    route_selected,
    sse_ping_interval,
    untyped_item_json,
    update_scope,
)

MATCH_FULL = Match.FULL
MATCH_PARTIAL = Match.PARTIAL
MATCH_NONE = Match.NONE

JSON_CONTENT_TYPE = (b"content-type", b"application/json")
MSGPACK_CONTENT_TYPE = (b"content-type", b"application/msgpack")
# On routes that negotiate MessagePack, the response depends on the request's Accept.
VARY_ACCEPT = (b"vary", b"Accept")
# The names MessagePack goes by, in a Content-Type or an Accept header (lower case).
MSGPACK_MEDIA_TYPES = frozenset(
    {b"application/msgpack", b"application/x-msgpack", b"application/vnd.msgpack"}
)
CONTENT_LENGTH = b"content-length"
# What an absent embedded body decodes as: each part takes its default or is missing.
EMPTY_OBJECT = b"{}"

UNSUPPORTED_MEDIA_TYPE_DETAIL = "Expected a JSON request body"
UNSUPPORTED_MEDIA_TYPE_MSGPACK_DETAIL = "Expected a JSON or MessagePack request body"
NESTED_TOO_DEEPLY_DETAIL = "JSON body is nested too deeply"
NESTED_TOO_DEEPLY_MSGPACK_DETAIL = "MessagePack body is nested too deeply"
MALFORMED_PREFIX = "Malformed JSON body: "
MALFORMED_MSGPACK_PREFIX = "Malformed MessagePack body: "

# Statuses that never carry a body or a content-length (RFC 9110 §6.4.1).
BODYLESS_STATUSES = frozenset({204, 205, 304})


class Missing:
    """The marker for 'no default': a body parameter without one is required."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING = Missing()

# Option codes the plan hands to the twins; small ints compare fast in compiled code.
OUTPUT_UNTYPED = 0
OUTPUT_TRUSTED = 1
OUTPUT_VALIDATE = 2
# Trusted or validated, then shaped by the route's response_model_* options (`_endpoint.shaping`).
OUTPUT_SHAPED = 3

# How a generator endpoint's items are sent (`OutputPlan.stream`).
STREAM_NONE = 0  # not a stream: one response
STREAM_JSONL = 1  # JSON Lines, as FastAPI streams a generator endpoint by default
STREAM_SSE = 2  # server-sent events, with response_class=EventSourceResponse

# The headers FastAPI starts each kind of stream with, before the injected Response's.
JSONL_HEADERS = ((b"content-type", b"application/jsonl"),)
SSE_HEADERS = (
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
)
SSE_DATA_PREFIX = b"data: "
# A stream lets the event loop run (a disconnect, other requests) after this many items,
# also when its generator never awaits: FastAPI does after each item, at the cost of an
# event-loop turn per item.
CHECKPOINT_EVERY = 32


# The names json.dumps gives dict keys msgspec has none for (msgspec asks the hook).
_KEY_NAMES: dict[Any, str] = {None: "null", True: "true", False: "false"}


def untyped_hook(value: Any) -> Any:
    """How untyped responses encode what msgspec does not know: Pydantic models by their
    JSON dump with aliases, and a None or bool dict key by its JSON name, as json.dumps
    writes it (msgspec encodes None and bools itself everywhere else)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    if value is None or value is True or value is False:
        return _KEY_NAMES[value]
    raise TypeError(f"Encoding objects of type {type(value).__name__} is unsupported")


def fill_dataclass_defaults(value: Any) -> None:
    """Give every dataclass instance in a decoded value the fields msgspec left to their
    class attribute (see `_params.annotations.has_dataclass_defaults`), so that they are encoded, as
    FastAPI sends the declared type's every field."""
    if isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            fill_dataclass_defaults(item)
    elif isinstance(value, dict):
        for item in value.values():
            fill_dataclass_defaults(item)
    elif isinstance(value, msgspec.Struct):
        for name in value.__struct_fields__:
            fill_dataclass_defaults(getattr(value, name, None))
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        state = getattr(value, "__dict__", None)
        for field in dataclasses.fields(value):
            name = field.name
            if state is not None and name not in state and field.default is not dataclasses.MISSING:
                state[name] = field.default  # also past a frozen dataclass's guard
            fill_dataclass_defaults(getattr(value, name, None))


# The `data` of a ServerSentEvent, which FastAPI does not validate against the item type.
EVENT_DATA_ENCODER = msgspec.json.Encoder(enc_hook=untyped_hook)
# What msgspec's names for non-finite float keys ("inf", "-inf", "nan") end a key with.
_NON_FINITE_KEY_ENDS = (b'inf":', b'nan":')


def _json_key(key: Any) -> Any:
    """A dict key as json.dumps names it, where msgspec names it otherwise: a float."""
    if type(key) is not float:
        return key
    if key != key:
        return "NaN"
    if key in (math.inf, -math.inf):
        return "Infinity" if key > 0 else "-Infinity"
    return repr(key)


def _with_json_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {_json_key(key): _with_json_keys(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_with_json_keys(item) for item in value]
    return value


def encode_untyped_item(encoder: Any, item: Any, buffer: bytearray, offset: int) -> None:
    """An untyped stream item's JSON, into `buffer` from `offset` on, with its dict keys
    as FastAPI's json.dumps writes them: when msgspec wrote a key as a non-finite float
    (seen in its output, which is cheap), the item is encoded again from its builtins
    with every float key named the json.dumps way ("Infinity" for `inf`)."""
    encoder.encode_into(item, buffer, offset)
    if _NON_FINITE_KEY_ENDS[0] in buffer or _NON_FINITE_KEY_ENDS[1] in buffer:
        builtins = msgspec.to_builtins(item, enc_hook=untyped_hook)
        encoder.encode_into(_with_json_keys(builtins), buffer, offset)


def event_data(data: Any) -> str:
    """A ServerSentEvent's `data` as FastAPI writes it: a Pydantic model by its own JSON
    dump (so its serialization config applies), anything else as an untyped item."""
    if hasattr(data, "model_dump_json"):
        return data.model_dump_json()  # type: ignore[no-any-return]
    buffer = bytearray()
    encode_untyped_item(EVENT_DATA_ENCODER, data, buffer, 0)
    return buffer.decode()


def pydantic_event_data(data: Any) -> str:
    """A ServerSentEvent's `data` on a Pydantic route: as `event_data`, but anything
    other than a Pydantic model written by FastAPI's own json.dumps path."""
    if hasattr(data, "model_dump_json"):
        return data.model_dump_json()  # type: ignore[no-any-return]
    return untyped_item_json(data)


def server_sent_event(item: ServerSentEvent, write_data: Callable[[Any], str]) -> bytes:
    """A ServerSentEvent as FastAPI formats it: its raw data as given, else its data
    written by `write_data` (not checked against the item type, as in FastAPI)."""
    data = item.raw_data
    if data is None and item.data is not None:
        data = write_data(item.data)
    return format_sse_event(
        data_str=data, event=item.event, id=item.id, retry=item.retry, comment=item.comment
    )


CONTAINER_NONE = 0
CONTAINER_LIST = 1
CONTAINER_DICT = 2
CONTAINER_OPTIONAL = 3
CONTAINER_TUPLE = 4

PARAM_PATH = 0
PARAM_QUERY = 1
PARAM_HEADER = 2
PARAM_COOKIE = 3
PARAM_FORM = 4  # a form model (never a direct-tier parameter)

# How a dependency plan's step is called (`_dependencies.plan.Step.kind`): awaited, in the
# threadpool, called without awaiting (the endpoint only: it makes a stream), or set up as
# an async or a sync generator, entered and torn down by `_dependencies.executor`'s
# `Teardown`.
DEP_ASYNC = 0
DEP_THREAD = 1
DEP_GENERATOR = 2
DEP_ASYNC_GENERATOR = 3
DEP_SYNC_GENERATOR = 4

# The special objects a step may receive (`_dependencies.plan.Step.specials`).
SPECIAL_REQUEST = 0  # the request (Request or HTTPConnection)
SPECIAL_RESPONSE = 1  # the sub-response whose status and headers the response takes
SPECIAL_BACKGROUND = 2  # the background tasks run after the response
SPECIAL_SCOPES = 3  # a new SecurityScopes with the step's scopes

# Digit strings this short fit in a signed 64-bit integer, so the compiled twin reads int
# parameters made of them without overflow checks; longer ones take the converter.
FAST_DIGITS_MAX = 18

# Where registration leaves, on each inclusion context of a route, its matcher and (on the
# direct tier) its ASGI app, for the route's `matches` and `handle` to find per request.
MATCHER_ATTR = "_msgspec_matcher"
DIRECT_ATTR = "_msgspec_direct_app"

# Where the delegated tier leaves (runtime, decoded body, raw body, parameter models, their
# errors) for the endpoint wrapper and the stand-ins of dependencies (`_dependencies.tree`).
SCOPE_KEY = "msgspec_fastapi"
# Where the delegated tier leaves an embedded body's `_dependencies.plan.BodyParts`, and the valid
# parts of a body that failed once they were decoded (`_dependencies.tree.valid_parts`).
PARTS_KEY = "msgspec_fastapi.parts"
VALID_PARTS_KEY = "msgspec_fastapi.valid_parts"
# Set once the request path's own 422 is raised: a validation error raised before it is
# FastAPI's own.
REACHED_KEY = "msgspec_fastapi.reached"


# -- dispatch (the route index; see `_routing.index`) --------------------------------------

# How an index entry is tested and handled per request.
ENTRY_ROUTE = 0  # a route of the application's own table: its `matches` and `handle`
ENTRY_MATCHER = 1  # an included MsgspecRoute: its context's prepared matcher
ENTRY_CONTEXT = 2  # another included APIRoute: its `matches` with the context in scope
ENTRY_FALLBACK = 3  # anything else included: reaching it hands the request to FastAPI

# How a parameter segment of a route path narrows the request segments it accepts; a
# superset of what the convertor's regex accepts, the regex deciding afterwards.
SEGMENT_ANY = 0  # any non-empty segment (str, float, uuid)
SEGMENT_DIGITS = 1  # ASCII digits only (int)

# Where registration leaves an inclusion's own index, for MsgspecRouter.matches/handle.
INDEX_ATTR = "_msgspec_index"


class Generation:
    """A value changed whenever FastAPI changes the routes of a watched router.

    Each change stores a value never stored before, drawn from one counter, instead of
    adding one to the current value: two changes in two threads may store theirs in
    either order, but never one an index was already built at (a read-add-store racing
    another can store a value again, and a later change can then store the value a
    stale index holds). `next()` on `itertools.count` is atomic, with or without the GIL.
    """

    __slots__ = ("_values", "value")

    def __init__(self) -> None:
        self._values = itertools.count(1)
        self.value = 0

    def bump(self) -> None:
        self.value = next(self._values)


# One counter for every index: any change anywhere rebuilds indexes lazily.
ROUTES_GENERATION = Generation()


class EntryPoints:
    """The `matches` and `handle` functions of every request-path twin imported so far.

    Each twin's routing module (`_routing.dispatch` or `_routing.dispatch_py`) adds its own
    as it is imported, so that the index builder (`_routing.index`) tells the package's
    routes and routers from custom ones without importing them: imports go one way, from
    registration to the request path.
    """

    __slots__ = ("route_handle", "route_matches", "router_methods")

    def __init__(self) -> None:
        self.route_matches: set[Any] = set()
        self.route_handle: set[Any] = set()
        # (matches, handle) pairs of a router's inclusion.
        self.router_methods: set[tuple[Any, Any]] = set()

    def add(
        self, route_matches: Any, route_handle: Any, router_matches: Any, router_handle: Any
    ) -> None:
        self.route_matches.add(route_matches)
        self.route_handle.add(route_handle)
        self.router_methods.add((router_matches, router_handle))


TWIN_ENTRY_POINTS = EntryPoints()


class Absent:
    """The marker for a scope entry that was not there before matching set it."""

    __slots__ = ()


ABSENT = Absent()


def unsupported_media_type(accepts_msgpack: bool = False) -> HTTPException:
    if accepts_msgpack:
        return HTTPException(415, UNSUPPORTED_MEDIA_TYPE_MSGPACK_DETAIL)
    return HTTPException(415, UNSUPPORTED_MEDIA_TYPE_DETAIL)


def body_too_large() -> HTTPException:
    """FastAPI's 413, for FastAPI versions that do not enforce `max_body_size` themselves."""
    return HTTPException(413, "Content Too Large")


def malformed_json(exc: BaseException) -> HTTPException:
    return HTTPException(400, MALFORMED_PREFIX + str(exc))


def malformed_msgpack(exc: BaseException) -> HTTPException:
    return HTTPException(400, MALFORMED_MSGPACK_PREFIX + str(exc))


def nested_too_deeply(msgpack: bool = False) -> HTTPException:
    if msgpack:
        return HTTPException(400, NESTED_TOO_DEEPLY_MSGPACK_DETAIL)
    return HTTPException(400, NESTED_TOO_DEEPLY_DETAIL)


# -- Pydantic routes on the direct tier (`_endpoint.pydantic_route`): FastAPI's handler's
# answers, made as it makes them.


# The fewest digits of an integer past the largest float (about 1.8e308): as a float's
# value, `json.loads` gives such an integer that Pydantic refuses, where Pydantic's own
# JSON parser gives infinity. A body with a run of this many digits takes FastAPI's steps.
LONG_NUMBER_DIGITS = 309
# The pure twin's search for such a run: every ASCII digit to "1", every other byte to a
# space, and the run as it then reads.
DIGIT_RUNS = bytes(49 if 48 <= byte <= 57 else 32 for byte in range(256))
LONG_NUMBER_RUN = b"1" * LONG_NUMBER_DIGITS


def takes_json(content_type: bytes) -> bool:
    """Whether FastAPI's handler parses a body sent with this (non-empty) Content-Type as
    JSON: an `application/json` or `application/*+json` type, as the standard library's
    email parser reads the header."""
    message = email.message.Message()
    message["content-type"] = content_type.decode("latin-1")
    if message.get_content_maintype() != "application":
        return False
    subtype = message.get_content_subtype()
    return subtype == "json" or subtype.endswith("+json")


def json_invalid_error(exc: JSONDecodeError) -> dict[str, Any]:
    """FastAPI's error for a body `json.loads` refused."""
    return {
        "type": "json_invalid",
        "loc": ("body", exc.pos),
        "msg": "JSON decode error",
        "input": {},
        "ctx": {"error": exc.msg},
    }


def json_invalid(exc: JSONDecodeError, call: Any, path: str, scope: Any) -> RequestValidationError:
    """FastAPI's 422 for a body `json.loads` refused, on a Pydantic route."""
    context = endpoint_context(call, path, scope)
    return RequestValidationError([json_invalid_error(exc)], body=exc.doc, endpoint_ctx=context)


def body_unreadable() -> HTTPException:
    """FastAPI's 400 for a body its handler could not parse otherwise."""
    return HTTPException(status_code=400, detail="There was an error parsing the body")


def pydantic_request_invalid(
    errors: list[Any], body: Any, call: Any, path: str, scope: Any
) -> RequestValidationError:
    context = endpoint_context(call, path, scope)
    return RequestValidationError(errors, body=body, endpoint_ctx=context)


def pydantic_response_invalid(
    errors: list[Any], result: Any, call: Any, path: str, scope: Any
) -> ResponseValidationError:
    return ResponseValidationError(
        errors, body=result, endpoint_ctx=endpoint_context(call, path, scope)
    )


def body_missing() -> RequestValidationError:
    return RequestValidationError(
        [{"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}]
    )


def response_invalid(exc: BaseException, body: Any, report: Any = None) -> ResponseValidationError:
    """The error for a response that failed validation: the errors `report` finds (FastAPI's,
    on a route with errors="fastapi"), else msgspec's one at `("response",)`."""
    if report is not None:
        errors = report(body)
        if errors:
            return ResponseValidationError(errors, body=body)
    return ResponseValidationError(
        [{"loc": ("response",), "msg": str(exc), "type": "value_error.msgspec"}], body=body
    )


class PreparedResponse(Response):
    """A response whose body and raw headers are already final bytes.

    Built by the request path for the delegated tier, where FastAPI expects a Response
    object; skips Starlette's header rendering because the plan prepared the headers.
    """

    def __init__(
        self,
        body: bytes,
        status_code: int,
        raw_headers: list[tuple[bytes, bytes]],
        background: BackgroundTask | None = None,
    ) -> None:
        self.body = body
        self.status_code = status_code
        self.raw_headers = raw_headers
        self.background = background


class NoResponse(Response):
    """What the delegated tier answers a client that left mid-body: nothing at all."""

    def __init__(self) -> None:
        self.background = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        return None


__all__ = [
    "FASTAPI_SCOPE_KEY",
    "INCLUDED_ROUTER_KEY",
    "INCLUSION_ROUTER_ATTR",
    "KEEPALIVE_COMMENT",
    "ROUTE_CONTEXT_KEY",
    "TELEMETRY_SCOPE_KEY",
    "ClientDisconnect",
    "HTTPException",
    "RequestValidationError",
    "ResponseValidationError",
    "ServerSentEvent",
    "apply_form_limits",
    "format_sse_event",
    "get_route_path",
    "route_selected",
    "sse_ping_interval",
    "update_scope",
]


def is_coroutine_endpoint(endpoint: Callable[..., Any]) -> bool:
    """Whether calling `endpoint` returns a coroutine, through partials.

    Not Starlette's `is_async_callable`, although both agree on functions, methods,
    partials and callable objects (FastAPI 0.142.2 and 0.165.0): Starlette's looks up
    `obj.__call__`, so it calls a class with an async `__call__` (whose call returns an
    instance) a coroutine function, and follows an instance attribute `__call__` that a
    call ignores. Looking at `type(obj).__call__` asks what a call runs.
    """
    target: Any = endpoint
    while isinstance(target, partial):
        target = target.func
    if inspect.iscoroutinefunction(target):
        return True
    return callable(target) and inspect.iscoroutinefunction(type(target).__call__)
