# cython: annotation_typing=False
# cython: freethreading_compatible=True
# cython: wraparound=False
"""Where, and why, Python's `json` refuses a document, found without reading it to values.

A route with errors="fastapi" answers a malformed JSON body with FastAPI's 422
`json_invalid`, which carries the message and position of the `JSONDecodeError` that
`json.loads` raises. `json.loads` builds every dict, string and number up to the fault
first, and on a large body that is most of the failing request's cost. `syntax_error`
walks the text as CPython's C scanner (`Modules/_json.c`) does, step for step, and
returns the same message and position without building anything.

It answers None where `json.loads` raises no `JSONDecodeError` (the document is valid to
Python's `json`, which also takes `NaN` and `Infinity`) or where the walk cannot be sure
of `json.loads`'s answer: an integer written in more characters than the lowest digit
limit Python may be set to (`json.loads` may raise `ValueError` there), or nesting
deeper than `MAX_DEPTH`, where `json.loads` may run out of recursion first. The caller
then runs `json.loads` itself.

One thing varies by Python version, and is probed once here from the interpreter's own
scanner: whether a comma before `]` or `}` has a message of its own (3.13 and later).

One source: compiled by Cython as `_errors.jsonscan` (with `jsonscan.pxd`) for routes on
the compiled twin. Routes on the pure twin call `json.loads`, whose C scanner is quicker
than this file run as Python; the tests hold both builds of this file to `json.loads`.
Every index here only grows from 0, so the compiled build reads the text without
negative-index wraparound.
"""

from __future__ import annotations

import json

# Nesting deeper than this is left to `json.loads` (it may raise RecursionError there).
MAX_DEPTH = 64
# Python's integer-string limit can be set no lower than 640 digits (0 means none): an
# integer of at most this many characters always converts.
MAX_INT_CHARS = 640

EXPECTING_VALUE = "Expecting value"
EXPECTING_DELIMITER = "Expecting ',' delimiter"
EXPECTING_COLON = "Expecting ':' delimiter"
EXPECTING_NAME = "Expecting property name enclosed in double quotes"
EXTRA_DATA = "Extra data"
UNTERMINATED = "Unterminated string starting at"
CONTROL_CHARACTER = "Invalid control character at"
INVALID_ESCAPE = "Invalid \\escape"
INVALID_UNICODE_ESCAPE = "Invalid \\uXXXX escape"
TRAILING_COMMA_ARRAY = "Illegal trailing comma before end of array"
TRAILING_COMMA_OBJECT = "Illegal trailing comma before end of object"

# The bytes the grammar names.
SPACE, TAB, NEWLINE, RETURN = 0x20, 0x09, 0x0A, 0x0D
QUOTE, BACKSLASH, COLON, COMMA = 0x22, 0x5C, 0x3A, 0x2C
OPEN_ARRAY, CLOSE_ARRAY, OPEN_OBJECT, CLOSE_OBJECT = 0x5B, 0x5D, 0x7B, 0x7D
MINUS, PLUS, POINT, DIGIT_0, DIGIT_1, DIGIT_9 = 0x2D, 0x2B, 0x2E, 0x30, 0x31, 0x39
LOWER_E, UPPER_E, LOWER_U = 0x65, 0x45, 0x75
LOWER_N, LOWER_T, LOWER_F, UPPER_N, UPPER_I = 0x6E, 0x74, 0x66, 0x4E, 0x49
LOWER_A, LOWER_B, LOWER_R, SLASH = 0x61, 0x62, 0x72, 0x2F
LAST_CONTROL = 0x1F


def _reports_trailing_commas() -> bool:
    try:
        json.loads("[1,]")
    except json.JSONDecodeError as exc:
        return exc.msg == TRAILING_COMMA_ARRAY
    return False


TRAILING_COMMAS = _reports_trailing_commas()


class Refused(Exception):
    """Python's `json` refuses the text: `msg` at `pos`. A `msg` of None: not known here."""

    def __init__(self, msg: str | None, pos: int) -> None:
        super().__init__(msg, pos)
        self.msg = msg
        self.pos = pos


def syntax_error(raw: bytes, start: int) -> tuple[str, int] | None:
    """The message and position of the `JSONDecodeError` `json.loads(raw)` raises, or
    None where it raises none, or where this walk cannot tell (see the module's text).

    `raw` is UTF-8 that decodes (the caller has checked), its text starting at `start`
    (past a byte-order mark). The walk is over bytes: every byte JSON's grammar names is
    ASCII, and no byte of a longer UTF-8 sequence is, so a fault is always found at the
    first byte of a character; its position is then counted in characters, as
    `json.loads` counts it."""
    try:
        _walk(raw, start, TRAILING_COMMAS)
    except Refused as refused:
        if refused.msg is None:
            return None
        return refused.msg, len(raw[start : refused.pos].decode("utf-8", "surrogatepass"))
    return None


def _walk(text: bytes, start: int, trailing_commas: bool) -> None:
    """Walk `text` as `json.loads` reads it; raise `Refused` where it would fail."""
    n = len(text)
    # The closing bracket of each open container, innermost at depth - 1.
    stack = bytearray(MAX_DEPTH)
    depth = 0
    idx = _skip_space(text, start, n)
    while True:
        # A value starts at idx.
        if idx >= n:
            raise Refused(EXPECTING_VALUE, idx)
        c = text[idx]
        if c == QUOTE:
            idx = _string_end(text, idx + 1, n)
        elif c in (OPEN_OBJECT, OPEN_ARRAY):
            if depth == MAX_DEPTH:
                raise Refused(None, idx)
            idx = _skip_space(text, idx + 1, n)
            closing = CLOSE_OBJECT if c == OPEN_OBJECT else CLOSE_ARRAY
            if idx < n and text[idx] == closing:
                idx += 1
            else:
                stack[depth] = closing
                depth += 1
                if c == OPEN_OBJECT:
                    idx = _key_end(text, idx, n)
                continue
        elif (c == LOWER_N and _word_at(text, idx, n, b"null")) or (
            c == LOWER_T and _word_at(text, idx, n, b"true")
        ):
            idx += 4
        elif c == LOWER_F and _word_at(text, idx, n, b"false"):
            idx += 5
        elif c == UPPER_N and _word_at(text, idx, n, b"NaN"):
            idx += 3
        elif c == UPPER_I and _word_at(text, idx, n, b"Infinity"):
            idx += 8
        elif c == MINUS and _word_at(text, idx, n, b"-Infinity"):
            idx += 9
        else:
            idx = _number_end(text, idx, n)
        # After a value: close whatever containers it completes, then find the next value.
        while True:
            idx = _skip_space(text, idx, n)
            if depth == 0:
                if idx != n:
                    raise Refused(EXTRA_DATA, idx)
                return
            closing = stack[depth - 1]
            if idx < n and text[idx] == closing:
                depth -= 1
                idx += 1
                continue
            if idx >= n or text[idx] != COMMA:
                raise Refused(EXPECTING_DELIMITER, idx)
            comma = idx
            idx = _skip_space(text, idx + 1, n)
            if trailing_commas and idx < n and text[idx] == closing:
                if closing == CLOSE_ARRAY:
                    raise Refused(TRAILING_COMMA_ARRAY, comma)
                raise Refused(TRAILING_COMMA_OBJECT, comma)
            if closing == CLOSE_OBJECT:
                idx = _key_end(text, idx, n)
            break


def _word_at(text: bytes, idx: int, n: int, word: bytes) -> bool:
    """Whether `word`, whose first byte is at `idx` already, is whole there."""
    size = len(word)
    if idx + size > n:
        return False
    # A loop, not all(...): Cython compiles the loop to C, the generator it would keep.
    for i in range(1, size):  # noqa: SIM110
        if text[idx + i] != word[i]:
            return False
    return True


def _skip_space(text: bytes, idx: int, n: int) -> int:
    while idx < n:
        c = text[idx]
        if c != SPACE and c != TAB and c != NEWLINE and c != RETURN:
            break
        idx += 1
    return idx


def _key_end(text: bytes, idx: int, n: int) -> int:
    """Past an object's key, its colon and the space before its value."""
    if idx >= n or text[idx] != QUOTE:
        raise Refused(EXPECTING_NAME, idx)
    idx = _skip_space(text, _string_end(text, idx + 1, n), n)
    if idx >= n or text[idx] != COLON:
        raise Refused(EXPECTING_COLON, idx)
    return _skip_space(text, idx + 1, n)


def _string_end(text: bytes, end: int, n: int) -> int:
    """Past the closing quote of the string whose text starts at `end`."""
    begin = end - 1
    while True:
        at = end
        c = 0
        while at < n:
            c = text[at]
            if c in (QUOTE, BACKSLASH):
                break
            if c <= LAST_CONTROL:
                raise Refused(CONTROL_CHARACTER, at)
            at += 1
        if at >= n:
            raise Refused(UNTERMINATED, begin)
        if c == QUOTE:
            return at + 1
        at += 1
        if at == n:
            raise Refused(UNTERMINATED, begin)
        c = text[at]
        if c != LOWER_U:
            end = at + 1
            if not _is_simple_escape(c):
                raise Refused(INVALID_ESCAPE, end - 2)
            continue
        at += 1
        end = at + 4
        if end >= n:
            raise Refused(INVALID_UNICODE_ESCAPE, at - 1)
        unit = _hex4(text, at, end)
        # A high surrogate takes a low one escaped right after it; else the pair is two.
        if (
            0xD800 <= unit <= 0xDBFF
            and end + 6 < n
            and text[end] == BACKSLASH
            and text[end + 1] == LOWER_U
        ):
            end += 6
            second = _hex4(text, end - 4, end)
            if not 0xDC00 <= second <= 0xDFFF:
                end -= 6


def _is_simple_escape(c: int) -> bool:
    """Whether a backslash and `c` is an escape other than `\\u`."""
    return c in (QUOTE, BACKSLASH, SLASH, LOWER_B, LOWER_F, LOWER_N, LOWER_R, LOWER_T)


def _hex4(text: bytes, start: int, end: int) -> int:
    """The four hex digits text[start:end] as a number."""
    value = 0
    for i in range(start, end):
        c = text[i]
        value <<= 4
        if DIGIT_0 <= c <= DIGIT_9:
            value |= c - DIGIT_0
        elif LOWER_A <= c | 0x20 <= LOWER_F:  # a to f, either case
            value |= (c | 0x20) - LOWER_A + 10
        else:
            raise Refused(INVALID_UNICODE_ESCAPE, end - 5)
    return value


def _number_end(text: bytes, start: int, n: int) -> int:
    """Past the number at `start`; a value that is not one is refused where it starts."""
    idx = start
    if text[idx] == MINUS:
        idx += 1
        if idx >= n:
            raise Refused(EXPECTING_VALUE, start)
    c = text[idx]
    if DIGIT_1 <= c <= DIGIT_9:
        idx += 1
        while idx < n and DIGIT_0 <= text[idx] <= DIGIT_9:
            idx += 1
    elif c == DIGIT_0:
        idx += 1
    else:
        raise Refused(EXPECTING_VALUE, start)
    is_float = False
    if idx < n - 1 and text[idx] == POINT and DIGIT_0 <= text[idx + 1] <= DIGIT_9:
        is_float = True
        idx += 2
        while idx < n and DIGIT_0 <= text[idx] <= DIGIT_9:
            idx += 1
    if idx < n - 1 and (text[idx] == LOWER_E or text[idx] == UPPER_E):
        e_start = idx
        idx += 1
        if idx < n - 1 and (text[idx] == MINUS or text[idx] == PLUS):
            idx += 1
        while idx < n and DIGIT_0 <= text[idx] <= DIGIT_9:
            idx += 1
        if DIGIT_0 <= text[idx - 1] <= DIGIT_9:
            is_float = True
        else:
            idx = e_start
    if not is_float and idx - start > MAX_INT_CHARS:
        raise Refused(None, start)
    return idx
