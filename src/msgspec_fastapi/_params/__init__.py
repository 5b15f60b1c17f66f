"""Parameters: path, query, header, cookie and form values converted with msgspec.

At registration: `annotations` answers questions asked of type annotations; `converters`
turns each parameter's annotation and FastAPI constraints into a converter; `models`
reads query, header, cookie and form models into a `ModelPlan`.

Per request: the twins call the converters and `ModelPlan.convert` they were handed.
"""
