"""OpenAPI: msgspec schemas for bodies, responses and parameters."""

from __future__ import annotations

import re
from collections.abc import Iterable
from copy import deepcopy
from typing import TYPE_CHECKING, Any

import msgspec
import msgspec.inspect as mi
from fastapi.encoders import jsonable_encoder
from fastapi.utils import is_body_allowed_for_status_code
from starlette.datastructures import UploadFile

from .. import _compat
from .._params.annotations import is_msgspec_json_type
from .._params.converters import PARAM_GROUPS
from .._shared import STREAM_JSONL, STREAM_NONE
from .body_docs import is_generated_body

if TYPE_CHECKING:
    from fastapi.routing import RouteContext

    from .._endpoint.plan import BodyPlan, EndpointSpec, OutputPlan

_REF_PREFIX = "#/components/schemas/"
# The name routes that take MessagePack document it under.
MSGPACK_MEDIA_TYPE = "application/msgpack"
_REF_TEMPLATE = _REF_PREFIX + "{name}"

# Component names are unique per class in the whole process, so that routers merged at
# any time agree: a class keeps the name it got first (`module__qualname`, Pydantic's
# style), and a second class with the same import path (made by a factory) gets `_2`.
_CANONICAL: dict[Any, str] = {}
_OWNERS: dict[str, Any] = {}
# Each canonical name's short form (msgspec's name for the class alone), used in the
# document whenever no other component there has that short name.
_SHORT: dict[str, str] = {}

# The inspect types msgspec makes a component of (a `$ref` in the schemas using them).
_NAMED = (mi.StructType, mi.DataclassType, mi.TypedDictType, mi.NamedTupleType, mi.EnumType)


def _component_classes(annotation: Any) -> list[Any]:
    """The classes (or generic aliases) msgspec makes components of for `annotation`."""
    found: list[Any] = []
    seen: set[int] = set()

    def walk(info: mi.Type) -> None:
        if id(info) in seen:
            return
        seen.add(id(info))
        if isinstance(info, _NAMED) and info.cls not in found:
            found.append(info.cls)
        for attribute in ("type", "item_type", "key_type", "value_type"):
            child = getattr(info, attribute, None)
            if isinstance(child, mi.Type):
                walk(child)
        for child in getattr(info, "types", ()) or getattr(info, "item_types", ()):
            walk(child)
        for field in getattr(info, "fields", ()):
            walk(field.type)

    walk(mi.type_info(annotation))
    return found


def _schema_hook(annotation: Any) -> dict[str, Any]:
    """A form model's UploadFile fields, documented as FastAPI documents UploadFile."""
    if isinstance(annotation, type) and issubclass(annotation, UploadFile):
        return {"type": "string", "contentMediaType": "application/octet-stream"}
    raise NotImplementedError


def _ref_name(schema: dict[str, Any]) -> str | None:
    ref = schema.get("$ref")
    return ref.removeprefix(_REF_PREFIX) if isinstance(ref, str) else None


def _normalize(name: str) -> str:
    """Pydantic's normalisation of a component name: `pkg.mod.City` → `pkg__mod__City`."""
    return re.sub(r"[^a-zA-Z0-9.\-_]", "_", name).replace(".", "__")


def _canonical(cls: Any) -> str:
    """The process-wide component name of `cls`: module-qualified, unique per class."""
    known = _CANONICAL.get(cls)
    if known is not None:
        return known
    (alone,), _ = msgspec.json.schema_components(
        [cls], ref_template=_REF_TEMPLATE, schema_hook=_schema_hook
    )
    short = _ref_name(alone) or str(getattr(cls, "__name__", "Component"))
    # A generic alias has its origin's qualname; msgspec's short name (`Page_City_`)
    # tells its instances apart.
    outer = str(getattr(cls, "__qualname__", short)).rpartition(".")[0]
    base = _normalize(".".join(filter(None, (getattr(cls, "__module__", ""), outer, short))))
    name, suffix = base, 2
    while name in _OWNERS:
        name, suffix = f"{base}_{suffix}", suffix + 1
    _OWNERS[name] = cls
    _CANONICAL[cls] = name
    _SHORT[name] = short
    return name


def rewrite_refs(node: Any, names: dict[str, str]) -> None:
    """Point every `$ref` to a component in `names` at its new name, in place."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_REF_PREFIX):
            new = names.get(ref.removeprefix(_REF_PREFIX))
            if new is not None:
                node["$ref"] = _REF_TEMPLATE.format(name=new)
        for value in node.values():
            rewrite_refs(value, names)
    elif isinstance(node, list):
        for value in node:
            rewrite_refs(value, names)


def merge_components(target: dict[str, Any], incoming: dict[str, Any]) -> None:
    """Add schemas to `target`; one name for two different schemas is an error.

    Names are canonical (one per class), so this fails only if a class changed its
    schema between two registrations.
    """
    for name, schema in incoming.items():
        if name in target and target[name] != schema:
            raise ValueError(f"Conflicting OpenAPI component name: {name!r}")
        target[name] = deepcopy(schema)


def _schema(annotation: Any, components: dict[str, Any]) -> dict[str, Any]:
    """msgspec's schema of `annotation`, its components added to `components`, every
    component named and referenced by its canonical name."""
    classes = _component_classes(annotation)
    schemas, definitions = msgspec.json.schema_components(
        [*classes, annotation], ref_template=_REF_TEMPLATE, schema_hook=_schema_hook
    )
    # msgspec names components per call (qualifying clashes itself): map its names to ours.
    names = {}
    for cls, alone in zip(classes, schemas, strict=False):
        name = _ref_name(alone)
        if name is not None:
            names[name] = _canonical(cls)
    schema = deepcopy(schemas[-1])
    rewrite_refs(schema, names)
    renamed = {names.get(name, name): deepcopy(value) for name, value in definitions.items()}
    rewrite_refs(renamed, names)
    merge_components(components, renamed)
    return schema


def _error_models(responses: dict[Any, Any], media_type: str, components: dict[str, Any]) -> bool:
    """Document `responses={404: {"model": T}}` with msgspec's schema of T, in place;
    whether there was such a model.

    FastAPI builds a Pydantic field for each `model` when the route is created, which a
    Struct cannot be; the model is taken out and its schema put where FastAPI puts a
    Pydantic model's: under the route's response media type.
    """
    found = False
    for status, response in responses.items():
        if not isinstance(response, dict) or not is_msgspec_json_type(response.get("model")):
            continue
        found = True
        entry = dict(response)
        model = entry.pop("model")
        content = entry["content"] = deepcopy(entry.get("content") or {})
        media = content[media_type] = dict(content.get(media_type) or {})
        media["schema"] = _schema(model, components)
        responses[status] = entry
    return found


def _builtins(value: Any) -> Any:
    """An example as JSON-ready values: msgspec's types by msgspec, others (a Pydantic
    model, say) as FastAPI encodes examples."""
    return msgspec.to_builtins(value, enc_hook=jsonable_encoder)


def _body_content(body: BodyPlan, components: dict[str, Any]) -> dict[str, Any]:
    """The media type object of a body, with its `Body(...)` documentation where FastAPI
    puts it: beside the schema, or on the embedded part's property."""
    schema = _schema(body.decode_type, components)
    schema.update(_builtins(body.docs))
    embedded = components.get(_ref_name(schema) or "", {}) if body.part_docs else {}
    for key, docs in body.part_docs.items():
        embedded["properties"][key].update(_builtins(docs))
    content = {"schema": schema}
    if body.openapi_examples:
        content["examples"] = _builtins(body.openapi_examples)
    return content


def _stream_content(
    output: OutputPlan,
    options: dict[str, Any],
    responses: dict[Any, Any],
    components: dict[str, Any],
) -> None:
    """A stream's response as FastAPI documents one: the item schema of JSON Lines, or
    the event schema of server-sent events with the item as each event's data."""
    code = options.get("status_code") or 200
    if not is_body_allowed_for_status_code(code):
        return
    key = str(code) if str(code) in responses else code
    entry = responses.setdefault(key, {})
    entry.setdefault("description", options.get("response_description", "Successful Response"))
    item = {} if output.output_type is None else _schema(output.output_type, components)
    if output.stream == STREAM_JSONL:
        entry.setdefault("content", {})["application/jsonl"] = {"itemSchema": item}
        return
    event = deepcopy(_compat.SSE_EVENT_SCHEMA)
    if output.output_type is not None:
        event["required"] = ["data"]
        event["properties"]["data"] = {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": item,
        }
    entry.setdefault("content", {})["text/event-stream"] = {"itemSchema": event}


def route_openapi(
    spec: EndpointSpec | None,
    options: dict[str, Any],
    max_body_size: int | None,
    response_media_type: str,
) -> dict[str, Any]:
    """Fill a route's `responses` and `openapi_extra` options; return its components.

    Without a spec (FastAPI serves the route alone) only msgspec error models are
    documented, and the options are left alone when there are none.
    """
    components: dict[str, Any] = {}
    responses = dict(options.get("responses") or {})
    has_models = _error_models(responses, response_media_type, components)
    if spec is None:
        if has_models:
            options["responses"] = responses
        return components
    responses = deepcopy(responses)
    extra = deepcopy(options.get("openapi_extra") or {})
    if max_body_size is not None:
        responses.setdefault(413, {"description": "Content Too Large"})
    body = spec.body
    if body is not None:
        content = {body.media_type: _body_content(body, components)}
        if body.msgpack_decoder is not None:
            content[MSGPACK_MEDIA_TYPE] = deepcopy(content[body.media_type])
        extra["requestBody"] = {"required": body.required, "content": content}
        malformed = "Malformed JSON or MessagePack" if body.msgpack_decoder else "Malformed JSON"
        responses.setdefault(400, {"description": malformed})
        responses.setdefault(415, {"description": "Unsupported Media Type"})
    form = spec.form
    if form is not None:
        media_type = (
            "multipart/form-data" if form.has_files else "application/x-www-form-urlencoded"
        )
        schema = {"schema": _schema(form.model, components)}
        extra["requestBody"] = {"required": True, "content": {media_type: schema}}
    if spec.models:
        # One entry per key, as FastAPI lists a parameter that several dependencies read.
        parameters = {
            (model.where, field.key): {
                "name": field.key,
                "in": model.where,
                "required": field.required,
                "schema": _schema(field.annotation, components),
            }
            for model in reversed(spec.models)
            for field in reversed(model.fields)
        }
        extra["parameters"] = [*extra.get("parameters", []), *reversed(parameters.values())]
    if body is not None or spec.models or form is not None:
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
    if output is not None and output.stream != STREAM_NONE:
        _stream_content(output, options, responses, components)
    elif output is not None and output.output_type is not None:
        code = options.get("status_code") or 200
        key = str(code) if str(code) in responses else code
        entry = responses.setdefault(key, {})
        entry.setdefault("description", options.get("response_description", "Successful Response"))
        media = entry.setdefault("content", {})
        media[response_media_type] = {"schema": _schema(output.output_type, components)}
        if output.msgpack_encoder is not None:
            media[MSGPACK_MEDIA_TYPE] = deepcopy(media[response_media_type])
    options["responses"] = responses
    options["openapi_extra"] = extra
    return components


def _parameter_fields(dependant: Any) -> list[Any]:
    fields = [field for group in PARAM_GROUPS for field in getattr(dependant, group)]
    for dependency in dependant.dependencies:
        fields.extend(_parameter_fields(dependency))
    return fields


# What Pydantic says about a parameter beside its type, kept when msgspec's schema of the
# type replaces Pydantic's (`Query(description=..., deprecated=True, examples=[...])`),
# with the keys of its `json_schema_extra`.
_PARAMETER_ANNOTATIONS = ("title", "description", "default", "examples", "deprecated")


def _any_items(schema: dict[str, Any]) -> None:
    """Say `items: {}` on an array of anything (a bare `list`), as Pydantic does."""
    for branch in (schema, *schema.get("anyOf", ())):
        if branch.get("type") == "array" and "items" not in branch:
            branch["items"] = {}


def _documented_field(fields: list[Any], where: tuple[str, str]) -> Any | None:
    """Which of the fields read as parameter `where` FastAPI documents: the last required
    one, else the last (several dependencies may read one parameter)."""
    found = [f for f in fields if (f.field_info.in_.value, f.alias) == where]
    required = [f for f in found if f.field_info.is_required()]
    return (required or found or [None])[-1]


def _parameter_schemas(
    document: dict[str, Any], route: RouteContext, components: dict[str, Any]
) -> None:
    """Replace FastAPI's schemas of msgspec-converted parameters with msgspec's own."""
    fields = _parameter_fields(route.dependant)
    if not any(hasattr(f, "msgspec_target") for f in fields):
        return
    for method in route.methods or ():
        operation = document.get("paths", {}).get(route.path_format, {}).get(method.lower())
        if not operation:
            continue
        for parameter in operation.get("parameters", []):
            field = _documented_field(fields, (parameter["in"], parameter["name"]))
            if field is None or not hasattr(field, "msgspec_target"):
                continue
            schema = _schema(field.msgspec_target, components)
            _any_items(schema)
            theirs = parameter.get("schema", {})
            extra = field.field_info.json_schema_extra
            keys = (*_PARAMETER_ANNOTATIONS, *(extra if isinstance(extra, dict) else ()))
            schema.update({key: theirs[key] for key in keys if key in theirs})
            parameter["schema"] = schema


def _same_enum(ours: dict[str, Any], theirs: dict[str, Any]) -> bool:
    """Whether FastAPI's schema of a component describes the same enum as msgspec's (which
    lists the values sorted, where Pydantic keeps their order)."""
    values, their_values = ours.get("enum"), theirs.get("enum")
    if not isinstance(values, list) or not isinstance(their_values, list):
        return False
    return sorted(map(repr, values)) == sorted(map(repr, their_values))


def _document_names(existing: dict[str, Any], ours: dict[str, Any]) -> dict[str, str]:
    """The name in the document of each of our canonical names.

    The short name (`City`) where nothing else in the document has it, as Pydantic does;
    the module-qualified canonical name where two of ours share a short name or one of
    FastAPI's components (a Pydantic model) already has it. An enum FastAPI also
    described (for a Pydantic-typed parameter, say) shares its name.
    """
    # Distinct classes with one short name and one schema (the generated bodies of two
    # endpoints named alike, say) can share the name, as they did in one component.
    shorts: dict[str, list[Any]] = {}
    for canonical, schema in ours.items():
        schemas = shorts.setdefault(_SHORT.get(canonical, canonical), [])
        if schema not in schemas:
            schemas.append(schema)
    names: dict[str, str] = {}
    for canonical, schema in ours.items():
        short = _SHORT.get(canonical, canonical)
        theirs = existing.get(short)
        if len(shorts[short]) == 1 and (
            theirs is None or theirs == schema or _same_enum(schema, theirs)
        ):
            names[canonical] = short
    taken = set(existing) | set(names.values())
    for canonical in ours:
        if canonical in names:
            continue
        name, suffix = canonical, 2
        while name in taken:  # a Pydantic model with this very import path
            name, suffix = f"{canonical}_{suffix}", suffix + 1
        taken.add(name)
        names[canonical] = name
    return names


def _references(node: Any, found: set[str]) -> set[str]:
    """The component names `node` refers to, added to `found`."""
    if isinstance(node, dict):
        name = _ref_name(node)
        if name is not None:
            found.add(name)
        for value in node.values():
            _references(value, found)
    elif isinstance(node, list):
        for value in node:
            _references(value, found)
    return found


def _body_names(document: dict[str, Any], routes: list[RouteContext], ours: dict[str, Any]) -> None:
    """Document each route's generated body as FastAPI names its body model,
    `Body_<route's unique id>` (`Body_create_items__post`), one component per route.

    A name that another component of the document has (or that two routes with unequal
    bodies would share) is left alone: that body keeps its generated name.
    """
    wanted: dict[str, list[tuple[dict[str, Any], str]]] = {}
    for route in routes:
        for method in route.methods or ():
            operation = document.get("paths", {}).get(route.path_format, {}).get(method.lower())
            content = ((operation or {}).get("requestBody") or {}).get("content", {})
            for media in content.values():
                canonical = _ref_name(media.get("schema", {})) or ""
                if is_generated_body(_OWNERS.get(canonical)):
                    name = f"Body_{route.unique_id}"
                    wanted.setdefault(name, []).append((media, canonical))
    taken = set(document.get("components", {}).get("schemas", {}))
    taken.update(_SHORT.get(canonical, canonical) for canonical in ours)
    for name, uses in wanted.items():
        schemas = [ours[canonical] for _, canonical in uses]
        if name in taken or any(schema != schemas[0] for schema in schemas):
            continue
        ours[name] = {**schemas[0], "title": name}
        for media, _ in uses:
            media["schema"]["$ref"] = _REF_TEMPLATE.format(name=name)
    referenced = _references(document, set())
    for canonical in [c for c in ours if is_generated_body(_OWNERS.get(c))]:
        if canonical not in referenced:
            del ours[canonical]


def add_msgspec_schemas(
    document: dict[str, Any], routes: Iterable[RouteContext], components: dict[str, Any]
) -> None:
    """Put msgspec's schemas into a document FastAPI built: `components`, and those of
    the msgspec-converted parameters of `routes`, then name them for this document and
    point every reference to them at that name."""
    ours = dict(components)
    routes = list(routes)
    for route in routes:
        _parameter_schemas(document, route, ours)
    _body_names(document, routes, ours)
    if not ours:
        return  # as FastAPI, no `components` for a document without schemas
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    names = _document_names(schemas, ours)
    # Canonical names are module-qualified, so no component of FastAPI's has one.
    rewrite_refs(document, names)
    for canonical, schema in ours.items():
        name = names[canonical]
        if name in schemas and _same_enum(schema, schemas[name]):
            continue  # FastAPI's, its values in their declared order
        copied = deepcopy(schema)
        rewrite_refs(copied, names)
        schemas[name] = copied


def mixed_request_body(
    extra: dict[str, Any] | None, fastapi_model: str, fastapi_required: bool, single: str | None
) -> dict[str, Any]:
    """A route's `openapi_extra` whose request body is FastAPI's body model and ours in
    one object, for a msgspec body read beside FastAPI's body fields.

    `fastapi_model` names FastAPI's component of its embedded body fields; `single` is the
    key of our body where it is one parameter (documented as the whole body until then).
    """
    extra = deepcopy(extra or {})
    request_body = extra.get("requestBody")
    if request_body is None:
        return extra
    for media in request_body.get("content", {}).values():
        ours = media.get("schema", {})
        if single is not None:
            part: dict[str, Any] = {"type": "object", "properties": {single: ours}}
            if request_body.get("required"):
                part["required"] = [single]
            ours = part
        # FastAPI's own `$ref` stays (its schema is merged with ours): OpenAPI 3.1 applies
        # a `$ref` and its sibling `allOf` both.
        media["schema"] = {"$ref": _REF_TEMPLATE.format(name=fastapi_model), "allOf": [ours]}
    request_body["required"] = bool(request_body.get("required") or fastapi_required)
    return extra
