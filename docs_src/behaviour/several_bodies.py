from typing import Annotated

import msgspec
from fastapi import Body, FastAPI

from msgspec_fastapi import MsgspecRouter, install_dispatch, install_openapi


class City(msgspec.Struct):
    name: str
    population: int


class Point(msgspec.Struct):
    x: float
    y: float


router = MsgspecRouter()


@router.post("/places")
async def add_place(
    city: City, point: Point, note: Annotated[str, Body()] = ""
) -> dict[str, object]:
    # The body is {"city": {...}, "point": {...}, "note": "..."}; "note" may be left out.
    return {"city": city.name, "x": point.x, "note": note}


app = FastAPI()
app.include_router(router)
install_openapi(app, router)
install_dispatch(app)
