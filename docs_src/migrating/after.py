import msgspec
from fastapi import FastAPI

from msgspec_fastapi import MsgspecRouter, install_dispatch, install_openapi


class City(msgspec.Struct):
    name: str
    population: int


router = MsgspecRouter(prefix="/cities")


@router.post("")
async def create_city(city: City) -> City:
    return city


@router.get("/{city_id}")
async def get_city(city_id: int) -> City:
    return City(name=f"city {city_id}", population=1000)


app = FastAPI()
app.include_router(router)
install_openapi(app, router)
install_dispatch(app)
