"""OpenAPI: msgspec schemas for bodies, responses and parameters."""

from __future__ import annotations

from collections.abc import Iterable
from copy import deepcopy
from typing import TYPE_CHECKING, Any

import msgspec

from . import _compat
from ._params import PARAM_GROUPS

if TYPE_CHECKING:
    from fastapi.routing import RouteContext

    from ._plan import EndpointSpec

_REF_TEMPLATE = "#/components/schemas/{name}"


def merge_components(target: dict[str, Any], incoming: dict[str, Any]) -> None:
    """Add schemas to `target`; one name for two different schemas is an error."""
    for name, schema in incoming.items():
        if name in target and target[name] != schema:
            raise ValueError(f"Conflicting OpenAPI component name: {name!r}")
        target[name] = deepcopy(schema)


def _schema(annotation: Any, components: dict[str, Any]) -> dict[str, Any]:
    (schema,), definitions = msgspec.json.schema_components(
        [annotation], ref_template=_REF_TEMPLATE
    )
    merge_components(components, definitions)
    return schema


def route_openapi(
    spec: EndpointSpec, options: dict[str, Any], max_body_size: int | None
) -> dict[str, Any]:
    """Fill a route's `responses` and `openapi_extra` options; return its components."""
    components: dict[str, Any] = {}
    responses = deepcopy(options.get("responses") or {})
    extra = deepcopy(options.get("openapi_extra") or {})
    if max_body_size is not None:
        responses.setdefault(413, {"description": "Content Too Large"})
    body = spec.body
    if body is not None:
        extra["requestBody"] = {
            "required": body.required,
            "content": {"application/json": {"schema": _schema(body.decode_type, components)}},
        }
        responses.setdefault(400, {"description": "Malformed JSON"})
        responses.setdefault(415, {"description": "Unsupported Media Type"})
        responses.setdefault(
            422,
            {
                "description": "Validation Error",
                "content": {
                    "application/json": {
                        "schema": {"$ref": _REF_TEMPLATE.format(name="HTTPValidationError")}
                    }
                },
            },
        )
        merge_components(
            components,
            {
                "HTTPValidationError": _compat.VALIDATION_ERROR_RESPONSE_DEFINITION,
                "ValidationError": _compat.VALIDATION_ERROR_DEFINITION,
            },
        )
    output = spec.output
    if output is not None and output.output_type is not None:
        code = options.get("status_code") or 200
        key = str(code) if str(code) in responses else code
        entry = responses.setdefault(key, {})
        entry.setdefault("description", options.get("response_description", "Successful Response"))
        entry.setdefault("content", {})["application/json"] = {
            "schema": _schema(output.output_type, components)
        }
    options["responses"] = responses
    options["openapi_extra"] = extra
    return components


def _parameter_fields(dependant: Any) -> list[Any]:
    fields = [field for group in PARAM_GROUPS for field in getattr(dependant, group)]
    for dependency in dependant.dependencies:
        fields.extend(_parameter_fields(dependency))
    return fields


def _parameter_schemas(
    document: dict[str, Any], route: RouteContext, components: dict[str, Any]
) -> None:
    """Replace FastAPI's schemas of msgspec-converted parameters with msgspec's own."""
    fields = [f for f in _parameter_fields(route.dependant) if hasattr(f, "msgspec_target")]
    if not fields:
        return
    for method in route.methods or ():
        operation = document.get("paths", {}).get(route.path_format, {}).get(method.lower())
        if not operation:
            continue
        for parameter in operation.get("parameters", []):
            for field in fields:
                where = (field.field_info.in_.value, field.alias)
                if (parameter["in"], parameter["name"]) != where:
                    continue
                schema = _schema(field.msgspec_target, components)
                for key in ("title", "description", "default"):
                    if key in parameter.get("schema", {}):
                        schema[key] = parameter["schema"][key]
                parameter["schema"] = schema


def _same_enum(ours: dict[str, Any], theirs: dict[str, Any]) -> bool:
    """Whether FastAPI's schema of a component describes the same enum as msgspec's."""
    return "enum" in ours and ours.get("enum") == theirs.get("enum")


def _merge_into_document(schemas: dict[str, Any], ours: dict[str, Any]) -> None:
    """Add msgspec's components to the document's; an enum FastAPI also described (for a
    Pydantic-typed parameter, say) keeps msgspec's wording of the same values."""
    for name, schema in ours.items():
        existing = schemas.get(name)
        if existing is not None and existing != schema and not _same_enum(schema, existing):
            raise ValueError(f"Conflicting OpenAPI component name: {name!r}")
        schemas[name] = deepcopy(schema)


def add_msgspec_schemas(
    document: dict[str, Any], routes: Iterable[RouteContext], components: dict[str, Any]
) -> None:
    """Put msgspec's schemas into a document FastAPI built: `components`, and those of
    the msgspec-converted parameters of `routes`."""
    ours = dict(components)
    for route in routes:
        _parameter_schemas(document, route, ours)
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    _merge_into_document(schemas, ours)
