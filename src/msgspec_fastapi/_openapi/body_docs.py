"""What OpenAPI says of a msgspec body beyond its type, decided at registration.

Apart from `schemas` so that `_endpoint.plan`, which `schemas` reads, can use it too.
"""

from __future__ import annotations

import weakref
from typing import Any

from pydantic.fields import FieldInfo

from .._shared import MISSING

# The Structs generated for embedded bodies: documented under FastAPI's name for the
# route's body (`Body_<unique id>`) once the route's place in the document is known.
_GENERATED_BODIES: weakref.WeakSet[Any] = weakref.WeakSet()


def field_docs(info: FieldInfo | None, default: Any) -> dict[str, Any]:
    """What FastAPI documents of a body parameter beside its type: what its FieldInfo
    (`_compat.body_field_info`) says, and its default unless that is None or there is
    none."""
    docs: dict[str, Any] = {}
    if info is not None:
        for key in ("title", "description", "examples"):
            value = getattr(info, key)
            if value is not None:
                docs[key] = value
        if info.deprecated:
            docs["deprecated"] = True
        if isinstance(info.json_schema_extra, dict):
            docs.update(info.json_schema_extra)
    if default is not MISSING and default is not None:
        docs["default"] = default
    return docs


def generated_body(cls: Any) -> Any:
    """Mark `cls` as the Struct generated for an embedded body; return it."""
    _GENERATED_BODIES.add(cls)
    return cls


def is_generated_body(cls: Any) -> bool:
    """Whether `cls` is a Struct generated for an embedded body (False for what cannot be
    weakly referenced, None say)."""
    return cls in _GENERATED_BODIES
