"""The endpoint: what a route does with a request once it is found.

At registration: `plan` reads an endpoint once into an `EndpointSpec` and a `RoutePlan`
per inclusion; `analysis` runs that for a route, and again for each inclusion whose
dependencies take msgspec types; `shaping` builds a route's `response_model_*` options.

Per request: `delegated` is the delegated tier (FastAPI solves, we read the body and make
the response); `telemetry` reports a request's steps as FastAPI's handler does; the
shapes of `shaping` are applied to each value sent.
"""
