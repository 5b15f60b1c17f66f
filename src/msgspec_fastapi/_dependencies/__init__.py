"""Dependencies: msgspec types in a route's dependency tree, and the plan that runs them.

At registration: `tree` reads the dependency tree (bodies and parameter models of
dependencies) and hands FastAPI stand-ins for them; `plan` flattens FastAPI's `Dependant`
into the steps FastAPI takes, once per route and once per override set.

Per request: `executor` (compiled from `executor_py.py`, typed by `executor.pxd`) runs a
plan on the direct tier, entering generator dependencies as FastAPI does and closing
their teardowns after success; `teardown` holds `request_response`'s frame around them
and closes them with an exception in flight as FastAPI's exit stacks would; `errors`
lists the delegated tier's 422 in FastAPI's order.
The stand-ins of `tree` hand over their decoded values.
"""
