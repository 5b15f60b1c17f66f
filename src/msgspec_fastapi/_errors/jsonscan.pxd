# cython: language_level=3
# C declarations for `_errors.jsonscan`, the compiled build of `jsonscan_py.py`: the walk
# over the body runs on C indexes and bytes, the grammar's bytes are C constants.
# `jsonscan_py.py` itself stays plain Python.

cimport cython


cdef Py_ssize_t MAX_DEPTH
cdef Py_ssize_t MAX_INT_CHARS
cdef int SPACE, TAB, NEWLINE, RETURN
cdef int QUOTE, BACKSLASH, COLON, COMMA
cdef int OPEN_ARRAY, CLOSE_ARRAY, OPEN_OBJECT, CLOSE_OBJECT
cdef int MINUS, PLUS, POINT, DIGIT_0, DIGIT_1, DIGIT_9
cdef int LOWER_E, UPPER_E, LOWER_U
cdef int LOWER_N, LOWER_T, LOWER_F, UPPER_N, UPPER_I
cdef int LOWER_A, LOWER_B, LOWER_R, SLASH
cdef int LAST_CONTROL


@cython.locals(n=Py_ssize_t, idx=Py_ssize_t, comma=Py_ssize_t, c=int, closing=int,
               stack=bytearray, depth=Py_ssize_t)
cdef _walk(bytes text, Py_ssize_t start, bint trailing_commas)


@cython.locals(size=Py_ssize_t, i=Py_ssize_t)
cdef bint _word_at(bytes text, Py_ssize_t idx, Py_ssize_t n, bytes word) except -1


@cython.locals(c=int)
cdef Py_ssize_t _skip_space(bytes text, Py_ssize_t idx, Py_ssize_t n) except -1


cdef Py_ssize_t _key_end(bytes text, Py_ssize_t idx, Py_ssize_t n) except -1


@cython.locals(begin=Py_ssize_t, at=Py_ssize_t, c=int, unit=long, second=long)
cdef Py_ssize_t _string_end(bytes text, Py_ssize_t end, Py_ssize_t n) except -1


cdef bint _is_simple_escape(int c) noexcept


@cython.locals(value=long, i=Py_ssize_t, c=int)
cdef long _hex4(bytes text, Py_ssize_t start, Py_ssize_t end) except -1


@cython.locals(idx=Py_ssize_t, e_start=Py_ssize_t, c=int, is_float=bint)
cdef Py_ssize_t _number_end(bytes text, Py_ssize_t start, Py_ssize_t n) except -1
