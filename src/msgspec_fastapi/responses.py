"""Response classes."""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.responses import JSONResponse

_ENCODER = msgspec.json.Encoder()


class MsgspecJSONResponse(JSONResponse):
    """A JSONResponse rendered by msgspec.

    It encodes without validating; routes of a MsgspecRouter validate typed responses
    before encoding. Usable on its own, for example as an app's default_response_class.
    """

    def render(self, content: Any) -> bytes:
        return _ENCODER.encode(content)
