"""The request path, in pure Python: the readable reference for `_fastpath.pyx`.

Both twins implement one contract over a route's plan (`_endpoint.plan.RoutePlan`):

- `RouteRuntime(plan)` holds the per-route state built at registration.
- `await runtime.read_raw(scope, receive)` reads the body straight from `receive` (a 413
  as soon as it exceeds the route's limit, where the request path enforces one), and
  `runtime.parse_body(scope, raw)` checks the content type on the raw ASGI header list
  and decodes it. It returns the
  decoded value, or a `RequestValidationError` to raise once dependencies have run (a
  missing or invalid body is a 422, which a failing dependency must be able to pre-empt).
  It raises `HTTPException` 415 for a non-JSON content type, 400 for malformed or too
  deeply nested JSON, and `ClientDisconnect` when the client goes away mid-body. Routes
  that accept MessagePack also decode `application/msgpack` bodies (and its two other
  names) into the same type, with the same errors.
- `runtime.encode(result, msgpack)` turns an endpoint's return value into JSON (or
  MessagePack) bytes: instances
  of exactly the declared Struct class (and containers of them) are trusted and encoded
  once, other values are validated against the declared type first, in lax mode as
  FastAPI validates responses (a failure raises `ResponseValidationError`), and untyped
  routes are encoded as they are. A route with
  `response_model_*` options encodes the checked value as its `_endpoint.shaping.ResponseShape`
  shapes it.
- Routing (which route a request goes to: `RouteMatcher`, `route_matches`,
  `route_handle`, the route index and its dispatchers) is written once for both twins, in
  `_routing/dispatch_py.py`; each twin re-exports it from its own implementation.
- A generator endpoint's result becomes `runtime.stream_items(items, status_code,
  extra_headers)`, an `ItemStream`: Starlette's StreamingResponse (disconnects,
  background tasks) whose send loop is the request path's. JSON Lines get one item per
  line (`encode_line`), server-sent events one event per item (`encode_event`) and a
  keep-alive comment whenever the generator is idle as long as FastAPI waits. Items are
  checked as responses are: exactly the declared Struct is trusted, anything else is
  validated, and an invalid one raises `ResponseValidationError` mid-stream, as in
  FastAPI. Sync generators run in the threadpool, one item at a time; a stream that
  stops early (a disconnect, an error) closes its generator, so its `finally` runs.
- `runtime.respond(result, status_code, extra_headers, request_headers)` is `encode` plus
  a Response object, for the delegated tier where FastAPI's handler expects one;
  `runtime.prepare` (same arguments) gives what that Response would send, (status, raw
  headers, body), to a caller that sends it itself (a stream route's response as is). Routes
  that negotiate MessagePack answer in it when the request's Accept prefers it
  (`prefers_msgpack`), and send `Vary: Accept` either way.
- `runtime.extract_models(scope, values, errors)` gathers each query, header and cookie
  model into `values` (or its errors), and `runtime.extract_form(form, values, errors)`
  the route's form model from the form FastAPI's way of parsing gave (delegated tier).
- `await runtime(scope, receive, send)` is the direct tier's whole ASGI app: body, then
  parameters, the endpoint (sync ones in the threadpool), and the response sent straight
  to `send`. Exceptions reach the application's exception handlers as they would from
  a FastAPI route.
- `await PydanticRuntime(plan)(scope, receive, send)` is the direct tier's app for a route
  FastAPI validates with Pydantic alone (`_endpoint.pydantic_route`): the steps of
  FastAPI's route handler without it, with FastAPI's own body and response fields, so that
  it answers every request as the same route on an APIRouter does.

Both twins give byte-identical responses for every input; tests drive them side by side.
The compiled twin mirrors this file: the same definitions in the same order under the same
names (tests/test_twin_shape.py compares them), so that a diff of the two shows only types
and Cython idioms.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Iterable
from contextlib import suppress
from copy import deepcopy
from json import JSONDecodeError
from time import monotonic
from typing import Any
from urllib.parse import parse_qsl

import msgspec
from anyio import CancelScope, Event, create_task_group, sleep
from anyio.lowlevel import checkpoint
from fastapi.encoders import jsonable_encoder
from pydantic_core import ValidationError as PydanticValidationError
from starlette.concurrency import iterate_in_threadpool, run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.requests import cookie_parser
from starlette.responses import Response, StreamingResponse
from starlette.types import Message, Receive, Scope, Send

from . import _shared
from ._compat import located_errors, untyped_item_json, validate_body, validate_whole_body
from ._errors.handlers import handle_route_exception
from ._errors.validation import request_invalid

# Routing is written once for both twins (`_routing/dispatch_py.py`); this twin re-exports
# it as Python.
from ._routing.dispatch_py import INDEX_CLASSES as INDEX_CLASSES
from ._routing.dispatch_py import AppDispatcher as AppDispatcher
from ._routing.dispatch_py import RouteMatcher as RouteMatcher
from ._routing.dispatch_py import route_handle as route_handle
from ._routing.dispatch_py import route_matches as route_matches
from ._routing.dispatch_py import router_handle as router_handle
from ._routing.dispatch_py import router_matches as router_matches
from ._routing.entry_py import Tracker as EntryTracker
from ._shared import (
    DIGIT_RUNS,
    KEEPALIVE_COMMENT,
    LONG_NUMBER_RUN,
    ClientDisconnect,
    PreparedResponse,
    RequestValidationError,
    ServerSentEvent,
    body_missing,
    body_too_large,
    body_unreadable,
    encode_untyped_item,
    event_data,
    fill_dataclass_defaults,
    format_sse_event,
    json_invalid,
    nested_too_deeply,
    pydantic_event_data,
    pydantic_request_invalid,
    pydantic_response_invalid,
    response_invalid,
    server_sent_event,
    sse_ping_interval,
    takes_json,
    unsupported_media_type,
)

IMPLEMENTATION = "pure"

# Shared constants under their `_shared` names; the compiled twin gives them C types.
MISSING = _shared.MISSING
EMPTY_OBJECT = _shared.EMPTY_OBJECT
BODYLESS_STATUSES = _shared.BODYLESS_STATUSES
JSON_CONTENT_TYPE = _shared.JSON_CONTENT_TYPE
MSGPACK_CONTENT_TYPE = _shared.MSGPACK_CONTENT_TYPE
VARY_ACCEPT = _shared.VARY_ACCEPT
MSGPACK_MEDIA_TYPES = _shared.MSGPACK_MEDIA_TYPES
CONTENT_LENGTH = _shared.CONTENT_LENGTH
OUTPUT_TRUSTED = _shared.OUTPUT_TRUSTED
OUTPUT_UNTYPED = _shared.OUTPUT_UNTYPED
OUTPUT_SHAPED = _shared.OUTPUT_SHAPED
CONTAINER_LIST = _shared.CONTAINER_LIST
CONTAINER_DICT = _shared.CONTAINER_DICT
CONTAINER_OPTIONAL = _shared.CONTAINER_OPTIONAL
CONTAINER_TUPLE = _shared.CONTAINER_TUPLE
STREAM_NONE = _shared.STREAM_NONE
STREAM_SSE = _shared.STREAM_SSE
JSONL_HEADERS = _shared.JSONL_HEADERS
SSE_HEADERS = _shared.SSE_HEADERS
SSE_DATA_PREFIX = _shared.SSE_DATA_PREFIX
CHECKPOINT_EVERY = _shared.CHECKPOINT_EVERY
PARAM_PATH = _shared.PARAM_PATH
PARAM_QUERY = _shared.PARAM_QUERY
PARAM_HEADER = _shared.PARAM_HEADER
TELEMETRY_SCOPE_KEY = _shared.TELEMETRY_SCOPE_KEY
FAST_DIGITS_MAX = _shared.FAST_DIGITS_MAX
LONG_NUMBER_DIGITS = _shared.LONG_NUMBER_DIGITS
RESPONSE_LOC = ("response",)
ASCII_SPACE = b" \t\r\n\x0b\x0c"
ValidationError = msgspec.ValidationError
DecodeError = msgspec.DecodeError
asdict = msgspec.structs.asdict


def routes_unchanged(routes: list[Any], snapshot: list[Any]) -> bool:
    """Whether `routes` still equals `snapshot`: the route index's test, per request, that
    the application's route list was not changed in place since the index was built from
    it (`app.router.routes.append(...)`, a route replaced by position or reordered)."""
    return routes == snapshot


def is_json_media_type(value: bytes) -> bool:
    """`application/json` or `application/*+json`, any parameters, any letter case."""
    media = value.split(b";", 1)[0].strip(ASCII_SPACE).lower()
    if media == b"application/json":
        return True
    return media.startswith(b"application/") and media.endswith(b"+json")


def is_msgpack_media_type(value: bytes) -> bool:
    """One of MessagePack's three media types, any parameters, any letter case."""
    return value.split(b";", 1)[0].strip(ASCII_SPACE).lower() in MSGPACK_MEDIA_TYPES


def accept_quality(params: bytes) -> float:
    """The q-value among a media range's parameters: 1 without one, -1 when invalid."""
    for param in params.split(b";"):
        name, _, value = param.partition(b"=")
        if name.strip(ASCII_SPACE) == b"q":
            try:
                quality = float(value)
            except ValueError:
                return -1.0
            return quality if 0.0 <= quality <= 1.0 else -1.0
    return 1.0


def outranks(level: int, quality: float, best_level: int, best_quality: float) -> bool:
    """Whether a matching range says more than the best so far: more specific, or as
    specific with a higher quality."""
    return level > best_level or (level == best_level and quality > best_quality)


def prefers_msgpack(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether the request's Accept ranks MessagePack above JSON, the default.

    Each format takes the quality of the most specific range that matches it (RFC 9110
    §12.5.1), any of MessagePack's names counting as its own. MessagePack wins with a
    higher quality; at equal quality, with a more specific range, then with one listed
    earlier. A quality of 0 is "not acceptable"; ranges that cannot be read are skipped.
    """
    accept = b""
    for name, value in headers:
        if name == b"accept":
            accept = value if not accept else accept + b"," + value
    accept = accept.lower()
    if b"msgpack" not in accept and b"json" not in accept:
        return False  # whatever range matches one matches the other alike
    json_quality = msgpack_quality = 0.0
    json_level = msgpack_level = -1  # 0 for */*, 1 for application/*, 2 for the type
    json_at = msgpack_at = 0
    position = 0
    for part in accept.split(b","):
        position += 1
        media, _, params = part.partition(b";")
        media = media.strip(ASCII_SPACE)
        is_json = media == b"application/json"
        if media == b"*/*":
            level = 0
        elif media == b"application/*":
            level = 1
        elif is_json or media in MSGPACK_MEDIA_TYPES:
            level = 2
        else:
            continue
        quality = accept_quality(params)
        if quality < 0.0:
            continue
        if (level < 2 or is_json) and outranks(level, quality, json_level, json_quality):
            json_level, json_quality, json_at = level, quality, position
        if (level < 2 or not is_json) and outranks(level, quality, msgpack_level, msgpack_quality):
            msgpack_level, msgpack_quality, msgpack_at = level, quality, position
    if msgpack_quality <= 0.0:
        return False
    if msgpack_quality != json_quality:
        return msgpack_quality > json_quality
    if msgpack_level != json_level:
        return msgpack_level > json_level
    return msgpack_at < json_at


def body_allowed(status_code: int) -> bool:
    return status_code >= 200 and status_code not in BODYLESS_STATUSES


def decimal_bytes(n: int) -> bytes:
    """`n` in decimal, as the Content-Length header carries it."""
    return str(n).encode("latin-1")


def response_headers(
    status_code: int, body: bytes, content_type: tuple[bytes, bytes], vary: bool
) -> list[tuple[bytes, bytes]]:
    """Headers in the order Starlette's JSONResponse writes them, then `Vary: Accept`."""
    if not body_allowed(status_code):
        headers = [content_type]
    else:
        headers = [(CONTENT_LENGTH, decimal_bytes(len(body))), content_type]
    if vary:
        headers.append(VARY_ACCEPT)
    return headers


def all_of_class(items: Iterable[Any], cls: type | None) -> bool:
    """Whether every item is exactly of class `cls` (subclasses need validation)."""
    return all(type(item) is cls for item in items)


def one_message_body(message: Message, limit: int) -> bytes | None:
    """The request body where its first message brings all of it, else None (then
    `receive_body` reads on from that message): most bodies come in one message, and
    this reads them without a coroutine of its own. A 413 where it exceeds `limit`."""
    if message["type"] != "http.request" or message.get("more_body", False):
        return None
    chunk: bytes | None = message.get("body", b"")
    if chunk is None:  # read on, as receive_body reads a missing body
        return None
    if 0 <= limit < len(chunk):
        raise body_too_large()
    return chunk


async def receive_body(receive: Receive, limit: int, message: Message | None = None) -> bytes:
    """The whole request body, as Starlette's `Request.body()` reads it, from `message` on
    where one was received already.

    With a limit (not -1), reading stops with a 413 as soon as the body exceeds it.
    """
    chunks: list[bytes] = []
    total = 0
    while True:
        if message is None:
            message = await receive()
        kind = message["type"]
        if kind == "http.request":
            chunk = message.get("body", b"")
            if chunk:
                total += len(chunk)
                if 0 <= limit < total:
                    raise body_too_large()
                chunks.append(chunk)
            if not message.get("more_body", False):
                break
        elif kind == "http.disconnect":
            raise ClientDisconnect()
        message = None
    if len(chunks) == 1:
        return chunks[0]
    return b"".join(chunks)


def revalidate_builtins(
    result: Any, output_type: Any, error: Exception, check: Any, report: Any
) -> Any:
    """Validate a value whose JSON round trip failed: an object with the fields as
    attributes, or builtins holding non-finite floats.

    NaN and infinity encode as null, which a float field refuses, although FastAPI sends
    such values as null. Validating the Python values instead (keys made strings, as
    JSON would) accepts them; a real validation error from that check is reported, as
    the round trip's error may only point at the non-finite float. `check` is the
    route's encoder where the type has an Any part, which lets a value msgspec cannot
    encode through the conversion (`{None: 1}`): that value is invalid too. `report`
    gives FastAPI's errors for an invalid value (errors="fastapi"), or is None.
    """
    if isinstance(error, ValidationError):
        try:
            return msgspec.convert(
                msgspec.to_builtins(result, str_keys=True),
                output_type,
                str_keys=True,
                strict=False,
            )
        except ValidationError as exc:
            error = exc
        except TypeError:
            # to_builtins refuses some values JSON encodes (msgspec.Raw, for one).
            pass
    elif isinstance(error, TypeError):
        # An object JSON cannot encode (an ORM row, say) may hold the fields as
        # attributes, which FastAPI reads with from_attributes: so does the convert.
        try:
            value = msgspec.convert(result, output_type, from_attributes=True, strict=False)
            if check is not None:
                check.encode(value)
            return value
        except ValidationError as exc:
            error = exc
        except (TypeError, ValueError):
            pass
    raise response_invalid(error, result, report) from error


def parse_query(raw: bytes) -> list[tuple[str, str]]:
    """The query string as Starlette's QueryParams reads it (parse_qsl, blanks kept).

    Without escapes ('%' or '+') that is a plain split, done here without urllib. The
    ASGI spec makes it bytes; anything else is refused as the compiled twin's typed
    argument refuses it.
    """
    if raw is not None and type(raw) is not bytes:
        raise TypeError(f"query_string must be bytes, not {type(raw).__name__}")
    text = raw.decode("latin-1")
    if "%" in text or "+" in text:
        return parse_qsl(text, keep_blank_values=True)
    pairs = []
    for field in text.split("&"):
        if field:
            name, _, value = field.partition("=")
            pairs.append((name, value))
    return pairs


def small_int(raw: Any) -> int | None:
    """An int, or a short ASCII digit string read as FastAPI reads it; else None."""
    if type(raw) is int:
        return raw
    if type(raw) is str and 0 < len(raw) <= FAST_DIGITS_MAX and raw.isascii() and raw.isdigit():
        return int(raw)
    return None


def pick(items: list[tuple[str, str]], key: str, many: bool) -> Any:
    """All values for `key`, or the last one, as Starlette's QueryParams gives it."""
    if many:
        return [value for name, value in items if name == key]
    found = None
    for name, value in items:
        if name == key:
            found = value
    return found


def pick_header(headers: Iterable[tuple[bytes, bytes]], key: bytes, many: bool) -> Any:
    """The first value or all values of a header, decoded as Starlette's Headers does."""
    if many:
        return [value.decode("latin-1") for name, value in headers if name == key]
    for name, value in headers:
        if name == key:
            return value.decode("latin-1")
    return None


def parse_cookies(headers: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    """Cookies from every Cookie header, later ones winning, as Starlette's Request."""
    cookies: dict[str, str] = {}
    for name, value in headers:
        if name == b"cookie":
            cookies.update(cookie_parser(value.decode("latin-1")))
    return cookies


def has_long_number(raw: bytes) -> bool:
    """Whether `raw` holds a run of `LONG_NUMBER_DIGITS` ASCII digits (in a number or not)."""
    return len(raw) >= LONG_NUMBER_DIGITS and LONG_NUMBER_RUN in raw.translate(DIGIT_RUNS)


def is_empty_file(value: Any) -> bool:
    """A file input sent without a file, which FastAPI treats as absent."""
    return isinstance(value, UploadFile) and value.filename == "" and value.size == 0


class SendTracker:
    """Wraps `send` to learn whether the response has started."""

    __slots__ = ("send", "started")

    def __init__(self, send: Send) -> None:
        self.send = send
        self.started = False

    def __call__(self, message: Message) -> Awaitable[None]:
        if message["type"] == "http.response.start":
            self.started = True
        return self.send(message)


def response_send(send: Send) -> Send:
    """Where the request path sends a response's messages itself: the server's `send`,
    where `send` is this twin's application entry noting the response's start
    (`_routing.entry_py.Tracker`), marked started, so that each message skips a call
    through it; else `send`. Called just before the start message."""
    if type(send) is EntryTracker:
        send.started = True
        return send.send
    return send


class Param:
    """A `_params.converters.ParamSpec` as the direct tier reads it per request."""

    __slots__ = (
        "convert",
        "default",
        "has_bounds",
        "header_key",
        "high",
        "is_sequence",
        "keeps_strings",
        "key",
        "loc",
        "location",
        "low",
        "name",
        "required",
    )

    low: int
    high: int

    def __init__(self, spec: Any) -> None:
        self.name = spec.name
        self.location = spec.location
        self.key = spec.key
        self.header_key = spec.header_key
        self.loc = spec.loc
        self.is_sequence = spec.is_sequence
        self.required = spec.required
        self.default = spec.default
        self.convert = spec.convert
        self.keeps_strings = spec.keeps_strings
        self.has_bounds = spec.int_bounds is not None
        self.low, self.high = spec.int_bounds if self.has_bounds else (0, 0)


async def close_items(items: Any) -> None:
    """End a generator whose stream stopped early, so that its `finally` runs now."""
    if hasattr(items, "aclose"):
        with CancelScope(shield=True):
            await items.aclose()
    elif hasattr(items, "close"):
        # ValueError: a worker thread is making its next item; it closes when collected.
        with suppress(ValueError):
            items.close()


class ItemStream(StreamingResponse):
    """A generator endpoint's items as JSON Lines or server-sent events.

    Starlette's StreamingResponse runs it: it ends the stream when the client
    disconnects and runs background tasks after it. Each item is encoded by the route's
    runtime into one buffer the stream reuses, and sent in a message of its own.
    """

    def __init__(
        self,
        runtime: Any,
        items: Any,
        status_code: int,
        headers: list[tuple[bytes, bytes]],
        scope: Scope | None,
    ) -> None:
        self.runtime = runtime
        self.items = items
        self.scope = scope  # the request's, where an invalid item's error names it
        self.status_code = status_code
        self.raw_headers = headers
        self.background = None
        # Server-sent events: when the last message went out, whether an event is being
        # sent, and the keep-alive being sent (set when it is done), if any.
        self.last_sent = 0.0
        self.sending = False
        self.ping: Event | None = None

    async def stream_response(self, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        items = self.items
        iterator = items if hasattr(items, "__aiter__") else iterate_in_threadpool(items)
        try:
            if self.runtime.stream == STREAM_SSE:
                await self.send_events(iterator, send)
            else:
                await self.send_lines(iterator, send)
        finally:
            await close_items(items)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def send_lines(self, iterator: Any, send: Send) -> None:
        runtime = self.runtime
        buffer = bytearray()
        count = 0
        async for item in iterator:
            body = runtime.encode_line(item, buffer, self.scope)
            await send({"type": "http.response.body", "body": body, "more_body": True})
            count += 1
            if count == runtime.checkpoint_every:
                count = 0
                await checkpoint()

    async def send_events(self, iterator: Any, send: Send) -> None:
        runtime = self.runtime
        buffer = bytearray()
        count = 0
        self.last_sent = monotonic()
        async with create_task_group() as group:
            group.start_soon(self.keep_alive, send, sse_ping_interval())
            async for item in iterator:
                body = runtime.encode_event(item, buffer, self.scope)
                # One message at a time: wait for a keep-alive being sent, if any.
                if self.ping is not None:
                    await self.ping.wait()
                self.sending = True
                await send({"type": "http.response.body", "body": body, "more_body": True})
                self.sending = False
                self.last_sent = monotonic()
                count += 1
                if count == runtime.checkpoint_every:
                    count = 0
                    await checkpoint()
            group.cancel_scope.cancel()

    async def keep_alive(self, send: Send, interval: float) -> None:
        """A comment whenever no event went out for `interval` seconds, as FastAPI sends;
        never while an event is being sent (then the stream is not idle)."""
        while True:
            idle = monotonic() - self.last_sent
            if idle < interval:
                await sleep(interval - idle)
            elif self.sending:
                await sleep(interval)  # an event is on its way (a slow client): not idle
            else:
                self.ping = Event()
                try:
                    await send(
                        {"type": "http.response.body", "body": KEEPALIVE_COMMENT, "more_body": True}
                    )
                finally:
                    self.ping.set()
                    self.ping = None
                self.last_sent = monotonic()


class RouteRuntime:
    """Per-route state for the request path; see the module docstring."""

    __slots__ = (
        "accepts_msgpack",
        "admits_any",
        "body_name",
        "checkpoint_every",
        "container",
        "content_type",
        "decoder",
        "default",
        "embedded",
        "encoder",
        "endpoint",
        "fills_defaults",
        "form",
        "has_body",
        "is_coroutine",
        "max_body_size",
        "models",
        "msgpack_decoder",
        "msgpack_encoder",
        "negotiates",
        "output_decoder",
        "output_mode",
        "output_type",
        "params",
        "plan",
        "report_invalid",
        "report_invalid_msgpack",
        "shape",
        "status_code",
        "stream",
        "strict_content_type",
        "traced_app",
        "trusted_class",
    )

    # Registration's objects (decoders, encoders, the endpoint) are Any: the compiled
    # twin reads them as `object` too, and the plan is what types them.
    decoder: Any
    msgpack_decoder: Any
    encoder: Any
    msgpack_encoder: Any
    output_decoder: Any
    report_invalid: Any
    report_invalid_msgpack: Any
    shape: Any
    endpoint: Any
    body_name: Any
    form: Any
    traced_app: Any

    def __init__(self, plan: Any) -> None:
        # Fields a plan leaves out keep the values a C struct starts with: None, 0, False.
        self.plan = plan
        body = plan.body
        self.has_body = body is not None
        self.decoder = body.decoder if body is not None else None
        self.default = body.default if body is not None else None
        self.embedded = body.embedded if body is not None else False
        self.report_invalid = body.report_invalid if body is not None else None
        self.msgpack_decoder = body.msgpack_decoder if body is not None else None
        self.report_invalid_msgpack = body.report_invalid_msgpack if body is not None else None
        self.accepts_msgpack = self.msgpack_decoder is not None
        self.strict_content_type = plan.strict_content_type
        output = plan.output
        self.output_mode = output.mode if output is not None else OUTPUT_UNTYPED
        self.encoder = output.encoder if output is not None else None
        self.msgpack_encoder = output.msgpack_encoder if output is not None else None
        self.negotiates = self.msgpack_encoder is not None
        self.output_decoder = output.decoder if output is not None else None
        self.output_type = output.output_type if output is not None else None
        self.trusted_class = output.trusted_class if output is not None else None
        self.container = output.container if output is not None else 0
        self.admits_any = output.admits_any if output is not None else False
        self.fills_defaults = output.fills_defaults if output is not None else False
        self.shape = output.shape if output is not None else None
        self.stream = output.stream if output is not None else STREAM_NONE
        self.checkpoint_every = CHECKPOINT_EVERY
        self.content_type = output.content_type if output is not None else JSON_CONTENT_TYPE
        self.status_code = plan.status_code
        self.max_body_size = plan.max_body_size
        direct = plan.direct
        self.endpoint = direct.endpoint if direct is not None else None
        self.is_coroutine = direct.is_coroutine if direct is not None else False
        self.params = tuple([Param(spec) for spec in direct.params]) if direct is not None else ()
        self.body_name = direct.body_name if direct is not None else None
        self.models = tuple(plan.models)
        self.form = plan.form
        # Direct tier: the route's delegated handling, as an ASGI app (set by the router).
        self.traced_app = None

    # -- body -----------------------------------------------------------------------

    def check_content_type(self, headers: Iterable[tuple[bytes, bytes]]) -> bool:
        """Whether the body is MessagePack; a 415 for a type the route does not take."""
        for name, value in headers:
            if name == b"content-type":
                if not value:
                    break
                if is_json_media_type(value):
                    return False
                if self.accepts_msgpack and is_msgpack_media_type(value):
                    return True
                raise unsupported_media_type(self.accepts_msgpack)
        if self.strict_content_type:
            # A body without a content type can be sent cross-origin without a CORS
            # preflight, so FastAPI's strict_content_type refuses to read it as JSON.
            raise unsupported_media_type(self.accepts_msgpack)
        return False

    def check_declared_length(self, headers: Iterable[tuple[bytes, bytes]]) -> None:
        """413 before reading, when Content-Length already exceeds the route's limit."""
        for name, value in headers:
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    return
                if declared > self.max_body_size:
                    raise body_too_large()
                return

    async def read_raw(self, scope: Scope, receive: Receive) -> bytes:
        if self.max_body_size < 0:
            return await receive_body(receive, -1)
        self.check_declared_length(scope["headers"])
        return await receive_body(receive, self.max_body_size)

    def one_message_body(self, message: Message) -> bytes | None:
        """`one_message_body` under this route's limit: read_raw's steps for a caller that
        receives the first message itself (and checked the declared length first)."""
        return one_message_body(message, self.max_body_size)

    async def read_rest(self, receive: Receive, message: Message) -> bytes:
        """The body from `message` on, where `one_message_body` gave None."""
        return await receive_body(receive, self.max_body_size, message)

    def parse_body(self, scope: Scope, raw: bytes) -> Any:
        if not raw:
            if self.embedded:
                return self.decode(raw, False)  # each part takes its default or is missing
            if self.default is MISSING:
                return body_missing()
            return deepcopy(self.default)
        return self.decode(raw, self.check_content_type(scope["headers"]))

    def decode(self, raw: bytes, msgpack: bool) -> Any:
        try:
            if msgpack:
                value = self.msgpack_decoder.decode(raw)
            else:
                value = self.decoder.decode(raw or EMPTY_OBJECT)
        except ValidationError as exc:
            # Typed decoding stops at the first wrong field, possibly before a syntax
            # error further on: the report raises the 400 for a malformed body, else
            # lists every invalid field (see `_errors.validation`).
            if msgpack:
                return self.report_invalid_msgpack(exc, raw)
            return self.report_invalid(exc, raw)
        except (DecodeError, UnicodeDecodeError) as exc:
            # The 400, or the 422 on a route with errors="fastapi".
            if msgpack:
                raise self.report_invalid_msgpack.malformed(exc, raw) from exc
            raise self.report_invalid.malformed(exc, raw) from exc
        except RecursionError as exc:
            raise nested_too_deeply(msgpack) from exc
        return asdict(value) if self.embedded else value

    # -- response -------------------------------------------------------------------

    def is_trusted(self, result: Any) -> bool:
        cls = self.trusted_class
        container = self.container
        if container == CONTAINER_LIST:
            return type(result) is list and all_of_class(result, cls)
        if container == CONTAINER_DICT:
            if type(result) is not dict:
                return False
            for key in result:
                if type(key) is not str:
                    return False
            return all_of_class(result.values(), cls)
        if container == CONTAINER_OPTIONAL:
            return result is None or type(result) is cls
        if container == CONTAINER_TUPLE:
            return type(result) is tuple and all_of_class(result, cls)
        return type(result) is cls

    def checked(self, result: Any) -> Any:
        """What gets encoded: a trusted (or untyped) result as it is, any other validated;
        on a route with response_model_* options, shaped by them after that."""
        mode = self.output_mode
        if mode == OUTPUT_UNTYPED or (mode == OUTPUT_TRUSTED and self.is_trusted(result)):
            return result
        if mode == OUTPUT_SHAPED:
            return self.shape(result if self.is_trusted(result) else self.validate(result))
        return self.validate(result)

    def encode(self, result: Any, msgpack: bool = False) -> bytes:
        result = self.checked(result)
        if msgpack:
            return self.msgpack_encoder.encode(result)  # type: ignore[no-any-return]
        return self.encoder.encode(result)  # type: ignore[no-any-return]

    def validate(self, result: Any) -> Any:
        try:
            # Decoding the encoded value checks every field and constraint, also of
            # Struct instances that were built without validation, in lax mode (a
            # string of digits for an int), as FastAPI validates responses.
            value = self.output_decoder.decode(self.encoder.encode(result))
        except (TypeError, ValueError, OverflowError) as exc:
            check = self.encoder if self.admits_any else None
            # A route with errors="fastapi" reports the failure as FastAPI would.
            report = self.plan.output.report_invalid
            value = revalidate_builtins(result, self.output_type, exc, check, report)
        if self.fills_defaults:
            fill_dataclass_defaults(value)
        return value

    def encode_line(self, item: Any, buffer: bytearray, scope: Scope | None) -> bytes:
        """One JSON Lines item, checked as `encode` checks a response, and its newline."""
        if self.output_mode == OUTPUT_UNTYPED:
            encode_untyped_item(self.encoder, item, buffer, 0)
        else:
            self.encoder.encode_into(self.checked(item), buffer)
        buffer.extend(b"\n")
        return bytes(buffer)

    def encode_event(self, item: Any, buffer: bytearray, scope: Scope | None) -> bytes:
        """One server-sent event: a ServerSentEvent as FastAPI formats it, any other item
        as an event's data."""
        if isinstance(item, ServerSentEvent):
            return server_sent_event(item, event_data)
        # msgspec's JSON has no line breaks, so the event is a single data line.
        buffer[:] = SSE_DATA_PREFIX
        if self.output_mode == OUTPUT_UNTYPED:
            encode_untyped_item(self.encoder, item, buffer, len(SSE_DATA_PREFIX))
        else:
            self.encoder.encode_into(self.checked(item), buffer, len(SSE_DATA_PREFIX))
        buffer.extend(b"\n\n")
        return bytes(buffer)

    def stream_items(
        self,
        items: Any,
        status_code: int,
        extra_headers: list[tuple[bytes, bytes]],
        scope: Scope | None = None,
    ) -> ItemStream:
        headers = list(SSE_HEADERS if self.stream == STREAM_SSE else JSONL_HEADERS)
        headers.extend(extra_headers)
        return ItemStream(self, items, status_code, headers, scope)

    def respond(
        self,
        result: Any,
        status_code: int | None,
        extra_headers: list[tuple[bytes, bytes]],
        request_headers: Iterable[tuple[bytes, bytes]],
    ) -> Response:
        prepared = self.prepare(result, status_code, extra_headers, request_headers)
        if type(prepared) is tuple:
            status, headers, body = prepared
            return PreparedResponse(body, status, headers)
        return prepared  # type: ignore[return-value]

    def prepare(
        self,
        result: Any,
        status_code: int | None,
        extra_headers: list[tuple[bytes, bytes]],
        request_headers: Iterable[tuple[bytes, bytes]],
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes] | Response:
        status = status_code or self.status_code
        if self.stream != STREAM_NONE:
            return self.stream_items(result, status, extra_headers)
        msgpack = self.negotiates and prefers_msgpack(request_headers)
        body = self.encode(result, msgpack)
        if not body_allowed(status):
            body = b""
        content_type = MSGPACK_CONTENT_TYPE if msgpack else self.content_type
        headers = response_headers(status, body, content_type, self.negotiates)
        headers.extend(extra_headers)
        return status, headers, body

    # -- direct tier ----------------------------------------------------------------

    def extract_params(self, scope: Scope) -> tuple[dict[str, Any], list[Any]]:
        values: dict[str, Any] = {}
        errors: list[Any] = []
        query: list[tuple[str, str]] | None = None
        cookies: dict[str, str] | None = None
        for spec in self.params:
            location = spec.location
            if location == PARAM_PATH:
                raw = scope["path_params"].get(spec.key)
            elif location == PARAM_QUERY:
                if query is None:
                    query = parse_query(scope["query_string"])
                raw = pick(query, spec.key, spec.is_sequence)
            elif location == PARAM_HEADER:
                raw = pick_header(scope["headers"], spec.header_key, spec.is_sequence)
            else:
                if cookies is None:
                    cookies = parse_cookies(scope["headers"])
                raw = cookies.get(spec.key)
            if raw is None or (spec.is_sequence and not raw):
                if spec.required:
                    errors.append(
                        {"type": "missing", "loc": spec.loc, "msg": "Field required", "input": None}
                    )
                else:
                    values[spec.name] = deepcopy(spec.default)
                continue
            if spec.keeps_strings and type(raw) is str:
                values[spec.name] = raw  # what the converter would answer
                continue
            if spec.has_bounds:
                number = small_int(raw)
                if number is not None and spec.low <= number <= spec.high:
                    values[spec.name] = number  # what the converter would answer
                    continue
            value, problems = spec.convert(raw, values, spec.loc)
            if problems:
                errors.extend(problems)
            else:
                values[spec.name] = value
        return values, errors

    def extract_models(self, scope: Scope, values: dict[str, Any], errors: list[Any]) -> None:
        """Each query, header and cookie model into `values`, or its errors."""
        query: list[tuple[str, str]] | None = None
        cookies: dict[str, str] | None = None
        source: Any
        for model in self.models:
            raw: dict[str, Any] = {}
            if model.location == PARAM_QUERY:
                if query is None:
                    query = parse_query(scope["query_string"])
                source = query
                for field in model.fields:
                    value = pick(query, field.key, field.is_sequence)
                    if value is not None and value != []:
                        raw[field.name] = value
                if model.forbid_unknown:
                    for name, value in query:
                        if name not in model.keys:
                            raw[name] = value
            elif model.location == PARAM_HEADER:
                source = scope["headers"]
                for field in model.fields:
                    value = pick_header(scope["headers"], field.header_key, field.is_sequence)
                    if value is not None and value != []:
                        raw[field.name] = value
                if model.forbid_unknown:
                    # As FastAPI's extra="forbid": every other header is an unknown field,
                    # but a field's unconverted name (x_token for x-token) is ignored, as
                    # FastAPI ignores it.
                    for header, text in scope["headers"]:
                        name = header.decode("latin-1")
                        if name not in model.keys and name not in model.names:
                            raw[name] = text.decode("latin-1")
            else:
                if cookies is None:
                    cookies = parse_cookies(scope["headers"])
                source = cookies
                for field in model.fields:
                    value = cookies.get(field.key)
                    if value is not None:
                        raw[field.name] = value
                if model.forbid_unknown:
                    for name, value in cookies.items():
                        if name not in model.keys:
                            raw[name] = value
            # Where the values came from: what the errors show as received.
            value, problems = model.convert(raw, source)
            if problems:
                errors.extend(problems)
            else:
                values[model.name] = value

    def extract_form(self, form: Any, values: dict[str, Any], errors: list[Any]) -> None:
        """The form model from a parsed form (Starlette's FormData) into `values`, or its
        errors. As FastAPI: an empty value or file input is absent, a scalar field takes a
        repeated key's last value, a list field every non-empty file or value."""
        model = self.form
        raw: dict[str, Any] = {}
        for field in model.fields:
            if field.is_sequence:
                items = [item for item in form.getlist(field.key) if not is_empty_file(item)]
                if items:
                    raw[field.name] = items
            else:
                value = form.get(field.key)
                if value is not None and value != "" and not is_empty_file(value):
                    raw[field.name] = value
        # Unknown keys too: a model that forbids them refuses them, and a missing field's
        # error shows the whole form received, as FastAPI's does.
        for key in form:
            if key not in model.keys:
                items = form.getlist(key)
                raw[key] = items if len(items) > 1 else items[0]
        value, problems = model.convert(raw)
        if problems:
            errors.extend(problems)
        else:
            values[model.name] = value

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        tracker: SendTracker | None = None
        started = False
        error: Exception | None = None
        body: Any = None
        raw: bytes | None = None
        if scope.get(TELEMETRY_SCOPE_KEY) is not None:
            # FastAPI's telemetry observes the request: the delegated tier reports its
            # steps as FastAPI's handler does (see `_endpoint.telemetry`).
            await self.traced_app(scope, receive, send)
            return
        try:
            # read_raw's steps, inline: no coroutine of their own for a body in one message.
            if self.max_body_size >= 0:
                self.check_declared_length(scope["headers"])
            if self.has_body:
                message = await receive()
                raw = one_message_body(message, self.max_body_size)
                if raw is None:
                    raw = await receive_body(receive, self.max_body_size, message)
                body = self.parse_body(scope, raw)
            values, errors = self.extract_params(scope)
            if self.models:
                self.extract_models(scope, values, errors)
            if errors:
                raise request_invalid(errors, body, raw)
            if self.has_body:
                if type(body) is RequestValidationError:
                    raise body
                if self.embedded:
                    values.update(body)
                else:
                    values[self.body_name] = body
            if self.stream != STREAM_NONE:
                result = self.stream_items(self.endpoint(**values), self.status_code, [])
            elif self.is_coroutine:
                result = await self.endpoint(**values)
            else:
                result = await run_in_threadpool(self.endpoint, **values)
            if isinstance(result, Response):
                tracker = SendTracker(send)
                await result(scope, receive, tracker)
                return
            status = self.status_code
            msgpack = self.negotiates and prefers_msgpack(scope["headers"])
            payload = self.encode(result, msgpack)
            if not body_allowed(status):
                payload = b""
            content_type = MSGPACK_CONTENT_TYPE if msgpack else self.content_type
            started = True
            sender = response_send(send)
            await sender(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": response_headers(status, payload, content_type, self.negotiates),
                }
            )
            await sender({"type": "http.response.body", "body": payload})
        except ClientDisconnect:
            return  # the client is gone: nothing to answer, nothing to raise
        except Exception as exc:
            error = exc
        if error is not None:
            # Outside the except block, as in the compiled twin, where a handler that
            # clears the traceback of an exception still being handled would crash.
            if tracker is not None:
                started = tracker.started
            await handle_route_exception(error, scope, receive, send, started, raw)


class PydanticRuntime(RouteRuntime):
    """The direct tier's app for a route FastAPI validates with Pydantic alone
    (`_endpoint.pydantic_route.PydanticPlan`): the steps of FastAPI's route handler, in
    its order, with FastAPI's own fields and solving of the body.

    The body is parsed as FastAPI's handler parses it (`json.loads`, where the content
    type is JSON's or, without one, the route does not insist on it; the bytes
    otherwise), then the parameters are converted, the body validated by FastAPI's
    `request_body_to_args`, and the endpoint called. Its result is validated by the
    response field (in the threadpool for a sync endpoint, as FastAPI does) and rendered by
    the field's `serialize_json` with the route's response_model_* options where no
    response class was chosen; otherwise the field's `serialize` (or, without a response
    model, `jsonable_encoder`) makes the content the route's response class renders.
    """

    __slots__ = (
        "absent_body",
        "body_fields",
        "dump_arguments",
        "dump_json",
        "dump_options",
        "item_serializer",
        "item_validator",
        "json_validator",
        "path",
        "response_args",
        "response_class",
        "response_field",
        "response_serializer",
        "response_validator",
        "whole_body",
    )

    absent_body: Any
    body_fields: Any
    whole_body: Any
    json_validator: Any
    dump_options: Any
    dump_arguments: Any
    response_validator: Any
    response_serializer: Any
    dump_json: bool
    response_class: Any
    response_args: Any
    path: Any
    response_field: Any
    item_validator: Any
    item_serializer: Any

    def __init__(self, plan: Any) -> None:
        RouteRuntime.__init__(self, plan.route)
        self.body_fields = plan.body_fields
        self.has_body = bool(plan.body_fields)
        self.embedded = plan.embedded
        self.whole_body = plan.whole_body
        self.body_name = plan.body_name
        self.json_validator = plan.json_validator
        self.absent_body = plan.absent_body
        self.response_field = plan.response_field
        self.response_validator = plan.response_validator
        self.response_serializer = plan.response_serializer
        self.dump_arguments = plan.dump_arguments
        self.dump_options = plan.dump_options
        self.dump_json = plan.dump_json
        self.response_class = plan.response_class
        self.response_args = plan.response_args
        self.path = plan.path
        self.stream = plan.stream
        # FastAPI lets the event loop run after each item, so a client that leaves stops
        # the stream where it stops FastAPI's.
        self.checkpoint_every = 1
        self.item_validator = plan.item_validator
        self.item_serializer = plan.item_serializer

    def json_content(self, headers: Iterable[tuple[bytes, bytes]]) -> bool:
        """Whether FastAPI's handler parses a body sent with these headers as JSON."""
        content_type = b""
        for name, value in headers:
            if name == b"content-type":
                content_type = value
                break
        if not content_type:
            return not self.strict_content_type
        return content_type == b"application/json" or takes_json(content_type)

    def validated_json(self, raw: bytes) -> Any:
        """The whole body validated straight from its JSON bytes, or MISSING where that
        refuses it (or gives None, which FastAPI may take as an absent body): FastAPI's
        steps then decide (`json_validator`)."""
        try:
            value = self.json_validator.validate_json(raw)
        except PydanticValidationError:
            return MISSING
        return MISSING if value is None else value

    def read_json(self, scope: Scope, raw: bytes) -> Any:
        """The body as FastAPI's handler gives it to its solving: parsed JSON, the bytes
        where the content type is not JSON's, the absent-body marker where it is empty."""
        if not raw:
            return self.absent_body
        if not self.json_content(scope["headers"]):
            return raw
        try:
            return json.loads(raw)  # looked up per call, as Starlette's Request.json does
        except JSONDecodeError as exc:
            raise json_invalid(exc, self.endpoint, self.path, scope) from exc
        except Exception as exc:
            raise body_unreadable() from exc

    def checked_result(self, result: Any, scope: Scope) -> Any:
        """The endpoint's result validated as FastAPI's response field validates it."""
        try:
            return self.response_validator.validate_python(result, from_attributes=True)
        except PydanticValidationError as exc:
            errors = located_errors(exc, RESPONSE_LOC)
        raise pydantic_response_invalid(errors, result, self.endpoint, self.path, scope)

    def item_json(self, item: Any, scope: Scope | None) -> bytes:
        """A stream item as FastAPI's streaming writes it: validated and rendered by the
        stream item field as a response is by the response field, or, without an item
        type, made JSON-ready by jsonable_encoder and written by json.dumps."""
        if self.item_validator is None:
            return untyped_item_json(item).encode()
        try:
            value = self.item_validator.validate_python(item, from_attributes=True)
        except PydanticValidationError as exc:
            errors = located_errors(exc, RESPONSE_LOC)
        else:
            return self.item_serializer.to_json(value, **self.dump_arguments)  # type: ignore[no-any-return]
        raise pydantic_response_invalid(errors, item, self.endpoint, self.path, scope)

    def encode_line(self, item: Any, buffer: bytearray, scope: Scope | None) -> bytes:
        return self.item_json(item, scope) + b"\n"

    def encode_event(self, item: Any, buffer: bytearray, scope: Scope | None) -> bytes:
        if isinstance(item, ServerSentEvent):
            return server_sent_event(item, pydantic_event_data)
        return format_sse_event(data_str=self.item_json(item, scope).decode())

    def invalid_request(self, errors: list[Any], body: Any, scope: Scope) -> Exception:
        """FastAPI's 422 for a request whose solving failed, the body as its handler
        parsed it (`read_json`)."""
        if body is self.absent_body:
            body = None
        return pydantic_request_invalid(errors, body, self.endpoint, self.path, scope)

    async def render(self, result: Any, sub: Any, tasks: Any, scope: Scope) -> Response:
        """The response FastAPI's handler makes of the endpoint's result (not a Response)
        on a route with dependencies: the status code of the sub-response `sub` (None: no
        step took it) where one was set, its headers added, the background tasks `tasks`
        (None: no step took them) run after it."""
        if self.encoder is not None:
            # msgspec's response, as the delegated tier sends it (`respond`).
            if sub is None:
                response = self.respond(result, None, [], scope["headers"])
            else:
                response = self.respond(result, sub.status_code, sub.raw_headers, scope["headers"])
            if tasks is not None:
                response.background = tasks
            return response
        if self.stream != STREAM_NONE:
            if sub is None:
                response = self.stream_items(result, self.status_code, [], scope)
            else:
                status = sub.status_code or self.status_code
                response = self.stream_items(result, status, sub.raw_headers, scope)
            response.background = tasks
            return response
        if self.response_field is None:
            content = jsonable_encoder(result)
        else:
            if self.is_coroutine:
                value = self.checked_result(result, scope)
            else:
                value = await run_in_threadpool(self.checked_result, result, scope)
            if self.dump_json:
                content = self.response_serializer.to_json(value, **self.dump_arguments)
            else:
                content = self.response_field.serialize(value, **self.dump_options)
        status = None if sub is None else sub.status_code
        if status:
            arguments = {"status_code": status, "background": tasks}
        else:
            arguments = {**self.response_args, "background": tasks}
        if self.dump_json:
            response = Response(content, media_type="application/json", **arguments)
        else:
            response = self.response_class(content, **arguments)
        if not body_allowed(response.status_code):
            response.body = b""
        if sub is not None:
            response.raw_headers.extend(sub.raw_headers)
        return response

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        tracker: SendTracker | None = None
        started = False
        error: Exception | None = None
        raw: bytes | None = None
        body: Any = None
        validated: Any = MISSING
        if scope.get(TELEMETRY_SCOPE_KEY) is not None:
            await self.traced_app(scope, receive, send)
            return
        try:
            if self.max_body_size >= 0:
                self.check_declared_length(scope["headers"])
            if self.has_body:
                message = await receive()
                raw = one_message_body(message, self.max_body_size)
                if raw is None:
                    raw = await receive_body(receive, self.max_body_size, message)
                if (
                    self.json_validator is not None
                    and raw
                    and not has_long_number(raw)
                    and self.json_content(scope["headers"])
                ):
                    validated = self.validated_json(raw)
                if validated is MISSING:
                    body = self.read_json(scope, raw)
            values, errors = self.extract_params(scope)
            if validated is not MISSING:
                values[self.body_name] = validated
            elif self.whole_body is not None:
                values[self.body_name], body_errors = validate_whole_body(self.whole_body, body)
                errors.extend(body_errors)
            elif self.has_body:
                body_values, body_errors = validate_body(self.body_fields, body, self.embedded)
                values.update(body_values)
                errors.extend(body_errors)
            if errors:
                raise self.invalid_request(errors, body, scope)
            if self.stream != STREAM_NONE:
                result = self.stream_items(self.endpoint(**values), self.status_code, [], scope)
            elif self.is_coroutine:
                result = await self.endpoint(**values)
            else:
                result = await run_in_threadpool(self.endpoint, **values)
            if isinstance(result, Response):
                tracker = SendTracker(send)
                await result(scope, receive, tracker)
                return
            if self.encoder is not None:
                # msgspec's response, as the delegated tier sends it (`respond`).
                response = self.respond(result, None, [], scope["headers"])
            elif self.response_field is None:
                response = self.response_class(jsonable_encoder(result), **self.response_args)
            else:
                if self.is_coroutine:
                    value = self.checked_result(result, scope)
                else:
                    value = await run_in_threadpool(self.checked_result, result, scope)
                if self.dump_json:
                    payload = self.response_serializer.to_json(value, **self.dump_arguments)
                    status = self.status_code
                    started = True
                    sender = response_send(send)
                    await sender(
                        {
                            "type": "http.response.start",
                            "status": status,
                            "headers": response_headers(status, payload, JSON_CONTENT_TYPE, False),
                        }
                    )
                    await sender({"type": "http.response.body", "body": payload})
                    return
                content = self.response_field.serialize(value, **self.dump_options)
                response = self.response_class(content, **self.response_args)
            if not body_allowed(response.status_code):
                response.body = b""
            tracker = SendTracker(send)
            await response(scope, receive, tracker)
        except ClientDisconnect:
            if tracker is not None:
                raise  # from a returned response's sending: FastAPI lets it reach the server
            return  # the client left before its body was read: nothing to answer
        except Exception as exc:
            error = exc
        if error is not None:
            if tracker is not None:
                started = tracker.started
            await handle_route_exception(error, scope, receive, send, started, raw)
