"""Models whose names clash with those of test_openapi, for the component-name tests."""

import msgspec
import pydantic


class City(msgspec.Struct):
    """Another module's `City`: a Struct with other fields."""

    title: str


class Pydantic:
    """A namespace, so that this module can also hold a Pydantic model named `City`."""

    class City(pydantic.BaseModel):
        label: str
