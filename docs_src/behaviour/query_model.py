from typing import Annotated, Literal

import msgspec
from fastapi import FastAPI, Query

from msgspec_fastapi import MsgspecRouter, install_dispatch, install_openapi


class Filter(msgspec.Struct, forbid_unknown_fields=True):
    country: Annotated[str, msgspec.Meta(pattern="^[A-Z]{2}$")]
    limit: Annotated[int, msgspec.Meta(ge=1, le=100)] = 10
    order: Literal["name", "population"] = "name"
    tags: list[str] = []


router = MsgspecRouter()


@router.get("/cities")
async def list_cities(filter: Annotated[Filter, Query()]) -> dict[str, object]:
    return msgspec.structs.asdict(filter)


app = FastAPI()
app.include_router(router)
install_openapi(app, router)
install_dispatch(app)
