import msgspec
from fastapi import FastAPI, HTTPException

from msgspec_fastapi import MsgspecRouter, install_dispatch, install_openapi


class City(msgspec.Struct):
    name: str
    population: int


class Problem(msgspec.Struct):
    detail: str


CITIES = {1: City("Lyon", 522250)}

router = MsgspecRouter()


@router.get("/cities/{city_id}", responses={404: {"model": Problem}})
async def get_city(city_id: int) -> City:
    if city_id not in CITIES:
        raise HTTPException(404, "no such city")
    return CITIES[city_id]


app = FastAPI()
app.include_router(router)
install_openapi(app, router)
install_dispatch(app)
