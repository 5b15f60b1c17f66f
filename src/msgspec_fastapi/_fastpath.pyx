# cython: language_level=3
# cython: embedsignature=True
# cython: freethreading_compatible=True
"""The request path, compiled: the contract of `_fastpath_py.py`, which documents it.

This file mirrors the pure twin: the same definitions in the same order under the same
names (tests/test_twin_shape.py compares them). Every shared object (errors, constants,
response class) is imported from Python modules, so the twins cannot disagree on them.
"""

cimport cython
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.object cimport PyObject
from cpython.sequence cimport PySequence_Fast_ITEMS
from libc.string cimport memcmp

from msgspec_fastapi._routing.entry cimport Tracker as EntryTracker

import json
from contextlib import suppress
from copy import deepcopy
from json import JSONDecodeError
from time import monotonic
from urllib.parse import parse_qsl

import msgspec
from anyio import CancelScope, Event, create_task_group, sleep
from anyio.lowlevel import checkpoint
from starlette.concurrency import iterate_in_threadpool, run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.requests import cookie_parser
from fastapi.encoders import jsonable_encoder
from pydantic_core import ValidationError as PydanticValidationError
from starlette.responses import Response, StreamingResponse

from msgspec_fastapi import _shared
from msgspec_fastapi._compat import (
    located_errors,
    untyped_item_json,
    validate_body,
    validate_whole_body,
)
from msgspec_fastapi._errors.handlers import handle_route_exception
from msgspec_fastapi._shared import (
    ClientDisconnect,
    KEEPALIVE_COMMENT,
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
from msgspec_fastapi._errors.validation import request_invalid
# Routing is written once for both twins (`_routing/dispatch_py.py`); this twin re-exports
# its compiled build (the markers tell cython-lint the names are used elsewhere).
from msgspec_fastapi._routing.dispatch import (
    INDEX_CLASSES,  # no-cython-lint
    AppDispatcher,  # no-cython-lint
    RouteMatcher,  # no-cython-lint
    route_handle,  # no-cython-lint
    route_matches,  # no-cython-lint
    router_handle,  # no-cython-lint
    router_matches,  # no-cython-lint
)

IMPLEMENTATION = "compiled"

# Shared constants under their `_shared` names, with C types where they have one.
cdef object MISSING = _shared.MISSING
cdef bytes EMPTY_OBJECT = _shared.EMPTY_OBJECT
cdef frozenset BODYLESS_STATUSES = _shared.BODYLESS_STATUSES
cdef tuple JSON_CONTENT_TYPE = _shared.JSON_CONTENT_TYPE
cdef tuple MSGPACK_CONTENT_TYPE = _shared.MSGPACK_CONTENT_TYPE
cdef tuple VARY_ACCEPT = _shared.VARY_ACCEPT
cdef frozenset MSGPACK_MEDIA_TYPES = _shared.MSGPACK_MEDIA_TYPES
cdef bytes CONTENT_LENGTH = _shared.CONTENT_LENGTH
cdef int OUTPUT_TRUSTED = _shared.OUTPUT_TRUSTED
cdef int OUTPUT_UNTYPED = _shared.OUTPUT_UNTYPED
cdef int OUTPUT_SHAPED = _shared.OUTPUT_SHAPED
cdef int CONTAINER_LIST = _shared.CONTAINER_LIST
cdef int CONTAINER_DICT = _shared.CONTAINER_DICT
cdef int CONTAINER_OPTIONAL = _shared.CONTAINER_OPTIONAL
cdef int CONTAINER_TUPLE = _shared.CONTAINER_TUPLE
cdef int STREAM_NONE = _shared.STREAM_NONE
cdef int STREAM_SSE = _shared.STREAM_SSE
cdef tuple JSONL_HEADERS = _shared.JSONL_HEADERS
cdef tuple SSE_HEADERS = _shared.SSE_HEADERS
cdef bytes SSE_DATA_PREFIX = _shared.SSE_DATA_PREFIX
cdef int CHECKPOINT_EVERY = _shared.CHECKPOINT_EVERY
cdef int PARAM_PATH = _shared.PARAM_PATH
cdef int PARAM_QUERY = _shared.PARAM_QUERY
cdef int PARAM_HEADER = _shared.PARAM_HEADER
cdef str TELEMETRY_SCOPE_KEY = _shared.TELEMETRY_SCOPE_KEY
cdef Py_ssize_t FAST_DIGITS_MAX = _shared.FAST_DIGITS_MAX
cdef Py_ssize_t LONG_NUMBER_DIGITS = _shared.LONG_NUMBER_DIGITS
cdef tuple RESPONSE_LOC = ("response",)
cdef bytes ASCII_SPACE = b" \t\r\n\x0b\x0c"
cdef object ValidationError = msgspec.ValidationError
cdef object DecodeError = msgspec.DecodeError
cdef object asdict = msgspec.structs.asdict


def routes_unchanged(routes, list snapshot):
    """Whether `routes` still equals `snapshot`: see `_fastpath_py`. For a list, the two
    item arrays are compared as memory first (the live list locked on a free-threaded
    build while it is read): the same objects in order are equal lists."""
    cdef Py_ssize_t count = len(snapshot)
    cdef bint same = False
    if type(routes) is list:
        with cython.critical_section(routes):
            same = count == len(routes) and (
                count == 0
                or memcmp(
                    PySequence_Fast_ITEMS(routes),
                    PySequence_Fast_ITEMS(snapshot),
                    <size_t>count * sizeof(PyObject*),
                ) == 0
            )
    return same or routes == snapshot


# compiled only: is_json_media_type's test of the header's bytes in place.
cdef inline bint is_ascii_space(unsigned char ch):
    """One of ASCII_SPACE's bytes: space, or tab to carriage return."""
    return ch == 32 or 9 <= ch <= 13


# compiled only: is_json_media_type's test of the header's bytes in place.
cdef inline bint lower_equals(const unsigned char* data, const char* lower, Py_ssize_t size):
    """Whether `size` bytes at `data`, their ASCII capitals lowered, are those of `lower`."""
    cdef Py_ssize_t k
    cdef unsigned char ch
    for k in range(size):
        ch = data[k]
        if 65 <= ch <= 90:
            ch += 32
        if ch != <unsigned char>lower[k]:
            return False
    return True


cpdef bint is_json_media_type(object value):
    """`application/json` or `application/*+json`, any parameters, any letter case."""
    cdef const unsigned char* data
    cdef Py_ssize_t start = 0, end, k
    if type(value) is not bytes:
        media = value.split(b";", 1)[0].strip(ASCII_SPACE).lower()
        if media == b"application/json":
            return True
        return media.startswith(b"application/") and media.endswith(b"+json")
    # The same test on the bytes in place: no split, strip or lowered copy.
    data = <bytes>value
    end = len(<bytes>value)
    for k in range(end):
        if data[k] == 59:  # ";"
            end = k
            break
    while start < end and is_ascii_space(data[start]):
        start += 1
    while end > start and is_ascii_space(data[end - 1]):
        end -= 1
    if end - start == 16 and lower_equals(data + start, b"application/json", 16):
        return True
    return (
        end - start >= 12
        and lower_equals(data + start, b"application/", 12)
        and lower_equals(data + end - 5, b"+json", 5)
    )


cpdef bint is_msgpack_media_type(object value):
    """One of MessagePack's three media types, any parameters, any letter case."""
    return value.split(b";", 1)[0].strip(ASCII_SPACE).lower() in MSGPACK_MEDIA_TYPES


cdef double accept_quality(bytes params):
    cdef bytes param, name, value
    cdef double quality
    for param in params.split(b";"):
        name, _, value = param.partition(b"=")
        if name.strip(ASCII_SPACE) == b"q":
            try:
                quality = float(value)
            except ValueError:
                return -1.0
            return quality if 0.0 <= quality <= 1.0 else -1.0
    return 1.0


cdef inline bint outranks(int level, double quality, int best_level, double best_quality):
    return level > best_level or (level == best_level and quality > best_quality)


cpdef bint prefers_msgpack(object headers):
    """Whether the request's Accept ranks MessagePack above JSON; see the pure twin."""
    cdef bytes accept = b""
    cdef object name, value
    cdef bytes part, media, params
    cdef bint is_json
    cdef double quality
    cdef double json_quality = 0.0, msgpack_quality = 0.0
    cdef int level
    cdef int json_level = -1, msgpack_level = -1
    cdef Py_ssize_t json_at = 0, msgpack_at = 0
    cdef Py_ssize_t position = 0
    for name, value in headers:
        if name == b"accept":
            accept = value if not accept else accept + b"," + value
    accept = accept.lower()
    if b"msgpack" not in accept and b"json" not in accept:
        return False
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
        if (level < 2 or not is_json) and outranks(
            level, quality, msgpack_level, msgpack_quality
        ):
            msgpack_level, msgpack_quality, msgpack_at = level, quality, position
    if msgpack_quality <= 0.0:
        return False
    if msgpack_quality != json_quality:
        return msgpack_quality > json_quality
    if msgpack_level != json_level:
        return msgpack_level > json_level
    return msgpack_at < json_at


cdef inline bint body_allowed(int status_code):
    # 200, most responses' status, answered without boxing it for the set lookup.
    return status_code == 200 or (status_code >= 200 and status_code not in BODYLESS_STATUSES)


cdef inline bytes decimal_bytes(Py_ssize_t n):
    # The digits written into a buffer: a tenth of what str(n).encode() costs.
    cdef char digits[24]
    cdef Py_ssize_t at = 24
    if n < 0:
        return str(n).encode("latin-1")
    while True:
        at -= 1
        digits[at] = <char>(48 + n % 10)
        n //= 10
        if n == 0:
            break
    return PyBytes_FromStringAndSize(digits + at, 24 - at)


cdef inline list response_headers(int status_code, bytes body, tuple content_type, bint vary):
    cdef list headers
    if not body_allowed(status_code):
        headers = [content_type]
    else:
        headers = [(CONTENT_LENGTH, decimal_bytes(len(body))), content_type]
    if vary:
        headers.append(VARY_ACCEPT)
    return headers


cdef inline bint all_of_class(object items, object cls):
    cdef object item
    for item in items:
        if type(item) is not cls:
            return False
    return True


cdef inline object one_message_body(dict message, Py_ssize_t limit):
    """The body where its first message brings all of it, else None; see `_fastpath_py`."""
    cdef bytes chunk
    if message["type"] != "http.request" or message.get("more_body", False):
        return None
    chunk = message.get("body", b"")
    if chunk is None:
        return None
    if 0 <= limit < len(chunk):
        raise body_too_large()
    return chunk


async def receive_body(receive, Py_ssize_t limit, dict message=None):
    """The whole request body from `message` on; a 413 as soon as it exceeds `limit`."""
    cdef list chunks = []
    cdef bytes chunk
    cdef Py_ssize_t total = 0
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


cdef revalidate_builtins(
    object result, object output_type, object error, object check, object report
):
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


cdef list parse_query(bytes raw):
    cdef str text = raw.decode("latin-1")
    cdef list pairs = []
    cdef str field, name, value
    if "%" in text or "+" in text:
        return parse_qsl(text, keep_blank_values=True)
    for field in text.split("&"):
        if field:
            name, _, value = field.partition("=")
            pairs.append((name, value))
    return pairs


cdef inline bint small_int(object raw, long long *out) except -1:
    """Whether `raw` is an int or a short digit string; its value goes to `out`."""
    cdef Py_ssize_t length
    cdef long long number = 0
    cdef Py_UCS4 ch
    if type(raw) is int:
        try:
            out[0] = raw
        except OverflowError:
            return False
        return True
    if type(raw) is not str:
        return False
    length = len(<str>raw)
    if length == 0 or length > FAST_DIGITS_MAX:
        return False
    for ch in <str>raw:
        if ch < u"0" or ch > u"9":
            return False
        number = number * 10 + (<long long>ch - 48)
    out[0] = number
    return True


cdef object pick(list items, str key, bint many):
    cdef str name
    cdef object value
    cdef object found = None
    if many:
        return [value for name, value in items if name == key]
    for name, value in items:
        if name == key:
            found = value
    return found


cdef object pick_header(object headers, bytes key, bint many):
    cdef object name, value
    if many:
        return [value.decode("latin-1") for name, value in headers if name == key]
    for name, value in headers:
        if name == key:
            if type(value) is bytes:
                return (<bytes>value).decode("latin-1")  # decoded in C, no method call
            return value.decode("latin-1")
    return None


cdef dict parse_cookies(object headers):
    cdef dict cookies = {}
    cdef object name, value
    for name, value in headers:
        if name == b"cookie":
            cookies.update(cookie_parser(value.decode("latin-1")))
    return cookies


cdef bint has_long_number(bytes raw):
    """Whether `raw` holds a run of `LONG_NUMBER_DIGITS` ASCII digits: see `_fastpath_py`
    (one pass over the bytes in C, where the pure twin translates and searches)."""
    cdef const unsigned char* data = raw
    cdef Py_ssize_t size = len(raw)
    cdef Py_ssize_t index
    cdef Py_ssize_t run = 0
    if size < LONG_NUMBER_DIGITS:
        return False
    for index in range(size):
        if 48 <= data[index] <= 57:
            run += 1
            if run >= LONG_NUMBER_DIGITS:
                return True
        else:
            run = 0
    return False


cdef bint is_empty_file(object value):
    return isinstance(value, UploadFile) and value.filename == "" and value.size == 0


cdef class SendTracker:
    """Wraps `send` to learn whether the response has started."""

    cdef object send
    cdef public bint started

    def __init__(self, send):
        self.send = send
        self.started = False

    def __call__(self, dict message):
        if message["type"] == "http.response.start":
            self.started = True
        return self.send(message)


cpdef object response_send(object send):
    """Where the request path sends a response's messages itself: see `_fastpath_py`."""
    cdef EntryTracker tracker
    if type(send) is EntryTracker:
        tracker = <EntryTracker>send
        tracker.started = True
        return tracker.send
    return send


cdef class Param:
    """A `_params.converters.ParamSpec` with C-typed fields, read per request."""

    cdef str name
    cdef int location
    cdef str key
    cdef bytes header_key
    cdef tuple loc
    cdef bint is_sequence
    cdef bint required
    cdef object default
    cdef object convert
    cdef bint keeps_strings
    cdef bint has_bounds
    cdef long long low
    cdef long long high

    def __init__(self, spec):
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


async def close_items(items):
    """End a generator whose stream stopped early, so that its `finally` runs now."""
    if hasattr(items, "aclose"):
        with CancelScope(shield=True):
            await items.aclose()
    elif hasattr(items, "close"):
        # ValueError: a worker thread is making its next item; it closes when collected.
        with suppress(ValueError):
            items.close()


class ItemStream(StreamingResponse):
    """A generator endpoint's items; see `_fastpath_py.ItemStream`."""

    def __init__(self, runtime, items, int status_code, list headers, scope):
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
        self.ping = None

    async def stream_response(self, send):
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        items = self.items
        iterator = items if hasattr(items, "__aiter__") else iterate_in_threadpool(items)
        try:
            if (<RouteRuntime>self.runtime).stream == STREAM_SSE:
                await self.send_events(iterator, send)
            else:
                await self.send_lines(iterator, send)
        finally:
            await close_items(items)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def send_lines(self, iterator, send):
        cdef RouteRuntime runtime = self.runtime
        cdef bytearray buffer = bytearray()
        cdef int count = 0
        async for item in iterator:
            body = runtime.encode_line(item, buffer, self.scope)
            await send({"type": "http.response.body", "body": body, "more_body": True})
            count += 1
            if count == runtime.checkpoint_every:
                count = 0
                await checkpoint()

    async def send_events(self, iterator, send):
        cdef RouteRuntime runtime = self.runtime
        cdef bytearray buffer = bytearray()
        cdef int count = 0
        self.last_sent = monotonic()
        async with create_task_group() as group:
            group.start_soon(self.keep_alive, send, sse_ping_interval())
            async for item in iterator:
                body = runtime.encode_event(item, buffer, self.scope)
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

    async def keep_alive(self, send, double interval):
        """A comment whenever no event went out for `interval` seconds, as FastAPI sends."""
        cdef double idle
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


cdef class RouteRuntime:
    """Per-route state for the request path; see `_fastpath_py.RouteRuntime`."""

    cdef readonly object plan
    cdef bint has_body
    cdef object decoder
    cdef object default
    cdef bint embedded
    cdef object report_invalid
    cdef object msgpack_decoder
    cdef object report_invalid_msgpack
    cdef bint accepts_msgpack
    cdef bint strict_content_type
    cdef int output_mode
    cdef object encoder
    cdef object msgpack_encoder
    cdef bint negotiates
    cdef object output_decoder
    cdef object output_type
    cdef object trusted_class
    cdef int container
    cdef bint admits_any
    cdef bint fills_defaults
    cdef object shape
    cdef readonly int stream
    cdef int checkpoint_every
    cdef tuple content_type
    cdef int status_code
    cdef Py_ssize_t max_body_size
    cdef object endpoint
    cdef bint is_coroutine
    cdef tuple params
    cdef object body_name
    cdef tuple models
    cdef object form
    cdef public object traced_app

    def __init__(self, plan):
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
        self.traced_app = None

    # -- body -----------------------------------------------------------------------

    cdef bint check_content_type(self, object headers) except -1:
        cdef object name, value
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
            raise unsupported_media_type(self.accepts_msgpack)
        return False

    cpdef check_declared_length(self, object headers):
        """413 before reading, when Content-Length already exceeds the route's limit."""
        cdef object name, value
        cdef object declared
        for name, value in headers:
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    return
                if declared > self.max_body_size:
                    raise body_too_large()
                return

    async def read_raw(self, scope, receive):
        if self.max_body_size < 0:
            return await receive_body(receive, -1)
        self.check_declared_length(scope["headers"])
        return await receive_body(receive, self.max_body_size)

    def one_message_body(self, dict message):
        return one_message_body(message, self.max_body_size)

    async def read_rest(self, receive, dict message):
        return await receive_body(receive, self.max_body_size, message)

    def parse_body(self, scope, bytes raw):
        if not raw:
            if self.embedded:
                return self.decode(raw, False)
            if self.default is MISSING:
                return body_missing()
            return deepcopy(self.default)
        return self.decode(raw, self.check_content_type(scope["headers"]))

    cdef decode(self, bytes raw, bint msgpack):
        try:
            if msgpack:
                value = self.msgpack_decoder.decode(raw)
            else:
                value = self.decoder.decode(raw or EMPTY_OBJECT)
        except ValidationError as exc:
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

    cdef bint is_trusted(self, object result):
        cdef object cls = self.trusted_class
        cdef int container = self.container
        cdef object key
        if container == CONTAINER_LIST:
            return type(result) is list and all_of_class(result, cls)
        if container == CONTAINER_DICT:
            if type(result) is not dict:
                return False
            for key in result:
                if type(key) is not str:
                    return False
            return all_of_class((<dict>result).values(), cls)
        if container == CONTAINER_OPTIONAL:
            return result is None or type(result) is cls
        if container == CONTAINER_TUPLE:
            return type(result) is tuple and all_of_class(result, cls)
        return type(result) is cls

    cdef object checked(self, object result):
        cdef int mode = self.output_mode
        if mode == OUTPUT_UNTYPED or (mode == OUTPUT_TRUSTED and self.is_trusted(result)):
            return result
        if mode == OUTPUT_SHAPED:
            return self.shape(result if self.is_trusted(result) else self.validate(result))
        return self.validate(result)

    cpdef bytes encode(self, object result, bint msgpack=False):
        result = self.checked(result)
        if msgpack:
            return self.msgpack_encoder.encode(result)
        return self.encoder.encode(result)

    cdef validate(self, object result):
        try:
            value = self.output_decoder.decode(self.encoder.encode(result))
        except (TypeError, ValueError, OverflowError) as exc:
            check = self.encoder if self.admits_any else None
            # A route with errors="fastapi" reports the failure as FastAPI would.
            report = self.plan.output.report_invalid
            value = revalidate_builtins(result, self.output_type, exc, check, report)
        if self.fills_defaults:
            fill_dataclass_defaults(value)
        return value

    cpdef bytes encode_line(self, object item, bytearray buffer, object scope):
        """One JSON Lines item, checked as `encode` checks a response, and its newline."""
        if self.output_mode == OUTPUT_UNTYPED:
            encode_untyped_item(self.encoder, item, buffer, 0)
        else:
            self.encoder.encode_into(self.checked(item), buffer)
        buffer.extend(b"\n")
        return bytes(buffer)

    cpdef bytes encode_event(self, object item, bytearray buffer, object scope):
        """One server-sent event; see `_fastpath_py.RouteRuntime.encode_event`."""
        if isinstance(item, ServerSentEvent):
            return server_sent_event(item, event_data)
        buffer[:] = SSE_DATA_PREFIX
        if self.output_mode == OUTPUT_UNTYPED:
            encode_untyped_item(self.encoder, item, buffer, len(SSE_DATA_PREFIX))
        else:
            self.encoder.encode_into(self.checked(item), buffer, len(SSE_DATA_PREFIX))
        buffer.extend(b"\n\n")
        return bytes(buffer)

    def stream_items(self, items, int status_code, list extra_headers, scope=None):
        cdef list headers = list(SSE_HEADERS if self.stream == STREAM_SSE else JSONL_HEADERS)
        headers.extend(extra_headers)
        return ItemStream(self, items, status_code, headers, scope)

    def respond(self, result, status_code, list extra_headers, object request_headers):
        prepared = self.prepare(result, status_code, extra_headers, request_headers)
        if type(prepared) is tuple:
            status, headers, body = <tuple>prepared
            return PreparedResponse(body, status, headers)
        return prepared

    cpdef object prepare(self, result, status_code, list extra_headers, object request_headers):
        cdef int status = status_code or self.status_code
        if self.stream != STREAM_NONE:
            return self.stream_items(result, status, extra_headers)
        cdef bint msgpack = self.negotiates and prefers_msgpack(request_headers)
        cdef bytes body = self.encode(result, msgpack)
        if not body_allowed(status):
            body = b""
        cdef tuple content_type = MSGPACK_CONTENT_TYPE if msgpack else self.content_type
        cdef list headers = response_headers(status, body, content_type, self.negotiates)
        headers.extend(extra_headers)
        return status, headers, body

    # -- direct tier ----------------------------------------------------------------

    cpdef tuple extract_params(self, dict scope):
        cdef dict values = {}
        cdef list errors = []
        cdef list query = None
        cdef dict cookies = None
        cdef Param spec
        cdef int location
        cdef object raw, path_params
        cdef long long number
        for spec in self.params:
            location = spec.location
            if location == PARAM_PATH:
                path_params = scope["path_params"]
                if type(path_params) is dict:
                    raw = (<dict>path_params).get(spec.key)
                else:
                    raw = path_params.get(spec.key)
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
                values[spec.name] = raw
                continue
            if spec.has_bounds:
                if small_int(raw, &number) and spec.low <= number <= spec.high:
                    values[spec.name] = number
                    continue
            value, problems = spec.convert(raw, values, spec.loc)
            if problems:
                errors.extend(problems)
            else:
                values[spec.name] = value
        return values, errors

    cpdef extract_models(self, dict scope, dict values, list errors):
        """Each query, header and cookie model into `values`, or its errors."""
        cdef list query = None
        cdef dict cookies = None
        cdef dict raw
        cdef object model, field, value, problems, source
        cdef object name, text
        for model in self.models:
            raw = {}
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
                    for name, text in scope["headers"]:
                        name = name.decode("latin-1")
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

    cpdef extract_form(self, object form, dict values, list errors):
        """The form model from a parsed form into `values`, or its errors."""
        cdef object model = self.form
        cdef dict raw = {}
        cdef list items
        cdef object field, value, problems, key
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

    async def __call__(self, dict scope, receive, send):
        cdef SendTracker tracker = None
        cdef bint started = False
        cdef object error = None
        cdef object body = None
        cdef bytes raw = None
        cdef dict values
        cdef list errors
        cdef int status
        cdef bint msgpack
        cdef tuple content_type
        cdef bytes payload
        if scope.get(TELEMETRY_SCOPE_KEY) is not None:
            # FastAPI's telemetry observes the request: see `_fastpath_py`.
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
            return
        except Exception as exc:
            error = exc
        if error is not None:
            # Outside the except block: the handler clears the exception's traceback,
            # which a coroutine suspended inside that block would still read.
            if tracker is not None:
                started = tracker.started
            await handle_route_exception(error, scope, receive, send, started, raw)


cdef class PydanticRuntime(RouteRuntime):
    """The direct tier's app for a route FastAPI validates with Pydantic alone: see
    `_fastpath_py`."""

    cdef object absent_body
    cdef list body_fields
    cdef object whole_body
    cdef object json_validator
    cdef dict dump_options
    cdef bint dump_json
    cdef object response_class
    cdef dict response_args
    cdef str path
    cdef object response_field
    cdef object response_validator
    cdef object response_serializer
    cdef dict dump_arguments
    cdef object item_validator
    cdef object item_serializer

    def __init__(self, plan):
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

    cdef bint json_content(self, object headers) except -1:
        cdef object name, value
        cdef bytes content_type = b""
        for name, value in headers:
            if name == b"content-type":
                content_type = value
                break
        if not content_type:
            return not self.strict_content_type
        return content_type == b"application/json" or takes_json(content_type)

    cdef object validated_json(self, bytes raw):
        cdef object value
        try:
            value = self.json_validator.validate_json(raw)
        except PydanticValidationError:
            return MISSING
        return MISSING if value is None else value

    cpdef object read_json(self, dict scope, bytes raw):
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

    def checked_result(self, result, dict scope):
        cdef list errors
        try:
            return self.response_validator.validate_python(result, from_attributes=True)
        except PydanticValidationError as exc:
            errors = located_errors(exc, RESPONSE_LOC)
        raise pydantic_response_invalid(errors, result, self.endpoint, self.path, scope)

    cdef bytes item_json(self, object item, object scope):
        cdef list errors
        if self.item_validator is None:
            return untyped_item_json(item).encode()
        try:
            value = self.item_validator.validate_python(item, from_attributes=True)
        except PydanticValidationError as exc:
            errors = located_errors(exc, RESPONSE_LOC)
        else:
            return self.item_serializer.to_json(value, **self.dump_arguments)
        raise pydantic_response_invalid(errors, item, self.endpoint, self.path, scope)

    cpdef bytes encode_line(self, object item, bytearray buffer, object scope):
        return self.item_json(item, scope) + b"\n"

    cpdef bytes encode_event(self, object item, bytearray buffer, object scope):
        if isinstance(item, ServerSentEvent):
            return server_sent_event(item, pydantic_event_data)
        return format_sse_event(data_str=self.item_json(item, scope).decode())

    cpdef object invalid_request(self, list errors, object body, dict scope):
        if body is self.absent_body:
            body = None
        return pydantic_request_invalid(errors, body, self.endpoint, self.path, scope)

    async def render(self, result, sub, tasks, dict scope):
        cdef dict arguments
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

    async def __call__(self, dict scope, receive, send):
        cdef SendTracker tracker = None
        cdef bint started = False
        cdef object error = None
        cdef bytes raw = None
        cdef object body = None
        cdef object validated = MISSING
        cdef dict values
        cdef list errors
        cdef int status
        cdef bytes payload
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
