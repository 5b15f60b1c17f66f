# cython: language_level=3
cimport cython

# C declarations for `_dependencies.executor`, the compiled build of `executor_py.py`: the
# per-request state, the plan's steps as the request path reads them, a generator
# dependency's teardown and the route's app become C structs, and the argument builder and
# the generator set-up C functions. `executor_py.py` itself stays plain Python for the pure
# twin.

cdef str TELEMETRY_SCOPE_KEY
cdef int DEP_ASYNC
cdef int DEP_ASYNC_GENERATOR
cdef int DEP_GENERATOR
cdef int DEP_SYNC_GENERATOR
cdef object MISSING
cdef int SPECIAL_BACKGROUND
cdef int SPECIAL_REQUEST
cdef int SPECIAL_RESPONSE
cdef object next_of


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
    cdef public object checkpoint
    cdef public object task
    cdef public Py_ssize_t resume_at
    cdef public object carried

    cpdef object get_request(self)
    cpdef object get_sub_response(self)
    cpdef object get_tasks(self)


cdef class Op:
    cdef public object call
    cdef public int kind
    cdef public object dependant
    cdef public Py_ssize_t key
    cdef public bint use_cache
    cdef public Py_ssize_t first
    cdef public bint function_stack
    cdef public object concurrency
    cdef public tuple steps
    cdef public object params
    cdef public bint has_models
    cdef public tuple body
    cdef public object body_keys
    cdef public object parts
    cdef public tuple specials
    cdef public list fields
    cdef public bint embeds
    cdef public bint form_fields
    cdef public Py_ssize_t lookup
    cdef public object looked_up
    cdef public object resolved
    cdef public bint overridden


cdef class Program:
    cdef public list ops
    cdef public Op endpoint
    cdef public Py_ssize_t n_keys
    cdef public bint uses_stacks
    cdef public bint teardowns
    cdef public bint overridden
    cdef public tuple checks


@cython.locals(index=Py_ssize_t)
cpdef dict arguments(Op step, list values, list errors, RequestState state)
cpdef bint lookups_hold(tuple checks, object current)


cdef inline tuple plain_messages(object response, object tasks)
cpdef object as_response(object outcome, object tasks)


@cython.locals(tasks=dict)
cpdef object running_task()
cpdef tuple enter_cleanup_scope()


@cython.locals(records=dict)
cpdef bint in_a_cancel_scope(object task)


cdef class Teardown:
    cdef public object gen
    cdef public object cleanup
    cdef public object checkpoint
    cdef public object task
    cdef public bint was_shielded

    cpdef object first(self)
    cpdef object shield_exit(self)
    cpdef object due_checkpoint(self, object cleanup)


cpdef Teardown prepare_generator(Op step, dict kwargs, RequestState state, bint on_stacks)
cpdef keep_teardown(Teardown teardown, Op step, RequestState state, bint on_stacks)


cpdef tuple carry_over(object carried, Program program)


cdef bint telemetry_observes(dict scope)


cdef class DependencyRoute:
    cdef public object runtime
    cdef public object plan
    cdef public Program program
    cdef public object build
    cdef public object provider
    cdef public object delegated
    cdef public bint pydantic
    cdef public object form_limits
    cdef public bint has_body
    cdef public bint checks_length
    cdef public list plans
    cdef public object response_send

    cpdef object plan_for(self, object overrides)
    cpdef object followed(self, Program program, object boundary)
