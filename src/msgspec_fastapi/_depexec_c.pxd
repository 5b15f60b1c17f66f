# cython: language_level=3
# C declarations for `_depexec_c`, the compiled build of `_depexec.py` (linked to it as
# `_depexec_c.py`): the per-request state and the route's app become C structs, and the
# argument builder a C function. `_depexec.py` itself stays plain Python.

cdef class RequestState:
    cdef public object scope
    cdef public object receive
    cdef public object send
    cdef public object body
    cdef public object parts
    cdef public object raw
    cdef public object request
    cdef public object sub
    cdef public object tasks
    cdef public bint started
    cdef public Py_ssize_t skipped
    cdef public object exits
    cdef public object function_exits
    cdef public object cleanup

    cpdef object get_request(self)
    cpdef object get_sub_response(self)
    cpdef object get_tasks(self)


cpdef dict arguments(object step, list values, list errors, RequestState state)


cdef class DependencyRoute:
    cdef public object runtime
    cdef public object plan
    cdef public object build
    cdef public object provider
    cdef public object delegated
    cdef public bint has_body
    cdef public bint checks_length
    cdef public list plans

    cpdef object plan_for(self, object overrides)
