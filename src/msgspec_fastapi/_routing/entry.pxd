# cython: language_level=3
# C declarations for `_routing.entry`, the compiled build of `entry_py.py`: the per-application
# state of the entry becomes typed fields, read per request without a dict lookup.

cimport cython

cdef class TelemetryKind:
    cdef public str switch
    cdef public str provider
    cdef public dict api
    cdef public str name
    cdef public object getter
    cdef public dict namespace
    cdef public str current
    cdef public object variable


cdef class TelemetryGate:
    cdef public object original
    cdef public dict config
    cdef public tuple kinds
    cdef public dict environ

    @cython.locals(config=dict, kind=TelemetryKind)
    cdef bint unconfigured(self)


cdef class Tracker:
    cdef public object send
    cdef public bint started


cdef class Inner:
    cdef public object app
    cdef public object other
    cdef public tuple handlers
    cdef public dict exception_handlers
    cdef public dict status_handlers
    cdef public dict async_handlers
    cdef public bint through_stack


@cython.final
cdef class Outer:
    cdef public object app
    cdef public Inner inner
    cdef public object body_limit
    cdef public bint limited
    cdef public object server_error
    cdef public bint debug
    cdef public object handler
    cdef public bint handler_is_async

    cdef bint runs_body_limit(self, scope)
    cpdef object enter(self, object scope, object receive, object send)
