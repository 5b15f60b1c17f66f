# cython: language_level=3
# C declarations for `_routing.dispatch`, the compiled build of `dispatch_py.py`: the
# matcher and the index become C structs, the constants C values, and the walk of the
# index C functions. `dispatch_py.py` itself stays plain Python for the pure twin.

cimport cython

cdef object MATCH_FULL
cdef object MATCH_PARTIAL
cdef object MATCH_NONE
cdef str FASTAPI_SCOPE_KEY
cdef str ROUTE_CONTEXT_KEY
cdef str MATCHER_ATTR
cdef str DIRECT_ATTR
cdef object ABSENT
cdef int ENTRY_ROUTE
cdef int ENTRY_MATCHER
cdef int ENTRY_FALLBACK
cdef int SEGMENT_ANY
cdef str INCLUDED_ROUTER_KEY
cdef str TELEMETRY_SCOPE_KEY
cdef str INDEX_ATTR
cdef str INCLUSION_ROUTER_ATTR
cdef object ROUTES_GENERATION
cdef object API_ROUTE_MATCHES
cdef object API_ROUTE_HANDLE
cdef object API_ROUTER_MATCHES
cdef object API_ROUTER_HANDLE


cdef class RouteMatcher:
    cdef object route
    cdef object path_regex
    cdef str literal_path
    cdef str literal_path_nl
    cdef Py_ssize_t segment_count
    cdef tuple literal_segments
    cdef tuple param_segments
    cdef dict convertors
    cdef object endpoint
    cdef frozenset methods

    cpdef tuple match(self, dict scope)

    @cython.locals(params=dict)
    cdef tuple match_params(self, dict scope, path, list segments)

    cdef dict child_scope(self, dict params)

    cdef dict path_params(self, path, list segments)

    @cython.locals(found=object)
    cdef dict regex_params(self, path)

    @cython.locals(position=Py_ssize_t, literal=str, name=str, digits=bint, value=str,
                   params=dict)
    cdef dict split_params(self, str path, list segments)


cdef object matched_context(dict scope)


@cython.locals(context=object, matcher=RouteMatcher)
cpdef route_matches(route, dict scope)


@cython.locals(context=object, direct=object)
cpdef route_handle(route, dict scope, receive, send)


cdef class IndexNode:
    cdef public dict literals
    cdef public list params
    cdef public list ends
    cdef public list tails
    cdef public int kind


cdef class IndexEntry:
    cdef public Py_ssize_t position
    cdef public int kind
    cdef public object route
    cdef public object context
    cdef public object matcher
    cdef public object direct
    cdef public object included
    cdef public tuple chain_limits
    cdef public object path_format
    cdef public bint is_mount


cdef class RouteIndex:
    cdef public IndexNode root
    cdef public list always
    cdef public list entries
    cdef public object generation
    cdef public object snapshot
    cdef public dict form_limits


@cython.locals(ch=Py_UCS4)
cdef bint ascii_digits(str segment)


@cython.locals(count=Py_ssize_t, segment=str, child=IndexNode, following=object)
cdef void collect(IndexNode node, list segments, Py_ssize_t i, list found) except *


@cython.locals(found=list)
cdef list candidates(RouteIndex index, list segments)


@cython.locals(kind=int, matcher=RouteMatcher, fastapi_scope=object, previous=object)
cdef tuple match_entry(IndexEntry entry, dict scope, path, list segments)


@cython.locals(route_path=object, path=str, segments=list, found=list, entries=list,
               entry=IndexEntry, partial=tuple, match=object, found_scope=object,
               position=Py_ssize_t)
cdef tuple select(RouteIndex index, dict scope)


@cython.locals(entry=IndexEntry, matcher=RouteMatcher)
cdef dict selected_child_scope(tuple selected)


@cython.locals(match=object, entry=IndexEntry, found=object, fastapi_scope=object,
               limits=object, matcher=RouteMatcher)
cdef object dispatch(tuple selected, dict scope, receive, send)


cdef class AppDispatcher:
    cdef public list current
    cdef public object fallback
    cdef public object installed_on
    cdef public object rebuild
    cdef public object unchanged

    @cython.locals(index=RouteIndex)
    cpdef RouteIndex current_index(self)


@cython.locals(index=RouteIndex)
cpdef RouteIndex included_index(router, included)


@cython.locals(fastapi_scope=object, included=object)
cdef object serving_inclusion(router, dict scope)


@cython.locals(included=object, selected=tuple)
cpdef router_matches(router, dict scope)


@cython.locals(included=object, selected=tuple)
cpdef router_handle(router, dict scope, receive, send)
